"""The run rules in SQL, without a runner: the seed's catch-up/skip rule on fixed
times, the exactly-once guard, the claim index, and run-now's refusals."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
import pytest
from psycopg import errors

from pgtimers.runner.queries import query
from tests.conftest import Database, scalar
from tests.integration.runner.conftest import save, timer_row
from tests.support.wait import wait_until

T0 = dt.datetime(2027, 1, 4, 9, 0, 0, tzinfo=dt.timezone.utc)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def after_run(
    conn: psycopg.Connection,
    name: str,
    due: float,
    started: float,
    ended: float,
) -> dict[str, Any]:
    """timers._after_run for the timer `name` (its run already counted), at offsets from T0."""
    row = conn.execute(
        "SELECT a.next_due, a.catch_up, a.skip_n, a.skip_dues"
        "  FROM timers.timers t,"
        "       timers._after_run(t, %(due)s, %(started)s, %(ended)s, timers._plan(t, %(due)s)) a"
        " WHERE t.name = %(name)s",
        {"due": at(due), "started": at(started), "ended": at(ended), "name": name},
    ).fetchone()
    assert row is not None
    return {
        "next": None if row[0] is None else (row[0] - T0).total_seconds(),
        "catch_up": row[1],
        "skipped": [(d - T0).total_seconds() for d in (row[3] or [])][: row[2]],
    }


@pytest.fixture
def every10(conn: psycopg.Connection) -> str:
    save(conn, "e10", "every 10s", "SELECT 1", start_at=T0 - dt.timedelta(days=1))
    return "e10"


@pytest.mark.parametrize(
    ("started", "ended", "expected"),
    [
        # on time and quick: the next regular time
        (0, 5, {"next": 10, "catch_up": False, "skipped": []}),
        # the seed: an `every 10s` that takes 11 s keeps 0, 20, 40 ... and skips 10
        (0, 11, {"next": 20, "catch_up": False, "skipped": [10]}),
        (20, 31, {"next": 40, "catch_up": False, "skipped": [30]}),
        # a late start (no worker free) that ends after the next due time: one catch-up
        (8, 12, {"next": 10, "catch_up": True, "skipped": []}),
        # ... but not when the run took a whole interval or more
        (9, 19.5, {"next": 20, "catch_up": False, "skipped": [10]}),
        # ... nor when it ended after the regular time after that: both are skipped
        (9, 21, {"next": 30, "catch_up": False, "skipped": [10, 20]}),
    ],
)
def test_seed_catch_up_and_skip_rule(
    conn: psycopg.Connection, every10: str, started: float, ended: float, expected: dict[str, Any]
) -> None:
    due = 20 if started >= 20 else 0
    assert after_run(conn, every10, due, started, ended) == expected


def test_catch_up_all_runs_every_due_time_in_order(conn: psycopg.Connection) -> None:
    save(conn, "all", "every 10s", "SELECT 1", catch_up="all", start_at=T0 - dt.timedelta(days=1))
    assert after_run(conn, "all", 0, 0, 25) == {"next": 10, "catch_up": False, "skipped": []}


def test_max_runs_and_end_at_end_the_plan(conn: psycopg.Connection) -> None:
    save(conn, "m", "every 10s", "SELECT 1", max_runs=1, start_at=T0 - dt.timedelta(days=1))
    # _after_run gets the row with the run just made already counted
    conn.execute("UPDATE timers.timers SET scheduled_runs = 1 WHERE name = 'm'")
    assert after_run(conn, "m", 0, 0, 1)["next"] is None
    save(conn, "e", "every 10s", "SELECT 1", start_at=T0 - dt.timedelta(days=1), end_at=at(15))
    assert after_run(conn, "e", 0, 0, 1)["next"] == 10
    assert after_run(conn, "e", 10, 10, 11)["next"] is None


def test_iso_due_at(conn: psycopg.Connection) -> None:
    assert conn.execute("SELECT timers._iso('2027-01-04 09:00:00+00')").fetchone() == (
        "2027-01-04T09:00:00Z",
    )
    assert conn.execute("SELECT timers._iso('2027-01-04 14:45:00.25+05:45')").fetchone() == (
        "2027-01-04T09:00:00.25Z",
    )


def _run_due(db: Database, timer_id: int, due: dt.datetime) -> Any:
    with db.connect() as c:
        return scalar(c, "SELECT timers._run_due(%s, %s, 'test')", [timer_id, due])


def test_a_due_time_commits_once(db: Database, conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE hits (due text)")
    save(
        conn,
        "once_only",
        "every 1h",
        "INSERT INTO hits VALUES (current_setting('pgtimers.due_at'))",
    )
    conn.execute("UPDATE timers.timers SET next_due_at = now() - interval '1 s'")
    t = timer_row(conn, "once_only")
    first = _run_due(db, t["id"], t["next_due_at"])
    assert first["ok"] is True and first["kind"] == "scheduled"
    # the same due time offered again (a second runner, a redelivery): nothing
    assert _run_due(db, t["id"], t["next_due_at"]) is None
    assert conn.execute("SELECT count(*) FROM hits").fetchone() == (1,)
    after = timer_row(conn, "once_only")
    assert after["last_due_at"] == t["next_due_at"]
    assert after["next_due_at"] > t["next_due_at"]


def test_a_due_time_at_or_below_the_high_water_mark_never_runs(
    conn: psycopg.Connection, db: Database
) -> None:
    conn.execute("CREATE TABLE hits (due text)")
    save(conn, "hw", "every 1h", "INSERT INTO hits VALUES ('x')")
    # as if the clock had been set back and the timer planned again before its last run
    conn.execute(
        "UPDATE timers.timers SET last_due_at = now(), next_due_at = now() - interval '1 min'"
    )
    t = timer_row(conn, "hw")
    result = _run_due(db, t["id"], t["next_due_at"])
    assert result["replanned"] is True
    assert conn.execute("SELECT count(*) FROM hits").fetchone() == (0,)
    assert timer_row(conn, "hw")["next_due_at"] > t["last_due_at"]


def test_sql_error_rolls_back_its_effects_and_is_recorded(
    db: Database, conn: psycopg.Connection
) -> None:
    conn.execute("CREATE TABLE hits (n int)")
    save(conn, "boom", "every 1h", "INSERT INTO hits VALUES (1); SELECT 1/0")
    conn.execute("UPDATE timers.timers SET next_due_at = now() - interval '1 s'")
    t = timer_row(conn, "boom")
    result = _run_due(db, t["id"], t["next_due_at"])
    assert result["ok"] is False and result["error"] == "division by zero"
    assert result["sqlstate"] == "22012"
    assert conn.execute("SELECT count(*) FROM hits").fetchone() == (0,)
    after = timer_row(conn, "boom")
    assert (after["failures"], after["runs"], after["last_ok"]) == (1, 1, False)
    assert after["last_error"] == "division by zero"
    assert after["next_due_at"] > t["next_due_at"]
    assert conn.execute(
        "SELECT kind, ok, error FROM timers.runs WHERE timer = 'boom'"
    ).fetchall() == [("scheduled", False, "division by zero")]


def test_timeout_is_recorded_and_the_bookkeeping_commits(
    db: Database, conn: psycopg.Connection
) -> None:
    conn.execute("CREATE TABLE hits (n int)")
    save(
        conn,
        "slow",
        "every 1h",
        "INSERT INTO hits VALUES (1); SELECT pg_sleep(5)",
        timeout=dt.timedelta(seconds=1),
    )
    conn.execute("UPDATE timers.timers SET next_due_at = now() - interval '1 s'")
    t = timer_row(conn, "slow")
    with db.connect(autocommit=False) as c:
        c.execute(query("set_timeout").replace("$1::text", "%s"), ["300"])
        result = scalar(c, "SELECT timers._run_due(%s, %s, 'test')", [t["id"], t["next_due_at"]])
        c.commit()
    assert result["ok"] is False
    assert result["error"].startswith("timed out: the run took longer than its timeout of")
    assert conn.execute("SELECT count(*) FROM hits").fetchone() == (0,)
    assert timer_row(conn, "slow")["failures"] == 1


def test_missing_calendar_fails_the_run_by_name(db: Database, conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save_calendar('xcal')")
    save(conn, "tr", "trading xcal 15:05", "SELECT 1")
    conn.execute("SELECT timers.drop_calendar('xcal')")
    conn.execute("UPDATE timers.timers SET next_due_at = now() - interval '1 s'")
    t = timer_row(conn, "tr")
    result = _run_due(db, t["id"], t["next_due_at"])
    assert result["ok"] is False
    assert result["error"] == "calendar 'xcal' does not exist"


def test_claim_is_served_by_the_due_index(db: Database, conn: psycopg.Connection) -> None:
    spec = scalar(conn, "SELECT timers._parse_schedule('daily 02:00', 'UTC', now())")
    conn.execute(
        "INSERT INTO timers.timers (name, schedule, spec, sql, owner, zone, next_due_at)"
        " SELECT 'n' || i, 'daily 02:00', %s, 'SELECT 1', current_user, 'UTC',"
        "        now() + (CASE WHEN i <= 3 THEN -i ELSE i END) * interval '1 minute'"
        "   FROM generate_series(1, 5000) i",
        [psycopg.types.json.Jsonb(spec)],
    )
    conn.execute("ANALYZE timers.timers")

    # the claims inside timers._fire, as they run: auto_explain sends their plans here
    plans: list[str] = []
    with conn.transaction():
        # every due timer is held (being run): the claims look and find nothing to take
        conn.execute("SELECT 1 FROM timers.timers WHERE next_due_at <= now() FOR UPDATE")
        with db.connect() as other:
            other.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
            other.execute("LOAD 'auto_explain'")
            other.execute(
                "SET auto_explain.log_min_duration = 0;"
                " SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice"
            )
            assert scalar(other, "SELECT timers._fire('t', '{}', '{}', false, 600000)") is None
    claims = [p for p in plans if "SKIP LOCKED" in p.replace("\n", " ") or "LockRows" in p]
    # the server's clock: timers without a priority (nearly all) from timers_due, in its
    # order; those with one from their own small index, higher first
    plain = next(p for p in claims if "t.priority = 0" in p)
    assert "Index Scan using timers_due on timers" in plain, plain
    assert "Sort" not in plain, plain
    ranked = [p for p in claims if "t.priority > 0" in p or "t.priority < 0" in p]
    assert len(ranked) == 2, claims
    for p in ranked:
        assert "Index Scan using timers_due_ranked on timers" in p, p
    assert "Seq Scan on timers " not in " ".join(claims) + " ", claims


def test_claim_order_is_priority_fire_time_then_the_longest_since_it_ran(
    conn: psycopg.Connection,
) -> None:
    """At one fire time the timer whose last run is oldest goes first (never run: first),
    whatever its id: the rule that shares an overload (tests/faults/test_overload.py)."""
    spec = scalar(conn, "SELECT timers._parse_schedule('every 1s', 'UTC', now())")
    conn.execute(
        "INSERT INTO timers.timers"
        " (name, schedule, spec, sql, owner, zone, next_due_at, last_run_at, priority)"
        " SELECT v.name, 'every 1s', %s, 'SELECT 1', current_user, 'UTC',"
        "        now() - v.due * interval '1 minute', now() - v.ran * interval '1 second', v.p"
        "   FROM (VALUES ('recent', 1, 10, 0), ('never', 1, NULL, 0), ('oldest', 1, 20, 0),"
        "                ('ranked', 1, 1, 5), ('earlier', 2, 1, 0)) v(name, due, ran, p)",
        [psycopg.types.json.Jsonb(spec)],
    )
    names: dict[int, str] = {r[0]: r[1] for r in conn.execute("SELECT id, name FROM timers.timers")}
    claimed: list[int] = []
    with conn.transaction():
        for _ in names:
            claimed.append(scalar(conn, "SELECT id FROM timers._claim_due(%s)", [claimed]))
    assert [names[i] for i in claimed] == ["ranked", "earlier", "never", "oldest", "recent"]


# ------------------------------------------------------------------ run-now refusals


def test_run_now_without_a_runner_fails_at_once(db: Database, conn: psycopg.Connection) -> None:
    save(conn, "r", "every 1h", "SELECT 1")
    with (
        db.connect("pgt_alice") as alice,
        pytest.raises(errors.ObjectNotInPrerequisiteState, match="no pgtimers runner serves"),
    ):
        alice.execute("CALL timers.run('r')")


def test_run_now_of_an_unknown_timer_is_p0002(db: Database) -> None:
    with (
        db.connect("pgt_alice") as alice,
        pytest.raises(errors.NoDataFound, match="no timer 'nope'"),
    ):
        alice.execute("CALL timers.run('nope')")


def test_run_now_inside_a_transaction_block_is_a_clear_error(
    db: Database, conn: psycopg.Connection
) -> None:
    save(conn, "r", "every 1h", "SELECT 1")
    with db.connect("pgt_alice", autocommit=False) as alice:
        with pytest.raises(
            errors.ActiveSqlTransaction,
            match=r"cannot be used inside a transaction block: it commits",
        ):
            alice.execute("CALL timers.run('r')")
        alice.rollback()


def test_run_now_needs_admin(db: Database, conn: psycopg.Connection) -> None:
    save(conn, "r", "every 1h", "SELECT 1")
    for role in ("pgt_reader", "pgt_nobody"):
        with db.connect(role) as c, pytest.raises(errors.InsufficientPrivilege):
            c.execute("CALL timers.run('r')")


def test_run_now_of_a_running_timer_is_55p03(db: Database, conn: psycopg.Connection) -> None:
    save(conn, "r", "every 1h", "SELECT 1")
    with db.connect(autocommit=False) as holder:
        holder.execute("SELECT 1 FROM timers.timers WHERE name = 'r' FOR UPDATE")
        with (
            db.connect("pgt_alice") as alice,
            pytest.raises(errors.LockNotAvailable, match="timer 'r' is running"),
        ):
            alice.execute("CALL timers.run('r')")
        holder.rollback()


# ------------------------------------------------------------------ parked runners


def _start(db: Database, runner: str, park: str | None = None) -> dict[str, Any]:
    """timers._runner_start from a session of its own, parked before it closes when `park`
    is given (an interval from now)."""
    with db.connect() as session:
        session.execute("SET application_name = 'pgtimers runner control'")
        started: dict[str, Any] = scalar(
            session, "SELECT timers._runner_start(%s, 'h', 1, 'v', 2)", (runner,)
        )
        if park is not None:
            session.execute("SELECT timers._runner_park(%s, now() + %s::interval)", (runner, park))
        pid = scalar(session, "SELECT pg_backend_pid()")
    # a closed session's backend ends a moment later: until then it still looks live
    with db.connect() as look:
        wait_until(
            lambda: (
                scalar(look, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)) == 0
            ),
            what="the closed session's backend to end",
        )
    return started


def test_a_parked_runner_serves_until_it_is_due_back(
    db: Database, conn: psycopg.Connection
) -> None:
    save(conn, "tick", "every 1s", "SELECT 1")
    _start(db, "r1", park="1 minute")
    # its control session is gone, and it still serves (CALL timers.run waits for it)
    assert scalar(conn, "SELECT timers._live_runners()") == 1
    # (a first start more than a second after the save skips the due time that passed
    # with no runner: a loaded machine's, not the resumed start's)
    skipped_before = scalar(conn, "SELECT count(*) FROM timers.runs WHERE kind = 'skipped'")
    # back late (a wait for a slot outlasted parked_until) after due times passed: it
    # served all along, so they are owed to it, not skipped as downtime
    conn.execute(
        "UPDATE timers.runners SET seen_at = now() - interval '10 s',"
        " parked_until = now() - interval '5 s'"
    )
    conn.execute("UPDATE timers.timers SET next_due_at = now() - interval '5 s'")
    assert scalar(conn, "SELECT timers._live_runners()") == 0
    back = _start(db, "r1", park="1 minute")
    assert (back["resumed"], back["downtime"], back["skipped"]) == (True, False, [])
    skipped = scalar(conn, "SELECT count(*) FROM timers.runs WHERE kind = 'skipped'")
    assert skipped == skipped_before
    # one that is not back by its parked_until has stopped serving from then on
    conn.execute(
        "UPDATE timers.runners SET seen_at = now() - interval '40 s',"
        " parked_until = now() - interval '10 s'"
    )
    other = _start(db, "r2")
    assert other["downtime"] and not other["resumed"]
    skipped = scalar(conn, "SELECT count(*) FROM timers.runs WHERE kind = 'skipped'")
    assert skipped > skipped_before, other
    # the gap starts when it was due back, not when it was last seen
    assert scalar(
        conn,
        "SELECT parked_until = %s::timestamptz FROM timers.runners WHERE id = 'r1'",
        (other["last_seen"],),
    )


@pytest.mark.parametrize(
    "until", ["now() - interval '1 second'", "NULL", "now() + interval '2 hours'"]
)
def test_parking_needs_a_time_within_the_next_hour(conn: psycopg.Connection, until: str) -> None:
    with pytest.raises(
        errors.DatetimeFieldOverflow, match="parks until a time within the next hour"
    ):
        conn.execute(f"SELECT timers._runner_park('r1', {until})")


# ------------------------------------------------------------------ gaps and clock jumps


def test_a_huge_gap_is_counted_in_full_and_written_as_one_row(conn: psycopg.Connection) -> None:
    save(conn, "tick", "every 1s", "SELECT 1")
    conn.execute(
        "UPDATE timers.timers SET next_due_at = date_trunc('second', now()) - interval '300 s'"
    )
    # the gaps are applied against the now() of their own transaction: compare with that one
    row = conn.execute(
        "SELECT timers._apply_gaps('no runner was serving the database', 'test', NULL), now()"
    ).fetchone()
    assert row is not None
    events, applied_at = row
    assert len(events) == 1 and events[0]["count"] >= 301
    t = timer_row(conn, "tick")
    assert t["skipped"] == events[0]["count"]
    assert t["next_due_at"] > applied_at
    rows = conn.execute("SELECT kind, reason FROM timers.runs").fetchall()
    assert len(rows) == 1 and rows[0][0] == "skipped"
    assert rows[0][1].startswith(f"{events[0]['count']} due times from ")
    assert rows[0][1].endswith("skipped: no runner was serving the database")


def test_clock_set_forward_skips_the_due_times_jumped_over(conn: psycopg.Connection) -> None:
    save(conn, "tick", "every 1s", "SELECT 1")
    save(conn, "every", "every 1s", "SELECT 1", catch_up="all")
    # one transaction: both statements see the same now(), whenever the second turns
    with conn.transaction():
        conn.execute(
            "UPDATE timers.timers SET next_due_at = date_trunc('second', now()) - interval '5 s'"
        )
        events = scalar(
            conn,
            "SELECT timers._server_clock_jumped("
            "date_trunc('second', now()) - interval '6 s', now(), 'test')",
        )
    assert [e["timer"] for e in events] == ["tick"]
    assert timer_row(conn, "tick")["last_skip_reason"] == "the clock was set forward"
    assert timer_row(conn, "tick")["skipped"] >= 5
    # catch_up = 'all' runs each of them instead
    assert timer_row(conn, "every")["skipped"] == 0
