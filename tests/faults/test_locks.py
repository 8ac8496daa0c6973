"""One lock, more timers blocked on it than the runner has workers: the blocked runs yield
after their lock wait limit (5 s) instead of holding every worker, the other timers keep
running, the log says why, and every due time is run once or skipped with a true reason."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

import psycopg

from tests.conftest import scalar
from tests.faults.cluster import Cluster
from tests.faults.conftest import audit, settle
from tests.integration.runner.conftest import LOG_SQL, save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

Start = Callable[..., RunnerProcess]

LOCKED = 15.0  # seconds the test's own session holds the table ACCESS EXCLUSIVE
# The other timers' due times skipped as late while the table is locked: the first lock
# wait limit (5 s), when every worker waits before any run has yielded, and a little
# more (4 timers x ~7 s); with nothing to free a worker, all ~4 x 15 would be.
OTHERS_LATE_AT_MOST = 30
# Each other timer runs at least this often while the table is locked (every second
# once the first runs have yielded); none would, with every worker waiting on the lock.
OTHERS_RUN_AT_LEAST = 6

BLOCKED_SQL = "UPDATE locked SET n = n + 1; " + LOG_SQL


def test_one_lock_does_not_starve_the_runner(cluster: Cluster, runners: Start) -> None:
    dsn = cluster.dsn("app")
    blocked = [f"b{i}" for i in range(3)]
    others = [f"o{i}" for i in range(4)]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE locked (n int); INSERT INTO locked VALUES (0)")
        for name in blocked:
            save(conn, name, "every 1s", BLOCKED_SQL)
        for name in others:
            save(conn, name, "every 1s", LOG_SQL)
    runner = runners("--dsn", dsn, "--workers", "2")
    runner.wait_for("event=serving", timeout=30)
    time.sleep(3)
    with psycopg.connect(dsn) as locker:
        locker.execute("LOCK TABLE locked IN ACCESS EXCLUSIVE MODE")
        began = scalar(locker, "SELECT now()")
        time.sleep(LOCKED)
        locker.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        ended = scalar(conn, "SELECT clock_timestamp()")

    def blocked_ran_again() -> bool:
        with psycopg.connect(dsn, autocommit=True) as conn:
            n = scalar(
                conn,
                "SELECT count(DISTINCT timer) FROM fired WHERE at > %s AND timer = ANY(%s)",
                [ended, blocked],
            )
        return bool(n == len(blocked))

    wait_until(blocked_ran_again, timeout=40, what="the blocked timers running again")
    back = (dt.datetime.now(dt.timezone.utc) - ended).total_seconds()
    time.sleep(1)
    settle(dsn)
    assert runner.stop() == 0
    log = runner.log()
    verdict = audit(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        ran: dict[str, int] = {
            r[0]: r[1]
            for r in conn.execute(
                "SELECT timer, count(*) FROM fired WHERE at BETWEEN %s AND %s AND timer = ANY(%s)"
                " GROUP BY timer",
                [began, ended, others],
            )
        }
        late = scalar(
            conn,
            "SELECT count(*) FROM timers.runs WHERE kind = 'skipped' AND timer = ANY(%s)"
            " AND due_at BETWEEN %s AND %s",
            [others, began, ended],
        )
        reasons = [
            r[0]
            for r in conn.execute(
                "SELECT reason FROM timers.runs WHERE kind = 'skipped' AND timer = ANY(%s)"
                " AND due_at BETWEEN %s AND %s",
                [blocked, began, ended],
            )
        ]
        attempts = scalar(
            conn, "SELECT count(*) FROM timers.runs WHERE kind <> 'skipped' AND NOT ok"
        )
    print(
        verdict.line(f"a table locked {LOCKED:.0f} s, 3 timers on it, 4 others, 2 workers")
        + f"; others ran {sorted(ran.values())} times and skipped {late} while it was locked;"
        f" the blocked ran again {back:.1f} s after; {log.count('event=run_yielded')}"
        f" run_yielded, {log.count('event=workers_blocked')} workers_blocked lines"
    )
    verdict.assert_exact()
    assert len(ran) == len(others) and min(ran.values()) >= OTHERS_RUN_AT_LEAST, (ran, log)
    assert late <= OTHERS_LATE_AT_MOST, (late, log)
    # a yield is no failed attempt: nothing counts toward retries or pause_after
    assert attempts == 0
    # the blocked timers' due times missed while they waited say so (or, when the lock was
    # let go while a run waited within its limit, that the run was still running)
    assert reasons, "the blocked timers skipped nothing"
    assert all(("waited for a lock" in r or "was still running" in r) for r in reasons), [
        r for r in reasons if "waited for a lock" not in r
    ]
    # the log says why
    assert "event=run_yielded" in log, log
    assert "event=workers_blocked" in log, log
    assert "lock_timeout=5s" in log
