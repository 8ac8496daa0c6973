"""Autonomous runs under faults: a server restart in the middle of one leaves one failed
attempt, "interrupted:", recorded by the runner once the server is back, and no second
start; the owner's session killed from outside fails the run with the server's word."""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg

from tests.conftest import scalar
from tests.faults.cluster import Cluster
from tests.integration.runner.test_autonomous import finished, runs, save_autonomous
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

Start = Callable[..., RunnerProcess]
LONG = "INSERT INTO started DEFAULT VALUES; SELECT pg_sleep(60)"
SLEEPING = (
    "SELECT count(*) FROM pg_stat_activity"
    " WHERE application_name = 'pgtimers: long' AND query LIKE '%pg_sleep%'"
)


def _setup(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE started (at timestamptz DEFAULT clock_timestamp())")
        save_autonomous(conn, "long", "in 1s", LONG)


def test_a_server_restart_mid_run_leaves_one_interrupted_attempt(
    cluster: Cluster, runners: Start
) -> None:
    dsn = cluster.dsn("app")
    _setup(dsn)
    proc = runners("--dsn", dsn)
    proc.wait_for("event=serving", timeout=30)
    with psycopg.connect(dsn, autocommit=True) as conn:
        wait_until(lambda: scalar(conn, SLEEPING), what="the run's sleep")
    cluster.restart("immediate")
    with psycopg.connect(dsn, autocommit=True) as conn:
        [run] = finished(conn, "long")
        assert not run["ok"] and run["error"].startswith("interrupted:"), run
        time.sleep(2)  # a second start would show by now
        assert scalar(conn, "SELECT count(*) FROM started") == 1
        assert len(runs(conn, "long")) == 1
        assert scalar(conn, "SELECT count(*) FROM timers.autonomous_runs") == 0
    assert proc.stop() == 0


def test_the_owners_session_killed_fails_the_run_with_the_servers_word(
    cluster: Cluster, runners: Start
) -> None:
    dsn = cluster.dsn("app")
    _setup(dsn)
    proc = runners("--dsn", dsn)
    proc.wait_for("event=serving", timeout=30)
    with psycopg.connect(dsn, autocommit=True) as conn:
        wait_until(lambda: scalar(conn, SLEEPING), what="the run's sleep")
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'pgtimers: long'"
        )
        [run] = finished(conn, "long")
        assert not run["ok"], run
        assert "terminating connection due to administrator command" in run["error"], run
        assert scalar(conn, "SELECT count(*) FROM started") == 1
    assert proc.stop() == 0
