"""Keyed fires back to back (sql/0011_keyed_speed.sql, pgtimers/runner/worker.py): a worker
whose keyed fire succeeded fires the clock's next one at once, and the advance notices a
stop's end sooner. Still one fire per transaction and per clock at a time, in tick order;
a run-now request is not starved by a long row of keyed fires; a fire that raises is left
alone and the others go on. (Speed is measured in bench/keyed_bench.py, not here.)"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.conftest import Database
from tests.integration.keyed.conftest import Fired, advance, arm, fired_rows, keyed
from tests.integration.runner.conftest import save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
T0 = "2028-01-01 00:00:00+00"

# The log row also says how many fires had committed before this one ran.
COUNTING_SQL = (
    "INSERT INTO public.fired_keyed (key, due, xid, who, note)"
    " SELECT current_setting('pgtimers.timer'), current_setting('pgtimers.due_at'),"
    " pg_current_xact_id()::text, current_user, count(*)::text FROM public.fired_keyed"
)


def sleepy_sql(seconds: float) -> str:
    """The log row, written after a nap."""
    return (
        "INSERT INTO public.fired_keyed (key, due, xid, who)"
        " SELECT current_setting('pgtimers.timer'), current_setting('pgtimers.due_at'),"
        f" pg_current_xact_id()::text, current_user FROM pg_sleep({seconds})"
    )


@pytest.fixture
def clock(conn: psycopg.Connection) -> str:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    return "c"


def tick_order(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT key FROM timers.keyed_timers WHERE test_clock = 'c' ORDER BY owed_at, place, key"
    ).fetchall()
    return [r[0] for r in rows]


def test_back_to_back_fires_keep_tick_order_and_each_sees_the_one_before(
    conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    # 6 owed times of 20 timers each, places and key bytes mixed; two slow ones at one stop
    kinds = ["task", "deadline", "money", "schedule"]
    for i in range(120):
        key = f"own{i % 7}:{kinds[i % 4]}:{'Step' if i % 3 else 'step'} {i % 5}:{i}"
        sql = sleepy_sql(0.3) if i in (9, 10) else COUNTING_SQL
        arm(
            conn,
            key,
            f"2028-0{1 + i % 6}-15 09:00+00",
            sql,
            place=1 + (i * 5) % 8,
            test_clock=clock,
        )
    start_runner("--workers", "4")
    result, _ = advance(conn, "2028-07-01 00:00+00", redeliver=True)
    # the advance returned once every fire had committed, the slow ones too
    assert (result["fired"], result["replayed"]) == (120, 120)
    rows = fired_rows(conn)
    assert [r["key"] for r in rows] == tick_order(conn)
    # one transaction per fire, and each one saw every fire before it committed
    assert len({r["xid"] for r in rows}) == 120
    counted = [(n, r["note"]) for n, r in enumerate(rows) if r["note"]]
    assert len(counted) == 118
    assert all(note == str(n) for n, note in counted)
    for row in conn.execute(
        "SELECT status, attempt, wakes, commit FROM timers.keyed WHERE test_clock = 'c'"
    ).fetchall():
        assert row[:3] == ("fired", 1, 2)
    commits = {r["key"]: r["xid"] for r in rows}
    for key, commit in conn.execute("SELECT key, commit FROM timers.keyed").fetchall():
        assert commits[key] == commit


def test_a_run_now_request_is_served_in_the_middle_of_a_long_row_of_keyed_fires(
    db: Database, conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    for i in range(300):
        arm(
            conn,
            f"job:task:step:{i:03d}",
            "2028-01-02 00:00+00",
            sleepy_sql(0.01),
            test_clock=clock,
        )
    save(
        conn,
        "probe",
        "every 1h",
        "INSERT INTO public.fired_keyed (key, due, xid, who, note)"
        " VALUES ('probe', '', pg_current_xact_id()::text, current_user, 'run now')",
    )
    # one worker (and no burst worker): it alone fires the keyed row and serves the request
    start_runner("--workers", "1")
    outcome: dict[str, Any] = {}

    def advance_in_background() -> None:
        with db.connect() as other:
            outcome["result"] = advance(other, "2028-01-03 00:00+00")[0]

    thread = threading.Thread(target=advance_in_background)
    thread.start()
    try:
        wait_until(lambda: len(fired()) > 0, what="the first keyed fire")
        row = conn.execute("CALL timers.run('probe')").fetchone()
        assert row is not None
        assert (row[0]["finished"], row[0]["ok"]) == (True, True)
    finally:
        thread.join(120)
    assert outcome["result"]["fired"] == 300
    keys = [k for k, _ in fired()]
    at = keys.index("probe")
    # keyed timers fired both before and after the request: it did not wait for the row to end
    assert 0 < at < 300
    assert [k for k in keys if k != "probe"] == [f"job:task:step:{i:03d}" for i in range(300)]


def test_a_fire_that_raises_fails_only_that_timer_and_the_others_go_on(
    conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    # an error of the fire's bookkeeping (not of the timer's SQL, which is recorded)
    conn.execute(
        """
        CREATE FUNCTION public.refuse_fire() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.key = 'job:task:b:2027' AND NEW.event = 'fired' THEN
                RAISE EXCEPTION 'bookkeeping refused for %', NEW.key USING ERRCODE = 'XX001';
            END IF;
            RETURN NEW;
        END
        $$;
        CREATE TRIGGER refuse_fire BEFORE INSERT ON timers.keyed_events
            FOR EACH ROW EXECUTE FUNCTION public.refuse_fire()
        """
    )
    for name in ("a", "b", "c", "d"):
        arm(conn, f"job:task:{name}:2027", "2028-01-02 00:00+00", test_clock=clock)
    arm(conn, "job:task:e:2027", "2028-01-03 00:00+00", test_clock=clock)
    # no runner yet: the clock only moves; the runner then fires what is owed back to back
    advance(conn, "2028-01-04 00:00+00")
    runner = start_runner("--workers", "1")
    wait_until(lambda: len(fired()) == 4, what="the four others to fire")
    assert [k for k, _ in fired()] == [
        "job:task:a:2027",
        "job:task:c:2027",
        "job:task:d:2027",
        "job:task:e:2027",
    ]
    # the refused fire left nothing: its SQL's row rolled back with it, it is still armed
    failed = keyed(conn, "job:task:b:2027")
    assert (failed["status"], failed["attempt"], failed["wakes"], failed["commit"]) == (
        "armed",
        0,
        0,
        None,
    )
    wait_until(lambda: "event=run_error" in runner.log(), what="the run_error line")
    line = next(x for x in runner.log().splitlines() if "event=run_error" in x)
    assert f"claimed=keyed:{failed['id']}" in line
    assert "sqlstate=XX001" in line
    assert "bookkeeping refused for job:task:b:2027" in line
    # left alone for a while (QUARANTINE_SECONDS), not retried in a hot loop
    assert runner.log().count("event=run_error") == 1
