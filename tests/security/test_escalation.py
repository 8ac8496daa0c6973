"""No path makes a timer run as a role its maker could not act as.

The cases follow the privilege-escalation reports against pg_cron and its kin:

* citusdata/pg_cron#120 and #390: `cron.schedule_in_database(..., username)` lets the
  caller name the role a job runs as; only a superuser may name another one. Here
  the owner is never a public argument, but the internal `timers._save(p_owner, ...)`
  takes one: it is tried with every other role, from a session and from inside a run.
* GreengageDB/greengage#569 (on pg_cron): "Direct writes to cron.job are equivalent to
  code execution as any user" — every table of schema timers is written directly by
  an admin, a reader, a role with nothing, and the runner's role.
* citusdata/pg_cron#153 (`cron.enable_superuser_jobs`): a role allowed to write jobs
  for others must not thereby be a superuser.
* timescale/timescaledb#5511, #5574, #5558 ("Use regrole for job owner"): a job
  that names its owner by name follows a rename to whichever role now has the name.
* The executor (`timers_exec.as_<oid>`, SECURITY DEFINER, owned by the timer's
  owner) must not be reachable, alterable, replaceable or re-owned into running as
  someone else: ALTER FUNCTION, CREATE [OR REPLACE] FUNCTION in the schemas,
  REASSIGN OWNED and DROP OWNED (which may only break runs, with a clear error).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import psycopg
import pytest
from psycopg import errors
from psycopg import sql as pgsql

from tests.conftest import Database, scalar
from tests.security.helpers import (
    ALICE,
    BOB,
    NOBODY,
    READER,
    audit_count,
    connect,
    exec_as,
    executor_of,
    fingerprint,
    fresh_role,
    save,
    server_version,
)


def _timer(name: str) -> str:
    """The jsonb of a timer for a direct call of timers._save."""
    return (
        f"jsonb_build_object('name', '{name}', 'schedule', 'daily 02:00',"
        " 'sql', 'SELECT current_user')"
    )


def _log_table(db: Database) -> None:
    """public.who_ran: every run that logs into it records the role it ran as."""
    with db.connect() as su:
        su.execute("CREATE TABLE public.who_ran (who name DEFAULT current_user, note text)")
        su.execute("GRANT ALL ON public.who_ran TO PUBLIC")


def _who_ran(db: Database) -> list[str]:
    with db.connect() as su:
        return [r[0] for r in su.execute("SELECT who FROM public.who_ran ORDER BY who")]


def _owners(db: Database) -> dict[str, str]:
    with db.connect() as su:
        return dict(su.execute("SELECT name, owner FROM timers.timers").fetchall())


# --------------------------------------------------------------------------- direct writes


CURATED_WRITES = [
    "UPDATE timers.timers SET owner = 'postgres'",
    "UPDATE timers.timers SET sql = 'SELECT 2'",
    "INSERT INTO timers.timers (name, schedule, spec, sql, owner)"
    " VALUES ('evil', 'hourly', '{\"kind\": \"hourly\"}', 'SELECT 1', 'postgres')",
    "DELETE FROM timers.timers",
    "TRUNCATE timers.timers CASCADE",
    "UPDATE timers.status SET enabled = false",
    "DELETE FROM timers.status",
    "INSERT INTO timers.audit (actor, session, action, object) VALUES ('x', 'x', 'x', 'x')",
    "DELETE FROM timers.audit",
    "TRUNCATE timers.audit",
    "UPDATE timers.settings SET value = 'Asia/Tokyo' WHERE key = 'timezone'",
    "INSERT INTO timers.run_requests (timer_id, timer, requested_by) VALUES (1, 't0', 'postgres')",
    "UPDATE timers.test_clocks SET now = now() + interval '1 year'",
    "DELETE FROM timers.calendars",
    "INSERT INTO timers.runs (timer_id, timer, kind) VALUES (1, 't0', 'run_now')",
    "COPY timers.timers FROM STDIN",
]

_PRIVILEGES = ["INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "MAINTAIN"]


@pytest.mark.parametrize("role", [ALICE, READER, NOBODY, "pgtimers_admin", "pgtimers_reader"])
def test_no_write_privilege_on_any_relation_of_the_schemas(db: Database, role: str) -> None:
    """Every relation of timers and timers_exec, every write privilege, on any column."""
    with db.connect() as su:
        version = su.execute("SELECT current_setting('server_version_num')::int").fetchone()
        assert version is not None
        privileges = [p for p in _PRIVILEGES if p != "MAINTAIN" or version[0] >= 170000]
        rows = su.execute(
            "SELECT c.oid::regclass::text, c.relkind, p"
            "  FROM pg_class c CROSS JOIN unnest(%s::text[]) p"
            " WHERE c.relnamespace IN ('timers'::regnamespace, 'timers_exec'::regnamespace)"
            "   AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
            "   AND (has_table_privilege(%s, c.oid, p)"
            "        OR (p IN ('INSERT', 'UPDATE', 'REFERENCES')"
            "            AND has_any_column_privilege(%s, c.oid, p)))",
            [privileges, role, role],
        ).fetchall()
        sequences = su.execute(
            "SELECT c.oid::regclass::text FROM pg_class c"
            " WHERE c.relnamespace = 'timers'::regnamespace AND c.relkind = 'S'"
            "   AND (has_sequence_privilege(%s, c.oid, 'UPDATE')"
            "        OR has_sequence_privilege(%s, c.oid, 'USAGE'))",
            [role, role],
        ).fetchall()
        count = su.execute(
            "SELECT count(*) FROM pg_class"
            " WHERE relnamespace = 'timers'::regnamespace AND relkind IN ('r', 'v')"
        ).fetchone()
    assert count and count[0] >= 10, "the catalog query found too few relations"
    # timers.callers is the one exception: admins INSERT their own caller ticket, and
    # row-level security lets a role insert a ticket only for itself (test below).
    allowed = [("timers.callers", "r", "INSERT")] if role in (ALICE, "pgtimers_admin") else []
    assert rows == allowed
    assert sequences == []


def test_a_caller_ticket_can_only_name_yourself(db: Database) -> None:
    with connect(db, ALICE) as alice:
        with pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
            alice.execute("INSERT INTO timers.callers (role) VALUES ('postgres')")
        with pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
            alice.execute("INSERT INTO timers.callers (xid, role) VALUES ('1', current_user)")
        with pytest.raises(errors.InsufficientPrivilege):
            alice.execute("SELECT * FROM timers.callers")


@pytest.mark.parametrize("role", [ALICE, READER, NOBODY])
def test_direct_writes_are_refused(db: Database, role: str) -> None:
    """pg_cron's "direct writes to cron.job" (greengage#569), tried for real: 42501 each."""
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
        alice.execute("SELECT timers.save_calendar('cal')")
        alice.execute("SELECT timers.create_test_clock('clk', '2027-01-01')")
    before = fingerprint(db)
    allowed = []
    with connect(db, role) as conn:
        for statement in CURATED_WRITES:
            try:
                conn.execute(statement)
            except errors.InsufficientPrivilege:
                continue
            except errors.FeatureNotSupported as exc:
                # a computed column of a view (timers.status.enabled shows a change asked
                # for while the timer runs): PostgreSQL refuses the write before the rights
                if "of view" in (exc.diag.message_primary or ""):
                    continue
                allowed.append(f"{statement}: {exc.sqlstate} {exc.diag.message_primary}")
            except psycopg.Error as exc:
                allowed.append(f"{statement}: {exc.sqlstate} {exc.diag.message_primary}")
                continue
            allowed.append(statement)
    assert allowed == [], "\n".join(allowed)
    assert fingerprint(db) == before


def test_the_runner_role_cannot_change_who_a_timer_runs_as(db: Database) -> None:
    """pgtimers_runner needs to write results, not owners or SQL.

    It had UPDATE on every column of timers.timers (sql/0001_schema.sql), so the
    runner's login role — a service account with a password in a config file — could
    set any timer's owner and SQL: pg_cron's "direct writes to cron.job"
    (greengage#569). sql/0012_hardening.sql grants UPDATE on the bookkeeping columns
    only."""
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
    with fresh_role(db, "pgtimers_runner") as runner, connect(db, runner) as conn:
        for statement in (
            "UPDATE timers.timers SET owner = 'pgt_bob'",
            "UPDATE timers.timers SET sql = 'SELECT 2'",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)
    assert _owners(db) == {"t0": ALICE}


# What the runner writes itself (sql/0005_runner.sql, sql/0009_keyed.sql and the named
# queries of pgtimers/runner/queries.sql): results, counters, due times, request answers.
RUNNER_UPDATES = {
    "keyed_timers": {
        "attempt", "cause", "commit", "error", "fired_at", "late_by", "ok", "rows", "sqlstate",
        "status", "superseded_at", "superseded_by", "took_ms", "updated_at", "wakes",
    },
    "run_requests": {"finished_at", "result"},
    "locks": {"note"},
    # a run locks a slot of its timer's run group FOR UPDATE, which needs UPDATE (never done)
    "run_group_slots": {"slot"},
    "runners": {
        "application_name", "backend_pid", "host", "id", "os_pid", "parked_until", "seen_at",
        "started_at", "stopped_at", "version", "workers",
    },
    "timers": {
        "catch_up_due_at", "caught_up", "expired", "failures", "last_due_at", "last_error",
        "last_late_ms", "last_ok", "last_rows", "last_run_at", "last_skip_at", "last_skip_reason",
        "last_took_ms", "max_late_ms", "next_due_at", "runs", "scheduled_runs", "skipped",
        "retry_due_at", "retry_attempt", "retry_at", "fail_streak", "deadline_due_at",
        "deadline_missed", "deadline_missed_at", "last_success_at", "took_counts", "took_sum_ms",
        "late_counts", "late_sum_ms",
    },
    # what a run said, which reaches the runner after the run's commit
    "runs": {"messages"},
    "events": {"messages"},
    # webhook deliveries: where the runners have got to, and each delivery's progress
    "notify_cursors": {"last_event_id", "seen_at"},
    "event_deliveries": {
        "attempts", "next_at", "leased_until", "leased_by", "delivered_at", "given_up_at",
        "last_status", "last_error",
    },
    # a backfill's progress; never its timer or range
    "backfill_jobs": {"done", "failed", "state", "next_at", "ended_at", "note"},
    # which session of the owner runs an autonomous attempt; never what the attempt is
    "autonomous_runs": {"owner_pid", "owner_login"},
    # a follower's due time: what it waits for, whether it is ready or done; never whose
    "follow_dues": {"waiting_for", "skip_reason", "state", "ready_at"},
}  # fmt: skip


def test_the_runner_role_updates_bookkeeping_columns_only(db: Database) -> None:
    """Never an owner, SQL, name, schedule, key or version, nor a test clock's time."""
    with db.connect() as su:
        rows = su.execute(
            "SELECT c.relname::text, a.attname::text FROM pg_class c"
            "  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
            " WHERE c.relnamespace = 'timers'::regnamespace AND c.relkind IN ('r', 'p', 'v')"
            "   AND has_column_privilege('pgtimers_runner', c.oid, a.attnum, 'UPDATE')"
        ).fetchall()
    granted: dict[str, set[str]] = {}
    for table, column in rows:
        granted.setdefault(table, set()).add(column)
    assert granted == RUNNER_UPDATES


def test_the_runner_role_turns_a_timer_off_only_when_its_pause_after_is_reached(
    db: Database,
) -> None:
    """A pause goes through timers._pause, which checks the timer's own failures in a row;
    the runner can turn no timer on, nor off at will."""
    with connect(db, ALICE) as alice:
        alice.execute("SELECT timers.save('p', 'every 1h', 'SELECT 1', pause_after => 3)")
        alice.execute("SELECT timers.save('q', 'every 1h', 'SELECT 1', enabled => false)")
    with fresh_role(db, "pgtimers_runner") as runner, connect(db, runner) as conn:
        for statement in (
            "UPDATE timers.timers SET enabled = false WHERE name = 'p'",
            "UPDATE timers.timers SET enabled = true WHERE name = 'q'",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)
        pid = scalar(conn, "SELECT id FROM timers.timers WHERE name = 'p'")
        with pytest.raises(errors.InsufficientPrivilege, match="has not failed pause_after"):
            conn.execute("SELECT timers._pause(%s, '{}')", [pid])
    with db.connect() as su:
        assert su.execute("SELECT name, enabled FROM timers.timers ORDER BY name").fetchall() == [
            ("p", True), ("q", False),
        ]  # fmt: skip
        assert scalar(su, "SELECT count(*) FROM timers.audit WHERE action = 'pause'") == 0


def test_the_runner_role_cannot_change_what_a_keyed_timer_runs(db: Database) -> None:
    with connect(db, ALICE) as alice:
        alice.execute("SELECT timers.arm('job:task:x:2027', '2030-01-01', 'SELECT 1')")
        alice.execute("SELECT timers.create_test_clock('clk', '2027-01-01')")
    with fresh_role(db, "pgtimers_runner") as runner, connect(db, runner) as conn:
        for statement in (
            "UPDATE timers.keyed_timers SET owner = 'pgt_bob'",
            "UPDATE timers.keyed_timers SET sql = 'SELECT 2'",
            "UPDATE timers.keyed_timers SET key = 'job:task:y:2027'",
            "UPDATE timers.keyed_timers SET version = 'v2'",
            "UPDATE timers.test_clocks SET now = '2030-01-01'",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)
        # the bookkeeping it needs stays writable
        conn.execute("UPDATE timers.keyed_timers SET wakes = wakes")
    with db.connect() as su:
        assert su.execute("SELECT key, owner, sql FROM timers.keyed_timers").fetchall() == [
            ("job:task:x:2027", ALICE, "SELECT 1")
        ]


def test_the_runner_role_cannot_run_sql_of_its_choosing_as_an_owner(db: Database) -> None:
    """The runner should run saved timers, not any SQL as any owner.

    A member of pgtimers_runner could call timers._exec_as(owner, sql) (and the
    executors, through USAGE on timers_exec) with SQL of its choosing, so it held the
    rights of every timer owner — of a superuser too once one saved a timer. Since
    sql/0012_hardening.sql, _exec_as runs only SQL saved for that owner, and the
    executors are reached through it only."""
    _log_table(db)
    with connect(db, BOB) as bob:
        save(bob, "b0", "SELECT 1")
    with fresh_role(db, "pgtimers_runner") as runner, connect(db, runner) as conn:
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute(
                "SELECT timers._exec_as('pgt_bob',"
                " 'INSERT INTO public.who_ran (note) VALUES (''x'')')"
            )
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute(
                f"SELECT {executor_of(db, BOB)}('INSERT INTO public.who_ran (note) VALUES (''x'')')"
            )
    assert _who_ran(db) == []


def test_the_runner_role_runs_a_saved_timers_sql_as_its_owner(db: Database) -> None:
    _log_table(db)
    sql = "INSERT INTO public.who_ran (note) VALUES ('b0')"
    with connect(db, BOB) as bob:
        save(bob, "b0", sql)
    with fresh_role(db, "pgtimers_runner") as runner, connect(db, runner) as conn:
        assert conn.execute("SELECT timers._exec_as('pgt_bob', %s)", [sql]).fetchone() == (1,)
        # the same SQL as another role than the one that saved it is not a saved timer's
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("SELECT timers._exec_as('pgt_alice', %s)", [sql])
    assert _who_ran(db) == [BOB]


# --------------------------------------------------------------------------- the owner argument


def test_internal_save_refuses_another_owner(db: Database) -> None:
    """Every other role (42501), and near-misses of real names that are no role (42704 or 42501)."""
    before = fingerprint(db)
    wrong = []
    with connect(db, ALICE) as alice:
        for owner, states in [
            ("postgres", ("42501",)),
            (BOB, ("42501",)),
            (READER, ("42501",)),
            (NOBODY, ("42501",)),
            ("pgtimers_runner", ("42501",)),
            ("pgtimers_reader", ("42501",)),
            (None, ("42501",)),
            ("PGT_BOB", ("42501", "42704")),
            ("pgt_bob ", ("42501", "42704")),
            ("", ("42501", "42704")),
            ('"pgt_bob"', ("42501", "42704")),
            ("pgt_bob; SELECT 1", ("42501", "42704")),
        ]:
            try:
                alice.execute(f"SELECT timers._save(%s, {_timer('evil')})", [owner])
            except psycopg.Error as exc:
                if exc.sqlstate not in states:
                    wrong.append(f"{owner!r}: {exc.sqlstate} {exc.diag.message_primary}")
                continue
            wrong.append(f"{owner!r}: accepted")
    assert wrong == [], "\n".join(wrong)
    assert fingerprint(db) == before


def test_internal_save_refuses_even_a_role_the_session_may_become(db: Database) -> None:
    """The owner is the role in effect, proven by its caller ticket: to save as
    pgtimers_admin, SET ROLE pgtimers_admin first; naming it in a direct call is refused."""
    with connect(db, ALICE) as alice:
        with pytest.raises(errors.InsufficientPrivilege, match="cannot save a timer that runs"):
            alice.execute(f"SELECT timers._save('pgtimers_admin', {_timer('shared')})")
        alice.execute("SET ROLE pgtimers_admin")
        save(alice, "shared", "SELECT 1")
    assert _owners(db) == {"shared": "pgtimers_admin"}


def test_membership_without_set_does_not_let_you_save_as_that_role(db: Database) -> None:
    """GRANT victim TO attacker WITH SET FALSE, INHERIT FALSE: attacker may not act as victim.

    timers._save checks pg_has_role(session_user, p_owner, 'MEMBER'), which is true
    for such a grant; docs/design.md promises "refuses an owner the session user
    cannot SET ROLE to". The check must be 'SET' (PostgreSQL 16+)."""
    if server_version(db) < 160000:
        pytest.skip("GRANT ... WITH SET FALSE needs PostgreSQL 16")
    with (
        fresh_role(db, "pgtimers_admin", login=False) as victim,
        fresh_role(db, "pgtimers_admin") as attacker,
    ):
        with db.server.admin() as su:
            su.execute(
                pgsql.SQL("GRANT {} TO {} WITH INHERIT FALSE, SET FALSE").format(
                    pgsql.Identifier(victim), pgsql.Identifier(attacker)
                )
            )
        with connect(db, attacker) as conn:
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(victim)))
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(f"SELECT timers._save(%s, {_timer('evil')})", [victim])
        assert _owners(db) == {}


# The internal bodies that take the acting role as an argument. An admin may call
# them directly; the role it passes is what timers.audit records as the actor.
ACTOR_CALLS = [
    ("_set_enabled", "SELECT timers._set_enabled('pgt_bob', 't0', false)"),
    ("_delete", "SELECT timers._delete('pgt_bob', 't0')"),
    ("_set_timezone", "SELECT timers._set_timezone('pgt_bob', 'Asia/Tokyo')"),
    ("_save_calendar", "SELECT timers._save_calendar('pgt_bob', 'cal2', 'mon-fri', NULL, NULL)"),
    (
        "_set_calendar_week",
        "SELECT timers._set_calendar_week('pgt_bob', 'cal', '2027-01-01', 'sun-thu')",
    ),
    (
        "_set_calendar_day",
        "SELECT timers._set_calendar_day('pgt_bob', 'cal', '2027-01-05', false, '')",
    ),
    ("_remove_day", "SELECT timers._remove_day('pgt_bob', 'cal', '2027-01-04')"),
    ("_drop_calendar", "SELECT timers._drop_calendar('pgt_bob', 'cal')"),
    ("_create_test_clock", "SELECT timers._create_test_clock('pgt_bob', 'clk2', now())"),
    ("_delete_test_clock", "SELECT timers._delete_test_clock('pgt_bob', 'clk')"),
    ("_clock_step", "SELECT timers._clock_step('pgt_bob', 'clk', '2027-01-02', true)"),
    ("_run_ask", "SELECT timers._run_ask('pgt_bob', 't0')"),
]
_FORGEABLE: set[str] = set()  # every body takes its caller's ticket now
_WERE_FORGEABLE = {
    "_set_enabled",
    "_delete",
    "_set_timezone",
    "_save_calendar",
    "_set_calendar_week",
    "_set_calendar_day",
    "_remove_day",
    "_drop_calendar",
    "_create_test_clock",
    "_delete_test_clock",
}


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            c,
            id=n,
            marks=[
                pytest.mark.xfail(
                    strict=True,
                    reason=f"timers.{n}(p_actor, ...) trusts p_actor: any admin can write "
                    "audit rows in another admin's name",
                )
            ]
            if n in _FORGEABLE
            else [],
        )
        for n, c in ACTOR_CALLS
    ],
)
def test_audit_actor_cannot_be_forged(db: Database, call: str) -> None:
    """pgt_alice calls an internal body naming pgt_bob as the actor: refused, or audited as her."""
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
        alice.execute("SELECT timers.save_calendar('cal')")
        alice.execute("SELECT timers.add_holiday('cal', '2027-01-04')")
        alice.execute("SELECT timers.create_test_clock('clk', '2027-01-01')")
    audits = audit_count(db)
    with connect(db, ALICE) as alice:
        try:
            alice.execute(call)
        except errors.InsufficientPrivilege:
            assert audit_count(db) == audits
            return
    with db.connect() as su:
        actors = [
            r[0] for r in su.execute("SELECT actor FROM timers.audit WHERE id > %s", [audits])
        ]
    assert actors and set(actors) == {ALICE}


# --------------------------------------------------------------------------- from inside a run


@pytest.mark.parametrize("target", ["postgres", BOB])
def test_a_timers_sql_cannot_save_a_timer_owned_by_someone_else(db: Database, target: str) -> None:
    """The pg_cron#120 case moved inside a run: the session user of a run is the runner."""
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
    with contextlib.suppress(errors.InsufficientPrivilege):
        exec_as(db, ALICE, f"SELECT timers._save('{target}', {_timer('evil')})")
    assert _owners(db) == {"t0": ALICE}


def test_a_timers_sql_cannot_unlock_a_locked_timer(db: Database) -> None:
    with connect(db, BOB) as bob:
        save(bob, "vault", "SELECT 1", locked=True)
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
    with contextlib.suppress(errors.InsufficientPrivilege):
        exec_as(db, ALICE, "SELECT timers.unlock('vault')")
    with db.connect() as su:
        assert su.execute("SELECT locked FROM timers.timers WHERE name = 'vault'").fetchone() == (
            True,
        )


def test_a_timers_sql_cannot_ask_for_runs_in_someone_elses_name(db: Database) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
    with connect(db) as live:  # looks like a live runner to timers._live_runners()
        live.execute(
            "INSERT INTO timers.runners (id, host, os_pid, backend_pid, application_name)"
            " VALUES ('fake', 'here', 1, pg_backend_pid(), current_setting('application_name'))"
        )
        with contextlib.suppress(errors.InsufficientPrivilege):
            exec_as(db, ALICE, "SELECT timers._run_ask('postgres', 't0')")
    with db.connect() as su:
        assert su.execute("SELECT requested_by FROM timers.run_requests").fetchall() in (
            [],
            [(ALICE,)],
        )


# --------------------------------------------------------------------------- executors


EXECUTOR_STATEMENTS = [
    "SELECT {fn}('SELECT 1')",
    "ALTER FUNCTION {fn}(text) SECURITY INVOKER",
    "ALTER FUNCTION {fn}(text) OWNER TO pgt_bob",
    "ALTER FUNCTION {fn}(text) RESET ALL",
    "ALTER FUNCTION {fn}(text) SET search_path = pg_temp",
    "ALTER FUNCTION {fn}(text) RENAME TO x",
    "ALTER ROUTINE {fn}(text) SECURITY INVOKER",
    "DROP FUNCTION {fn}(text)",
    "CREATE OR REPLACE FUNCTION {fn}(sql text) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint'",
    "COMMENT ON FUNCTION {fn}(text) IS 'x'",
    "GRANT EXECUTE ON FUNCTION {fn}(text) TO PUBLIC",
    "ALTER EXTENSION plpgsql ADD FUNCTION {fn}(text)",
]


def _all_refused(conn: psycopg.Connection, statements: list[str]) -> list[str]:
    wrong = []
    for statement in statements:
        try:
            conn.execute(statement)
        except errors.InsufficientPrivilege:
            continue
        except psycopg.Error as exc:
            wrong.append(f"{statement}: {exc.sqlstate} {exc.diag.message_primary}")
            continue
        wrong.append(f"{statement}: accepted")
    return wrong


@pytest.mark.parametrize("role", [ALICE, BOB])
def test_executors_are_out_of_reach(db: Database, role: str) -> None:
    """Alice owns her executor, Bob does not: neither may call, alter, replace, re-own, drop it."""
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
    fn = executor_of(db, ALICE)
    before = fingerprint(db)
    with connect(db, role) as conn:
        wrong = _all_refused(conn, [s.format(fn=fn) for s in EXECUTOR_STATEMENTS])
    assert wrong == [], "\n".join(wrong)
    assert fingerprint(db) == before


SCHEMA_STATEMENTS = [
    "CREATE FUNCTION {s}.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "CREATE FUNCTION {s}.as_10(sql text) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint'",
    "CREATE OR REPLACE FUNCTION {s}.save(name text, schedule text, sql text,"
    " enabled boolean DEFAULT true,"
    " timezone text DEFAULT NULL, catch_up text DEFAULT NULL, start_at timestamptz DEFAULT NULL,"
    " end_at timestamptz DEFAULT NULL, max_runs bigint DEFAULT NULL, timeout interval DEFAULT NULL,"
    " locked boolean DEFAULT false, test_clock text DEFAULT NULL)"
    " RETURNS timers.status LANGUAGE sql AS 'SELECT NULL::timers.status'",
    "CREATE TABLE {s}.t (a int)",
    "CREATE VIEW {s}.v AS SELECT 1 AS a",
    "CREATE OPERATOR {s}.=== (FUNCTION = pg_catalog.texteq, LEFTARG = text, RIGHTARG = text)",
    "CREATE TYPE {s}.ty AS (a int)",
    "ALTER FUNCTION timers._save(name, jsonb) SECURITY INVOKER",
    "ALTER FUNCTION timers._ensure_executor(name) OWNER TO pgt_alice",
    "ALTER TABLE timers.timers DISABLE ROW LEVEL SECURITY",
    "CREATE TRIGGER x BEFORE INSERT ON timers.timers FOR EACH ROW"
    " EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger()",
]


@pytest.mark.parametrize("role", [ALICE, READER, NOBODY])
def test_nobody_creates_or_alters_objects_in_the_schemas(db: Database, role: str) -> None:
    """CREATE [OR REPLACE] anything in timers or timers_exec, ALTER pgtimers' own objects: 42501."""
    before = fingerprint(db)
    statements = [
        st.format(s=schema) for schema in ("timers", "timers_exec") for st in SCHEMA_STATEMENTS
    ]
    statements = list(dict.fromkeys(statements))
    with connect(db, role) as conn:
        wrong = _all_refused(conn, statements)
    assert wrong == [], "\n".join(wrong)
    assert fingerprint(db) == before


def test_ensure_executor_is_not_callable(db: Database) -> None:
    before = fingerprint(db)
    for role in (ALICE, READER, NOBODY):
        with connect(db, role) as conn:
            wrong = _all_refused(
                conn,
                [
                    "SELECT timers._ensure_executor('pgt_bob')",
                    "SELECT timers._ensure_executor(current_user)",
                ],
            )
        assert wrong == [], (role, wrong)
    assert fingerprint(db) == before


@pytest.mark.parametrize("target", [BOB, "pgtimers_admin", "postgres"])
def test_reassign_owned_by_an_owner_is_refused(db: Database, target: str) -> None:
    """REASSIGN OWNED would hand Alice's executor (and so her timers) to another role."""
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
    before = fingerprint(db)
    with connect(db, ALICE) as alice, pytest.raises(errors.InsufficientPrivilege):
        alice.execute(
            pgsql.SQL("REASSIGN OWNED BY pgt_alice TO {}").format(pgsql.Identifier(target))
        )
    assert fingerprint(db) == before


def test_reassign_owned_by_a_dba_moves_the_timers_to_the_new_owner(db: Database) -> None:
    """Off-boarding a role with REASSIGN OWNED BY x TO y is routine for a DBA: x's timers
    are then y's (their executor is y's function) and run as y, as every other object
    x owned now belongs to y; never as anyone else."""
    _log_table(db)
    with fresh_role(db, "pgtimers_admin") as owner:
        with connect(db, owner) as conn:
            save(conn, "t0", "INSERT INTO public.who_ran (note) VALUES ('t0')")
        with db.connect() as su:
            su.execute(
                pgsql.SQL("REASSIGN OWNED BY {} TO {}").format(
                    pgsql.Identifier(owner), pgsql.Identifier(BOB)
                )
            )
            su.execute("SELECT set_config('pgtimers.timer', 't0', false)")
            su.execute("SELECT timers._exec_as(owner, sql) FROM timers.timers WHERE name = 't0'")
            shown = su.execute("SELECT created_by FROM timers.status WHERE name = 't0'").fetchone()
        assert _who_ran(db) == [BOB]
        assert shown == (BOB,)


def test_drop_owned_only_breaks_runs_with_a_clear_error(db: Database) -> None:
    """DROP OWNED BY the owner drops its executor: runs fail clearly until it saves again."""
    _log_table(db)
    with connect(db, ALICE) as alice:
        save(alice, "t0", "INSERT INTO public.who_ran (note) VALUES ('t0')")
        alice.execute("DROP OWNED BY pgt_alice")
    with pytest.raises(
        errors.UndefinedObject, match=r'owner "pgt_alice" has no executor.*save the timer again'
    ):
        exec_as(db, ALICE, "INSERT INTO public.who_ran (note) VALUES ('t0')")
    assert _who_ran(db) == []
    with connect(db, ALICE) as alice:
        save(alice, "t0", "INSERT INTO public.who_ran (note) VALUES ('t0')")
    exec_as(db, ALICE, "INSERT INTO public.who_ran (note) VALUES ('t0')")
    assert _who_ran(db) == [ALICE]


def test_dropped_owner_breaks_runs_with_a_clear_error(db: Database) -> None:
    _log_table(db)
    with fresh_role(db, "pgtimers_admin") as owner, connect(db, owner) as conn:
        save(conn, "t0", "INSERT INTO public.who_ran (note) VALUES ('t0')")
    # the role is gone (DROP OWNED + DROP ROLE); its timer stays
    assert _owners(db) == {"t0": owner}
    with pytest.raises(errors.UndefinedObject, match="has no executor"):
        exec_as(db, owner, "INSERT INTO public.who_ran (note) VALUES ('t0')")
    assert _who_ran(db) == []


def test_a_renamed_owners_timers_never_run_as_the_role_that_takes_its_name(db: Database) -> None:
    _log_table(db)
    with fresh_role(db, "pgtimers_admin") as first, fresh_role(db, "pgtimers_admin") as second:
        with connect(db, first) as conn:
            save(conn, "t_first", "INSERT INTO public.who_ran (note) VALUES ('first')")
        with connect(db, second) as conn:
            save(conn, "t_second", "SELECT 1")
        with db.server.admin() as su:
            su.execute(
                pgsql.SQL("ALTER ROLE {} RENAME TO {}").format(
                    pgsql.Identifier(first), pgsql.Identifier(first + "_old")
                )
            )
            su.execute(
                pgsql.SQL("ALTER ROLE {} RENAME TO {}").format(
                    pgsql.Identifier(second), pgsql.Identifier(first)
                )
            )
        try:
            stored = _owners(db)["t_first"]
            with contextlib.suppress(psycopg.Error):
                exec_as(db, stored, "INSERT INTO public.who_ran (note) VALUES ('first')")
            with db.connect() as su:
                ran_as_oid = su.execute(
                    "SELECT r.oid FROM public.who_ran w JOIN pg_roles r ON r.rolname = w.who"
                ).fetchall()
                first_oid = su.execute(
                    "SELECT oid FROM pg_roles WHERE rolname = %s", [first + "_old"]
                ).fetchone()
            assert ran_as_oid == [first_oid]  # the same role, renamed; never the new one
        finally:
            with db.server.admin() as su:
                su.execute(
                    pgsql.SQL("ALTER ROLE {} RENAME TO {}").format(
                        pgsql.Identifier(first), pgsql.Identifier(second)
                    )
                )
                su.execute(
                    pgsql.SQL("ALTER ROLE {} RENAME TO {}").format(
                        pgsql.Identifier(first + "_old"), pgsql.Identifier(first)
                    )
                )


def test_replacing_a_timer_makes_the_saver_its_owner_never_keeps_the_old_one(db: Database) -> None:
    """Bob replacing Alice's timer runs Bob's SQL as Bob (audited), never as Alice."""
    _log_table(db)
    with connect(db, ALICE) as alice:
        save(alice, "shared", "INSERT INTO public.who_ran (note) VALUES ('alice')")
    with connect(db, BOB) as bob:
        save(bob, "SHARED", "INSERT INTO public.who_ran (note) VALUES ('bob')")
        bob.execute("SELECT timers.enable('shared', false)")
    assert _owners(db) == {"SHARED": BOB}
    with db.connect() as su:
        sql = su.execute("SELECT sql FROM timers.timers").fetchone()
        assert sql is not None
        audit = su.execute("SELECT actor, session, action FROM timers.audit ORDER BY id").fetchall()
    assert audit == [(ALICE, ALICE, "save"), (BOB, BOB, "save"), (BOB, BOB, "disable")]
    exec_as(db, _owners(db)["SHARED"], sql[0])
    assert _who_ran(db) == [BOB]


def test_enable_and_run_now_by_another_admin_do_not_change_the_owner(db: Database) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
    with connect(db, BOB) as bob:
        bob.execute("SELECT timers.enable('t0', false)")
        bob.execute("SELECT timers.enable('t0', true)")
    assert _owners(db) == {"t0": ALICE}


def _acting_role_bodies(db: Database) -> list[tuple[str, str]]:
    """Every SECURITY DEFINER body of schema timers whose first argument is the acting role
    (p_actor / p_owner), with a call naming `{role}` there and NULL everywhere else."""
    with db.connect() as su:
        rows = su.execute(
            "SELECT p.oid::regprocedure::text, p.proname,"
            "       array(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) t)"
            "  FROM pg_proc p"
            " WHERE p.prosecdef AND p.pronamespace = 'timers'::regnamespace"
            "   AND p.proargnames[1] IN ('p_actor', 'p_owner') AND p.prokind = 'f'"
            " ORDER BY 1"
        ).fetchall()
    calls = []
    for signature, proname, types in rows:
        args = ["{role}::name"] + [f"NULL::{t}" for t in types[1:]]
        calls.append((signature, f"SELECT timers.{proname}({', '.join(args)})"))
    return calls


def _classify(run: Callable[[str], object], calls: list[tuple[str, str]], role: str) -> list[str]:
    """The bodies that did not refuse `role` as the acting role with 42501."""
    offenders = []
    for signature, call in calls:
        try:
            run(call.format(role=f"'{role}'"))
        except errors.InsufficientPrivilege:
            continue
        except psycopg.Error as exc:
            offenders.append(f"{signature}: {exc.sqlstate} {exc.diag.message_primary}")
            continue
        offenders.append(f"{signature}: accepted")
    return offenders


@pytest.mark.parametrize("where", ["session", "run"])
def test_every_internal_body_checks_the_acting_role_it_is_given(db: Database, where: str) -> None:
    """Catalog-driven, so bodies added later (keyed timers, ...) are covered too.

    session: pgt_alice calls each body naming pgt_bob; run: pgt_alice's timer SQL,
    run by a superuser runner, calls each body naming postgres. Each must refuse (42501)
    before anything else."""
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
    calls = _acting_role_bodies(db)
    assert len(calls) >= 10, calls
    if where == "session":
        with connect(db, ALICE) as alice:
            offenders = _classify(lambda sql: alice.execute(sql), calls, BOB)
    else:
        offenders = _classify(lambda sql: exec_as(db, ALICE, sql), calls, "postgres")
    assert offenders == [], "\n".join(offenders)
