"""Keyed timers fired by a real runner on test clocks: once per key, in tick order,
replays, the per-kind rules after a gap, restarts and kills."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.conftest import Database
from tests.integration.keyed.conftest import (
    LOG_SQL,
    Fired,
    advance,
    arm,
    call,
    events,
    fired_rows,
    keyed,
)
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
T0 = "2028-01-01 00:00:00+00"


def iso(text: str) -> str:
    return (
        dt.datetime.fromisoformat(text).astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    )


@pytest.fixture
def clock(conn: psycopg.Connection) -> str:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    return "c"


def test_fires_once_in_its_own_transaction_as_its_owner(
    db: Database, conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    with db.connect("pgt_alice") as alice:
        arm(alice, "job:task:file:2027", "2028-01-02 09:00+00", test_clock=clock)
    start_runner()
    result, _ = advance(conn, "2028-01-03 00:00+00")
    assert (result["fired"], result["runner"]) == (1, True)
    rows = fired_rows(conn)
    assert [(r["key"], r["due"], r["who"]) for r in rows] == [
        ("job:task:file:2027", "2028-01-02T09:00:00Z", "pgt_alice")
    ]
    row = keyed(conn, "job:task:file:2027")
    assert (row["status"], row["attempt"], row["wakes"], row["ok"]) == ("fired", 1, 1, True)
    # the commit is the run's transaction: the SQL's row was written in it
    assert row["commit"] == rows[0]["xid"]
    assert row["fired_at"] == dt.datetime.fromisoformat("2028-01-02 09:00+00:00")
    assert row["late_by"] == dt.timedelta(0)
    assert events(conn) == [
        ("job:task:file:2027", "armed", "arm"),
        ("job:task:file:2027", "fired", "wake"),
    ]


def test_tick_order_is_owed_at_then_place_then_key_bytes(
    conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    same = "2028-01-02 09:00+00"
    arm(conn, "z:task:a:1", same, place=6, test_clock=clock)
    arm(conn, "a:task:b:1", same, place=6, test_clock=clock)
    arm(conn, "a:task:B:1", same, place=6, test_clock=clock)
    arm(conn, "m:money:line:2", same, place=2, test_clock=clock)
    arm(conn, "m:money:line:1", same, place=2, test_clock=clock)
    arm(conn, "x:task:late:1", "2028-01-02 09:00:01+00", place=1, test_clock=clock)
    arm(conn, "y:task:early:1", "2028-01-02 08:59:59+00", place=8, test_clock=clock)
    start_runner("--workers", "4")
    result, _ = advance(conn, "2028-01-03 00:00+00")
    assert result["fired"] == 7
    assert [k for k, _ in fired()] == [
        "y:task:early:1",
        "m:money:line:1",
        "m:money:line:2",
        "a:task:B:1",  # 'B' (0x42) before 'b' (0x62): bytes, not a locale
        "a:task:b:1",
        "z:task:a:1",
        "x:task:late:1",
    ]


def test_redeliver_answers_replayed_with_the_original_commit(
    conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    for n in range(3):
        arm(
            conn,
            f"sbn:schedule:monthly:2028-0{n + 2}",
            f"2028-0{n + 2}-01 00:00+00",
            place=2,
            test_clock=clock,
        )
    start_runner()
    result, _ = advance(conn, "2028-06-01 00:00+00", redeliver=True)
    assert (result["fired"], result["replayed"]) == (3, 3)
    assert len(fired()) == 3
    for row in conn.execute("SELECT wakes, attempt, status FROM timers.keyed").fetchall():
        assert row == (2, 1, "fired")
    # any later wake answers the same: replayed with the commit, nothing done
    commit = keyed(conn, "sbn:schedule:monthly:2028-02")["commit"]
    with conn.cursor() as cur:
        cur.execute("SET ROLE pgtimers_runner")
        answer = cur.execute(
            "SELECT timers._keyed_fire(id, owed_at, 'test') FROM timers.keyed_timers"
            " WHERE key = 'sbn:schedule:monthly:2028-02'"
        ).fetchone()
        cur.execute("RESET ROLE")
    assert answer is not None
    assert answer[0] == {
        "timer": "sbn:schedule:monthly:2028-02",
        "replayed": True,
        "commit": commit,
        "fired_at": "2028-02-01T00:00:00Z",
    }
    assert len(fired()) == 3
    assert keyed(conn, "sbn:schedule:monthly:2028-02")["wakes"] == 3


def test_a_time_that_passed_while_held_fires_at_resume(
    conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    key = "job:deadline:at_risk:2027"
    arm(conn, key, "2028-01-10 00:00+00", test_clock=clock, late_at="2028-01-20 00:00+00")
    arm(conn, "job:deadline:late:2027", "2028-01-20 00:00+00", test_clock=clock)
    call(conn, "hold", key, "books")
    start_runner()
    advance(conn, "2028-01-25 00:00+00")
    # the late timer fired on its date; the held at-risk one waited
    assert fired() == [("job:deadline:late:2027", "2028-01-20T00:00:00Z")]
    assert keyed(conn, key)["status"] == "held"
    resumed = call(conn, "resume", key)
    assert resumed["owed_at"] == dt.datetime.fromisoformat("2028-01-20 00:00+00:00")
    advance(conn, "2028-01-25 00:00+00")
    assert fired()[-1] == (key, "2028-01-20T00:00:00Z")
    assert keyed(conn, key)["status"] == "fired"


def test_after_a_gap_each_kind_follows_its_rule(
    conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    # schedules: each missed occurrence once
    for month in (1, 2, 3):
        arm(
            conn,
            f"sbn:schedule:monthly:2028-0{month}",
            f"2028-0{month}-01 12:00+00",
            place=2,
            test_clock=clock,
        )
    # notice rungs of one owner: only the latest owed runs; a run rung runs once
    arm(conn, "clk#US:rung:notice 90d:2027@0", "2028-01-19 14:00+00", place=6, test_clock=clock)
    arm(conn, "clk#US:rung:notice 30d:2027@0", "2028-03-19 14:00+00", place=6, test_clock=clock)
    arm(conn, "clk#US:rung:notice 14d:2027@0", "2028-05-01 14:00+00", place=6, test_clock=clock)
    arm(conn, "clk#US:rung:run:2027", "2028-03-20 14:00+00", place=6, test_clock=clock)
    # another owner's notice is its own
    arm(conn, "clk#US-NY:rung:notice 90d:2027@0", "2028-01-19 14:00+00", place=6, test_clock=clock)
    # deadlines: at risk, then late, in order
    arm(conn, "job:deadline:late:2027", "2028-04-14 04:00+00", test_clock=clock)
    arm(conn, "job:deadline:at_risk:2027", "2028-03-31 00:30+00", test_clock=clock)
    # money: every owed line, in order
    for line in (3, 1, 2):
        arm(
            conn,
            f"sbn:money:line {line}:2028-02",
            f"2028-02-0{line} 00:00+00",
            place=3,
            test_clock=clock,
        )
    result, notices = advance(conn, "2028-06-01 00:00+00")
    assert (result["runner"], result["fired"]) == (False, 0)
    assert any("no runner serves database" in n for n in notices)
    runner = start_runner()
    wait_until(
        lambda: (
            conn.execute("SELECT count(*) FROM timers.keyed WHERE status = 'armed'").fetchone()
            == (0,)
        ),
        what="every owed keyed timer to fire",
    )
    assert [k for k, _ in fired()] == [
        "sbn:schedule:monthly:2028-01",
        "clk#US-NY:rung:notice 90d:2027@0",
        "sbn:money:line 1:2028-02",
        "sbn:schedule:monthly:2028-02",
        "sbn:money:line 2:2028-02",
        "sbn:money:line 3:2028-02",
        "sbn:schedule:monthly:2028-03",
        "clk#US:rung:run:2027",
        "job:deadline:at_risk:2027",
        "job:deadline:late:2027",
        "clk#US:rung:notice 14d:2027@0",
    ]
    for key in ("clk#US:rung:notice 90d:2027@0", "clk#US:rung:notice 30d:2027@0"):
        row = keyed(conn, key)
        assert (row["status"], row["superseded_by"], row["by"], row["commit"]) == (
            "superseded",
            "clk#US:rung:notice 14d:2027@0",
            "catch_up",
            None,
        )
    # fired late, on the clock's time; each in its own commit
    late = keyed(conn, "sbn:schedule:monthly:2028-01")
    assert late["fired_at"] == dt.datetime.fromisoformat("2028-06-01 00:00+00:00")
    assert late["late_by"] == dt.timedelta(days=151, hours=12)
    assert len({r["xid"] for r in fired_rows(conn)}) == 11
    # nothing dropped quietly: each superseded rung is one log line
    wait_until(lambda: runner.log().count("event=run_skipped") == 2, what="two skip lines")
    assert "only the latest, clk#US:rung:notice 14d:2027@0, runs" in runner.log()
    # and shows in trouble with its late_by
    trouble = conn.execute(
        "SELECT name, late_by FROM timers.trouble WHERE name = 'job:deadline:late:2027'"
    ).fetchall()
    assert trouble == [("job:deadline:late:2027", dt.timedelta(days=47, hours=20))]


def test_a_timer_armed_after_its_day_fires_at_once_and_is_never_late(
    conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    start_runner()
    advance(conn, "2028-02-01 14:00+00")
    arm(conn, "clk#US:rung:notice 90d:2027@0", "2028-01-19 14:00+00", place=6, test_clock=clock)
    advance(conn, "2028-02-01 14:00+00")
    row = keyed(conn, "clk#US:rung:notice 90d:2027@0")
    assert (row["status"], row["late_by"]) == ("fired", None)
    assert row["fired_at"] == dt.datetime.fromisoformat("2028-02-01 14:00+00:00")
    assert fired() == [("clk#US:rung:notice 90d:2027@0", "2028-01-19T14:00:00Z")]
    assert conn.execute("SELECT count(*) FROM timers.trouble").fetchone() == (0,)


def test_a_runner_restart_rearms_nothing(
    conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    arm(conn, "job:task:a:2027", "2028-01-02 00:00+00", test_clock=clock)
    arm(conn, "job:task:b:2027", "2028-02-02 00:00+00", test_clock=clock)
    arm(conn, "job:ask:c:2027", "2028-03-02 00:00+00", test_clock=clock)
    call(conn, "hold", "job:ask:c:2027", "client")
    first = start_runner()
    advance(conn, "2028-01-15 00:00+00")
    before = conn.execute("SELECT * FROM timers.keyed ORDER BY id").fetchall()
    before_events = events(conn)
    assert first.stop() == 0
    second = start_runner()
    second.wait_for("event=serving")
    # the new runner changed no timer and recorded no re-arm
    assert conn.execute("SELECT * FROM timers.keyed ORDER BY id").fetchall() == before
    assert events(conn) == before_events
    advance(conn, "2028-12-31 00:00+00")
    assert [k for k, _ in fired()] == ["job:task:a:2027", "job:task:b:2027"]
    assert keyed(conn, "job:ask:c:2027")["status"] == "held"


def test_a_killed_runner_during_an_advance_loses_and_doubles_nothing(
    db: Database, conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    slow = LOG_SQL.replace("VALUES (", "SELECT ").replace(
        "current_user)", "current_user FROM pg_sleep(30)"
    )
    arm(conn, "job:task:slow:2027", "2028-01-02 00:00+00", slow, test_clock=clock)
    arm(conn, "job:task:next:2027", "2028-01-03 00:00+00", test_clock=clock)
    runner = start_runner()
    outcome: dict[str, Any] = {}

    def advance_in_background() -> None:
        with db.connect() as other:
            outcome["result"] = advance(other, "2028-01-04 00:00+00")[0]

    thread = threading.Thread(target=advance_in_background)
    thread.start()
    wait_until(
        lambda: conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE application_name = 'pgtimers: job:task:slow:2027'"
        ).fetchone(),
        what="the slow fire to start",
    )
    runner.kill()
    # the server lets go of the dead run (client_connection_check_interval); a new runner redoes it
    wait_until(
        lambda: (
            conn.execute(
                "SELECT 1 FROM pg_stat_activity"
                " WHERE application_name = 'pgtimers: job:task:slow:2027'"
            ).fetchone()
            is None
        ),
        timeout=20,
        what="the killed run to end",
    )
    assert keyed(conn, "job:task:slow:2027")["status"] == "armed"
    assert fired() == []
    # a quicker SQL for the redo, so the test does not wait 30 s
    call(conn, "repin", "job:task:slow:2027", LOG_SQL, "fast")
    start_runner()
    thread.join(60)
    assert not thread.is_alive()
    assert [k for k, _ in fired()] == ["job:task:slow:2027", "job:task:next:2027"]
    assert keyed(conn, "job:task:slow:2027")["status"] == "fired"
    assert outcome["result"]["now"] == "2028-01-04T00:00:00Z"


def test_deleting_a_clock_voids_its_keyed_timers(conn: psycopg.Connection, clock: str) -> None:
    arm(conn, "job:task:a:2027", "2028-01-02 00:00+00", test_clock=clock)
    arm(conn, "job:ask:b:2027", "2028-01-02 00:00+00", test_clock=clock)
    call(conn, "hold", "job:ask:b:2027", "client")
    assert conn.execute("SELECT timers.delete_test_clock('c')").fetchone() == (
        {"deleted": True, "voided": 2},
    )
    rows = conn.execute(
        "SELECT key, status, by, test_clock FROM timers.keyed ORDER BY key"
    ).fetchall()
    assert rows == [
        ("job:ask:b:2027", "void", "test_clock_deleted", None),
        ("job:task:a:2027", "void", "test_clock_deleted", None),
    ]
    assert events(conn, "job:task:a:2027")[-1] == ("job:task:a:2027", "void", "test_clock_deleted")
    # a void timer is done: a replay answers it as it is
    assert arm(conn, "job:task:a:2027", "2028-01-02 00:00+00")["status"] == "void"


def test_keyed_timers_on_the_server_clock_fire_when_due(
    conn: psycopg.Connection, fired: Fired, start_runner: StartRunner
) -> None:
    start_runner()
    found = conn.execute("SELECT now()").fetchone()
    assert found is not None
    now = found[0]
    arm(conn, "job:task:soon:2027", (now + dt.timedelta(seconds=1)).isoformat())
    arm(conn, "job:task:past:2027", (now - dt.timedelta(hours=1)).isoformat())
    wait_until(lambda: len(fired()) == 2, what="both to fire")
    assert [k for k, _ in fired()] == ["job:task:past:2027", "job:task:soon:2027"]
    time.sleep(0.5)
    assert len(fired()) == 2
