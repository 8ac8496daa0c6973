"""What the pg_cron import trusts: pg_cron's own table, and nothing else.

A job's `username` is the role its timer runs as, and a superuser may act as every role,
so for a superuser's import the rows alone decide whose timers these become. A role with
CREATE on a database can make a schema `cron` with a table `cron.job` listing any
username (or a view whose functions run as whoever reads it). The import reads jobs only
from the table of the extension pg_cron, owned by the extension's owner, where pg_cron
lets a role that is not a superuser add jobs of its own only; it refuses anything else
before reading a row, in SQL (timers.import_pg_cron) and in `pgtimers import-pg-cron
--cron-dsn`, whose connection also looks nothing up in schemas others write to. Rows a
caller passes itself (timers.import_pg_cron_jobs) become timers only of roles the caller
could SET ROLE to, and every dry run shows each job's username and command.

The tests of the real extension run on a cluster that loads pg_cron (tests/pg_cron.py) and
skip where pg_cron is not installed; the others run on every test server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors
from psycopg import sql as pgsql
from psycopg.rows import dict_row

from pgtimers.cli.pg_cron_import import report
from tests.conftest import Database, scalar
from tests.pg_cron import PgCron
from tests.security.helpers import BOB, connect, fingerprint, fresh_role


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgtimers", "import-pg-cron", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def is_superuser(conn: psycopg.Connection, role: str) -> bool:
    return bool(scalar(conn, "SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role]))


# reading the view calls it: it counts its calls in a sequence (which no rollback undoes)
STEAL = pgsql.SQL(
    "CREATE FUNCTION cron.steal() RETURNS text LANGUAGE plpgsql AS $f$"
    " BEGIN PERFORM nextval('cron.reads'); EXECUTE {}; RETURN 'x'; END $f$"
)


def fake_cron_job(conn: psycopg.Connection, kind: str, username: str, command: str) -> None:
    """A schema cron with a relation cron.job of pg_cron's columns, made by conn's role: a
    table with one job, or a view whose reading calls cron.steal(), which makes that role
    a superuser when a superuser reads it."""
    conn.execute("CREATE SCHEMA cron")
    conn.execute("GRANT USAGE ON SCHEMA cron TO PUBLIC")
    if kind == "table":
        conn.execute(
            "CREATE TABLE cron.job (jobid bigint PRIMARY KEY, schedule text, command text,"
            " nodename text, nodeport int, database text, username text, active boolean,"
            " jobname name)"
        )
        conn.execute(
            "INSERT INTO cron.job VALUES (1, '@daily', %s, 'localhost', NULL, NULL, %s, true,"
            " 'nightly')",
            [command, username],
        )
    else:
        me = scalar(conn, "SELECT current_user")
        conn.execute("CREATE SEQUENCE cron.reads")
        conn.execute("GRANT USAGE ON SEQUENCE cron.reads TO PUBLIC")
        conn.execute(STEAL.format(pgsql.Literal(f'ALTER ROLE "{me}" SUPERUSER')))
        conn.execute(
            pgsql.SQL(
                "CREATE VIEW cron.job AS SELECT 1::bigint AS jobid, '@daily'::text AS schedule,"
                " {}::text AS command, {}::text AS username, cron.steal() AS jobname"
            ).format(pgsql.Literal(command), pgsql.Literal(username))
        )
    conn.execute("GRANT SELECT ON cron.job TO PUBLIC")


@pytest.fixture
def mallory(db: Database) -> Iterator[str]:
    """A plain role with CREATE on the test's database (and nothing of pgtimers)."""
    with fresh_role(db, prefix="pgt_mallory") as name:
        with db.server.admin() as su:
            su.execute(
                pgsql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                    pgsql.Identifier(db.name), pgsql.Identifier(name)
                )
            )
        yield name


# --- a cron.job that is not pg_cron's: refused before a row is read, on every server ---


@pytest.mark.parametrize("kind", ["table", "view"])
def test_a_cron_job_of_a_plain_role_is_refused_and_never_read(
    db: Database, mallory: str, kind: str
) -> None:
    with connect(db) as su:
        superuser = scalar(su, "SELECT current_user")
    with connect(db, mallory) as m:
        fake_cron_job(m, kind, superuser, f'ALTER ROLE "{mallory}" SUPERUSER')
    before = fingerprint(db)
    with connect(db) as su:
        for dry_run in (True, False):
            with pytest.raises(errors.InsufficientPrivilege) as caught:
                su.execute("SELECT * FROM timers.import_pg_cron(%s)", [dry_run])
            assert caught.value.diag.message_primary == (
                f"cron.job in database {db.name} is not pg_cron's own table: the extension"
                f" pg_cron is not installed here, and cron.job is a {kind} of role {mallory}"
            )
            assert "import_pg_cron_jobs" in (caught.value.diag.message_hint or "")
        assert not is_superuser(su, mallory)
        if kind == "view":  # its function never ran, not even in a rolled back read
            assert scalar(su, "SELECT is_called FROM cron.reads") is False
    assert fingerprint(db) == before


def test_a_cron_job_a_superuser_made_by_hand_is_not_pg_crons_either(db: Database) -> None:
    with connect(db) as su:
        superuser = scalar(su, "SELECT current_user")
        fake_cron_job(su, "table", superuser, "SELECT 1")
        before = fingerprint(db)
        with pytest.raises(errors.InsufficientPrivilege, match="is not pg_cron's own table"):
            su.execute("SELECT * FROM timers.import_pg_cron(false)")
    assert fingerprint(db) == before


def test_the_cli_refuses_a_cron_database_whose_cron_job_is_not_pg_crons(
    db: Database, empty_db: Database
) -> None:
    # --cron-dsn: a database without pgtimers where a plain role made cron.job (a view)
    with fresh_role(db, prefix="pgt_mallory") as name, db.server.admin() as admin:
        admin.execute(
            pgsql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                pgsql.Identifier(empty_db.name), pgsql.Identifier(name)
            )
        )
        try:
            with empty_db.connect(name) as m:
                fake_cron_job(m, "view", "postgres", f'ALTER ROLE "{name}" SUPERUSER')
            before = fingerprint(db)
            for extra in ([], ["--apply"]):
                done = cli("--dsn", db.dsn, "--cron-dsn", empty_db.dsn, *extra)
                assert done.returncode == 2, done.stdout
                assert (
                    f"cron.job in database {empty_db.name} (--cron-dsn) is not pg_cron's own"
                    f" table: the extension pg_cron is not installed here, and cron.job is a"
                    f" view of role {name}"
                ) in done.stderr
                assert done.stdout == ""
            assert not is_superuser(admin, name)
            with empty_db.connect() as su:
                assert scalar(su, "SELECT is_called FROM cron.reads") is False
            assert fingerprint(db) == before
        finally:
            with empty_db.connect() as su:
                su.execute("DROP SCHEMA IF EXISTS cron CASCADE")
                su.execute(
                    pgsql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(
                        pgsql.Identifier(empty_db.name), pgsql.Identifier(name)
                    )
                )


# --- rows a caller passes: its own to check, and imported only as roles it may act as ---


def test_every_row_shows_the_username_and_command_it_would_run(db: Database) -> None:
    jobs = [
        {"jobid": 1, "schedule": "@daily", "command": "SELECT 42", "username": "pgt_alice"},
        {"jobid": 2, "schedule": "@daily", "command": "DELETE FROM t", "username": "no_one_x"},
        {"jobid": 3, "schedule": "@reboot", "command": "SELECT 3"},
    ]
    with connect(db) as su, su.cursor(row_factory=dict_row) as cur:
        me = scalar(su, "SELECT current_user")
        rows = cur.execute(
            "SELECT * FROM timers.import_pg_cron_jobs(%s::jsonb)", [json.dumps(jobs)]
        ).fetchall()
    assert [(r["jobid"], r["action"], r["username"], r["command"]) for r in rows] == [
        (1, "would import", "pgt_alice", "SELECT 42"),
        (2, "cannot import", "no_one_x", "DELETE FROM t"),
        (3, "cannot import", me, "SELECT 3"),
    ]


def test_an_admin_cannot_import_a_job_as_a_role_it_cannot_act_as(db: Database) -> None:
    with connect(db) as su:
        superuser = scalar(su, "SELECT current_user")
    jobs = [
        {"jobid": 1, "schedule": "@daily", "command": "SELECT 1", "username": superuser},
        {"jobid": 2, "schedule": "@daily", "command": "SELECT 2", "username": "pgt_alice"},
    ]
    before = fingerprint(db)
    with connect(db, BOB) as bob, bob.cursor(row_factory=dict_row) as cur:
        for dry_run in (True, False):
            rows = cur.execute(
                "SELECT * FROM timers.import_pg_cron_jobs(%s::jsonb, %s)",
                [json.dumps(jobs), dry_run],
            ).fetchall()
            assert [r["action"] for r in rows] == ["cannot import", "cannot import"]
            assert f'role "{BOB}" cannot act as the job\'s role "{superuser}"' in rows[0]["reason"]
            assert f'role "{BOB}" cannot act as the job\'s role "pgt_alice"' in rows[1]["reason"]
        assert scalar(bob, "SELECT current_user") == BOB
    assert fingerprint(db) == before


def test_the_cli_report_shows_each_role_and_command_in_full() -> None:
    long = "SELECT " + ", ".join(str(n) for n in range(40)) + "\n  FROM t\x1b[2J\u2028"
    rows = [
        {
            "jobid": 7,
            "jobname": "nightly",
            "timer": "nightly",
            "schedule": "@daily",
            "action": "would import",
            "reason": None,
            "username": "postgres",
            "command": long,
        }
    ]
    text = report(rows, apply=False)
    assert "postgres" in text.splitlines()[2]  # the table's row names the role
    assert "  job 7 (nightly), as postgres:" in text
    assert "    SELECT 0, 1, 2, " + ", ".join(str(n) for n in range(3, 40)) in text
    assert "    FROM t\\u001b[2J\\u2028" in text  # nothing of it reaches the terminal as is
    assert "\x1b" not in text and "\u2028" not in text


# --- the real pg_cron (a cluster that loads it; skipped where pg_cron is not installed) ---


def test_pg_crons_own_table_is_imported(pg_cron: PgCron) -> None:
    with pg_cron.connect(user="pgt_alice") as alice:
        alice.execute("SELECT cron.schedule('alices', '@daily', 'SELECT 1')")
    with pg_cron.connect() as su:
        rows = su.execute("SELECT timer, username, command, action FROM timers.import_pg_cron()")
        assert rows.fetchall() == [("alices", "pgt_alice", "SELECT 1", "would import")]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            "ALTER TABLE cron.job OWNER TO pgt_alice",
            "it is owned by role pgt_alice, and the extension pg_cron by role postgres",
        ),
        (
            "ALTER EXTENSION pg_cron DROP TABLE cron.job",
            "it is not a member of the extension pg_cron (it is a table of role postgres)",
        ),
    ],
)
def test_pg_crons_table_handed_to_another_role_or_taken_out_is_refused(
    pg_cron: PgCron, change: str, why: str
) -> None:
    with pg_cron.connect(user="pgt_alice") as alice:
        alice.execute("SELECT cron.schedule('alices', '@daily', 'SELECT 1')")
    with pg_cron.connect() as su:
        su.execute(change)
        with pytest.raises(errors.InsufficientPrivilege) as caught:
            su.execute("SELECT * FROM timers.import_pg_cron()")
        assert caught.value.diag.message_primary == (
            f"cron.job in database postgres is not pg_cron's own table: {why}"
        )
    done = cli("--dsn", pg_cron.dsn("app"), "--cron-dsn", pg_cron.dsn(), "--apply")
    assert done.returncode == 2
    assert f"(--cron-dsn) is not pg_cron's own table: {why};" in done.stderr
    with pg_cron.connect("app") as su:
        assert scalar(su, "SELECT count(*) FROM timers.status") == 0


def test_the_cli_looks_nothing_up_in_the_cron_databases_writable_schemas(
    pg_cron: PgCron,
) -> None:
    # A role that may create in schema public of pg_cron's database (PostgreSQL before 15
    # lets every role) defines a to_jsonb for cron.job rows, a better match than the
    # built-in: it would forge a job of postgres and make itself a superuser as it ran.
    with pg_cron.connect() as su:
        su.execute("GRANT CREATE ON SCHEMA public TO pgt_nobody")
        su.execute("GRANT USAGE ON SCHEMA cron TO pgt_nobody")
    try:
        with pg_cron.connect(user="pgt_nobody") as nobody:
            nobody.execute(
                "CREATE FUNCTION public.to_jsonb(j cron.job) RETURNS jsonb LANGUAGE plpgsql AS $f$"
                " BEGIN EXECUTE 'ALTER ROLE pgt_nobody SUPERUSER';"
                ' RETURN \'{"jobid": 99, "schedule": "@daily", "command": "SELECT 99",'
                ' "username": "postgres", "jobname": "forged"}\'::jsonb; END $f$'
            )
        with pg_cron.connect() as su:
            su.execute("SELECT cron.schedule('real', '@daily', 'SELECT 1')")
        done = cli("--dsn", pg_cron.dsn("app"), "--cron-dsn", pg_cron.dsn(), "--json")
        assert [(r["timer"], r["username"]) for r in json.loads(done.stdout)] == [
            ("real", "postgres")
        ]
        with pg_cron.connect() as su:
            assert not is_superuser(su, "pgt_nobody")
    finally:
        with pg_cron.connect() as su:
            su.execute("ALTER ROLE pgt_nobody NOSUPERUSER")
            su.execute("DROP FUNCTION IF EXISTS public.to_jsonb(cron.job)")
            su.execute("REVOKE CREATE ON SCHEMA public FROM pgt_nobody")
            su.execute("REVOKE USAGE ON SCHEMA cron FROM pgt_nobody")
