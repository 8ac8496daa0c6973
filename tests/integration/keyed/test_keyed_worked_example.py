"""The seed's worked example end to end on a test clock: Acme's 2027 annual return.

Notice rungs per state fire 90/30/14 days before the federal date; the at-risk
deadline is held from the mint until the books arrive and resumes with its
remaining time; an extension moves the federal date (every notice ahead is
superseded and re-armed at @1, the run rung keeps its key); a year's advance
fires everything in tick order, every wake delivered twice and committed once.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Database
from tests.integration.keyed.conftest import Fired, advance, arm, call, events, fired_rows, keyed
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
MINT = "2028-02-01 14:00:00+00"
STATES = ("clk_8Tx1#US", "clk_8Tx1#US-CA", "clk_8Tx1#US-NY")
FEDERAL = dt.datetime(2028, 4, 18, 14, tzinfo=dt.timezone.utc)
EXTENDED = dt.datetime(2028, 10, 16, 14, tzinfo=dt.timezone.utc)
AT_RISK = "job_4Tx9:deadline:at_risk:2027"
LATE = "job_4Tx9:deadline:late:2027"
SCHEDULE = "sbn_7Hq2:schedule:annual:2027"


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def iso(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def mint(conn: psycopg.Connection) -> None:
    """Everything the job arms when it is minted; a replay arms exactly the same keys."""
    arm(conn, SCHEDULE, MINT, place=2, test_clock="c", version="2027-06")
    for state in STATES:
        for days in (90, 30, 14):
            arm(
                conn,
                f"{state}:rung:notice {days}d:2027@0",
                (FEDERAL - dt.timedelta(days=days)).isoformat(),
                place=6,
                test_clock="c",
                version="2027-06",
            )
    arm(
        conn,
        "clk_8Tx1#US:rung:run:2027",
        FEDERAL.isoformat(),
        place=6,
        test_clock="c",
        version="2027-06",
    )
    arm(
        conn,
        AT_RISK,
        "2028-03-27 00:30+00",
        place=5,
        late_at="2028-04-14 04:00+00",
        test_clock="c",
        version="2027-06",
    )
    arm(conn, LATE, "2028-04-14 04:00+00", place=5, test_clock="c", version="2027-06")


def snapshot(conn: psycopg.Connection) -> list[Any]:
    return conn.execute("SELECT * FROM timers.keyed ORDER BY id").fetchall()


def test_annual_return(
    db: Database, conn: psycopg.Connection, fired: Fired, start_runner: StartRunner
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [MINT])
    # The clock's keyed fire lock keeps the runner from firing what the mint owes at
    # once (before the advance), so that the advance's counts below are exact.
    holder = db.connect(autocommit=False)
    holder.execute("SELECT 1 FROM timers.locks WHERE name = 'keyed_fire:c' FOR UPDATE")
    start_runner()
    mint(conn)
    # the organizer holds the at-risk timer from the mint: waiting on the books
    call(conn, "hold", AT_RISK, "ask_9Ts4")

    # The mint: the 90-day notices were owed before it (armed after their day: fire
    # at once, never late), and the schedule's period is owed now.
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.update(advance(conn, MINT, redeliver=True)[0]))
    thread.start()
    wait_until(
        lambda: holder.execute(
            "SELECT 1 FROM timers.audit WHERE action = 'advance_test_clock'"
        ).fetchone(),
        what="the advance's first step",
    )
    holder.close()  # lets the runner fire
    thread.join(timeout=60)
    result = outcome
    assert (result["fired"], result["replayed"]) == (4, 4)
    assert [k for k, _ in fired()] == [
        "clk_8Tx1#US-CA:rung:notice 90d:2027@0",  # '-' (0x2d) sorts before ':' (0x3a)
        "clk_8Tx1#US-NY:rung:notice 90d:2027@0",
        "clk_8Tx1#US:rung:notice 90d:2027@0",
        SCHEDULE,
    ]
    us = keyed(conn, "clk_8Tx1#US:rung:notice 90d:2027@0")
    assert {
        k: us[k]
        for k in (
            "on",
            "kind",
            "place",
            "status",
            "version",
            "late_by",
            "attempt",
            "wakes",
            "superseded_by",
        )
    } == {
        "on": "clk_8Tx1#US",
        "kind": "rung",
        "place": 6,
        "status": "fired",
        "version": "2027-06",
        "late_by": None,
        "attempt": 1,
        "wakes": 2,
        "superseded_by": None,
    }
    assert (us["owed_at"], us["armed_at"], us["fired_at"]) == (
        at("2028-01-19 14:00+00"),
        at(MINT),
        at(MINT),
    )
    assert us["commit"] == next(r["xid"] for r in fired_rows(conn) if r["key"] == us["key"])
    assert conn.execute(
        "SELECT next_timer FROM timers.keyed_owners WHERE \"on\" = 'clk_8Tx1#US-CA'"
    ).fetchone() == ("clk_8Tx1#US-CA:rung:notice 30d:2027@0",)

    # The books arrive on 5 February: the at-risk timer resumes with its time left.
    advance(conn, "2028-02-05 14:00+00")
    resumed = call(conn, "resume", AT_RISK)
    assert {
        k: resumed[k]
        for k in (
            "status",
            "held_since",
            "held_by",
            "resumed_at",
            "remaining",
            "owed_at",
            "late_at",
        )
    } == {
        "status": "armed",
        "held_since": at(MINT),
        "held_by": "ask_9Ts4",
        "resumed_at": at("2028-02-05 14:00+00"),
        "remaining": dt.timedelta(days=54, hours=10, minutes=30),
        "owed_at": at("2028-03-31 00:30+00"),
        "late_at": at("2028-04-14 04:00+00"),
    }

    # A replay of the mint arms the same keys and changes nothing.
    before = snapshot(conn)
    mint(conn)
    assert snapshot(conn) == before

    # 10 February: the extension moves the federal date to 16 October. Every notice
    # still ahead is superseded and re-armed at @1; the run rung keeps its key.
    advance(conn, "2028-02-10 14:00+00")
    for state in STATES:
        for days in (30, 14):
            moved = call(
                conn,
                "move",
                f"{state}:rung:notice {days}d:2027@0",
                (EXTENDED - dt.timedelta(days=days)).isoformat(),
            )
            assert moved["key"] == f"{state}:rung:notice {days}d:2027@1"
            old = keyed(conn, f"{state}:rung:notice {days}d:2027@0")
            assert (old["status"], old["superseded_by"], old["by"]) == (
                "superseded",
                moved["key"],
                "move",
            )
        with pytest.raises(errors.ObjectNotInPrerequisiteState, match="fired at"):
            call(conn, "move", f"{state}:rung:notice 90d:2027@0", EXTENDED.isoformat())
    run = call(conn, "move", "clk_8Tx1#US:rung:run:2027", EXTENDED.isoformat())
    assert (run["key"], run["owed_at"]) == ("clk_8Tx1#US:rung:run:2027", EXTENDED)
    assert keyed(conn, "clk_8Tx1#US-NY:rung:notice 30d:2027@1")["owed_at"] == at(
        "2028-09-16 14:00+00"
    )
    # the deadline follows its own late time, not the clock's: it did not move
    assert keyed(conn, LATE)["owed_at"] == at("2028-04-14 04:00+00")

    # A year's advance, every wake delivered twice: all of it fires once, in tick order.
    rows_before = len(fired())
    result, _ = advance(conn, "2029-02-01 14:00+00", redeliver=True)
    assert (result["fired"], result["replayed"]) == (9, 9)
    new = fired()[rows_before:]
    assert new == [
        (AT_RISK, "2028-03-31T00:30:00Z"),
        (LATE, "2028-04-14T04:00:00Z"),
        ("clk_8Tx1#US-CA:rung:notice 30d:2027@1", "2028-09-16T14:00:00Z"),
        ("clk_8Tx1#US-NY:rung:notice 30d:2027@1", "2028-09-16T14:00:00Z"),
        ("clk_8Tx1#US:rung:notice 30d:2027@1", "2028-09-16T14:00:00Z"),
        ("clk_8Tx1#US-CA:rung:notice 14d:2027@1", "2028-10-02T14:00:00Z"),
        ("clk_8Tx1#US-NY:rung:notice 14d:2027@1", "2028-10-02T14:00:00Z"),
        ("clk_8Tx1#US:rung:notice 14d:2027@1", "2028-10-02T14:00:00Z"),
        ("clk_8Tx1#US:rung:run:2027", iso(EXTENDED)),
    ]
    # nothing was written twice, and every fired timer was woken twice, committed once
    keys = [k for k, _ in fired()]
    assert len(keys) == len(set(keys)) == 13
    states: dict[str, int] = dict(
        conn.execute("SELECT status, count(*) FROM timers.keyed GROUP BY status").fetchall()
    )
    assert states == {"fired": 13, "superseded": 6}
    assert conn.execute(
        "SELECT DISTINCT wakes, attempt FROM timers.keyed WHERE status = 'fired'"
    ).fetchall() == [(2, 1)]
    assert conn.execute(
        "SELECT count(*) FROM timers.keyed WHERE late_by > interval '0'"
    ).fetchone() == (0,)
    # every re-arm is on the record with its cause, and nothing else re-armed
    causes = conn.execute(
        "SELECT event, cause, count(*) FROM timers.keyed_events GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    assert causes == [
        ("armed", "arm", 13),
        ("armed", "move", 6),
        ("fired", "wake", 13),
        ("held", "hold", 1),
        ("moved", "move", 1),
        ("resumed", "resume", 1),
        ("superseded", "move", 6),
    ]
    assert events(conn, AT_RISK) == [
        (AT_RISK, "armed", "arm"),
        (AT_RISK, "held", "hold"),
        (AT_RISK, "resumed", "resume"),
        (AT_RISK, "fired", "wake"),
    ]
