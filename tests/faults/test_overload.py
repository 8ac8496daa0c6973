"""Overload: more timers due than the workers can run. 50 `every 1s` timers of 0.1 s on
one runner with 2 workers (3 runs at a time with the burst worker, about half of what is
due): every timer gets the same share, within one run of the mean, whatever its id; each
due time commits once or is skipped as late."""

from __future__ import annotations

import datetime as dt
import statistics
from collections import Counter
from collections.abc import Callable

import psycopg

from tests.conftest import scalar
from tests.faults.cluster import Cluster
from tests.faults.conftest import audit
from tests.integration.runner.conftest import LOG_SQL, save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

Start = Callable[..., RunnerProcess]

TIMERS = 50
WINDOW = 10  # seconds of due times counted, after the runner has warmed up


def _runs_per_timer(dsn: str, start: dt.datetime) -> Counter[str]:
    """Runs committed per timer of the due times in [start, start + WINDOW)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT timer, count(*) FROM fired"
            " WHERE due::timestamptz >= %(a)s AND due::timestamptz < %(a)s + %(w)s * interval '1 s'"
            " GROUP BY timer",
            {"a": start, "w": WINDOW},
        ).fetchall()
    runs: Counter[str] = Counter({f"o{i:02d}": 0 for i in range(TIMERS)})
    runs.update({str(name): int(n) for name, n in rows})
    return runs


def test_overload_shares_the_workers_fairly(cluster: Cluster, runners: Start) -> None:
    dsn = cluster.dsn("app")
    proc = runners("--dsn", dsn, "--workers", "2")
    proc.wait_for("event=serving", timeout=30)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # made while a runner serves: no due time passes before one (a downtime skip)
        for i in range(TIMERS):
            save(conn, f"o{i:02d}", "every 1s", LOG_SQL + "; SELECT pg_sleep(0.1)")
        start = scalar(conn, "SELECT date_trunc('second', now()) + interval '3 s'")
        end = start + dt.timedelta(seconds=WINDOW)
        # past the window's last due time by enough for every timer's turn to come
        wait_until(
            lambda: scalar(conn, "SELECT now() > %s", [end + dt.timedelta(seconds=3)]),
            timeout=WINDOW + 15,
            what="the window's due times dealt with",
        )
    assert proc.stop() == 0
    runs = _runs_per_timer(dsn, start)
    mean = statistics.mean(runs.values())
    low, high = min(runs.values()), max(runs.values())
    verdict = audit(dsn)
    print(
        verdict.line(f"overload, {TIMERS} timers of 0.1 s on 2 workers")
        + f"; runs per timer in {WINDOW} s: min {low}, max {high}, mean {mean:.2f}"
    )
    verdict.assert_exact()
    assert set(verdict.skipped) <= {"late"}, verdict.skipped
    assert verdict.skipped, "not overloaded: nothing was skipped"
    by_count = sorted(runs.items(), key=lambda kv: kv[1])
    assert mean - 1 <= low and high <= mean + 1, f"unfair (mean {mean:.2f}): {by_count}"
