"""Run groups in SQL, without a runner (issue 34): timers.set_group and its refusals, a
group made by timers.save, the claim that passes over a full group and takes the next
due timer, waiting_for_group, and run_group through export and apply."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors
from psycopg.types.json import Jsonb

from tests.conftest import Database, scalar
from tests.integration.runner.conftest import save, status, timer_row

FIRE = "SELECT timers._fire('t', '{}', '{}', false, 600000)"


def groups(conn: psycopg.Connection) -> list[tuple[str, int, list[int]]]:
    """Each group, its max_running and its slot rows."""
    rows = conn.execute(
        "SELECT g.name, g.max_running,"
        "       ARRAY(SELECT s.slot FROM timers.run_group_slots s"
        "              WHERE s.run_group = g.name ORDER BY s.slot)"
        "  FROM timers.run_groups g ORDER BY g.name"
    ).fetchall()
    return [(r[0], r[1], list(r[2])) for r in rows]


def make_due(conn: psycopg.Connection, *names: str) -> None:
    """Their due time: the hour that began (an `every 1h` due time), so they are due now."""
    conn.execute(
        "UPDATE timers.timers SET next_due_at = date_trunc('hour', now()) WHERE name = ANY (%s)",
        [list(names)],
    )


@pytest.fixture
def three(conn: psycopg.Connection) -> Iterator[None]:
    """a and b in group g (max_running 1), c in none; all three due now, a first."""
    for name, group in (("a", "g"), ("b", "g"), ("c", None)):
        save(conn, name, "every 1h", "SELECT 1", run_group=group)
    make_due(conn, "a", "b", "c")
    yield


@pytest.fixture
def other(db: Database) -> Iterator[psycopg.Connection]:
    """A second session, in a transaction (a run that goes on), rolled back at the end."""
    with db.connect(autocommit=False) as session:
        yield session
        session.rollback()


# ------------------------------------------------------------------ set_group, save


def test_save_makes_an_unknown_group_with_max_running_1(conn: psycopg.Connection) -> None:
    row = save(conn, "a", "every 1h", "SELECT 1", run_group="heavy")
    assert (row["run_group"], row["waiting_for_group"]) == ("heavy", False)
    assert groups(conn) == [("heavy", 1, [1])]
    save(conn, "a", "every 1h", "SELECT 1")
    assert status(conn, "a")["run_group"] is None
    assert groups(conn) == [("heavy", 1, [1])]  # the group stays


def test_set_group_makes_or_changes_a_group(conn: psycopg.Connection) -> None:
    save(conn, "a", "every 1h", "SELECT 1", run_group="heavy")
    said = scalar(conn, "SELECT timers.set_group('heavy', max_running => 3)")
    assert said == {"name": "heavy", "max_running": 3, "timers": 1}
    assert groups(conn) == [("heavy", 3, [1, 2, 3])]
    # lowered: the slots above stay, unused
    scalar(conn, "SELECT timers.set_group('heavy', 2)")
    assert groups(conn) == [("heavy", 2, [1, 2, 3])]
    assert scalar(conn, "SELECT timers.set_group('new')") == {
        "name": "new", "max_running": 1, "timers": 0}  # fmt: skip
    audit = conn.execute(
        "SELECT object, detail FROM timers.audit WHERE action = 'set_group' ORDER BY id"
    ).fetchall()
    assert audit == [
        ("heavy", {"from": 1, "to": 3}),
        ("heavy", {"from": 3, "to": 2}),
        ("new", {"from": None, "to": 1}),
    ]


@pytest.mark.parametrize(
    ("name", "max_running", "message"),
    [
        ("heavy", 0, "bad max_running 0: use 1 to 1000"),
        ("heavy", -1, "bad max_running -1"),
        ("heavy", None, "bad max_running NULL"),
        ("heavy", 1001, "bad max_running 1001"),
        (None, 2, "a run group needs a name, not NULL"),
        ("", 2, "bad run group name ''"),
        ("no spaces", 2, "bad run group name 'no spaces'"),
        ("x" * 65, 2, "bad run group name"),
    ],
)
def test_set_group_refuses_bad_input_with_class_22_and_changes_nothing(
    conn: psycopg.Connection, name: str | None, max_running: int | None, message: str
) -> None:
    save(conn, "a", "every 1h", "SELECT 1", run_group="heavy")
    before = (groups(conn), scalar(conn, "SELECT count(*) FROM timers.audit"))
    with pytest.raises(psycopg.Error, match=message) as raised:
        conn.execute("SELECT timers.set_group(%s, %s)", [name, max_running])
    assert (raised.value.sqlstate or "").startswith("22"), raised.value.sqlstate
    assert (groups(conn), scalar(conn, "SELECT count(*) FROM timers.audit")) == before


def test_set_group_needs_the_admin_role(db: Database, conn: psycopg.Connection) -> None:
    with (
        db.connect("pgt_reader") as reader,
        pytest.raises(errors.InsufficientPrivilege, match="pgtimers_admin"),
    ):
        reader.execute("SELECT timers.set_group('heavy', 2)")
    assert groups(conn) == []


def test_a_bad_group_name_or_an_autonomous_timer_in_a_group_is_refused_at_save(
    conn: psycopg.Connection,
) -> None:
    with pytest.raises(errors.InvalidParameterValue, match="bad run group name 'a b'"):
        save(conn, "a", "every 1h", "SELECT 1", run_group="a b")
    with pytest.raises(errors.InvalidParameterValue, match="an autonomous timer cannot be in"):
        save(conn, "a", "every 1h", "VACUUM", autonomous=True, run_group="heavy")
    assert groups(conn) == []
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0


def test_run_group_goes_through_export_and_apply(conn: psycopg.Connection) -> None:
    save(conn, "a", "every 1h", "SELECT 1", run_group="heavy")
    spec = scalar(conn, "SELECT timers.export()")
    assert [t.get("run_group") for t in spec["timer"]] == ["heavy"]
    plan = conn.execute("SELECT action, name FROM timers.apply(%s)", [Jsonb(spec)]).fetchall()
    assert plan == [("unchanged", "a")]
    spec["timer"][0]["run_group"] = "other"
    plan = conn.execute(
        "SELECT action, changes FROM timers.apply(%s, dry_run => false)", [Jsonb(spec)]
    ).fetchall()
    assert plan == [("update", {"run_group": {"from": "heavy", "to": "other"}})]
    assert status(conn, "a")["run_group"] == "other"
    assert [g[0] for g in groups(conn)] == ["heavy", "other"]


# ------------------------------------------------------------------------ the claim


def test_the_claim_of_a_full_groups_timer_raises_pgt02_and_passes_over_it_when_told(
    conn: psycopg.Connection, other: psycopg.Connection, three: None
) -> None:
    ids = {r[0]: r[1] for r in conn.execute("SELECT name, id FROM timers.timers")}
    # another session's run of a holds the group's one slot
    assert scalar(other, "SELECT id FROM timers._claim_due('{}')") == ids["a"]
    with conn.transaction():
        # b is next: its group is full
        with (
            pytest.raises(psycopg.Error, match="run group 'g' is full") as raised,
            conn.transaction(),
        ):
            conn.execute("SELECT id FROM timers._claim_due('{}')")
        assert raised.value.sqlstate == "PGT02"
        # told that g is full, the claim takes the next due timer
        assert scalar(conn, "SELECT id FROM timers._claim_due('{}', ARRAY['g'])") == ids["c"]


def test_a_fire_passes_over_a_full_group_and_runs_the_next_due_timer(
    conn: psycopg.Connection, other: psycopg.Connection, three: None
) -> None:
    b_before = timer_row(conn, "b")
    scalar(other, "SELECT id FROM timers._claim_due('{}')")  # a runs, in another session
    seen = {r["name"]: (r["running"], r["waiting_for_group"]) for r in _status_rows(conn)}
    assert seen == {"a": (True, False), "b": (False, True), "c": (False, False)}
    result = scalar(conn, FIRE)
    assert (result["timer"], result["ok"]) == ("c", True)
    # b was passed over: still owed, untouched, not locked, not run
    assert scalar(conn, FIRE) is None
    b_after = timer_row(conn, "b")
    assert (b_after["next_due_at"], b_after["runs"]) == (b_before["next_due_at"], 0)
    assert status(conn, "b")["waiting_for_group"] is True
    # a's run ends: b runs at the next fire
    other.rollback()
    assert status(conn, "b")["waiting_for_group"] is False
    ran = {scalar(conn, FIRE)["timer"], scalar(conn, FIRE)["timer"]}
    assert ran == {"a", "b"}
    assert scalar(conn, FIRE) is None


def test_a_group_with_max_running_2_runs_two_at_once(
    conn: psycopg.Connection, other: psycopg.Connection, three: None
) -> None:
    scalar(conn, "SELECT timers.set_group('g', 2)")
    scalar(other, "SELECT id FROM timers._claim_due('{}')")  # a, in slot 1
    assert status(conn, "b")["waiting_for_group"] is False
    assert scalar(conn, FIRE)["timer"] == "b"  # slot 2


def test_a_run_now_of_a_full_groups_timer_waits_for_a_slot(
    conn: psycopg.Connection, other: psycopg.Connection, three: None
) -> None:
    conn.execute("UPDATE timers.timers SET next_due_at = next_due_at + interval '1 hour'")
    conn.execute(
        "INSERT INTO timers.run_requests (timer_id, timer, requested_by)"
        " SELECT id, name, current_user FROM timers.timers WHERE name = 'b'"
    )
    # a runs (a run-now of it, say) in another session: it holds g's slot
    other.execute("SELECT timers._group_slot('g')")
    assert scalar(conn, FIRE) is None
    other.rollback()
    result = scalar(conn, FIRE)
    assert (result["timer"], result["kind"]) == ("b", "run_now")


def _status_rows(conn: psycopg.Connection) -> list[dict[str, object]]:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute("SELECT * FROM timers.status ORDER BY name").fetchall()


def group_slot_notices(listener: psycopg.Connection) -> list[str]:
    """The NOTIFY pgtimers events delivered to `listener` so far, of event group_slot."""
    events = [json.loads(n.payload)["event"] for n in listener.notifies(timeout=0.5)]
    return [e for e in events if e == "group_slot"]


def test_a_run_that_frees_a_slot_others_wait_for_tells_the_runners(
    db: Database, conn: psycopg.Connection, three: None
) -> None:
    with db.connect() as listener:
        listener.execute("LISTEN pgtimers")
        assert scalar(conn, FIRE)["timer"] == "a"  # b, due, waits for a's slot
        assert group_slot_notices(listener) == ["group_slot"]
        assert scalar(conn, FIRE)["timer"] == "b"  # none of g waits now
        assert scalar(conn, FIRE)["timer"] == "c"  # in no group
        assert group_slot_notices(listener) == []


def test_a_group_setting_left_in_the_session_takes_no_slot(
    conn: psycopg.Connection, other: psycopg.Connection, three: None
) -> None:
    """A session-level pgtimers.run_group (the group, or with the id of a transaction gone
    by) does not pass for a slot in a later transaction. (A runner's session never keeps
    one: timers._session_reset resets every setting a run's SQL made before its commit.)"""
    scalar(other, "SELECT id FROM timers._claim_due('{}')")  # a holds g's slot
    xid = scalar(conn, "SELECT pg_current_xact_id()::text")
    for value in ("g", f"g {xid}"):
        conn.execute("SELECT set_config('pgtimers.run_group', %s, false)", [value])
        assert scalar(conn, "SELECT timers._group_slot('g')") is False
    assert scalar(conn, FIRE)["timer"] == "c"
    assert scalar(conn, FIRE) is None


def test_a_followers_due_time_waits_for_its_groups_slot_and_is_passed_over(
    conn: psycopg.Connection, other: psycopg.Connection
) -> None:
    """A follower (after) in a run group: its released due time is claimed with a slot of
    the group; while the group is full the fire passes over it, and it runs once a slot
    frees."""
    save(conn, "x", "every 1h", "SELECT 1", run_group="g")
    save(conn, "u", "every 1h", "SELECT 1")
    save(conn, "f", "after", "SELECT 1", after=["u"], run_group="g")
    make_due(conn, "x")
    ids = {r[0]: r[1] for r in conn.execute("SELECT name, id FROM timers.timers")}
    assert scalar(other, "SELECT id FROM timers._claim_due('{}')") == ids["x"]  # g's slot
    make_due(conn, "u")
    assert scalar(conn, FIRE)["timer"] == "u"  # f's due time is released with u's commit
    ready = "SELECT count(*) FROM timers.follow_dues WHERE follower_id = %s AND state = 'ready'"
    assert scalar(conn, ready, [ids["f"]]) == 1
    # g is full: the fire passes over f, runs nothing, and leaves its due time ready
    assert scalar(conn, FIRE) is None
    assert scalar(conn, ready, [ids["f"]]) == 1
    assert timer_row(conn, "f")["runs"] == 0
    other.rollback()  # x's run ends: its slot frees
    ran = [scalar(conn, FIRE)["timer"], scalar(conn, FIRE)["timer"]]
    assert sorted(ran) == ["f", "x"]
    assert scalar(conn, ready, [ids["f"]]) == 0
    assert scalar(conn, FIRE) is None
