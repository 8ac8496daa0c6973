"""Failover: a primary with a streaming standby; the primary stops and the standby is
promoted. A runner with both hosts and target_session_attrs=read-write serves the new
primary within 5 s, with no due time twice; one given only the standby runs nothing
until the promotion."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.conftest import scalar
from tests.faults.cluster import Cluster
from tests.faults.conftest import audit, serving_again, settle
from tests.integration.runner.conftest import LOG_SQL, save
from tests.support.runner import RunnerProcess

Start = Callable[..., RunnerProcess]


@pytest.fixture
def standby(cluster: Cluster) -> Iterator[Cluster]:
    """A streaming standby of `cluster`, caught up."""
    made = cluster.standby()
    try:
        made.wait_caught_up(cluster)
        yield made
    finally:
        made.cleanup()


def test_a_promoted_standby_is_served_within_5_s(
    cluster: Cluster, standby: Cluster, runners: Start
) -> None:
    with psycopg.connect(cluster.dsn("app"), autocommit=True) as conn:
        for i in range(4):
            save(conn, f"f{i}", "every 1s", LOG_SQL, catch_up="all")
    both = make_conninfo(
        host="127.0.0.1,127.0.0.1",
        port=f"{cluster.port},{standby.port}",
        dbname="app",
        user="postgres",
        target_session_attrs="read-write",
    )
    follower = runners("--dsn", both)
    on_standby = runners("--dsn", standby.dsn("app"))
    follower.wait_for("event=serving", timeout=30)
    on_standby.wait_for("event=standby", timeout=30)
    time.sleep(3)
    seen = follower.log().count("event=serving")
    cluster.stop("fast")
    standby.promote()
    back = [serving_again(follower, seen), serving_again(on_standby, 0)]
    new_primary = standby.dsn("app")
    time.sleep(2)
    settle(new_primary)
    for proc in (follower, on_standby):
        assert proc.stop() == 0
    verdict = audit(new_primary)
    print(verdict.line("standby promoted (multi-host runner, standby-only runner)", back))
    verdict.assert_exact()
    assert not verdict.skipped
    assert max(back) < 5.0, back
    assert "event=promoted" in on_standby.log()


def test_a_runner_on_a_standby_runs_nothing(
    cluster: Cluster, standby: Cluster, runners: Start
) -> None:
    with psycopg.connect(cluster.dsn("app"), autocommit=True) as conn:
        save(conn, "s", "every 1s", LOG_SQL)
    standby.wait_caught_up(cluster)
    proc = runners("--dsn", standby.dsn("app"))
    proc.wait_for("event=standby", timeout=30)
    with psycopg.connect(cluster.dsn("app"), autocommit=True) as conn:
        time.sleep(2.5)
        assert scalar(conn, "SELECT count(*) FROM timers.runners") == 0
        assert scalar(conn, "SELECT count(*) FROM fired") == 0
    assert proc.stop() == 0
