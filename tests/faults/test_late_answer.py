"""A late answer is no clock step: the control session's look reaches the server, whose
clock never moves, and its answer comes 8 s late (the way back held, no connection cut).
The runner says nothing of its clock, skips nothing as 'the clock was set forward', and
the due times of those 8 s are run late or skipped as late by the ordinary rules."""

from __future__ import annotations

import datetime as dt
import functools
import time
from collections.abc import Callable

import psycopg

from tests.conftest import scalar
from tests.faults.cluster import Cluster
from tests.faults.conftest import audit, settle
from tests.faults.proxy import Proxy
from tests.integration.runner.conftest import LOG_SQL, save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

Start = Callable[..., RunnerProcess]

STALL = 8.0  # seconds the answers wait: under the control session's 10 s deadline (QUICK)
TIMERS = 3


def _looked_since(dsn: str, since: dt.datetime) -> bool:
    """Whether the control session's last statement, sent after `since`, is a look."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return bool(
            scalar(
                conn,
                "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
                " AND query LIKE '%%timers._next_wake()%%' AND query_start > %s",
                [since],
            )
        )


def _stall_a_look(proxy: Proxy, dsn: str) -> dt.datetime:
    """Hold the answers until the control session has sent a look into the stall (the
    loop looks every second; its heartbeat may be the one caught: heal and try again)."""
    for _ in range(5):
        stalled_at = dt.datetime.now(dt.timezone.utc)
        proxy.stall(answers_only=True)
        looked = functools.partial(_looked_since, dsn, stalled_at)
        try:
            wait_until(looked, timeout=2.5, what="a look")
            return stalled_at
        except AssertionError:
            proxy.heal()
            time.sleep(1.5)
    raise AssertionError("no look of the control session was caught in the stall")


def test_a_late_answer_is_no_clock_step(cluster: Cluster, proxy: Proxy, runners: Start) -> None:
    dsn = cluster.dsn("app")
    behind = runners("--dsn", proxy.dsn(dsn))
    behind.wait_for("event=serving", timeout=30)
    # saved while the runner serves: no first due time is downtime's
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(TIMERS):
            save(conn, f"tick{i}", "every 1s", LOG_SQL)
    time.sleep(2.5)  # a few looks and runs before the stall
    stalled_at = _stall_a_look(proxy, dsn)
    try:
        time.sleep(STALL - (dt.datetime.now(dt.timezone.utc) - stalled_at).total_seconds())
    finally:
        proxy.heal()
    time.sleep(2)
    settle(dsn)
    assert behind.stop() == 0
    log = behind.log()
    verdict = audit(dsn)
    print(verdict.line(f"the answers of a runner's sessions held {STALL:.0f} s"))
    assert "event=clock_set_forward" not in log, log
    assert "event=clock_set_back" not in log, log
    assert "event=connection_stalled" not in log, log  # the scenario: nothing was cut off
    verdict.assert_exact()
    # no step: what the stall made late was run late or skipped as late, by the
    # ordinary rule (a due time whose successor had come is skipped; the latest runs)
    assert set(verdict.skipped) <= {"late"}, verdict.skipped
    assert verdict.skipped["late"] >= TIMERS * (STALL - 3), verdict.skipped
