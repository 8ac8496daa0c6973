"""timers.import_pg_cron and `pgtimers import-pg-cron`: pg_cron's jobs become timers.

pg_cron needs shared_preload_libraries, so most tests make a table with pg_cron's
columns and pass its rows to timers.import_pg_cron_jobs (what the CLI does with the rows
of --cron-dsn): the mapping of a job to a timer is the same for both. timers.import_pg_cron
reads only pg_cron's own table, so the tests of it and of the CLI use the real extension
on a cluster of their own (tests/pg_cron.py); what it refuses is in
tests/security/test_pg_cron_import_trust.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.rows import dict_row

from tests.conftest import Database, scalar
from tests.pg_cron import PgCron

# pg_cron 1.4's table (1.0's columns, plus active in 1.1 and jobname in 1.3), as a plain
# table of the test's own: import_pg_cron refuses it, import_pg_cron_jobs takes its rows
CRON_JOB = """
    CREATE SCHEMA cron;
    CREATE TABLE cron.job (
        jobid bigint PRIMARY KEY,
        schedule text NOT NULL,
        command text NOT NULL,
        nodename text NOT NULL DEFAULT 'localhost',
        nodeport int NOT NULL DEFAULT current_setting('port')::int,
        database text NOT NULL DEFAULT current_database(),
        username text NOT NULL DEFAULT current_user,
        active boolean NOT NULL DEFAULT true,
        jobname name);
    GRANT USAGE ON SCHEMA cron TO PUBLIC;
    GRANT SELECT ON cron.job TO PUBLIC;
"""


def add_job(conn: psycopg.Connection, jobid: int, schedule: str, command: str, **more: Any) -> None:
    columns = ["jobid", "schedule", "command", *more]
    conn.execute(
        f"INSERT INTO cron.job ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
        [jobid, schedule, command, *more.values()],
    )


def imported(
    conn: psycopg.Connection, dry_run: bool = True, run_group: str | None = None
) -> dict[int, dict[str, Any]]:
    """The import of the rows of the test's cron.job (those this role may read)."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            "SELECT * FROM timers.import_pg_cron_jobs((SELECT coalesce(jsonb_agg(to_jsonb(j)"
            " ORDER BY j.jobid), '[]') FROM cron.job j), %s, run_group => %s)",
            [dry_run, run_group],
        ).fetchall()
    return {r["jobid"]: r for r in rows}


def imported_here(conn: psycopg.Connection, dry_run: bool = True) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM timers.import_pg_cron(%s)", [dry_run]).fetchall()


def timers_now(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT name, schedule, sql, enabled, created_by, timezone FROM timers.status ORDER BY name"
    ).fetchall()


@pytest.fixture
def cron(conn: psycopg.Connection) -> psycopg.Connection:
    """The test database's superuser connection, with an empty cron.job."""
    conn.execute(CRON_JOB)
    return conn


def test_a_dry_run_reports_and_changes_nothing(cron: psycopg.Connection) -> None:
    add_job(cron, 1, "*/5 * * * *", "SELECT 1", jobname="five")
    add_job(cron, 2, "30 seconds", "SELECT 2", active=False)
    audit = scalar(cron, "SELECT count(*) FROM timers.audit")
    rows = imported(cron)
    assert {k: (r["timer"], r["schedule"], r["action"]) for k, r in rows.items()} == {
        1: ("five", "cron */5 * * * *", "would import"),
        2: ("pg_cron_2", "every 30s", "would import"),
    }
    assert timers_now(cron) == []
    assert scalar(cron, "SELECT count(*) FROM timers.audit") == audit
    assert imported(cron) == rows  # and again: the dry run left nothing behind


def test_apply_saves_each_job_as_a_timer_of_its_role(cron: psycopg.Connection) -> None:
    add_job(cron, 1, "*/5 * * * *", "SELECT 1", jobname="five", username="pgt_alice")
    add_job(cron, 2, "30 seconds", "SELECT 2", active=False)
    add_job(cron, 3, "@daily", "SELECT 3", jobname="my job")
    me = scalar(cron, "SELECT current_user")
    rows = imported(cron, dry_run=False)
    assert [r["action"] for r in rows.values()] == ["imported"] * 3
    assert rows[3]["timer"] == "my_job" and "not a timer name" in rows[3]["reason"]
    assert timers_now(cron) == [
        ("five", "cron */5 * * * *", "SELECT 1", True, "pgt_alice", "UTC"),
        ("my_job", "@daily", "SELECT 3", True, me, "UTC"),
        ("pg_cron_2", "every 30s", "SELECT 2", False, me, "UTC"),
    ]
    # the caller is itself again, and each save is audited in its owner's name
    assert cron.execute("SELECT current_user = session_user").fetchone() == (True,)
    actors = cron.execute("SELECT object, actor FROM timers.audit ORDER BY id").fetchall()
    assert ("five", "pgt_alice") in actors
    # again: nothing to do
    again = imported(cron, dry_run=False)
    assert [r["action"] for r in again.values()] == ["already imported"] * 3


def test_jobs_are_imported_into_a_run_group_but_an_autonomous_one(
    cron: psycopg.Connection,
) -> None:
    cron.execute("SELECT timers.set_group('from_pg_cron', max_running => 4)")
    add_job(cron, 1, "*/5 * * * *", "SELECT 1", jobname="five")
    add_job(cron, 2, "@daily", "VACUUM", jobname="vac")
    rows = imported(cron, dry_run=False, run_group="from_pg_cron")
    assert [r["action"] for r in rows.values()] == ["imported", "imported"]
    assert "not in run group from_pg_cron" in rows[2]["reason"]
    groups = cron.execute("SELECT name, run_group FROM timers.status ORDER BY name").fetchall()
    assert groups == [("five", "from_pg_cron"), ("vac", None)]
    # the group keeps the limit it was given
    limit = "SELECT max_running FROM timers.run_groups WHERE name = 'from_pg_cron'"
    assert scalar(cron, limit) == 4
    again = imported(cron, dry_run=False, run_group="from_pg_cron")
    assert [r["action"] for r in again.values()] == ["already imported"] * 2
    # in another group (or none) a job imported already is not the same timer: never changed
    other = imported(cron, dry_run=False, run_group=None)
    assert other[1]["action"] == "cannot import" and "run group" in other[1]["reason"]
    assert other[2]["action"] == "already imported"
    assert scalar(cron, "SELECT run_group FROM timers.timers WHERE name = 'five'") == "from_pg_cron"


def test_a_bad_run_group_is_refused_before_any_job(cron: psycopg.Connection) -> None:
    add_job(cron, 1, "*/5 * * * *", "SELECT 1", jobname="five")
    with pytest.raises(errors.InvalidParameterValue, match="bad run group name"):
        imported(cron, dry_run=False, run_group="no spaces")
    assert timers_now(cron) == []


def test_jobs_that_cannot_be_mapped_are_reported_and_left_alone(cron: psycopg.Connection) -> None:
    add_job(cron, 1, "0 12 $ * *", "CALL payroll()", jobname="payroll")
    add_job(cron, 2, "@reboot", "SELECT 2")
    add_job(cron, 3, "0 3 * * *", "VACUUM", jobname="vac")
    add_job(cron, 4, "0 3 * * *", "SELECT 4", database="elsewhere")
    add_job(cron, 5, "0 3 * * *", "SELECT 5", nodename="db2.example.com")
    add_job(cron, 6, "0 3 * * *", "SELECT 6", nodeport=1)
    add_job(cron, 7, "0 3 * * *", "SELECT 7", username="no_such_role_here")
    add_job(cron, 8, "0 3 * * *", "SELECT 8", username="pgt_nobody")
    add_job(cron, 9, "0 3 * * *", "SELEC 9")
    add_job(cron, 10, "0 0 * * * *", "SELECT 10")
    add_job(cron, 11, "0 4 * * *", "SELECT 11", jobname="ok")
    rows = imported(cron, dry_run=False)
    reasons = {k: r["reason"] for k, r in rows.items() if r["action"] == "cannot import"}
    expected = {
        2: "pgtimers has no @reboot",
        4: "the job runs in database elsewhere: import it into that database",
        5: "the job runs on host db2.example.com, not on this server",
        6: "the job runs on port 1, and this server listens on",
        7: "the job's role no_such_role_here does not exist",
        8: "the job's role pgt_nobody may not save timers: it needs the role pgtimers_admin",
        9: "the timer's SQL does not parse",
        10: "a cron schedule has 5 fields",
    }
    assert set(reasons) == set(expected)
    for jobid, part in expected.items():
        assert part in reasons[jobid], (jobid, reasons[jobid])
    assert "GRANT pgtimers_admin TO pgt_nobody;" in reasons[8]
    assert "use a schedule like" not in reasons[10]
    # pg_cron's '$' (the last day of the month) is cron's L
    assert (rows[1]["action"], rows[1]["schedule"]) == ("imported", "cron 0 12 $ * *")
    assert rows[11]["action"] == "imported"
    # VACUUM, and a procedure that may commit, run as pg_cron ran them: autonomous
    assert rows[3]["action"] == "imported" and "autonomous" in rows[3]["reason"]
    assert "autonomous" in rows[1]["reason"]
    assert [t[0] for t in timers_now(cron)] == ["ok", "payroll", "vac"]


def test_a_timer_of_the_same_name_is_never_replaced(cron: psycopg.Connection) -> None:
    cron.execute("SELECT timers.save('nightly', 'daily 02:00', 'SELECT 0')")
    add_job(cron, 1, "0 2 * * *", "SELECT 1", jobname="nightly")
    add_job(cron, 2, "0 2 * * *", "SELECT 2", jobname="Twice", username="pgt_alice")
    add_job(cron, 3, "0 2 * * *", "SELECT 3", jobname="twice", username="pgt_bob")
    rows = imported(cron, dry_run=False)
    assert rows[1]["action"] == "cannot import"
    assert "a timer named nightly already exists" in rows[1]["reason"]
    assert rows[2]["action"] == "imported"
    assert rows[3]["action"] == "cannot import"
    assert "job 2 of this import takes the name twice already" in rows[3]["reason"]
    assert ("nightly", "daily 02:00", "SELECT 0") in [t[:3] for t in timers_now(cron)]


def test_schedules_are_read_in_pg_crons_zone(cron: psycopg.Connection) -> None:
    add_job(cron, 1, "0 9 * * *", "SELECT 1", jobname="nine")
    cron.execute("SET cron.timezone = 'asia/kathmandu'")
    rows = imported(cron, dry_run=False)
    assert rows[1]["action"] == "imported"
    assert timers_now(cron)[0][5] == "Asia/Kathmandu"
    row = cron.execute(
        "SELECT * FROM timers.import_pg_cron_jobs("
        """'[{"jobid": 5, "schedule": "0 9 * * *", "command": "SELECT 5", "jobname": "five"}]',"""
        " false, timezone => 'America/New_York')"
    ).fetchone()
    assert row is not None and row[4] == "imported"
    zone = scalar(cron, "SELECT timezone FROM timers.status WHERE name = 'five'")
    assert zone == "America/New_York"


def test_an_admin_imports_its_own_jobs_not_another_roles(db: Database) -> None:
    with db.connect() as su:
        su.execute(CRON_JOB)
        add_job(su, 1, "0 1 * * *", "SELECT 1", jobname="bobs", username="pgt_bob")
        add_job(su, 2, "0 1 * * *", "SELECT 2", jobname="alices", username="pgt_alice")
    with db.connect("pgt_bob") as bob:
        rows = imported(bob, dry_run=False)
        assert bob.execute("SELECT current_user").fetchone() == ("pgt_bob",)
    assert rows[1]["action"] == "imported"
    assert rows[2]["action"] == "cannot import"
    assert 'role "pgt_bob" cannot act as the job\'s role "pgt_alice"' in rows[2]["reason"]
    assert "GRANT pgt_alice TO pgt_bob" in rows[2]["reason"]
    with db.connect() as su:
        assert [t[0] for t in timers_now(su)] == ["bobs"]


def test_readers_may_not_import(db: Database) -> None:
    with db.connect() as su:
        su.execute(CRON_JOB)
        add_job(su, 1, "0 1 * * *", "SELECT 1", username="pgt_reader")
    with db.connect("pgt_reader") as reader:
        for call in (
            "SELECT * FROM timers.import_pg_cron(false)",
            "SELECT * FROM timers.import_pg_cron_jobs('[]', false)",
        ):
            with pytest.raises(errors.InsufficientPrivilege, match="needs the role pgtimers_admin"):
                reader.execute(call)


def test_without_pg_cron_the_error_says_so(conn: psycopg.Connection) -> None:
    with pytest.raises(errors.UndefinedTable) as caught:
        conn.execute("SELECT * FROM timers.import_pg_cron()")
    assert caught.value.diag.message_primary == (
        f"pg_cron is not installed in database {conn.info.dbname}: there is no table cron.job"
    )
    assert "cron.database_name" in (caught.value.diag.message_hint or "")


@pytest.mark.parametrize(
    ("jobs", "message"),
    [
        ("null", "jobs must be a JSON array of cron.job rows, not null"),
        ('{"jobid": 1}', "jobs must be a JSON array of cron.job rows, not object"),
        ('[{"schedule": "* * * * *"}]', "each job must be a cron.job row with a jobid"),
    ],
)
def test_bad_jobs_are_refused(conn: psycopg.Connection, jobs: str, message: str) -> None:
    with pytest.raises(errors.InvalidParameterValue, match=message):
        conn.execute("SELECT * FROM timers.import_pg_cron_jobs(%s::jsonb)", [jobs])


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgtimers", "import-pg-cron", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_cli_says_what_is_missing(db: Database, empty_db: Database) -> None:
    missing = cli("--dsn", db.dsn, "--cron-dsn", db.dsn)
    assert missing.returncode == 2
    assert f"pg_cron is not installed in database {db.name} (--cron-dsn)" in missing.stderr
    not_installed = cli("--dsn", empty_db.dsn)
    assert not_installed.returncode == 2
    assert "pgtimers is not installed in the --dsn database" in not_installed.stderr


# --- the real pg_cron (a cluster that loads it; skipped where pg_cron is not installed) ---


def test_the_real_pg_cron_jobs_of_each_role_become_its_timers(pg_cron: PgCron) -> None:
    with pg_cron.connect(user="pgt_alice") as alice:
        alice.execute("SELECT cron.schedule('alices', '0 6 * * mon-fri', 'SELECT 2')")
    with pg_cron.connect() as su:
        su.execute("SELECT cron.schedule('real-five', '*/5 * * * *', 'SELECT 1')")
        su.execute("SELECT cron.schedule('@hourly', 'SELECT 3')")
        dry = imported_here(su)
        assert [(r["timer"], r["username"], r["command"], r["action"]) for r in dry] == [
            ("alices", "pgt_alice", "SELECT 2", "would import"),
            ("real-five", "postgres", "SELECT 1", "would import"),
            (f"pg_cron_{dry[2]['jobid']}", "postgres", "SELECT 3", "would import"),
        ]
        assert timers_now(su) == []
        done = imported_here(su, dry_run=False)
        assert [r["action"] for r in done] == ["imported"] * 3
        assert [(t[0], t[1], t[4]) for t in timers_now(su)] == [
            ("alices", "cron 0 6 * * mon-fri", "pgt_alice"),
            (dry[2]["timer"], "@hourly", "postgres"),
            ("real-five", "cron */5 * * * *", "postgres"),
        ]
    # an admin sees its own jobs only (pg_cron's row-level security): all it may import
    with pg_cron.connect(user="pgt_bob") as bob:
        bob.execute("SELECT cron.schedule('bobs', '@daily', 'SELECT 4')")
        rows = imported_here(bob, dry_run=False)
        assert [(r["timer"], r["username"], r["action"]) for r in rows] == [
            ("bobs", "pgt_bob", "imported")
        ]


def test_cli_dry_run_then_apply(pg_cron: PgCron) -> None:
    with pg_cron.connect() as su:
        su.execute("SELECT cron.schedule('five', '*/5 * * * *', 'SELECT 1')")
        su.execute("SELECT cron.schedule('restart', '@reboot', 'SELECT 2')")
    dry = cli("--dsn", pg_cron.dsn())
    assert dry.returncode == 2, dry.stderr  # a job cannot be imported
    assert "would import" in dry.stdout and "cannot import" in dry.stdout
    assert "(restart): pgtimers has no @reboot" in dry.stdout
    assert "dry run: nothing changed; run again with --apply to import" in dry.stdout
    with pg_cron.connect() as su:
        assert timers_now(su) == []
    done = cli("--dsn", pg_cron.dsn(), "--apply", "--json", "--run-group", "from_pg_cron")
    assert done.returncode == 2, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["timer"], r["action"], r["username"], r["command"]) for r in rows] == [
        ("five", "imported", "postgres", "SELECT 1"),
        ("restart", "cannot import", "postgres", "SELECT 2"),
    ]
    with pg_cron.connect() as su:
        assert [t[0] for t in timers_now(su)] == ["five"]
        group = "SELECT run_group FROM timers.timers WHERE name = 'five'"
        assert scalar(su, group) == "from_pg_cron"


def test_cli_reads_the_jobs_from_pg_crons_database(pg_cron: PgCron) -> None:
    # pg_cron's database (postgres) lists a job that runs in app, and one that runs there
    with pg_cron.connect() as su:
        su.execute(
            "SELECT cron.schedule_in_database('weekday', '0 6 * * mon-fri', 'SELECT 7', 'app')"
        )
        su.execute("SELECT cron.schedule('there', '0 6 * * *', 'SELECT 8')")
    done = cli("--dsn", pg_cron.dsn("app"), "--cron-dsn", pg_cron.dsn(), "--apply")
    assert done.returncode == 2, done.stderr
    assert "weekday" in done.stdout and "imported" in done.stdout
    assert "the job runs in database postgres" in done.stdout
    assert "unschedule each imported one" in done.stdout
    with pg_cron.connect("app") as su:
        assert [t[:2] for t in timers_now(su)] == [("weekday", "cron 0 6 * * mon-fri")]
