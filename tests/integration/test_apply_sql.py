"""timers.apply(spec, prune, dry_run) and timers.export from SQL: the plan, what an apply
changes and what it leaves alone (unchanged timers, timers saved by hand, other sets),
locked timers, calendars, bad input, rights and two applies at once."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Database, scalar


def apply(
    conn: psycopg.Connection, spec: dict[str, Any], *, prune: bool = False, dry_run: bool = False
) -> list[tuple[str, str, dict[str, Any]]]:
    rows = conn.execute(
        "SELECT action, name, changes FROM timers.apply(%s::jsonb, prune => %s, dry_run => %s)",
        [json.dumps(spec), prune, dry_run],
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def timer(
    name: str, schedule: str = "every 5m", sql: str = "SELECT 1", **options: Any
) -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "sql": sql, **options}


def count(conn: psycopg.Connection, what: str = "timers.timers") -> int:
    return int(scalar(conn, f"SELECT count(*) FROM {what}"))


def test_a_dry_run_is_the_default_and_changes_nothing(conn: psycopg.Connection) -> None:
    rows = conn.execute(
        "SELECT action, name FROM timers.apply(%s::jsonb)",
        [json.dumps({"timer": [timer("a"), timer("b")]})],
    ).fetchall()
    assert rows == [("create", "a"), ("create", "b")]
    assert count(conn) == 0 and count(conn, "timers.audit") == 0


def test_apply_creates_then_leaves_unchanged_timers_untouched(conn: psycopg.Connection) -> None:
    spec = {"timer": [timer("a"), timer("b", "daily 02:00", retries=2, deadline="1 hour")]}
    plan = apply(conn, spec)
    assert [(a, n) for a, n, _ in plan] == [("create", "a"), ("create", "b")]
    assert plan[1][2] == {
        "name": "b", "schedule": "daily 02:00", "sql": "SELECT 1", "retries": 2,
        "deadline": "01:00:00",
    }  # fmt: skip
    before = conn.execute(
        "SELECT name, updated_at, xmin::text FROM timers.timers ORDER BY name"
    ).fetchall()
    audits = count(conn, "timers.audit")
    assert apply(conn, spec) == [("unchanged", "a", {}), ("unchanged", "b", {})]
    after = conn.execute(
        "SELECT name, updated_at, xmin::text FROM timers.timers ORDER BY name"
    ).fetchall()
    assert after == before  # not even rewritten
    # one apply row with the counts, no save row
    assert count(conn, "timers.audit") == audits + 1
    detail = scalar(conn, "SELECT detail FROM timers.audit ORDER BY id DESC LIMIT 1")
    assert (detail["unchanged"], detail["create"], detail["update"]) == (2, 0, 0)


def test_an_update_says_what_changes_and_prune_deletes_only_the_sets_own(
    conn: psycopg.Connection,
) -> None:
    apply(conn, {"timer": [timer("a"), timer("b")]})
    apply(conn, {"timer": [timer("other")], "managed_by": "billing"})
    conn.execute("SELECT timers.save('by_hand', 'every 1h', 'SELECT 2')")
    plan = apply(conn, {"timer": [timer("a", "every 10m", priority=5)]}, prune=True)
    assert plan == [
        ("update", "a", {"schedule": {"from": "every 5m", "to": "every 10m"},
                         "priority": {"from": 0, "to": 5}}),
        ("delete", "b", {}),
    ]  # fmt: skip
    names = conn.execute("SELECT name, managed_by FROM timers.status ORDER BY name").fetchall()
    assert names == [("a", "apply"), ("by_hand", None), ("other", "billing")]


def test_a_timer_saved_by_hand_leaves_its_set_and_shows_as_drift(conn: psycopg.Connection) -> None:
    spec = {"timer": [timer("a")]}
    apply(conn, spec)
    conn.execute("SELECT timers.save('a', 'every 7m', 'SELECT 1')")
    plan = apply(conn, spec, dry_run=True)
    assert plan == [("update", "a", {"schedule": {"from": "every 7m", "to": "every 5m"}})]
    # and a prune of the set does not touch it meanwhile
    assert apply(conn, {"timer": []}, prune=True, dry_run=True) == []


def test_a_locked_timer_stops_the_apply_unless_unchanged(conn: psycopg.Connection) -> None:
    apply(conn, {"timer": [timer("vault", locked=True), timer("a")]})
    assert apply(conn, {"timer": [timer("vault", locked=True), timer("a")]}) == [
        ("unchanged", "vault", {}),
        ("unchanged", "a", {}),
    ]
    with pytest.raises(errors.InsufficientPrivilege, match=r'timer "vault": .*is locked'):
        apply(conn, {"timer": [timer("a", "every 9m"), timer("vault", "every 6m", locked=True)]})
    # nothing of the apply stayed, not even the timer before the locked one
    assert scalar(conn, "SELECT schedule FROM timers.timers WHERE name = 'a'") == "every 5m"
    with pytest.raises(errors.InsufficientPrivilege, match='timer "vault"'):
        apply(conn, {"timer": [timer("a")]}, prune=True)
    assert count(conn) == 2


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (timer("a", retries="many"), errors.InvalidParameterValue, 'timer "a": bad retries'),
        (
            timer("a", colour="red"),
            errors.InvalidParameterValue,
            "timer \"a\": unknown option 'colour'",
        ),
        (timer("a", "every blue moon"), errors.InvalidParameterValue, 'timer "a": '),
        (timer("a", deadline="0 s"), errors.InvalidParameterValue, 'timer "a": bad deadline'),
        ({"name": "a", "schedule": "every 5m"}, errors.InvalidParameterValue, 'timer "a": '),
    ],
)
def test_a_bad_timer_is_named_and_nothing_changes(
    conn: psycopg.Connection, bad: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        apply(conn, {"timer": [timer("good"), bad]})
    assert count(conn) == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"timer": [timer("a"), timer("A")]}, 'timer "a": named twice'),
        ({"timers": []}, "unknown key 'timers'"),
        ({"timer": {}}, '"timer" must be an array'),
        ({"timer": [], "managed_by": ""}, "bad managed_by"),
    ],
)
def test_a_bad_spec_is_refused(
    conn: psycopg.Connection, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(errors.InvalidParameterValue, match=message):
        apply(conn, spec)


def test_calendars_come_first_and_round_trip_through_export(conn: psycopg.Connection) -> None:
    spec = {
        "calendar": [
            {"name": "xchg", "week": "sun-thu", "valid_from": "2027-01-01",
             "weeks": [{"from_day": "2027-06-01", "week": "mon-fri"}],
             "holidays": [{"day": "2027-01-05", "note": "new year"}],
             "trading_days": [{"day": "2027-01-08"}]},
        ],
        "timer": [timer("close", "trading xchg 15:05", timezone="Asia/Kathmandu", retries=1,
                        retry_delay="1 minute", jitter="10 seconds", priority=-3, catch_up="latest",
                        history="failures", enabled=False)],
    }  # fmt: skip
    # a dry run sees the calendar its timer trades on
    assert [a for a, _, _ in apply(conn, spec, dry_run=True)] == ["create", "create"]
    assert count(conn, "timers.calendars") == 0
    assert [(a, n) for a, n, _ in apply(conn, spec)] == [
        ("create", "calendar:xchg"),
        ("create", "close"),
    ]
    assert scalar(conn, "SELECT timers.is_trading_day('xchg', '2027-01-08')") is True
    assert scalar(conn, "SELECT timers.is_trading_day('xchg', '2027-01-05')") is False
    exported = scalar(conn, "SELECT timers.export()")
    assert [a for a, _, _ in apply(conn, exported)] == ["unchanged", "unchanged"]
    spec["calendar"][0]["holidays"].append({"day": "2027-01-06"})
    plan = apply(conn, spec)
    assert plan[0][:2] == ("update", "calendar:xchg") and list(plan[0][2]) == ["holidays"]


def test_export_takes_a_pattern_and_is_for_admins(db: Database, conn: psycopg.Connection) -> None:
    apply(conn, {"timer": [timer("eod_a"), timer("eod_b"), timer("other")]})
    names = [t["name"] for t in scalar(conn, "SELECT timers.export('eod_*')")["timer"]]
    assert names == ["eod_a", "eod_b"]
    with db.connect("pgt_reader") as reader:
        with pytest.raises(errors.InsufficientPrivilege):
            reader.execute("SELECT timers.export()")
        with pytest.raises(errors.InsufficientPrivilege):
            reader.execute("SELECT * FROM timers.apply('{\"timer\": []}')")


def test_two_applies_take_turns(db: Database, conn: psycopg.Connection) -> None:
    first = db.connect(autocommit=False)
    first.execute(
        "SELECT * FROM timers.apply(%s::jsonb, dry_run => false)",
        [json.dumps({"timer": [timer("a")]})],
    )
    done: list[float] = []

    def second() -> None:
        with db.connect() as other:
            other.execute(
                "SELECT * FROM timers.apply(%s::jsonb, dry_run => false)",
                [json.dumps({"timer": [timer("a", "every 9m")]})],
            )
        done.append(time.monotonic())

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(1.0)
    assert not done  # waits for the first to commit
    committed = time.monotonic()
    first.commit()
    first.close()
    thread.join(10)
    assert done and done[0] >= committed
    assert scalar(conn, "SELECT schedule FROM timers.timers WHERE name = 'a'") == "every 9m"


def test_an_export_of_timers_saved_by_hand_applies_as_unchanged(conn: psycopg.Connection) -> None:
    conn.execute(
        "SELECT timers.save('nightly', 'daily 02:00', 'CALL nightly()', timezone => 'Europe/Oslo',"
        " retries => 3, retry_delay => '2 minutes', jitter => '0 s', deadline => '3 hours',"
        " catch_up => 'skip')"
    )
    conn.execute("SELECT timers.save('vault', 'every 1h', 'SELECT 1', locked => true)")
    conn.execute("CREATE PROCEDURE nightly() LANGUAGE sql AS 'SELECT 1'")
    exported = scalar(conn, "SELECT timers.export()")
    assert apply(conn, exported) == [("unchanged", "nightly", {}), ("unchanged", "vault", {})]
    # left as they were: saved by hand, so no set prunes them
    assert scalar(conn, "SELECT count(*) FROM timers.timers WHERE managed_by IS NULL") == 2


def test_a_thousand_unchanged_timers_are_not_saved_again(conn: psycopg.Connection) -> None:
    spec = {"timer": [timer(f"t{i}", f"every {i % 50 + 1}m", retries=i % 3) for i in range(1000)]}
    apply(conn, spec)
    audits = count(conn, "timers.audit")
    began = time.monotonic()
    plan = apply(conn, spec, dry_run=True)
    took = time.monotonic() - began
    assert {a for a, _, _ in plan} == {"unchanged"}
    assert count(conn, "timers.audit") == audits
    print(f"plan of 1,000 unchanged timers: {took:.2f} s")
