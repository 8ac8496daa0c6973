"""Server restarts with runs in flight, immediate (a crash) and fast: every due time
commits once or is skipped with its reason, and the runner serves again within a second
of the server taking connections."""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg

from tests.faults.cluster import Cluster
from tests.faults.conftest import audit, serving_again, settle
from tests.integration.runner.conftest import LOG_SQL, save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

Start = Callable[..., RunnerProcess]


def _fired(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM fired").fetchone()
    return int(row[0]) if row else 0


def test_server_restarts_with_runs_in_flight(cluster: Cluster, runners: Start) -> None:
    dsn = cluster.dsn("app")
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(4):
            save(conn, f"all{i}", "every 1s", LOG_SQL + "; SELECT pg_sleep(0.3)", catch_up="all")
        for i in range(2):
            save(conn, f"skip{i}", "every 1s", LOG_SQL + "; SELECT pg_sleep(0.3)")
    procs = [runners("--dsn", dsn) for _ in range(2)]
    for proc in procs:
        proc.wait_for("event=serving", timeout=30)
    backs: list[float] = []
    for mode in ("immediate", "fast", "immediate"):
        before = _fired(dsn)
        wait_until(lambda b=before: _fired(dsn) >= b + 15, what="runs before the restart")  # type: ignore[misc]
        seen = [p.log().count("event=serving") for p in procs]
        cluster.restart(mode)
        backs += [serving_again(p, n) for p, n in zip(procs, seen, strict=True)]
    time.sleep(2)
    settle(dsn)
    for proc in procs:
        assert proc.stop() == 0
    verdict = audit(dsn)
    print(verdict.line("server restarts (immediate, fast, immediate), 2 runners", backs))
    verdict.assert_exact()
    assert verdict.skipping <= {"skip0", "skip1"}  # catch_up = all runs every due time
    assert max(backs) < 1.5, backs
    for proc in procs:
        assert proc.log().count("event=database_unavailable") == 3
