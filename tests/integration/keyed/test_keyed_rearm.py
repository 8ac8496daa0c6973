"""The calendar and policy re-arms of keyed timers: a calendar edit re-rolls the dates it
touches, a policy change re-arms each silence span from its last activity; both recorded
with their cause, and nothing else moves."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.rows import dict_row

from tests.conftest import Database
from tests.integration.keyed.conftest import LOG_SQL, Fired, advance, arm, call, events, keyed
from tests.support.runner import RunnerProcess

StartRunner = Callable[..., RunnerProcess]
NY = "America/New_York"


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


@pytest.fixture
def clock(conn: psycopg.Connection) -> str:
    conn.execute("SELECT timers.create_test_clock('c', '2028-01-01 00:00+00')")
    return "c"


@pytest.fixture
def irs(conn: psycopg.Connection) -> str:
    """A mon-fri calendar known for 2028."""
    conn.execute("SELECT timers.save_calendar('irs', 'mon-fri', '2028-01-01', '2028-12-31')")
    return "irs"


def policy(conn: psycopg.Connection, name: str, span: str) -> dict[str, Any]:
    row = conn.execute("SELECT timers.set_policy(%s, %s::interval)", [name, span]).fetchone()
    assert row is not None
    result: dict[str, Any] = row[0]
    return result


def snapshot(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT key, status, owed_at, nominal_at, since, by FROM timers.keyed ORDER BY key"
    ).fetchall()


# ---------------------------------------------------------------------------- calendars


def test_a_date_on_a_closed_day_rolls_to_an_open_day_at_the_same_wall_time(
    conn: psycopg.Connection, irs: str
) -> None:
    # 2028-04-15 is a Saturday; 09:00 in New York
    saturday = "2028-04-15 09:00-04"
    row = arm(conn, "job:deadline:file:2027", saturday, calendar=irs, zone=NY)
    assert (row["owed_at"], row["nominal_at"]) == (at("2028-04-17 09:00-04"), at(saturday))
    assert (row["calendar"], row["roll"], row["zone"]) == ("irs", "following", NY)
    row = arm(conn, "job:deadline:early:2027", saturday, calendar="IRS", roll="preceding", zone=NY)
    assert (row["owed_at"], row["calendar"]) == (at("2028-04-14 09:00-04"), "irs")
    # an open day stays as it is
    assert arm(conn, "job:task:x:2027", "2028-04-18 09:00-04", calendar=irs)["owed_at"] == at(
        "2028-04-18 09:00-04"
    )


def test_a_holiday_re_rolls_every_date_it_touches_and_nothing_else(
    conn: psycopg.Connection, irs: str
) -> None:
    arm(conn, "clk#US:rung:notice 30d:2027@0", "2028-03-20 14:00+00", calendar=irs, place=6)
    arm(conn, "clk#US:rung:run:2027", "2028-03-20 18:00+00", calendar=irs, place=6)
    arm(conn, "clk#US:rung:notice 14d:2027@0", "2028-04-03 14:00+00", calendar=irs, place=6)
    arm(conn, "other:task:plain:2027", "2028-03-20 14:00+00")  # follows no calendar
    before = events(conn)

    # a closed day the IRS declares in March (a Monday)
    conn.execute("SELECT timers.add_holiday('irs', '2028-03-20', 'storm')")

    notice = keyed(conn, "clk#US:rung:notice 30d:2027@0")
    assert (notice["status"], notice["superseded_by"], notice["by"]) == (
        "superseded",
        "clk#US:rung:notice 30d:2027@1",
        "calendar",
    )
    successor = keyed(conn, "clk#US:rung:notice 30d:2027@1")
    assert (successor["status"], successor["owed_at"], successor["nominal_at"]) == (
        "armed",
        at("2028-03-21 14:00+00"),
        at("2028-03-20 14:00+00"),
    )
    assert (successor["place"], successor["calendar"]) == (6, "irs")
    # the run rung has no @n: it keeps its key and moves in place
    run = keyed(conn, "clk#US:rung:run:2027")
    assert (run["status"], run["owed_at"]) == ("armed", at("2028-03-21 18:00+00"))
    assert events(conn)[len(before) :] == [
        ("clk#US:rung:notice 30d:2027@0", "superseded", "calendar"),
        ("clk#US:rung:notice 30d:2027@1", "armed", "calendar"),
        ("clk#US:rung:run:2027", "moved", "calendar"),
    ]
    # untouched: the April rung and the timer without a calendar
    assert keyed(conn, "clk#US:rung:notice 14d:2027@0")["status"] == "armed"
    assert keyed(conn, "other:task:plain:2027")["owed_at"] == at("2028-03-20 14:00+00")

    # the holiday lifted: the date rolls back, as a new re-arm
    conn.execute("SELECT timers.remove_day('irs', '2028-03-20')")
    assert keyed(conn, "clk#US:rung:notice 30d:2027@2")["owed_at"] == at("2028-03-20 14:00+00")
    assert keyed(conn, "clk#US:rung:run:2027")["owed_at"] == at("2028-03-20 18:00+00")
    audit = conn.execute(
        "SELECT detail->>'keyed_rerolled' FROM timers.audit WHERE action = 'remove_day'"
    ).fetchone()
    assert audit == ("2",)


def test_every_kind_of_calendar_edit_re_rolls(conn: psycopg.Connection, irs: str) -> None:
    arm(conn, "job:task:sat:2027@0", "2028-05-06 10:00+00", calendar=irs)  # a Saturday
    assert keyed(conn, "job:task:sat:2027@0")["owed_at"] == at("2028-05-08 10:00+00")
    # an extra trading day on that Saturday
    conn.execute("SELECT timers.add_trading_day('irs', '2028-05-06')")
    assert keyed(conn, "job:task:sat:2027@1")["owed_at"] == at("2028-05-06 10:00+00")
    # a new week era from May on: Saturday is open anyway, the extra day goes
    conn.execute("SELECT timers.remove_day('irs', '2028-05-06')")
    conn.execute("SELECT timers.set_calendar_week('irs', '2028-05-01', 'tue-sat')")
    assert keyed(conn, "job:task:sat:2027@2")["owed_at"] == at("2028-05-08 10:00+00")
    assert keyed(conn, "job:task:sat:2027@3")["owed_at"] == at("2028-05-06 10:00+00")
    # the base week changes through save_calendar
    conn.execute("SELECT timers.set_calendar_week('irs', '2028-05-01', 'mon-fri')")
    assert keyed(conn, "job:task:sat:2027@4")["owed_at"] == at("2028-05-08 10:00+00")
    conn.execute("SELECT timers.save_calendar('irs', 'sun-thu', '2028-01-01', '2028-12-31')")
    assert keyed(conn, "job:task:sat:2027@4")["status"] == "armed"  # era mon-fri still rules May


def test_held_and_fired_timers_are_not_re_rolled(conn: psycopg.Connection, irs: str) -> None:
    arm(conn, "job:deadline:at_risk:2027", "2028-03-20 14:00+00", calendar=irs)
    call(conn, "hold", "job:deadline:at_risk:2027", "ask_1")
    before = events(conn)
    conn.execute("SELECT timers.add_holiday('irs', '2028-03-20')")
    assert events(conn) == before
    assert keyed(conn, "job:deadline:at_risk:2027")["status"] == "held"


def test_a_resume_rolls_onto_the_calendar(conn: psycopg.Connection, irs: str, clock: str) -> None:
    # held Saturday noon with 5 days left, resumed Monday noon: owed Saturday, rolled to Monday
    arm(conn, "job:task:wait:2027", "2028-01-06 12:00+00", calendar=irs, test_clock=clock)
    conn.execute("UPDATE timers.test_clocks SET now = '2028-01-01 12:00+00' WHERE name = 'c'")
    call(conn, "hold", "job:task:wait:2027", "ask_1")
    conn.execute("UPDATE timers.test_clocks SET now = '2028-01-03 12:00+00' WHERE name = 'c'")
    row = call(conn, "resume", "job:task:wait:2027")
    assert (row["owed_at"], row["nominal_at"], row["remaining"]) == (
        at("2028-01-10 12:00+00"),
        at("2028-01-08 12:00+00"),
        dt.timedelta(days=5),
    )


def test_a_move_sets_the_nominal_date_and_the_calendar_rolls_it(
    conn: psycopg.Connection, irs: str
) -> None:
    arm(conn, "clk#US:rung:notice 30d:2027@0", "2028-03-21 14:00+00", calendar=irs)
    row = call(conn, "move", "clk#US:rung:notice 30d:2027@0", "2028-09-16 14:00+00", "move")
    # 2028-09-16 is a Saturday
    assert (row["key"], row["owed_at"], row["nominal_at"]) == (
        "clk#US:rung:notice 30d:2027@1",
        at("2028-09-18 14:00+00"),
        at("2028-09-16 14:00+00"),
    )
    # a move to the Sunday rolls to the same Monday: nothing is re-armed, the nominal date is kept
    before = events(conn)
    row = call(conn, "move", "clk#US:rung:notice 30d:2027@1", "2028-09-17 14:00+00", "move")
    assert (row["key"], row["owed_at"], row["nominal_at"]) == (
        "clk#US:rung:notice 30d:2027@1",
        at("2028-09-18 14:00+00"),
        at("2028-09-17 14:00+00"),
    )
    assert events(conn) == before


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"calendar": "nope"}, errors.NoDataFound, "there is no calendar 'nope'"),
        (
            {"calendar": "irs", "roll": "nearest"},
            errors.InvalidParameterValue,
            "bad roll 'nearest'",
        ),
        ({"calendar": "irs", "zone": "Mars/Base"}, errors.InvalidParameterValue, "Mars/Base"),
    ],
)
def test_bad_calendar_options_arm_nothing(
    conn: psycopg.Connection,
    irs: str,
    options: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        arm(conn, "job:task:x:2027", "2028-03-20 14:00+00", **options)
    assert snapshot(conn) == []


def test_a_date_outside_the_known_range_is_an_error_never_a_guess(
    conn: psycopg.Connection, irs: str
) -> None:
    with pytest.raises(errors.InvalidParameterValue, match="calendar 'irs' is known from"):
        arm(conn, "job:task:x:2029", "2029-03-20 14:00+00", calendar=irs)
    # the last day of the range is a Sunday: a following roll would leave the range
    with pytest.raises(errors.InvalidParameterValue, match="not on 2029-01-01"):
        arm(conn, "job:task:x:2028", "2028-12-31 14:00+00", calendar=irs)
    assert snapshot(conn) == []


def test_a_calendar_that_stops_knowing_the_day_fails_the_fire_with_the_reason(
    conn: psycopg.Connection, irs: str, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    arm(conn, "job:task:known:2027", "2028-01-05 10:00+00", calendar=irs, test_clock=clock)
    arm(conn, "job:task:gone:2027", "2028-01-06 10:00+00", calendar="irs", test_clock=clock)
    # the range shrinks: the edit cannot re-roll the dates, so they keep their times
    conn.execute("SELECT timers.save_calendar('irs', 'mon-fri', '2028-01-01', '2028-01-04')")
    assert keyed(conn, "job:task:known:2027")["owed_at"] == at("2028-01-05 10:00+00")
    start_runner()
    advance(conn, "2028-01-05 12:00+00")
    row = keyed(conn, "job:task:known:2027")
    assert (row["status"], row["ok"]) == ("fired", False)
    assert (
        "calendar 'irs' is known from 2028-01-01 until 2028-01-04, not on 2028-01-05"
        in (row["error"])
    )
    conn.execute("SELECT timers.drop_calendar('irs')")
    advance(conn, "2028-01-07 00:00+00")
    row = keyed(conn, "job:task:gone:2027")
    assert (row["status"], row["ok"], row["error"]) == (
        "fired",
        False,
        "calendar 'irs' does not exist",
    )
    assert fired() == []  # neither SQL ran
    trouble = conn.execute("SELECT name FROM timers.trouble ORDER BY name").fetchall()
    assert ("job:task:gone:2027",) in trouble


# ---------------------------------------------------------------------------- policies


def test_a_policy_change_re_arms_from_the_last_activity(conn: psycopg.Connection) -> None:
    assert policy(conn, "stall_days", "14 days") == {
        "name": "stall_days",
        "span": "14 days",
        "from": None,
        "created": True,
        "rearmed": 0,
        "held": 0,
        "busy": 0,
    }
    key = "deal_7:window:silent:2026-11@0"
    row = arm(conn, key, None, policy="stall_days", since="2026-11-03 15:00+00")
    assert (row["owed_at"], row["since"], row["policy"]) == (
        at("2026-11-17 15:00+00"),
        at("2026-11-03 15:00+00"),
        "stall_days",
    )
    # api.forsale's agent moves stall_days from 14 to 7: gone dark on 10 November, not 17
    result = policy(conn, "stall_days", "7 days")
    assert (result["rearmed"], result["from"]) == (1, "14 days")
    old, new = keyed(conn, key), keyed(conn, "deal_7:window:silent:2026-11@1")
    assert (old["status"], old["by"], old["superseded_by"]) == (
        "superseded",
        "policy",
        "deal_7:window:silent:2026-11@1",
    )
    assert (new["status"], new["owed_at"], new["since"], new["policy"]) == (
        "armed",
        at("2026-11-10 15:00+00"),
        at("2026-11-03 15:00+00"),
        "stall_days",
    )
    assert events(conn)[-2:] == [
        (key, "superseded", "policy"),
        ("deal_7:window:silent:2026-11@1", "armed", "policy"),
    ]
    # the same span again re-arms nothing
    before = events(conn)
    assert policy(conn, "stall_days", "7 days")["rearmed"] == 0
    assert events(conn) == before


def test_a_policy_span_is_added_in_the_timers_zone(conn: psycopg.Connection) -> None:
    policy(conn, "stall", "7 days")
    # New York leaves DST on 2026-11-01: seven days later is still 09:00 there
    row = arm(
        conn, "deal_1:window:silent:x", None, policy="stall", since="2026-10-30 09:00-04", zone=NY
    )
    assert row["owed_at"] == at("2026-11-06 09:00-05")


def test_a_move_of_a_policy_timer_moves_its_last_activity(conn: psycopg.Connection) -> None:
    policy(conn, "stall", "14 days")
    arm(conn, "deal_2:window:silent:x", None, policy="stall", since="2026-11-03 15:00+00")
    # a reply on 5 November: the silence now ends on the 19th
    row = call(conn, "move", "deal_2:window:silent:x", "2026-11-19 15:00+00", "move")
    assert (row["owed_at"], row["since"]) == (at("2026-11-19 15:00+00"), at("2026-11-05 15:00+00"))
    policy(conn, "stall", "7 days")
    assert keyed(conn, "deal_2:window:silent:x")["owed_at"] == at("2026-11-12 15:00+00")


def test_held_policy_timers_keep_their_remaining_time(conn: psycopg.Connection) -> None:
    policy(conn, "stall", "14 days")
    arm(conn, "deal_3:window:silent:x", None, policy="stall", since="2099-11-03 15:00+00")
    held = call(conn, "hold", "deal_3:window:silent:x", "legal")
    result = policy(conn, "stall", "7 days")
    assert (result["rearmed"], result["held"]) == (0, 1)
    assert keyed(conn, "deal_3:window:silent:x")["remaining"] == held["remaining"]


def test_a_policy_follows_a_calendar_too(conn: psycopg.Connection, irs: str) -> None:
    policy(conn, "answer", "5 days")
    # Monday + 5 days = Saturday, rolled to Monday
    row = arm(
        conn,
        "job:ask:books:2027",
        None,
        policy="answer",
        since="2028-03-06 12:00+00",
        calendar=irs,
    )
    assert (row["nominal_at"], row["owed_at"]) == (
        at("2028-03-11 12:00+00"),
        at("2028-03-13 12:00+00"),
    )
    policy(conn, "answer", "3 days")
    assert keyed(conn, "job:ask:books:2027")["owed_at"] == at("2028-03-09 12:00+00")


@pytest.mark.parametrize(
    ("owed", "options", "error", "message"),
    [
        (None, {"policy": "nope", "since": "2026-11-03"}, errors.NoDataFound, "no policy 'nope'"),
        (None, {"policy": "stall"}, errors.NullValueNotAllowed, "since must be the time"),
        (
            "2026-11-20",
            {"policy": "stall", "since": "2026-11-03"},
            errors.InvalidParameterValue,
            "give owed_at or a policy, not both",
        ),
        ("2026-11-20", {"since": "2026-11-03"}, errors.InvalidParameterValue, "give policy too"),
        (
            None,
            {"policy": "bad name!", "since": "2026-11-03"},
            errors.InvalidParameterValue,
            "bad policy name",
        ),
    ],
)
def test_bad_policy_options_arm_nothing(
    conn: psycopg.Connection,
    owed: str | None,
    options: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    policy(conn, "stall", "14 days")
    with pytest.raises(error, match=message):
        arm(conn, "deal:window:silent:x", owed, **options)
    assert snapshot(conn) == []


@pytest.mark.parametrize("span", ["0", "-1 day", "101 years", None])
def test_a_bad_span_changes_nothing(conn: psycopg.Connection, span: str | None) -> None:
    policy(conn, "stall", "14 days")
    arm(conn, "deal:window:silent:x", None, policy="stall", since="2026-11-03 15:00+00")
    before = snapshot(conn)
    with pytest.raises(errors.InvalidParameterValue, match="bad span"):
        conn.execute("SELECT timers.set_policy('stall', %s::interval)", [span])
    assert snapshot(conn) == before
    assert conn.execute("SELECT span::text FROM timers.keyed_policies").fetchone() == ("14 days",)


def test_drop_policy_refuses_while_timers_use_it(conn: psycopg.Connection) -> None:
    policy(conn, "stall", "14 days")
    policy(conn, "unused", "1 day")
    arm(conn, "deal:window:silent:x", None, policy="stall", since="2026-11-03 15:00+00")
    with pytest.raises(errors.ObjectNotInPrerequisiteState, match="1 armed or held keyed timers"):
        conn.execute("SELECT timers.drop_policy('stall')")
    assert conn.execute("SELECT timers.drop_policy('UNUSED')").fetchone() == (
        {"dropped": True, "name": "unused"},
    )
    with pytest.raises(errors.NoDataFound, match="no policy 'unused'"):
        conn.execute("SELECT timers.drop_policy('unused')")


@pytest.mark.parametrize("role", ["pgt_reader", "pgt_nobody"])
def test_only_admins_set_policies(db: Database, role: str) -> None:
    with db.connect(role) as conn, pytest.raises(errors.InsufficientPrivilege):
        conn.execute("SELECT timers.set_policy('stall', '7 days')")
    with db.connect(role) as conn, pytest.raises(errors.InsufficientPrivilege):
        conn.execute("SELECT timers._keyed_set_policy('postgres', 'stall', '7 days', '')")
    with db.connect("pgt_alice") as alice:
        alice.execute("SELECT timers.set_policy('stall', '7 days')")
    with db.connect("pgt_reader") as reader:
        assert reader.execute("SELECT name, span::text FROM timers.keyed_policies").fetchall() == [
            ("stall", "7 days")
        ]


def test_a_policy_re_arm_into_the_past_fires_at_once_and_is_never_late(
    conn: psycopg.Connection, clock: str, fired: Fired, start_runner: StartRunner
) -> None:
    conn.execute("UPDATE timers.test_clocks SET now = '2026-11-12 00:00+00' WHERE name = 'c'")
    policy(conn, "stall", "14 days")
    arm(
        conn,
        "deal:window:silent:x@0",
        None,
        policy="stall",
        since="2026-11-03 15:00+00",
        test_clock=clock,
        sql=LOG_SQL,
    )
    policy(conn, "stall", "7 days")  # owed on the 10th, two days ago
    start_runner()
    advance(conn, "2026-11-12 00:00+00")
    row = keyed(conn, "deal:window:silent:x@1")
    assert (row["status"], row["owed_at"], row["late_by"]) == (
        "fired",
        at("2026-11-10 15:00+00"),
        None,
    )
    assert fired() == [("deal:window:silent:x@1", "2026-11-10T15:00:00Z")]


def test_the_new_columns_read_for_readers(db: Database) -> None:
    with db.connect("pgt_alice") as alice:
        alice.execute("SELECT timers.set_policy('stall', '7 days')")
        arm(alice, "deal:window:silent:x", None, policy="stall", since="2026-11-03 15:00+00")
    with db.connect("pgt_reader") as reader, reader.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM timers.list_keyed('deal')").fetchone()
    assert row is not None
    assert (row["policy"], row["zone"], row["calendar"], row["sql"]) == ("stall", "UTC", None, None)
