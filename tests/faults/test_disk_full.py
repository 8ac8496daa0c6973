"""A full disk (53100 on pgtimers' own bookkeeping write, injected by a trigger on
timers.runs): the runner backs off and tries again within a second or two, quarantines
no timer, is serving again within seconds of space coming back, and says why the due
times it could not run were skipped."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

import psycopg

from tests.faults.cluster import Cluster
from tests.faults.conftest import audit, settle
from tests.integration.runner.conftest import LOG_SQL, save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

Start = Callable[..., RunnerProcess]

FULL = 6.0  # seconds the disk is full
BACK_WITHIN = 3.5  # every timer runs again this soon after space is back

# What PostgreSQL says when a table cannot grow, raised on the write of each run's record
# while the `disk_full` table has a row.
FAULT = """
CREATE TABLE disk_full (since timestamptz);
CREATE FUNCTION no_space() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM public.disk_full) THEN
        RAISE EXCEPTION 'could not extend file "base/16384/16500": No space left on device'
            USING ERRCODE = '53100', HINT = 'Check free disk space.';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER no_space BEFORE INSERT ON timers.runs FOR EACH ROW EXECUTE FUNCTION no_space();
"""


def test_a_full_disk_costs_no_service_after_it_ends(cluster: Cluster, runners: Start) -> None:
    dsn = cluster.dsn("app")
    names = [f"t{i}" for i in range(4)]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FAULT)
        for name in names:
            save(conn, name, "every 1s", LOG_SQL)
    runner = runners("--dsn", dsn)
    runner.wait_for("event=serving", timeout=30)
    time.sleep(3)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO disk_full VALUES (now())")
        time.sleep(FULL)
        conn.execute("DELETE FROM disk_full")
        freed = conn.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]

    def all_ran_again() -> bool:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(DISTINCT timer) FROM fired WHERE at > %s", [freed]
            ).fetchone()
        return bool(row and row[0] == len(names))

    wait_until(all_ran_again, timeout=40, what="every timer running again")
    back = (dt.datetime.now(dt.timezone.utc) - freed).total_seconds()
    time.sleep(2)
    settle(dsn)
    assert runner.stop() == 0
    log = runner.log()
    verdict = audit(dsn)
    print(verdict.line(f"a full disk for {FULL:.0f} s, 1 runner") + f"; back after {back:.1f} s")
    verdict.assert_exact()
    assert back <= BACK_WITHIN, (back, log)
    assert log.count("event=database_trouble ") == 1, log
    assert "sqlstate=53100" in log
    assert "event=database_trouble_over" in log
    with psycopg.connect(dsn, autocommit=True) as conn:
        reasons = [
            r[0]
            for r in conn.execute(
                "SELECT reason FROM timers.runs WHERE kind = 'skipped' AND due_at > %s",
                [freed - dt.timedelta(seconds=FULL)],
            )
        ]
    assert reasons, "nothing skipped in the outage"
    # the due times lost to the full disk say so
    assert all("refused the runner's work (53100" in r for r in reasons), reasons
