"""Keyed timers without a runner: keys, arm and replay, move, hold and resume, repin, rights."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Database
from tests.integration.keyed.conftest import LOG_SQL, arm, call, events, keyed

T0 = "2028-02-01 14:00:00+00"


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


@pytest.fixture
def clock(conn: psycopg.Connection) -> str:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    return "c"


def test_arm_records_the_key_parts_and_the_seed_fields(
    conn: psycopg.Connection, clock: str
) -> None:
    row = arm(
        conn,
        "clk_8Tx1#US:rung:notice 90d:2027@0",
        "2028-04-18 14:00+00",
        place=6,
        test_clock=clock,
        version="2027-06",
    )
    assert {
        k: row[k]
        for k in (
            "key",
            "on",
            "kind",
            "name",
            "occurrence",
            "n",
            "place",
            "status",
            "version",
            "attempt",
            "wakes",
            "commit",
            "superseded_by",
        )
    } == {
        "key": "clk_8Tx1#US:rung:notice 90d:2027@0",
        "on": "clk_8Tx1#US",
        "kind": "rung",
        "name": "notice 90d",
        "occurrence": "2027",
        "n": 0,
        "place": 6,
        "status": "armed",
        "version": "2027-06",
        "attempt": 0,
        "wakes": 0,
        "commit": None,
        "superseded_by": None,
    }
    # armed on the clock's time, owed at its own
    assert row["armed_at"] == at(T0)
    assert row["owed_at"] == at("2028-04-18 14:00+00")
    assert events(conn) == [("clk_8Tx1#US:rung:notice 90d:2027@0", "armed", "arm")]
    audit = conn.execute("SELECT action, object FROM timers.audit WHERE action = 'arm'").fetchall()
    assert audit == [("arm", "clk_8Tx1#US:rung:notice 90d:2027@0")]


def test_arming_an_existing_key_answers_it_unchanged(conn: psycopg.Connection, clock: str) -> None:
    first = arm(conn, "job_4Tx9:task:file:2027", "2028-03-01 00:00+00", test_clock=clock)
    conn.execute("CALL timers.advance_test_clock('c', '2028-02-10 00:00+00')")
    again = arm(
        conn,
        "job_4Tx9:task:file:2027",
        "2029-01-01 00:00+00",
        "SELECT 2",
        place=1,
        test_clock=clock,
    )
    assert again == first
    assert events(conn) == [("job_4Tx9:task:file:2027", "armed", "arm")]
    # the version defaults to the SQL's md5
    assert first["version"].startswith("md5:")


def test_keys_compare_byte_by_byte(conn: psycopg.Connection) -> None:
    arm(conn, "a:task:x:B", "2030-01-01 00:00+00")
    arm(conn, "a:task:x:b", "2030-01-01 00:00+00")
    rows = conn.execute("SELECT key FROM timers.keyed ORDER BY key").fetchall()
    assert rows == [("a:task:x:B",), ("a:task:x:b",)]
    assert conn.execute(
        "SELECT count(*) FROM timers.keyed WHERE key = 'a:task:x:B'"
    ).fetchone() == (1,)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "bad key: it is empty"),
        ("job:task:file", "it has 3 parts separated by ':', not 4"),
        ("job:task:file:2027:x", "it has 5 parts"),
        (
            "job:cron:file:2027",
            "the kind 'cron' is not one of cycle, schedule, ask, task, deadline, rung, due,"
            " window, money",
        ),
        (":task:file:2027", "the owner is empty"),
        ("job::file:2027", "the kind is empty"),
        ("job:task::2027", "the name is empty"),
        ("job:task:file:", "the occurrence is empty"),
        ("job:task:file:@1", "the occurrence is empty"),
        ("job:task:file:2027@x", "the move count '@x' is not a number of moves"),
        ("job:task:file:2027@01", "the move count '@01'"),
        ("job:task:file:2027@-1", "the move count '@-1'"),
        ("job:task: file:2027", "the name ' file' starts or ends with a space"),
        ("j@b:task:file:2027", "the owner 'j@b' holds '@'"),
        ("job:task:file:20@27@1", "the occurrence '20@27' holds '@'"),
        ("job:task:fi\nle:2027", "control character"),
        ("job:task:file:" + "x" * 400, "a key is at most 400"),
    ],
)
def test_bad_keys_are_refused_naming_the_bad_part(
    conn: psycopg.Connection, key: str, message: str
) -> None:
    with pytest.raises(errors.InvalidParameterValue, match="bad key") as caught:
        arm(conn, key, "2030-01-01 00:00+00")
    assert message in str(caught.value)
    assert conn.execute("SELECT count(*) FROM timers.keyed").fetchone() == (0,)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"place": 0}, errors.InvalidParameterValue, "bad place 0: a place in the tick is 1 to 8"),
        ({"place": 9}, errors.InvalidParameterValue, "bad place 9"),
        ({"test_clock": "nope"}, errors.InvalidParameterValue, "there is no test clock 'nope'"),
        ({"late_at": "2029-01-01 00:00+00"}, errors.InvalidParameterValue, "late_at"),
        ({"version": ""}, errors.InvalidParameterValue, "bad version"),
        ({"sql": "SELEC 1"}, errors.SyntaxError, "syntax error"),
        (
            {"sql": "ALTER SYSTEM SET work_mem = '1MB'"},
            errors.InsufficientPrivilege,
            "ALTER SYSTEM",
        ),
    ],
)
def test_bad_arguments_are_refused(
    conn: psycopg.Connection, options: dict[str, object], error: type[Exception], message: str
) -> None:
    sql = str(options.pop("sql", LOG_SQL))
    with pytest.raises(error, match=message):
        arm(conn, "job:task:file:2027", "2030-01-01 00:00+00", sql, **options)
    assert conn.execute("SELECT count(*) FROM timers.keyed").fetchone() == (0,)


def test_move_supersedes_and_arms_the_next_count(conn: psycopg.Connection, clock: str) -> None:
    key = "clk_8Tx1#US:rung:notice 30d:2027@0"
    arm(conn, key, "2028-03-19 14:00+00", place=6, test_clock=clock)
    moved = call(conn, "move", key, "2028-09-16 14:00+00")
    assert moved["key"] == "clk_8Tx1#US:rung:notice 30d:2027@1"
    assert (moved["status"], moved["n"], moved["place"]) == ("armed", 1, 6)
    assert moved["owed_at"] == at("2028-09-16 14:00+00")
    old = keyed(conn, key)
    assert (old["status"], old["superseded_by"], old["by"]) == (
        "superseded",
        "clk_8Tx1#US:rung:notice 30d:2027@1",
        "move",
    )
    # a replay arms the same keys: @0 answers as it is, superseded
    assert (
        arm(conn, key, "2028-03-19 14:00+00", place=6, test_clock=clock)["status"] == "superseded"
    )
    assert events(conn) == [
        (key, "armed", "arm"),
        (key, "superseded", "move"),
        ("clk_8Tx1#US:rung:notice 30d:2027@1", "armed", "move"),
    ]
    # the superseded one is done; its successor moves on to @2
    with pytest.raises(
        errors.ObjectNotInPrerequisiteState,
        match="superseded by 'clk_8Tx1#US:rung:notice 30d:2027@1'",
    ):
        call(conn, "move", key, "2028-10-01 00:00+00")
    assert call(conn, "move", moved["key"], "2028-10-01 00:00+00", "policy")["key"].endswith("@2")
    assert keyed(conn, moved["key"])["by"] == "policy"


def test_a_key_without_a_count_keeps_its_key_when_moved(
    conn: psycopg.Connection, clock: str
) -> None:
    key = "clk_8Tx1#US:rung:run:2027"
    arm(conn, key, "2028-04-18 14:00+00", test_clock=clock)
    moved = call(conn, "move", key, "2028-10-16 14:00+00")
    assert (moved["key"], moved["status"], moved["owed_at"]) == (
        key,
        "armed",
        at("2028-10-16 14:00+00"),
    )
    assert conn.execute("SELECT count(*) FROM timers.keyed").fetchone() == (1,)
    assert events(conn) == [(key, "armed", "arm"), (key, "moved", "move")]
    # moving to the same time changes nothing
    call(conn, "move", key, "2028-10-16 14:00+00")
    assert len(events(conn)) == 2


def test_move_takes_only_the_closed_list_of_causes(conn: psycopg.Connection) -> None:
    arm(conn, "job:task:file:2027", "2030-01-01 00:00+00")
    with pytest.raises(
        errors.InvalidParameterValue,
        match="a move is recorded as one of move, policy, calendar, due",
    ):
        call(conn, "move", "job:task:file:2027", "2030-02-01 00:00+00", "deploy")
    with pytest.raises(errors.NoDataFound, match="there is no keyed timer 'job:task:file:2028'"):
        call(conn, "move", "job:task:file:2028", "2030-02-01 00:00+00")


def test_hold_keeps_the_time_left_and_resume_rearms_with_it(
    conn: psycopg.Connection, clock: str
) -> None:
    key = "job_4Tx9:deadline:at_risk:2027"
    arm(conn, key, "2028-03-27 00:30+00", test_clock=clock, late_at="2028-04-14 04:00+00")
    held = call(conn, "hold", key, "ask_9Ts4")
    assert (held["status"], held["owed_at"], held["held_by"], held["held_since"]) == (
        "held",
        None,
        "ask_9Ts4",
        at(T0),
    )
    assert held["remaining"] == dt.timedelta(days=54, hours=10, minutes=30)
    # holding again by the same party changes nothing
    assert call(conn, "hold", key, "ask_9Ts4") == held
    conn.execute("CALL timers.advance_test_clock('c', '2028-02-05 14:00+00')")
    resumed = call(conn, "resume", key)
    assert (resumed["status"], resumed["resumed_at"], resumed["owed_at"]) == (
        "armed",
        at("2028-02-05 14:00+00"),
        at("2028-03-31 00:30+00"),
    )
    assert resumed["remaining"] == dt.timedelta(days=54, hours=10, minutes=30)
    assert resumed["late_at"] == at("2028-04-14 04:00+00")
    assert [e[1:] for e in events(conn, key)] == [
        ("armed", "arm"),
        ("held", "hold"),
        ("resumed", "resume"),
    ]
    with pytest.raises(errors.ObjectNotInPrerequisiteState, match="cannot resume"):
        call(conn, "resume", key)


def test_a_deadline_resumes_no_later_than_its_late_time(
    conn: psycopg.Connection, clock: str
) -> None:
    key = "job:deadline:at_risk:2027"
    arm(conn, key, "2028-02-20 00:00+00", test_clock=clock, late_at="2028-03-01 00:00+00")
    call(conn, "hold", key, "books")
    conn.execute("CALL timers.advance_test_clock('c', '2028-02-25 00:00+00')")
    # now + 18d 10h would be after late_at: late_at it is
    assert call(conn, "resume", key)["owed_at"] == at("2028-03-01 00:00+00")


def test_rungs_are_never_held_and_held_timers_do_not_move(conn: psycopg.Connection) -> None:
    arm(conn, "clk:rung:notice 30d:2027@0", "2030-01-01 00:00+00")
    with pytest.raises(errors.ObjectNotInPrerequisiteState, match="never waits"):
        call(conn, "hold", "clk:rung:notice 30d:2027@0", "someone")
    arm(conn, "job:ask:books:2027", "2030-01-01 00:00+00")
    call(conn, "hold", "job:ask:books:2027", "client")
    with pytest.raises(errors.ObjectNotInPrerequisiteState, match="held by client"):
        call(conn, "move", "job:ask:books:2027", "2030-02-01 00:00+00")
    with pytest.raises(errors.InvalidParameterValue, match="held_by"):
        call(conn, "hold", "job:ask:books:2027", " ")


def test_repin_supersedes_under_the_new_version(conn: psycopg.Connection) -> None:
    key = "sbn:due:return:2027@0"
    arm(conn, key, "2030-01-01 00:00+00", "SELECT 1", version="2027-06")
    new = call(conn, "repin", key, "SELECT 2", "2027-07")
    assert (new["key"], new["version"], new["sql"], new["owed_at"]) == (
        "sbn:due:return:2027@1",
        "2027-07",
        "SELECT 2",
        at("2030-01-01 00:00+00"),
    )
    old = keyed(conn, key)
    assert (old["status"], old["by"], old["superseded_by"]) == ("superseded", "repin", new["key"])
    # the same SQL and version again: nothing to do
    assert call(conn, "repin", new["key"], "SELECT 2", "2027-07")["key"] == new["key"]
    # a key without @n is repinned in place
    arm(conn, "sbn:task:file:2027", "2030-01-01 00:00+00", "SELECT 1")
    inplace = call(conn, "repin", "sbn:task:file:2027", "SELECT 3", None)
    assert (inplace["key"], inplace["sql"], inplace["status"]) == (
        "sbn:task:file:2027",
        "SELECT 3",
        "armed",
    )
    assert inplace["version"].startswith("md5:")
    assert events(conn, "sbn:task:file:2027")[-1] == ("sbn:task:file:2027", "repinned", "repin")


def test_list_keyed_and_next_timer(conn: psycopg.Connection) -> None:
    arm(conn, "job:task:b:2027", "2030-01-02 00:00+00")
    arm(conn, "job:task:a:2027", "2030-01-02 00:00+00", place=6)
    arm(conn, "job:task:c:2027", "2030-01-01 00:00+00")
    arm(conn, "other:task:a:2027", "2029-01-01 00:00+00")
    call(conn, "hold", "job:task:c:2027", "x")
    keys = conn.execute("SELECT key FROM timers.list_keyed('job')").fetchall()
    assert keys == [("job:task:b:2027",), ("job:task:a:2027",), ("job:task:c:2027",)]
    held = conn.execute("SELECT key FROM timers.list_keyed(status => 'held')").fetchall()
    assert held == [("job:task:c:2027",)]
    owners = conn.execute(
        'SELECT "on", armed, held, next_timer FROM timers.keyed_owners ORDER BY 1'
    ).fetchall()
    assert owners == [("job", 2, 1, "job:task:b:2027"), ("other", 1, 0, "other:task:a:2027")]


@pytest.mark.parametrize("role", ["pgt_reader", "pgt_nobody"])
@pytest.mark.parametrize(
    "statement",
    [
        "SELECT timers.arm('job:task:x:2027', '2030-01-01', 'SELECT 1')",
        "SELECT timers.move('job:task:file:2027', '2030-02-01')",
        "SELECT timers.hold('job:task:file:2027', 'x')",
        "SELECT timers.resume('job:task:file:2027')",
        "SELECT timers.repin('job:task:file:2027', 'SELECT 2')",
        "SELECT timers._keyed_arm('pgt_alice', 'job:task:x:2027', '2030-01-01', 'SELECT 1', 5,"
        " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        "SELECT timers._keyed_fire(1, '2030-01-01', 'me')",
        "UPDATE timers.keyed_timers SET owner = 'postgres'",
        "INSERT INTO timers.keyed_events (key, event, cause) VALUES ('x', 'fired', 'x')",
    ],
)
def test_non_admins_change_nothing(db: Database, role: str, statement: str) -> None:
    with db.connect("pgt_alice") as alice:
        arm(alice, "job:task:file:2027", "2030-01-01 00:00+00", "SELECT 1")
    with db.connect(role) as conn, pytest.raises(errors.InsufficientPrivilege):
        conn.execute(statement)
    with db.connect() as su:
        assert su.execute("SELECT key, status, owner FROM timers.keyed").fetchall() == [
            ("job:task:file:2027", "armed", "pgt_alice")
        ]


def test_readers_read_and_nobody_cannot(db: Database) -> None:
    with db.connect("pgt_alice") as alice:
        arm(alice, "job:task:file:2027", "2030-01-01 00:00+00", "SELECT 1")
    with db.connect("pgt_reader") as reader:
        assert reader.execute("SELECT key FROM timers.keyed").fetchall() == [
            ("job:task:file:2027",)
        ]
        assert reader.execute("SELECT count(*) FROM timers.list_keyed()").fetchone() == (1,)
        assert reader.execute("SELECT count(*) FROM timers.keyed_events").fetchone() == (1,)
    with db.connect("pgt_nobody") as nobody, pytest.raises(errors.InsufficientPrivilege):
        nobody.execute("SELECT * FROM timers.keyed")


def test_nobody_arms_a_timer_that_runs_as_someone_else(db: Database) -> None:
    with db.connect("pgt_alice") as alice:
        for owner in ("postgres", "pgt_bob"):
            with pytest.raises(
                errors.InsufficientPrivilege, match="cannot arm a keyed timer as role"
            ):
                alice.execute(
                    "SELECT timers._keyed_arm(%s, 'job:task:x:2027', '2030-01-01', 'SELECT 1', 5,"
                    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
                    [owner],
                )
        # the role in effect is the owner, and a repin by another admin makes that one the owner
        arm(alice, "job:task:x:2027", "2030-01-01 00:00+00", "SELECT 1")
    with db.connect("pgt_bob") as bob:
        assert call(bob, "repin", "job:task:x:2027", "SELECT 2", None)["owner"] == "pgt_bob"
