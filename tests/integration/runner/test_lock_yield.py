"""A run that waits for a lock longer than its lock wait limit yields, in SQL: no attempt is
recorded, its due time stays owed, and the late rule's reason says it waited for a lock."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from tests.conftest import Database, scalar
from tests.integration.runner.conftest import save, timer_row

COUNTS = ("next_due_at", "runs", "failures", "fail_streak", "retry_due_at", "enabled", "last_error")


def _run_due(db: Database, name: str, settings: str = "", note: Any = None) -> Any:
    """timers._run_due of the timer's due time, in a transaction of its own that first
    runs `settings` and sets the runner's late note."""
    with db.connect(autocommit=False) as c:
        if settings:
            c.execute(settings)
        if note is not None:
            c.execute("SELECT set_config('pgtimers.late', %s, true)", [json.dumps(note)])
        t = timer_row(c, name)
        result = scalar(c, "SELECT timers._run_due(%s, %s, 'test')", [t["id"], t["next_due_at"]])
        c.commit()
        return result


def _locked(conn: psycopg.Connection) -> psycopg.Connection:
    conn.execute("CREATE TABLE locked (n int); INSERT INTO locked VALUES (0)")
    return conn


def test_a_run_that_waits_too_long_for_a_lock_yields_and_its_due_time_stays_owed(
    db: Database, conn: psycopg.Connection
) -> None:
    _locked(conn)
    save(conn, "blocked", "every 1h", "UPDATE locked SET n = n + 1", retries=2, pause_after=1)
    conn.execute("UPDATE timers.timers SET next_due_at = now() - interval '1 s'")
    before = timer_row(conn, "blocked")
    with db.connect(autocommit=False) as holder:
        holder.execute("LOCK TABLE locked IN ACCESS EXCLUSIVE MODE")
        # a smaller lock wait limit in effect (the session's) is kept
        result = _run_due(db, "blocked", "SET lock_timeout = '100ms'")
    assert result["yielded"] == "waited for a lock"
    assert result["timer_id"] == before["id"] and result["lock_timeout"] == "100ms"
    assert result["error"].startswith("canceling statement due to lock timeout")
    after = timer_row(conn, "blocked")
    # no attempt: nothing toward retries or pause_after, nothing recorded
    assert {k: after[k] for k in COUNTS} == {k: before[k] for k in COUNTS}
    assert scalar(conn, "SELECT count(*) FROM timers.runs") == 0
    # the lock is gone: the owed due time runs, once
    ran = _run_due(db, "blocked")
    assert ran["ok"] is True and ran["due_at"] == result["due_at"]
    assert scalar(conn, "SELECT n FROM locked") == 1


def test_a_timer_may_set_its_own_lock_wait_limit(db: Database, conn: psycopg.Connection) -> None:
    _locked(conn)
    save(conn, "patient", "every 1h", "SET LOCAL lock_timeout = '300ms'; UPDATE locked SET n = 1")
    conn.execute("UPDATE timers.timers SET next_due_at = now() - interval '1 s'")
    with db.connect(autocommit=False) as holder:
        holder.execute("LOCK TABLE locked IN ACCESS EXCLUSIVE MODE")
        result = _run_due(db, "patient", "SET lock_timeout = '50ms'")
    assert result["yielded"] and result["waited_ms"] >= 300


def test_nowait_yields_and_says_what_waited(db: Database, conn: psycopg.Connection) -> None:
    _locked(conn)
    save(conn, "nowait", "every 1h", "SELECT * FROM locked FOR UPDATE NOWAIT")
    conn.execute("UPDATE timers.timers SET next_due_at = now() - interval '1 s'")
    with db.connect(autocommit=False) as holder:
        holder.execute("UPDATE locked SET n = 2")
        result = _run_due(db, "nowait")
    assert result["yielded"]
    assert 'SQL statement "SELECT * FROM locked FOR UPDATE NOWAIT"' in result["error"]


def test_a_held_timers_skips_say_it_waited_for_a_lock_and_its_run_is_marked(
    db: Database, conn: psycopg.Connection
) -> None:
    save(conn, "held", "every 1s", "SELECT 1")
    conn.execute(
        "UPDATE timers.timers SET next_due_at = date_trunc('second', now()) - interval '3 s'"
    )
    t = timer_row(conn, "held")
    what = "it waited for a lock longer than its lock wait limit (5s) and the runner held it back"
    note = {
        "timers": {
            str(t["id"]): {
                "from": "2000-01-01T00:00:00Z",
                "to": "2100-01-01T00:00:00Z",
                "what": what,
            }
        }
    }
    result = _run_due(db, "held", note=note)
    assert result["ok"] is True and result["ran_after_yield"] is True
    assert result["timer_id"] == t["id"]
    (skip,) = result["skipped"]
    assert skip["count"] >= 3
    assert skip["reason"].startswith(
        "late: the next due time had come before a run could start, while it waited for a lock"
    )
    # another timer's note says nothing of this one
    with db.connect(autocommit=False) as c:
        c.execute("SELECT set_config('pgtimers.late', %s, true)", [json.dumps(note)])
        reasons = c.execute(
            "SELECT timers._late_reason(now(), %s), timers._late_reason(now(), %s)",
            [t["id"], t["id"] + 1],
        ).fetchone()
    assert reasons is not None and what in reasons[0]
    assert reasons[1] == "late: the next due time had come before a run could start"
