"""A timer's SQL cannot leave its transaction, its owner's identity or its database.

Twice over: when the timer is saved (timers._check_sql refuses the statement,
SQLSTATE 42501, naming it), and — because the check only reads statement heads —
at run time, where timers._exec_as(owner, sql), called as a superuser like the
runner does, runs the SQL in the owner's SECURITY DEFINER executor: PostgreSQL
refuses SET ROLE / SET SESSION AUTHORIZATION there (also through set_config(),
DO blocks and functions the owner writes), a function cannot COMMIT or ROLLBACK,
and CREATE DATABASE, ALTER SYSTEM, VACUUM cannot run inside one.

pg_cron's jobs run in a session of their own that may switch identity; its
history of "run as someone else" bugs (citusdata/pg_cron#120, #153, #390,
GreengageDB/greengage#569) is why both layers are tested, and with obfuscations
(case, comments, quoted identifiers, statements after tricky literals).
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Database
from tests.security.helpers import ALICE, audit_count, connect, exec_as, fingerprint, save

# (SQL, the statement the refusal names)
REFUSED_AT_SAVE = [
    # the run's transaction
    ("COMMIT", "COMMIT"),
    ("commit work", "COMMIT"),
    ("COMMIT AND CHAIN", "COMMIT"),
    ("ROLLBACK", "ROLLBACK"),
    ("ABORT", "ABORT"),
    ("END", "END"),
    ("BEGIN", "BEGIN"),
    ("START TRANSACTION ISOLATION LEVEL SERIALIZABLE", "START TRANSACTION"),
    ("SAVEPOINT s", "SAVEPOINT"),
    ("RELEASE SAVEPOINT s", "RELEASE SAVEPOINT"),
    ("ROLLBACK TO SAVEPOINT s", "ROLLBACK TO SAVEPOINT"),
    ("PREPARE TRANSACTION 'x'", "PREPARE TRANSACTION"),
    ("COMMIT PREPARED 'x'", "COMMIT PREPARED"),
    ("ROLLBACK PREPARED 'x'", "ROLLBACK PREPARED"),
    # the owner's identity
    ("SET ROLE postgres", "SET ROLE"),
    ("set role postgres", "SET ROLE"),
    ("SET LOCAL ROLE postgres", "SET ROLE"),
    ("SET SESSION ROLE postgres", "SET ROLE"),
    ('SET "role" TO postgres', "SET ROLE"),
    ('SET "ROLE" = postgres', "SET ROLE"),
    ("SET role=postgres", "SET ROLE"),
    ("RESET ROLE", "RESET ROLE"),
    ("SET SESSION AUTHORIZATION postgres", "SET SESSION AUTHORIZATION"),
    ("SET SESSION AUTHORIZATION DEFAULT", "SET SESSION AUTHORIZATION"),
    ("SET session_authorization = postgres", "SET SESSION AUTHORIZATION"),
    ('SET "session_authorization" TO postgres', "SET SESSION AUTHORIZATION"),
    ("RESET SESSION AUTHORIZATION", "RESET SESSION AUTHORIZATION"),
    ("SET\nSESSION\nAUTHORIZATION\npostgres", "SET SESSION AUTHORIZATION"),
    ("CREATE ROLE evil SUPERUSER", "CREATE ROLE"),
    ("ALTER ROLE pgt_alice SUPERUSER", "ALTER ROLE"),
    ("ALTER USER pgt_alice CREATEROLE", "ALTER USER"),
    ("DROP ROLE pgt_bob", "DROP ROLE"),
    ("GRANT pg_execute_server_program TO pgt_alice", "GRANT of a role"),
    ("REVOKE pgtimers_admin FROM pgt_bob", "REVOKE of a role"),
    # the database
    ("CREATE DATABASE evil", "CREATE DATABASE"),
    ("DROP DATABASE postgres", "DROP DATABASE"),
    ("ALTER DATABASE postgres OWNER TO pgt_alice", "ALTER DATABASE"),
    ("ALTER SYSTEM SET shared_preload_libraries = 'evil'", "ALTER SYSTEM"),
    ("COPY (SELECT 1) TO PROGRAM 'id'", "COPY ... PROGRAM"),
    ("COPY t FROM PROGRAM 'curl http://example.invalid'", "COPY ... PROGRAM"),
    ("COPY (SELECT 1) TO '/tmp/pgt_sec_out'", "COPY ... a file"),
    ("COPY t FROM '/etc/passwd'", "COPY ... a file"),
    ("LOAD 'dblink'", "LOAD"),
    ("CREATE TABLESPACE evil LOCATION '/tmp'", "CREATE TABLESPACE"),
    # the runner's session
    ("DISCARD ALL", "DISCARD"),
    ("RESET ALL", "RESET ALL"),
    ("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", "SET SESSION CHARACTERISTICS"),
    ("LISTEN pgtimers", "LISTEN"),
    ("PREPARE p AS SELECT 1", "PREPARE"),
    # hidden after harmless statements, literals, comments, quoted identifiers
    ("SELECT 1; COMMIT", "COMMIT"),
    ("SELECT 1;COMMIT;SELECT 2", "COMMIT"),
    ("/* x */ COMMIT", "COMMIT"),
    ("-- c\nCOMMIT", "COMMIT"),
    ("SELECT 'a'';'; COMMIT", "COMMIT"),
    ("SELECT E'\\''; COMMIT; --'", "COMMIT"),
    ("SELECT '\\'; COMMIT; --'", "COMMIT"),
    ("SELECT $$;$$; COMMIT", "COMMIT"),
    ("SELECT $a$ $$ ; $a$; SET ROLE postgres", "SET ROLE"),
    ('SELECT "x;" FROM (SELECT 1 AS "x;") s; RESET ROLE', "RESET ROLE"),
    ("SELECT U&'\\0041;'; ROLLBACK", "ROLLBACK"),
    ("/* /* nested */ still comment */ COMMIT", "COMMIT"),
    ("/* /* /* /* four deep */ */ */ */ COMMIT", "COMMIT"),
    ("/*/*/*/*/*/*/*/* eight deep */*/*/*/*/*/*/*/ SET ROLE postgres", "SET ROLE"),
    ("SELECT 1 /* ; */ ; ROLLBACK", "ROLLBACK"),
    ("WITH x AS (SELECT 1) SELECT * FROM x; COMMIT", "COMMIT"),
    ("(SELECT 1); COMMIT", "COMMIT"),
    (
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2; END; COMMIT",
        "COMMIT",
    ),
    ("SELECT $_$ ' $_$; CREATE DATABASE x", "CREATE DATABASE"),
    ("SELECT 1\r\n;\r\nSET SESSION AUTHORIZATION postgres", "SET SESSION AUTHORIZATION"),
]


def _groups(items: list[tuple[str, str]], size: int) -> dict[str, list[tuple[str, str]]]:
    return {
        f"{i + 1}-{min(i + size, len(items))}": items[i : i + size]
        for i in range(0, len(items), size)
    }


SAVE_GROUPS = _groups(REFUSED_AT_SAVE, 12)


@pytest.mark.parametrize("group", list(SAVE_GROUPS))
def test_refused_at_save(db: Database, group: str) -> None:
    """42501 naming the statement and where it is; nothing changed, no audit row."""
    before = fingerprint(db)
    audits = audit_count(db)
    wrong = []
    with connect(db, ALICE) as alice:
        for sql, statement in SAVE_GROUPS[group]:
            try:
                save(alice, "t1", sql)
            except psycopg.Error as exc:
                message = exc.diag.message_primary or ""
                if exc.sqlstate != "42501" or f"may not use {statement}:" not in message:
                    wrong.append(f"{sql!r}: {exc.sqlstate} {message}")
                elif "line " not in message or "column " not in message:
                    wrong.append(f"{sql!r}: no position in {message}")
                continue
            wrong.append(f"{sql!r}: accepted")
    assert wrong == [], "\n".join(wrong)
    assert fingerprint(db) == before
    assert audit_count(db) == audits


ACCEPTED_AT_SAVE = [
    "SELECT 'COMMIT'",
    "SELECT 1 -- COMMIT",
    "SELECT 1 /* SET ROLE postgres */",
    "SELECT $$ROLLBACK$$",
    'SELECT 1 AS "commit"',
    "SELECT 1 AS rollback",
    "SET LOCAL work_mem = '8MB'",
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    "GRANT SELECT ON public.who_ran TO pgt_bob",
    "NOTIFY pgtimers_app, 'x'",
    "ANALYZE public.who_ran",
    "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END",
]


def test_keywords_in_literals_comments_and_names_are_not_refused(db: Database) -> None:
    with db.connect() as su:
        su.execute("CREATE TABLE public.who_ran (who name DEFAULT current_user, note text)")
        su.execute("ALTER TABLE public.who_ran OWNER TO pgt_alice")
    wrong = []
    with connect(db, ALICE) as alice:
        for sql in ACCEPTED_AT_SAVE:
            try:
                save(alice, "t1", sql)
            except psycopg.Error as exc:  # noqa: PERF203 - one probe per SQL, a report of each
                wrong.append(f"{sql!r}: {exc.sqlstate} {exc.diag.message_primary}")
    assert wrong == [], "\n".join(wrong)


# Accepted at save (the check reads statement heads only); PostgreSQL refuses them in the run.
# (SQL, SQLSTATE at run time)
REFUSED_AT_RUN = [
    ("DO $$ BEGIN EXECUTE 'SET ROLE postgres'; END $$", "42501"),
    ("DO $$ BEGIN EXECUTE 'RESET ROLE'; END $$", "42501"),
    ("DO $$ BEGIN EXECUTE 'SET SESSION AUTHORIZATION postgres'; END $$", "42501"),
    ("SELECT set_config('role', 'postgres', false)", "42501"),
    ("SELECT set_config('role', 'none', true)", "42501"),
    ("SELECT set_config('session_authorization', 'postgres', false)", "42501"),
    ("DO $$ BEGIN PERFORM set_config('role', 'postgres', true); END $$", "42501"),
    ("DO $$ BEGIN COMMIT; END $$", "2D000"),
    ("DO $$ BEGIN ROLLBACK; END $$", "2D000"),
    ("DO $$ BEGIN EXECUTE 'COMMIT'; END $$", "0A000"),
    ("DO $$ BEGIN EXECUTE 'SAVEPOINT s'; END $$", "0A000"),
    ("DO $$ BEGIN EXECUTE 'CREATE DATABASE pgt_sec_evil'; END $$", "25001"),
    ("DO $$ BEGIN EXECUTE 'DROP DATABASE postgres'; END $$", "25001"),
    ("DO $$ BEGIN EXECUTE 'ALTER SYSTEM SET work_mem = ''1MB'''; END $$", "25001"),
    ("DO $$ BEGIN EXECUTE 'VACUUM'; END $$", "25001"),
    ("DO $$ BEGIN EXECUTE 'COPY (SELECT 1) TO PROGRAM ''true'''; END $$", "42501"),
    ("DO $$ BEGIN EXECUTE 'COPY (SELECT 1) TO ''/tmp/pgt_sec_out'''; END $$", "42501"),
    ("SELECT pg_read_file('/etc/passwd')", "42501"),
    ("DO $$ BEGIN EXECUTE 'LOAD ''dblink'''; END $$", "42501"),
    ("DO $$ BEGIN EXECUTE 'ALTER ROLE pgt_alice SUPERUSER'; END $$", "42501"),
    ("DO $$ BEGIN EXECUTE 'GRANT pg_read_server_files TO pgt_alice'; END $$", "42501"),
    ("DO $$ BEGIN EXECUTE 'CREATE ROLE pgt_sec_evil SUPERUSER'; END $$", "42501"),
    ("SELECT pg_terminate_backend(pg_backend_pid())", "42501"),
    # functions and procedures the owner wrote
    ("SELECT public.become('postgres')", "42501"),
    ("SELECT public.become_definer('postgres')", "42501"),
    ("SELECT public.become_auth('postgres')", "42501"),
    ("CALL public.committer()", "2D000"),
]


@pytest.fixture
def escape_db(db: Database) -> Database:
    with db.connect() as su:
        su.execute("CREATE TABLE public.who_ran (who name DEFAULT current_user, note text)")
        su.execute("GRANT ALL ON public.who_ran TO PUBLIC")
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
        alice.execute(
            "CREATE FUNCTION public.become(r text) RETURNS void LANGUAGE plpgsql AS $$"
            " BEGIN EXECUTE format('SET ROLE %I', r); END $$"
        )
        alice.execute(
            "CREATE FUNCTION public.become_definer(r text) RETURNS void"
            " LANGUAGE plpgsql SECURITY DEFINER AS $$"
            " BEGIN EXECUTE format('SET ROLE %I', r); END $$"
        )
        alice.execute(
            "CREATE FUNCTION public.become_auth(r text) RETURNS void LANGUAGE plpgsql AS $$"
            " BEGIN PERFORM set_config('session_authorization', r, false); END $$"
        )
        alice.execute(
            "CREATE PROCEDURE public.committer() LANGUAGE plpgsql AS $$"
            " BEGIN INSERT INTO public.who_ran (note) VALUES ('committed'); COMMIT; END $$"
        )
    return db


RUN_GROUPS = _groups(REFUSED_AT_RUN, 7)


@pytest.mark.parametrize("group", list(RUN_GROUPS))
def test_refused_at_run_time(escape_db: Database, group: str) -> None:
    """Accepted at save, refused at run time; the runner's session stays itself; nothing changed."""
    wrong = []
    for sql, sqlstate in RUN_GROUPS[group]:
        full = "INSERT INTO public.who_ran (note) VALUES ('before'); " + sql
        with connect(escape_db, ALICE) as alice:
            save(alice, "t1", full)  # accepted at save
        with connect(escape_db) as runner:
            itself = runner.execute("SELECT current_user, session_user").fetchone()
            try:
                runner.execute("SELECT timers._exec_as('pgt_alice', %s)", [full])
            except psycopg.Error as exc:
                if exc.sqlstate != sqlstate:
                    wrong.append(f"{sql!r}: {exc.sqlstate} {exc.diag.message_primary}")
            else:
                wrong.append(f"{sql!r}: ran")
            # the runner's session is still itself, with no transaction left open by the SQL
            if runner.execute("SELECT current_user, session_user").fetchone() != itself:
                wrong.append(f"{sql!r}: the runner's session changed identity")
            if runner.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                wrong.append(f"{sql!r}: left a transaction open")
    assert wrong == [], "\n".join(wrong)
    with escape_db.connect() as su:
        assert su.execute("SELECT count(*) FROM public.who_ran").fetchone() == (0,)
        assert su.execute(
            "SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = 'pgt_alice'"
        ).fetchone() == (False, False)
        assert su.execute(
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'pgt_sec_evil%'"
        ).fetchone() == (0,)
        assert su.execute(
            "SELECT count(*) FROM pg_roles WHERE rolname = 'pgt_sec_evil'"
        ).fetchone() == (0,)
        row = su.execute(
            "SELECT pg_has_role('pgt_alice', 'pg_read_server_files', 'MEMBER')"
        ).fetchone()
        assert row == (False,)


def test_the_runner_session_is_unchanged_after_a_refused_identity_switch(
    escape_db: Database,
) -> None:
    """Several refused switches in a row on one runner connection: it stays the runner."""
    with connect(escape_db) as runner:
        itself = runner.execute("SELECT current_user, session_user").fetchone()
        for sql in ("RESET ROLE", "SET ROLE pgt_bob", "SET SESSION AUTHORIZATION pgt_bob"):
            with pytest.raises(errors.InsufficientPrivilege, match="security-definer"):
                runner.execute("SELECT timers._exec_as('pgt_alice', %s)", [sql])
            assert runner.execute("SELECT current_user, session_user").fetchone() == itself
        assert exec_as(escape_db, ALICE, "INSERT INTO public.who_ran (note) VALUES ('ok')") == 1
    with escape_db.connect() as su:
        assert su.execute("SELECT who FROM public.who_ran").fetchall() == [("pgt_alice",)]


@pytest.fixture
def dblink_db(escape_db: Database) -> Database:
    with escape_db.connect() as su:
        if not su.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'dblink'").fetchone():
            pytest.skip("dblink is not available on this server")
        su.execute("CREATE EXTENSION dblink")
    return escape_db


def _dblink_sql(db: Database) -> str:
    info = psycopg.conninfo.conninfo_to_dict(db.dsn)
    target = f"dbname={db.name} user=postgres"
    if info.get("host"):
        target += f" host={info['host']}"
    if info.get("port"):
        target += f" port={info['port']}"
    return (
        f"SELECT dblink_exec('{target}', 'INSERT INTO public.who_ran (note) VALUES (''dblink'')')"
    )


def test_dblink_cannot_leave_as_another_role_at_run_time(dblink_db: Database) -> None:
    """dblink refuses a non-superuser connection without a password (SQLSTATE 2F003)."""
    with pytest.raises(psycopg.Error) as caught:
        exec_as(dblink_db, ALICE, _dblink_sql(dblink_db))
    assert caught.value.sqlstate == "2F003", caught.value
    with dblink_db.connect() as su:
        assert su.execute("SELECT count(*) FROM public.who_ran").fetchone() == (0,)


def test_dblink_is_refused_at_save(dblink_db: Database) -> None:
    with connect(dblink_db, ALICE) as alice, pytest.raises(errors.InsufficientPrivilege):
        save(alice, "t1", _dblink_sql(dblink_db))


def test_cursor_with_hold_is_refused_at_save(db: Database) -> None:
    with connect(db, ALICE) as alice, pytest.raises(errors.InsufficientPrivilege):
        save(alice, "t1", "DECLARE c CURSOR WITH HOLD FOR SELECT 1")


# Refused at save beyond statement heads (sql/0012_hardening.sql, timers._sql_scan):
# (SQL, the statement the refusal names)
REFUSED_BEYOND_HEADS = [
    ("DEALLOCATE ALL", "DEALLOCATE"),
    ("SELECT 1; EXECUTE q(1)", "EXECUTE"),
    ("declare c binary no scroll cursor with hold for select 1", "DECLARE ... WITH HOLD"),
    ("SELECT public.dblink_exec('dbname=x', 'SELECT 1')", "dblink_exec()"),
    ('SELECT "public"."dblink_connect" (\'dbname=x\')', "dblink_connect()"),
    ("SELECT * FROM dblink('dbname=x', 'SELECT 1') AS t(a int)", "dblink()"),
    ("SELECT dblink_connect_u /* c */ ('dbname=x')", "dblink_connect_u()"),
    ("SELECT U&\"d\\0062link_exec\"('dbname=x', 'x')", "dblink_exec()"),
    ("SELECT U&\"d!0062link_exec\" UESCAPE '!' ('dbname=x', 'x')", "dblink_exec()"),
    ("DO $$ BEGIN PREPARE p AS SELECT 1; END $$", "PREPARE in a DO block"),
    ("DO $$ BEGIN IF true THEN DEALLOCATE ALL; END IF; END $$", "DEALLOCATE in a DO block"),
    ("DO LANGUAGE plpgsql 'BEGIN DEALLOCATE ALL; END'", "DEALLOCATE in a DO block"),
    ("DO E'BEGIN \\x44EALLOCATE ALL; END'", "DEALLOCATE in a DO block"),
    ("DO U&'BEGIN \\0044EALLOCATE ALL; END'", "DEALLOCATE in a DO block"),
    ("DO 'BEGIN DEALL'\n'OCATE ALL; END'", "DEALLOCATE in a DO block"),
    ("DO $$ BEGIN PERFORM dblink_exec('dbname=x', 'x'); END $$", "dblink_exec() in a DO block"),
    ("DO $a$ BEGIN DO $b$ BEGIN DEALLOCATE ALL; END $b$; END $a$", "DEALLOCATE in a DO block"),
    (
        "CREATE FUNCTION pg_temp.f() RETURNS void LANGUAGE plpgsql"
        " AS $$ BEGIN DEALLOCATE ALL; END $$; SELECT pg_temp.f()",
        "DEALLOCATE in the body of a routine",
    ),
    (
        "CREATE PROCEDURE pg_temp.p() LANGUAGE sql AS 'PREPARE q AS SELECT 1'",
        "PREPARE in the body of a routine",
    ),
]


def test_refused_beyond_statement_heads(db: Database) -> None:
    """42501 naming the statement and where it is; nothing changed."""
    before = fingerprint(db)
    wrong = []
    with connect(db, ALICE) as alice:
        for sql, statement in REFUSED_BEYOND_HEADS:
            try:
                save(alice, "t1", sql)
            except psycopg.Error as exc:
                message = exc.diag.message_primary or ""
                if exc.sqlstate != "42501" or f"may not use {statement}:" not in message:
                    wrong.append(f"{sql!r}: {exc.sqlstate} {message}")
                elif "line " not in message or "column " not in message:
                    wrong.append(f"{sql!r}: no position in {message}")
                continue
            wrong.append(f"{sql!r}: accepted")
    assert wrong == [], "\n".join(wrong)
    assert fingerprint(db) == before


NOT_REFUSED_BEYOND_HEADS = [
    "DECLARE c CURSOR FOR SELECT 1",
    "CREATE TEMP TABLE dblink (a int)",
    "CREATE TEMP TABLE t (a int) ; INSERT INTO t (a) VALUES (1) ON CONFLICT DO NOTHING",
    "SELECT 'dblink_exec(' AS x",
    "SELECT 1 -- dblink_exec('x', 'y')",
    "DO $$ BEGIN EXECUTE format('SELECT %s', 1); COMMIT; END $$",
    # dynamic SQL is not read at save: the run-time guard of timers._exec_as stops it
    "DO $$ BEGIN EXECUTE 'PREPARE mine AS SELECT 1'; END $$",
    "CREATE TEMP TABLE execute_log (prepare int); SELECT prepare FROM execute_log",
]


def test_what_is_not_refused_beyond_statement_heads(db: Database) -> None:
    wrong = []
    with connect(db, ALICE) as alice:
        for sql in NOT_REFUSED_BEYOND_HEADS:
            try:
                alice.execute("SELECT timers._check_sql(%s)", [sql])
            except psycopg.Error as exc:  # noqa: PERF203 - one probe per SQL, a report of each
                wrong.append(f"{sql!r}: {exc.sqlstate} {exc.diag.message_primary}")
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize(
    "sql",
    [
        "DEALLOCATE ALL",
        "SELECT 1; EXECUTE q",
        "DO $$ BEGIN DEALLOCATE ALL; END $$",
        "DO E'BEGIN \\x44EALLOCATE ALL; END'",
    ],
)
def test_sql_saved_before_the_check_is_refused_at_run_time(db: Database, sql: str) -> None:
    """timers._exec_as reads the session part again before each run: 42501, nothing ran."""
    with db.connect() as su:
        su.execute("CREATE TABLE public.who_ran (who name DEFAULT current_user, note text)")
        su.execute("GRANT ALL ON public.who_ran TO PUBLIC")
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")  # makes her executor
    with pytest.raises(errors.InsufficientPrivilege, match=r"may not use (DEALLOCATE|EXECUTE)"):
        exec_as(db, ALICE, "INSERT INTO public.who_ran (note) VALUES ('before'); " + sql)
    with db.connect() as su:
        assert su.execute("SELECT count(*) FROM public.who_ran").fetchone() == (0,)


def test_statements_prepared_by_dynamic_sql_are_refused_and_dropped(db: Database) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")  # makes her executor
    with connect(db) as runner:
        runner.execute("PREPARE runners_own AS SELECT 1")
        with pytest.raises(errors.InsufficientPrivilege, match="may not prepare or deallocate"):
            runner.execute(
                "SELECT timers._exec_as(%s, %s)",
                [ALICE, "DO $$ BEGIN EXECUTE 'PREPARE mine AS SELECT 2'; END $$"],
            )
        names = runner.execute("SELECT name FROM pg_prepared_statements ORDER BY 1").fetchall()
    assert names == [("runners_own",)]
