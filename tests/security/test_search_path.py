"""pgtimers' own code never runs a user's objects that shadow built-ins or its internals.

The pattern is CVE-2018-1058 (objects in a schema earlier in search_path shadow
pg_catalog's, or better match their argument types), as it hit pg_cron: its
extension functions called unqualified functions and operators in a privileged
context (citusdata/pg_cron#192, "Fix privilege escalation", found with pgspot:
PS016 unqualified function call, PS001 unqualified operator), and pg_cron's
maintainers refused custom extension schemas for the same reason
(citusdata/pg_cron#225, #289: "We've had privilege escalation issues in the past
due to public schema").

Here a schema `evil`, owned by pgt_nobody, holds functions, operators and tables
named like built-ins and like pgtimers' internals, some with argument types that
match pgtimers' calls better than pg_catalog's own. An admin (and the superuser,
for the runner's internals and unlock) puts it first in search_path and calls
every public function; nothing of `evil` may run. Every evil object records its
call in evil.calls and raises a WARNING (which survives a rolled-back call).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg
import pytest

from tests.conftest import Database
from tests.security.helpers import ALICE, NOBODY, connect, save

# name(argument types) -> return type, and the pg_catalog expression it returns
EVIL_FUNCTIONS = [
    ("lower", "text", "text", "pg_catalog.lower($1)"),
    ("upper", "text", "text", "pg_catalog.upper($1)"),
    ("now", "", "timestamptz", "pg_catalog.now()"),
    ("clock_timestamp", "", "timestamptz", "pg_catalog.clock_timestamp()"),
    ("pg_has_role", "name, name, text", "boolean", "pg_catalog.pg_has_role($1, $2, $3)"),
    ("pg_has_role", "name, text", "boolean", "pg_catalog.pg_has_role($1, $2)"),
    (
        "pg_has_role",
        "text, text, text",
        "boolean",
        "pg_catalog.pg_has_role($1::name, $2::name, $3)",
    ),
    ("jsonb_build_object", "text, text", "jsonb", "pg_catalog.jsonb_build_object($1, $2)"),
    ("jsonb_build_object", "text, text, text, text", "jsonb", "'{}'::jsonb"),
    ("jsonb_build_object", "text, text, text, text, text, text", "jsonb", "'{}'::jsonb"),
    # exactly the argument types of the result of CALL timers.advance_test_clock
    (
        "jsonb_build_object",
        "text, text, text, text, text, bigint, text, boolean, text, bigint",
        "jsonb",
        "'{}'::jsonb",
    ),
    ("format", "text", "text", "pg_catalog.format($1)"),
    ("format", "text, text", "text", "pg_catalog.format($1, $2)"),
    ("format", "text, text, text", "text", "pg_catalog.format($1, $2, $3)"),
    ("pg_notify", "text, text", "void", "pg_catalog.pg_notify($1, $2)"),
    ("current_database", "", "name", "pg_catalog.current_database()"),
    ("quote_ident", "text", "text", "pg_catalog.quote_ident($1)"),
    ("quote_literal", "text", "text", "pg_catalog.quote_literal($1)"),
    ("length", "text", "integer", "pg_catalog.length($1)"),
    ("octet_length", "text", "integer", "pg_catalog.octet_length($1)"),
    ("left", "text, integer", "text", "pg_catalog.left($1, $2)"),
    ("strpos", "text, text", "integer", "pg_catalog.strpos($1, $2)"),
    ("to_regprocedure", "text", "regprocedure", "pg_catalog.to_regprocedure($1)"),
    ("set_config", "text, text, boolean", "text", "pg_catalog.set_config($1, $2, $3)"),
    ("pg_sleep", "double precision", "void", "pg_catalog.pg_sleep($1)"),
    ("pg_sleep", "numeric", "void", "pg_catalog.pg_sleep($1::float8)"),
    (
        "pg_advisory_xact_lock",
        "integer, integer",
        "void",
        "pg_catalog.pg_advisory_xact_lock($1, $2)",
    ),
    ("to_char", "timestamp, text", "text", "pg_catalog.to_char($1, $2)"),
    (
        "regexp_replace",
        "text, text, text, text",
        "text",
        "pg_catalog.regexp_replace($1, $2, $3, $4)",
    ),
    ("starts_with", "text, text", "boolean", "pg_catalog.starts_with($1, $2)"),
    ("array_position", "text[], text", "integer", "pg_catalog.array_position($1, $2)"),
    ("replace", "text, text, text", "text", "pg_catalog.replace($1, $2, $3)"),
    ("_status", "text", "text", "'{}'"),
    (
        "_save",
        "name, text, text, text, boolean, text, text, timestamptz, timestamptz, bigint,"
        " interval, boolean, text",
        "text",
        "'x'",
    ),
    ("_audit", "name, text, text, jsonb", "void", "NULL"),
    ("_require_admin", "text", "void", "NULL"),
    ("_exec_as", "name, text", "bigint", "0"),
]

# operator, left, right, return type
EVIL_OPERATORS = [
    ("=", "text", "text", "boolean"),
    ("<>", "text", "text", "boolean"),
    ("||", "text", "text", "text"),
    ("~", "text", "text", "boolean"),
    ("=", "name", "name", "boolean"),
    ("=", "bigint", "bigint", "boolean"),
    ("=", "integer", "integer", "boolean"),
    (">", "integer", "integer", "boolean"),
    ("+", "bigint", "bigint", "bigint"),
    ("<=", "timestamptz", "timestamptz", "boolean"),
    (">=", "timestamptz", "timestamptz", "boolean"),
    ("<", "timestamptz", "timestamptz", "boolean"),
    (">", "timestamptz", "timestamptz", "boolean"),
    ("+", "timestamptz", "interval", "timestamptz"),
    ("-", "timestamptz", "timestamptz", "interval"),
    ("->>", "jsonb", "text", "text"),
    ("->", "jsonb", "text", "jsonb"),
    # better matches than pg_catalog's: no float8 * int4 or timestamptz = text there
    ("*", "double precision", "integer", "double precision"),
    ("=", "timestamptz", "text", "boolean"),
    ("=", "jsonb", "text", "boolean"),
]

EVIL_TABLES = [
    "settings",
    "timers",
    "calendars",
    "calendar_weeks",
    "calendar_days",
    "test_clocks",
    "runs",
    "audit",
    "status",
    "run_requests",
    "runners",
    "pg_roles",
    "pg_locks",
    "pg_proc",
    "pg_database",
]


def _evil_sql() -> str:
    out = [
        "CREATE TABLE evil.calls (what text, by name DEFAULT current_user)",
        "GRANT INSERT, SELECT ON evil.calls TO PUBLIC",
        "CREATE FUNCTION evil.hit(what text) RETURNS void LANGUAGE plpgsql AS $$"
        " BEGIN INSERT INTO evil.calls (what) VALUES (what);"
        " RAISE WARNING 'EVIL OBJECT USED: % (as %)', what, current_user; END $$",
    ]
    for i, (name, args, ret, expr) in enumerate(EVIL_FUNCTIONS):
        label = f"{name}({args})".replace("'", "")
        body = (
            f"PERFORM evil.hit('{label}'); RETURN {expr};"
            if ret != "void"
            else (
                f"PERFORM evil.hit('{label}'); PERFORM {expr}; RETURN;"
                if expr != "NULL"
                else f"PERFORM evil.hit('{label}'); RETURN;"
            )
        )
        out.append(
            f'CREATE FUNCTION evil."{name}"({args}) RETURNS {ret} LANGUAGE plpgsql'
            f" AS $f{i}$ BEGIN {body} END $f{i}$"
        )
    for i, (op, left, right, ret) in enumerate(EVIL_OPERATORS):
        if (left, right) == ("timestamptz", "text"):
            expr = "$1 OPERATOR(pg_catalog.=) $2::timestamptz"
        elif (left, right) == ("jsonb", "text"):
            expr = "$1 OPERATOR(pg_catalog.=) $2::jsonb"
        elif (left, right) == ("double precision", "integer"):
            expr = "$1 OPERATOR(pg_catalog.*) $2::float8"
        else:
            expr = f"$1 OPERATOR(pg_catalog.{op}) $2"
        out.append(
            f"CREATE FUNCTION evil.op{i}({left}, {right}) RETURNS {ret} LANGUAGE plpgsql AS $o{i}$"
            f" BEGIN PERFORM evil.hit('operator {op}({left}, {right})'); RETURN {expr}; END $o{i}$"
        )
        out.append(
            f"CREATE OPERATOR evil.{op}"
            f" (FUNCTION = evil.op{i}, LEFTARG = {left}, RIGHTARG = {right})"
        )
    # tables named like pgtimers' and the catalog's: views that record any read or write
    out.append(
        "CREATE FUNCTION evil.rows(what text)"
        " RETURNS TABLE (id bigint, name text, key text, value text,"
        " now timestamptz, owner name, rolname name, rolsuper boolean) LANGUAGE plpgsql AS $r$"
        " BEGIN PERFORM evil.hit(what); RETURN; END $r$"
    )
    out.append(
        "CREATE FUNCTION evil.trg() RETURNS trigger LANGUAGE plpgsql AS $t$"
        " BEGIN PERFORM evil.hit('write to evil.' || TG_TABLE_NAME); RETURN NULL; END $t$"
    )
    for t in EVIL_TABLES:
        out.append(f"CREATE VIEW evil.{t} AS SELECT * FROM evil.rows('read of evil.{t}')")
        out.append(
            f"CREATE TRIGGER hit INSTEAD OF INSERT OR UPDATE OR DELETE ON evil.{t}"
            " FOR EACH ROW EXECUTE FUNCTION evil.trg()"
        )
        out.append(f"GRANT ALL ON evil.{t} TO PUBLIC")
    out.append("GRANT USAGE ON SCHEMA evil TO PUBLIC")
    return ";\n".join(out)


PATHS = {
    "evil-first": "evil, timers, public",
    "evil-before-pg_catalog": "evil, pg_catalog, timers, public",
}


@pytest.fixture
def evil_db(db: Database) -> Iterator[Database]:
    """db with schema evil (owned by pgt_nobody) and some timers, calendars and a test clock."""
    with db.connect() as su:
        su.execute(f"CREATE SCHEMA evil AUTHORIZATION {NOBODY}")
    with connect(db, NOBODY) as nobody:
        nobody.execute(_evil_sql())
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
        save(alice, "locked0", "SELECT 1", locked=True)
        alice.execute("SELECT timers.save_calendar('cal')")
        alice.execute("SELECT timers.add_holiday('cal', '2027-01-04')")
        alice.execute("SELECT timers.create_test_clock('clk', '2027-01-01')")
        save(alice, "on_clock", "SELECT 1", schedule="daily 09:00", test_clock="clk")
        save(alice, "trading0", "SELECT 1", schedule="trading cal 15:05")
    yield db


def _calls(db: Database) -> list[tuple[str, str]]:
    with db.connect() as su:
        return su.execute("SELECT what, by FROM evil.calls").fetchall()


def _call_with_path(db: Database, role: str | None, path: str, statement: str) -> list[str]:
    """Run one statement with `path`; the evil WARNINGs it raised. Its own errors are ignored."""
    warnings: list[str] = []

    def on_notice(diag: psycopg.errors.Diagnostic) -> None:
        if (diag.message_primary or "").startswith("EVIL"):
            warnings.append(diag.message_primary or "")

    with connect(db, role) as conn:
        conn.add_notice_handler(on_notice)
        conn.execute(f"SET search_path = {path}")
        with contextlib.suppress(psycopg.Error):
            conn.execute(statement)
    return warnings


ADMIN_CALLS = [
    ("save", "SELECT timers.save('t1', 'daily 02:00', 'SELECT 1')"),
    (
        "save-all-options",
        "SELECT timers.save('t2', 'every 10m', 'SELECT 1', enabled => false,"
        " timezone => 'Europe/Paris', catch_up => 'all',"
        " start_at => '2027-01-01', end_at => '2027-06-01',"
        " max_runs => 3, timeout => interval '1 minute', locked => false)",
    ),
    ("save-replace", "SELECT timers.save('T0', 'hourly :15', 'SELECT 2')"),
    ("save-bad-sql", "SELECT timers.save('t3', 'hourly', 'SELEC 1')"),
    ("save-refused-sql", "SELECT timers.save('t3', 'hourly', 'SELECT 1; COMMIT')"),
    ("save-bad-schedule", "SELECT timers.save('t3', 'every 0s', 'SELECT 1')"),
    ("save-bad-name", "SELECT timers.save('t 3', 'hourly', 'SELECT 1')"),
    ("save-on-clock", "SELECT timers.save('t4', 'daily 10:00', 'SELECT 1', test_clock => 'clk')"),
    ("save-trading", "SELECT timers.save('t5', 'trading cal 09:30', 'SELECT 1')"),
    ("save-locked", "SELECT timers.save('locked0', 'hourly', 'SELECT 2')"),
    ("enable-off", "SELECT timers.enable('t0', false)"),
    ("enable-on", "SELECT timers.enable('t0')"),
    ("delete-unknown", "SELECT timers.delete('nope')"),
    ("set_timezone", "SELECT timers.set_timezone('America/New_York')"),
    ("next_runs", "SELECT * FROM timers.next_runs('mon-fri 11:00', 5)"),
    (
        "next_runs-cron",
        "SELECT * FROM timers.next_runs('cron */5 9-17 * * mon-fri', 5, timezone => 'Asia/Tokyo')",
    ),
    ("save_calendar", "SELECT timers.save_calendar('cal2', 'sun-thu')"),
    ("set_calendar_week", "SELECT timers.set_calendar_week('cal', '2027-03-01', 'sun-thu')"),
    ("add_holiday", "SELECT timers.add_holiday('cal', '2027-01-05', 'x')"),
    ("add_trading_day", "SELECT timers.add_trading_day('cal', '2027-01-09')"),
    ("remove_day", "SELECT timers.remove_day('cal', '2027-01-04')"),
    ("is_trading_day", "SELECT timers.is_trading_day('cal', '2027-01-04')"),
    ("trading_days", "SELECT * FROM timers.trading_days('cal', '2027-01-01', '2027-01-31')"),
    ("create_test_clock", "SELECT timers.create_test_clock('clk2', '2027-01-01')"),
    ("status", "SELECT * FROM timers.status"),
    ("recent_runs", "SELECT * FROM timers.recent_runs"),
    ("trouble", "SELECT * FROM timers.trouble"),
    ("unlock-denied", "SELECT timers.unlock('locked0')"),
    # the destructive ones last: the calls run one after the other in one database
    ("delete_test_clock", "SELECT timers.delete_test_clock('clk')"),
    ("drop_calendar", "SELECT timers.drop_calendar('cal')"),
    ("delete", "SELECT timers.delete('t0')"),
]

PROCEDURE_CALLS = [
    ("advance_test_clock", "CALL timers.advance_test_clock('clk', '2027-01-03')"),
    ("run-no-runner", "CALL timers.run('t0')"),
]

SUPERUSER_CALLS = [
    ("unlock", "SELECT timers.unlock('locked0')"),
    ("_exec_as", "SELECT timers._exec_as('pgt_alice', 'SELECT 1')"),
    ("_fire", "SELECT timers._fire('r', '{}', '{}', false, 600000)"),
    ("_next_wake", "SELECT * FROM timers._next_wake()"),
    ("_run_due", "SELECT timers._run_due(t.id, t.next_due_at, 'x') FROM timers.timers t"),
    ("_runner_start", "SELECT timers._runner_start('r', 'h', 1, 'v', 1)"),
    (
        "_runner_park",
        "SELECT timers._runner_park('r', pg_catalog.now() OPERATOR(pg_catalog.+) '1 minute')",
    ),
    ("_apply_gaps", "SELECT timers._apply_gaps('x', 'r', '2027-01-01')"),
    ("_server_clock_jumped", "SELECT timers._server_clock_jumped('2020-01-01', '2030-01-01', 'r')"),
    ("_prune", "SELECT timers._prune()"),
]

# The two procedures cannot pin search_path (a procedure with a SET clause cannot
# COMMIT): since sql/0013_procedures.sql their bodies hold only schema-qualified
# calls and types, and the work is in functions that pin it.


def _run_all(db: Database, role: str | None, path: str, calls: list[tuple[str, str]]) -> list[str]:
    hits = []
    for name, statement in calls:
        hits += [f"{name}: {w}" for w in _call_with_path(db, role, path, statement)]
    return hits


@pytest.mark.parametrize("path_id", list(PATHS))
def test_admin_calls_never_use_objects_of_an_earlier_schema(
    evil_db: Database, path_id: str
) -> None:
    """Every public function and view, one after the other, as pgt_alice with evil first."""
    hits = _run_all(evil_db, ALICE, PATHS[path_id], ADMIN_CALLS)
    assert hits == [], "\n".join(hits)
    assert _calls(evil_db) == []


@pytest.mark.parametrize(
    ("path_id", "name", "statement"),
    [pytest.param(p, n, s, id=f"{p}-{n}") for p in PATHS for n, s in PROCEDURE_CALLS],
)
def test_procedures_never_use_objects_of_an_earlier_schema(
    evil_db: Database, path_id: str, name: str, statement: str
) -> None:
    warnings = _call_with_path(evil_db, ALICE, PATHS[path_id], statement)
    assert warnings == []
    assert _calls(evil_db) == []


@pytest.mark.parametrize("path_id", list(PATHS))
def test_superuser_and_runner_calls_never_use_objects_of_an_earlier_schema(
    evil_db: Database, path_id: str
) -> None:
    """timers.unlock and the runner's internals, as the superuser (the runner) with evil first."""
    hits = _run_all(evil_db, None, PATHS[path_id], SUPERUSER_CALLS)
    assert hits == [], "\n".join(hits)
    assert _calls(evil_db) == []


@pytest.mark.parametrize("path_id", list(PATHS))
def test_a_whole_fire_as_the_superuser_never_uses_objects_of_an_earlier_schema(
    evil_db: Database, path_id: str
) -> None:
    """A due timer claimed, run and recorded by timers._fire, as the runner's superuser with
    evil first: the inner routines it calls set no search_path of their own and run under
    _fire's (docs/design.md, Rules)."""
    due_now = (
        "UPDATE timers.timers SET next_due_at = pg_catalog.now()"
        " WHERE name OPERATOR(pg_catalog.=) 't0';"
        " SELECT timers._fire('r', '{}', '{}', false, 600000)"
    )
    hits = _call_with_path(evil_db, None, PATHS[path_id], due_now)
    assert hits == [], "\n".join(hits)
    assert _calls(evil_db) == []
    with evil_db.connect() as su:
        row = su.execute("SELECT runs, last_ok FROM timers.timers WHERE name = 't0'").fetchone()
    assert row == (1, True)  # it ran: the battery is not vacuous


def test_the_evil_objects_work(evil_db: Database) -> None:
    """The battery is not vacuous: the same objects are picked up by unqualified SQL."""
    warnings = _call_with_path(
        evil_db,
        ALICE,
        PATHS["evil-before-pg_catalog"],
        "SELECT lower('X'), now(), 'a' = 'b', 2.5::float8 * 2, jsonb_build_object('a', 'b')",
    )
    assert len(warnings) == 5
    warnings = _call_with_path(evil_db, ALICE, PATHS["evil-first"], "SELECT 2.5::float8 * 2")
    assert len(warnings) == 1


def test_every_security_definer_function_pins_search_path(db: Database) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")  # makes an executor
    with db.connect() as su:
        rows = su.execute(
            "SELECT p.oid::regprocedure::text, p.proconfig FROM pg_proc p"
            " WHERE p.prosecdef"
            "   AND p.pronamespace IN ('timers'::regnamespace, 'timers_exec'::regnamespace)"
        ).fetchall()
    assert len(rows) > 10
    unpinned = [r for r in rows if not any(c.startswith("search_path=") for c in (r[1] or []))]
    assert unpinned == []


def test_internal_security_definer_functions_pin_pg_catalog_first_and_pg_temp_last(
    db: Database,
) -> None:
    with db.connect() as su:
        rows = su.execute(
            "SELECT p.oid::regprocedure::text, c FROM pg_proc p, unnest(p.proconfig) c"
            " WHERE p.prosecdef AND p.pronamespace = 'timers'::regnamespace"
            "   AND c LIKE 'search_path=%'"
        ).fetchall()
    assert rows
    assert {r[1] for r in rows} == {"search_path=pg_catalog, pg_temp"}


def test_executors_put_pg_temp_last(db: Database) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
    with db.connect() as su:
        rows = su.execute(
            "SELECT c FROM pg_proc p, unnest(p.proconfig) c"
            " WHERE p.pronamespace = 'timers_exec'::regnamespace AND c LIKE 'search_path=%'"
        ).fetchall()
    assert rows
    for (config,) in rows:
        assert config.replace(" ", "").endswith(",pg_temp"), config


def test_functions_in_views_are_bound_when_the_view_is_made(evil_db: Database) -> None:
    """Selecting from the views with evil first runs nothing of evil (also as a reader)."""
    for role in (ALICE, "pgt_reader"):
        for view in ("status", "recent_runs", "trouble", "runs", "audit"):
            for path in PATHS.values():
                assert _call_with_path(evil_db, role, path, f"SELECT * FROM timers.{view}") == []
    assert _calls(evil_db) == []
