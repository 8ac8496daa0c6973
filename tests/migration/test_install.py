"""Install and upgrade: a fresh install equals an upgraded older database, by catalog; the
versioned migrations and the repeatable code keep to their kinds; installs are idempotent
and say what they did."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.script import ScriptDirectory

from pgtimers.schema.install import alembic_config, current_revision, install, upgrade
from tests.catalog import snapshot
from tests.conftest import HEAD_REVISION, PREVIOUS_REVISION, Database, scalar
from tests.sqltext import statements

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = ROOT / "sql" / "migrations"
CODE = ROOT / "sql" / "code"
TABLES = ("timers", "audit", "calendars", "calendar_days", "test_clocks", "keyed_timers")
FIXTURE_0013 = Path(__file__).resolve().parent / "fixtures" / "pgtimers_0013.sql"

# What each kind of file may create (the first words of its statements).
CODE_ONLY = re.compile(
    r"^\s*(CREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE|VIEW|TRIGGER)|COMMENT\s+ON|GRANT|REVOKE)\b",
    re.I | re.M,
)
VERSIONED_ONLY = re.compile(
    r"^\s*(CREATE\s+(UNIQUE\s+)?(TABLE|INDEX|SCHEMA|ROLE|POLICY)|ALTER\s+TABLE|DROP\s+(TABLE|INDEX))\b",
    re.I | re.M,
)
DEFINITION = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE|VIEW)\s+(timers\.\w+)", re.I | re.M
)
TRIGGER = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\s+(\w+)\s.*?\sON\s+(\S+)", re.I | re.M | re.S
)


def _revisions() -> list[str]:
    script = ScriptDirectory.from_config(alembic_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def _code_text() -> str:
    return "\n".join(p.read_text() for p in sorted(CODE.glob("*.sql")))


def _without_bodies(sql: str) -> str:
    """The top-level statements of the SQL, one per line, each cut after its head."""
    return "\n".join(" ".join(s.split())[:400] for s in statements(sql))


def test_each_versioned_file_is_applied_by_its_revision() -> None:
    revisions = _revisions()
    assert revisions == [f"{i:04d}" for i in range(1, len(revisions) + 1)]
    for path in sorted(MIGRATIONS.glob("*.sql")):
        revision = path.name[:4]
        assert revision in revisions, path.name
        module = next((ROOT / "migrations" / "versions").glob(f"{revision}_*.py")).read_text()
        assert f'apply_sql_file("migrations/{path.name}")' in module


def test_versioned_files_and_code_keep_to_their_kinds() -> None:
    for path in sorted(MIGRATIONS.glob("*.sql")):
        found = CODE_ONLY.findall(_without_bodies(path.read_text()))
        assert found == [], f"{path.name} creates code: {found}"
    for path in sorted(CODE.glob("*.sql")):
        found = VERSIONED_ONLY.findall(_without_bodies(path.read_text()))
        assert found == [], f"{path.name} changes tables: {found}"


def test_the_code_defines_each_object_once() -> None:
    code = _without_bodies(_code_text())
    names = [name.lower() for _, name in DEFINITION.findall(code)]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert twice == []
    triggers = [(t.lower(), on.lower()) for t, on in TRIGGER.findall(code)]
    assert len(triggers) == len(set(triggers))
    comments = re.findall(r"^\s*COMMENT ON (\w+(?: \w+)?) ([^\s(]+)", code, re.M)
    assert len(comments) == len(set(comments)), "a comment is set twice"


def test_every_routine_comes_from_the_code(db: Database) -> None:
    """No orphans: the routines of schema timers are exactly those the code defines, and
    timers_exec holds only executors (made by timers._ensure_executor)."""
    defined = {name.lower() for kind, name in DEFINITION.findall(_without_bodies(_code_text()))
               if kind.upper() != "VIEW"}  # fmt: skip
    with db.connect() as conn:
        live = {r[0] for r in conn.execute(
            "SELECT 'timers.' || proname FROM pg_proc WHERE pronamespace = 'timers'::regnamespace"
        )}  # fmt: skip
        executors = conn.execute(
            "SELECT proname FROM pg_proc WHERE pronamespace = 'timers_exec'::regnamespace"
        ).fetchall()
    assert live == defined
    assert all(re.fullmatch(r"as_\d+(_n\d+)?", r[0]) for r in executors)


def _frozen_0013(database: Database) -> None:
    with database.connect() as conn:
        conn.execute(FIXTURE_0013.read_text())
    assert current_revision(database.dsn) == "0013"


def test_fresh_install_equals_an_upgraded_0013_database(db: Database, empty_db: Database) -> None:
    """A database that today's main made (revision 0013, the delta chain) upgrades in place
    to the same catalog as a fresh install: tables, indexes, constraints, routine bodies,
    triggers, rights and comments."""
    _frozen_0013(empty_db)
    done = upgrade(empty_db.dsn)
    assert done.revisions == [f"{i:04d}" for i in range(14, len(_revisions()) + 1)]
    assert done.code is not None
    assert snapshot(empty_db.dsn) == snapshot(db.dsn)


def test_a_0013_databases_timers_survive_the_upgrade_and_work(empty_db: Database) -> None:
    _frozen_0013(empty_db)
    with empty_db.connect() as conn:
        conn.execute("CREATE TABLE public.hits (what text, due text)")
        conn.execute("SELECT timers.save_calendar('nepse', 'sun-thu')")
        conn.execute("SELECT timers.add_holiday('nepse', '2027-01-05', 'a holiday')")
        conn.execute("SELECT timers.create_test_clock('c', '2027-01-04 08:00+00')")
        conn.execute(
            "SELECT timers.save('daily', 'daily 09:00', 'INSERT INTO public.hits"
            " VALUES (''daily'', current_setting(''pgtimers.due_at''))', test_clock => 'c')"
        )
        conn.execute(
            "SELECT timers.save('candles', 'trading nepse 15:05', 'SELECT 1', test_clock => 'c')"
        )
        conn.execute(
            "SELECT timers.arm('job:task:report:2027', '2027-01-04 10:00+00',"
            " 'INSERT INTO public.hits VALUES (''keyed'', current_setting(''pgtimers.due_at''))',"
            " test_clock => 'c')"
        )
        before = {
            t: conn.execute(f"SELECT count(*) FROM timers.{t}").fetchone()
            for t in (
                "timers",
                "audit",
                "calendars",
                "calendar_days",
                "test_clocks",
                "keyed_timers",
            )
        }
    upgrade(empty_db.dsn)
    with empty_db.connect() as conn:
        after = {
            t: conn.execute(f"SELECT count(*) FROM timers.{t}").fetchone()
            for t in (
                "timers",
                "audit",
                "calendars",
                "calendar_days",
                "test_clocks",
                "keyed_timers",
            )
        }
        assert after == before
        # the clock moves on (no runner: downtime), then the runner's own calls run the due times
        conn.execute("CALL timers.advance_test_clock('c', '2027-01-04 10:00+00')")
        row = conn.execute(
            "SELECT timers._run_due(id, next_due_at, 'upgrade-test') FROM timers.timers"
            " WHERE name = 'daily'"
        ).fetchone()
        assert row is not None and row[0]["ok"] is True
        key = conn.execute(
            "SELECT timers._keyed_fire(id, owed_at, 'upgrade-test') FROM timers.keyed_timers"
        ).fetchone()
        assert key is not None and key[0]["ok"] is True
        assert conn.execute("SELECT * FROM public.hits ORDER BY 1").fetchall() == [
            ("daily", "2027-01-04T09:00:00Z"),
            ("keyed", "2027-01-04T10:00:00Z"),
        ]
        candles = conn.execute(
            "SELECT next_run_ms FROM timers.status WHERE name = 'candles'"
        ).fetchone()
        # the clock is at 08:00 on Monday 2027-01-04, a trading day: next is 15:05 that day
        assert candles is not None
        due = conn.execute(
            "SELECT to_timestamp(%s / 1000.0) AT TIME ZONE 'UTC'", [candles[0]]
        ).fetchone()
        assert due is not None and due[0].isoformat() == "2027-01-04T15:05:00"
        assert conn.execute("SELECT timers.is_trading_day('nepse', '2027-01-05')").fetchone() == (
            False,
        )


def test_a_view_of_yours_on_timers_status_stops_0022(db: Database) -> None:
    """0022 re-creates the views built on timers.timers.fire_at: one of the user's on them
    stops it, named, and nothing changes."""
    with db.connect() as conn:
        conn.execute("CREATE VIEW public.mine AS SELECT name FROM timers.status")
        conn.execute("SET search_path = pg_catalog, pg_temp")  # as the install runs it
        with pytest.raises(psycopg.errors.DependentObjectsStillExist) as refused:
            conn.execute((MIGRATIONS / "0022_pinned_names.sql").read_text())
        assert scalar(conn, "SELECT to_regclass('timers.status')::text") == "timers.status"
    assert "view public.mine depends on view timers.status" in str(
        refused.value.diag.message_detail
    )
    assert "create them again" in str(refused.value.diag.message_hint)


def test_install_is_idempotent_and_says_so(db: Database) -> None:
    before = snapshot(db.dsn)
    again = upgrade(db.dsn)
    assert (again.revision, again.revisions, again.code) == (_revisions()[-1], [], None)
    assert again.summary().endswith("up to date, nothing changed")
    assert snapshot(db.dsn) == before


def test_a_changed_code_is_applied_again(db: Database) -> None:
    """The checksum of sql/code/ decides: a database whose recorded code differs gets it."""
    with db.connect() as conn:
        conn.execute("UPDATE timers.installed_code SET checksum = 'older'")
    done = upgrade(db.dsn)
    assert done.revisions == [] and done.code is not None
    assert "applied the code" in done.summary()


def test_a_revision_applied_applies_the_code_too(db: Database, empty_db: Database) -> None:
    """A revision may drop what the code defines (0022 drops the views built on fire_at):
    the code is applied after one even when its checksum is the one recorded last."""
    command.upgrade(alembic_config(empty_db.dsn), PREVIOUS_REVISION)
    with db.connect() as conn:
        checksum = scalar(conn, "SELECT checksum FROM timers.installed_code ORDER BY id DESC")
    with empty_db.connect() as conn:
        conn.execute(
            "INSERT INTO timers.installed_code (checksum, files, revision) VALUES (%s, 0, %s)",
            [checksum, PREVIOUS_REVISION],
        )
    done = upgrade(empty_db.dsn)
    assert done.revisions == [HEAD_REVISION] and done.code == checksum
    assert snapshot(empty_db.dsn) == snapshot(db.dsn)


def test_install_leaves_the_application_alone(empty_db: Database) -> None:
    with empty_db.connect() as conn:
        conn.execute("CREATE TABLE public.alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("INSERT INTO public.alembic_version VALUES ('app_rev_42')")
        conn.execute("CREATE TABLE public.orders (id int PRIMARY KEY, total numeric)")
        conn.execute("INSERT INTO public.orders VALUES (1, 9.5)")
    install(empty_db.dsn)
    install(empty_db.dsn)
    with empty_db.connect() as conn:
        assert conn.execute("SELECT * FROM public.alembic_version").fetchall() == [("app_rev_42",)]
        assert conn.execute("SELECT count(*) FROM public.orders").fetchone() == (1,)
    assert current_revision(empty_db.dsn) == _revisions()[-1]


def test_alembic_command_line_upgrades_from_a_checkout(empty_db: Database, db: Database) -> None:
    env = {**os.environ, "PGTIMERS_DSN": empty_db.dsn}
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(ROOT / "alembic.ini"), "upgrade", "head"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert snapshot(empty_db.dsn) == snapshot(db.dsn)


def test_pgtimers_install_command(empty_db: Database) -> None:
    def run() -> str:
        result = subprocess.run(
            [sys.executable, "-m", "pgtimers", "install", "--dsn", empty_db.dsn],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    last = _revisions()[-1]
    assert run().startswith(f"pgtimers schema at revision {last}: applied migrations 0001-{last}")
    assert run().strip() == f"pgtimers schema at revision {last}: up to date, nothing changed"


def test_partial_install_upgrades_to_head(empty_db: Database, db: Database) -> None:
    """An intermediate revision is tables only; the code comes with the head."""
    command.upgrade(alembic_config(empty_db.dsn), _revisions()[0])
    assert current_revision(empty_db.dsn) == _revisions()[0]
    install(empty_db.dsn)
    assert snapshot(empty_db.dsn) == snapshot(db.dsn)


def test_failed_install_changes_nothing(empty_db: Database) -> None:
    # A database where the schema name is taken by something that is not pgtimers.
    with empty_db.connect() as conn:
        conn.execute("CREATE SCHEMA timers")
        conn.execute("CREATE TABLE timers.timers (x int)")
    with pytest.raises(psycopg.Error):
        install(empty_db.dsn)
    with empty_db.connect() as conn:
        assert conn.execute("SELECT to_regclass('timers.alembic_version')").fetchone() == (None,)
        assert conn.execute("SELECT to_regclass('timers.runs')").fetchone() == (None,)


# The public surface: names users and other tools depend on (../shared/SPEC.md and the
# docs). A routine may gain arguments with defaults; one that goes is a broken promise.
PUBLIC_ROUTINES = {
    "add_holiday(text,date,text)",
    "add_trading_day(text,date,text)",
    "advance_test_clock(text,timestamp with time zone,boolean,jsonb)",
    "arm(text,timestamp with time zone,text,integer,timestamp with time zone,text,text,text,"
    "text,text,timestamp with time zone,text)",
    "cancel(text)",
    "create_test_clock(text,timestamp with time zone)",
    "delete(text,boolean)",
    "delete_test_clock(text)",
    "drop_calendar(text)",
    "drop_old_partitions(regclass,interval)",
    "drop_policy(text)",
    "enable(text,boolean)",
    "hold(text,text)",
    "import_pg_cron(boolean,text)",
    "import_pg_cron_jobs(jsonb,boolean,text,text)",
    "is_trading_day(text,date)",
    "keep_data_for(regclass,interval,text)",
    "list_keyed(text,text,text)",
    "move(text,timestamp with time zone,text)",
    "next_runs(text,integer,timestamp with time zone,text)",
    "remove_day(text,date)",
    "repin(text,text,text)",
    "resume(text)",
    "run(text,jsonb)",
    "save(text,text,text,boolean,text,text,timestamp with time zone,timestamp with time zone,"
    "bigint,interval,boolean,text,integer,interval,integer,interval,integer,interval,boolean,"
    "interval,text,text[],text)",
    "backfill(text,timestamp with time zone,timestamp with time zone)",
    "cancel_backfill(bigint)",
    "save_calendar(text,text,date,date)",
    "set_calendar_week(text,date,text)",
    "set_policy(text,interval,text)",
    "set_group(text,integer)",
    "set_timezone(text)",
    "trading_days(text,date,date)",
    "unlock(text)",
}
PUBLIC_VIEWS = {"backfills", "keyed", "keyed_owners", "recent_runs", "status", "trouble"}


def test_the_public_surface_is_all_there(db: Database) -> None:
    with db.connect() as conn:
        routines = {
            r[0].removeprefix("timers.")
            for r in conn.execute(
                "SELECT p.oid::regprocedure::text FROM pg_proc p"
                " WHERE p.pronamespace = 'timers'::regnamespace AND p.proname !~ '^_'"
            )
        }
        views = {
            r[0]
            for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = 'timers'::regnamespace"
                " AND relkind = 'v'"
            )
        }
    assert routines >= PUBLIC_ROUTINES, sorted(PUBLIC_ROUTINES - routines)
    assert views >= PUBLIC_VIEWS
