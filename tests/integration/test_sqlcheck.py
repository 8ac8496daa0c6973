"""Save-time checks of a timer's name and SQL: timers._check_name and timers._check_sql.

The checks are pure functions, so most tests share one database per module (a fresh
database per parametrized case would cost far more than the check itself).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import errors, sql

from tests.conftest import Database, Server

RULE = 'use 1 to 64 letters, digits, "_" and "-"'


@pytest.fixture(scope="module")
def checker(server: Server, template: str) -> Iterator[psycopg.Connection]:
    """A superuser connection to a database of this module, copied from the template."""
    name = f"pgt_sqlcheck_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with server.admin() as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    try:
        with psycopg.connect(server.dsn_for(name), autocommit=True) as conn:
            yield conn
    finally:
        with server.admin() as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def check_sql(conn: psycopg.Connection, text: str | None) -> None:
    conn.execute("SELECT timers._check_sql(%s)", [text])


def sql_error(conn: psycopg.Connection, text: str | None) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as info:
        check_sql(conn, text)
    return info.value


def message(e: psycopg.Error) -> str:
    return e.diag.message_primary or ""


# --- names -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["a", "Z", "0", "_", "-", "daily_totals", "Shop-Totals_2", "x" * 64, "A-Za-z0-9_-"],
)
def test_good_names_are_returned_unchanged(checker: psycopg.Connection, name: str) -> None:
    assert checker.execute("SELECT timers._check_name(%s)", [name]).fetchone() == (name,)


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("", "''"),
        ("a b", "'a b'"),
        ("a;b", "'a;b'"),
        ("a.b", "'a.b'"),
        ("a/b", "'a/b'"),
        ("it's", "'it''s'"),
        ("back\\slash", "E'back\\\\slash'"),
        ("é", "'é'"),
        ("caf\u00e9", "'café'"),
        ("\u212a", "'\u212a'"),  # KELVIN SIGN: lower()s to an ASCII k, still not a letter here
        ("\uff46\uff55\uff4c\uff4c", "'\uff46\uff55\uff4c\uff4c'"),  # fullwidth "full"
        ("١٢٣", "'١٢٣'"),  # Arabic-Indic digits
        ("a\nb", "'a?b'"),  # control characters are shown, not printed
        ("abc\n", "'abc?'"),  # '$' in the rule does not match before a final newline
        ("x" * 65, "'" + "x" * 65 + "' (65 characters)"),
        ("x" * 1000, "'" + "x" * 80 + "…' (1000 characters)"),
        (None, "NULL"),
    ],
)
def test_bad_names_are_refused_naming_the_name_and_the_rule(
    checker: psycopg.Connection, name: str | None, shown: str
) -> None:
    with pytest.raises(errors.InvalidParameterValue) as info:
        checker.execute("SELECT timers._check_name(%s)", [name])
    assert info.value.sqlstate == "22023"
    assert message(info.value) == f"bad timer name {shown}: {RULE}"


# --- SQL that passes ---------------------------------------------------------------

GOOD_SQL = [
    "SELECT 1",
    "CALL refresh_daily_totals()",
    "CALL missing_schema.missing_procedure(1, 'x')",
    "INSERT INTO no_such_table SELECT * FROM nor_this_one",
    "SELECT 1; SELECT 2;\nSELECT 3",
    "SELECT 1;;;",
    "  SELECT 1  ;  ",
    "SELECT 'x' -- trailing comment",
    "SELECT 'SET ROLE postgres; COMMIT'",
    "SELECT E'it\\'s; COMMIT; SET ROLE x'",
    "SELECT $$COMMIT; SET ROLE x$$",
    "SELECT $fn$ it's $$ ; COMMIT $fn$",
    "SELECT $a$ $b$ SET ROLE x; $b$ $a$",
    'SELECT 1 AS "BEGIN", "COMMIT" FROM t',
    'SELECT * FROM "SET ROLE"',
    "-- COMMIT\nSELECT 1",
    "/* SET ROLE x; /* nested; COMMIT */ still a comment; */ SELECT 1",
    "DO $$ BEGIN PERFORM 1; END $$",
    # stopped at run time by PostgreSQL: the SQL runs in a SECURITY DEFINER function
    "DO $$ BEGIN EXECUTE 'reset role'; END $$",
    "DO $do$ BEGIN EXECUTE 'SET ROLE postgres'; COMMIT; END $do$",
    "SELECT set_config('search_path', 'app', true)",
    "SET search_path = app, public",
    "SET LOCAL work_mem = '64MB'",
    "SET SESSION statement_timeout = 0",
    "SET TIME ZONE 'UTC'",
    "SET app.role = 'admin'",
    "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    "RESET work_mem",
    "GRANT SELECT ON t TO someone",
    "GRANT SELECT (a, b) ON t TO someone",
    "GRANT USAGE ON SCHEMA s TO someone",
    "REVOKE ALL ON ALL TABLES IN SCHEMA s FROM someone",
    "REVOKE GRANT OPTION FOR SELECT ON t FROM someone",
    "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO someone",
    "CREATE USER MAPPING FOR CURRENT_USER SERVER s",
    "ALTER USER MAPPING FOR someone SERVER s OPTIONS (SET password 'x')",
    "DROP USER MAPPING IF EXISTS FOR someone SERVER s",
    "CREATE INDEX i ON t (a)",
    "CREATE UNIQUE INDEX ON t (a)",
    "DROP INDEX i",
    "REINDEX TABLE t",
    "REINDEX INDEX i",
    "CLUSTER t USING i",
    "CLUSTER t",
    "ALTER TABLE p DETACH PARTITION c",
    "ALTER TABLE t ALTER COLUMN a SET DEFAULT 1",
    "ANALYZE t",
    "REFRESH MATERIALIZED VIEW CONCURRENTLY mv",
    "CHECKPOINT",
    "NOTIFY jobs, 'done'",
    "SELECT pg_notify('jobs', 'done')",
    "UPDATE t SET role = 'x'",
    'CREATE TABLE t (role text, "end" int, begin_at timestamptz)',
    "CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO a VALUES (1); DELETE FROM b)",
    "CREATE SCHEMA s CREATE TABLE t (a int)",
    "WITH x AS (SELECT 1) SELECT * FROM x",
    "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END",
    "CREATE OR REPLACE PROCEDURE p() LANGUAGE sql\nBEGIN ATOMIC\n  INSERT INTO t VALUES (1);\n"
    "  SELECT CASE WHEN true THEN 1 END;\nEND;\nSELECT 2",
    "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN COMMIT; RETURN NEW; END $$",
    "SELECT 'é€😀' AS \"ünï\", U&'\\0041'",
    "SELECT begin_work(), commit_all()",
    "CALL commit_all()",
    "SELECT $1",
]


@pytest.mark.parametrize("text", GOOD_SQL)
def test_good_sql_passes(checker: psycopg.Connection, text: str) -> None:
    check_sql(checker, text)


# --- refused statements ------------------------------------------------------------

REFUSED = [
    ("CREATE DATABASE d", "CREATE DATABASE"),
    ("DROP DATABASE d", "DROP DATABASE"),
    ("DROP DATABASE IF EXISTS d WITH (FORCE)", "DROP DATABASE"),
    ("ALTER DATABASE d SET work_mem = '1MB'", "ALTER DATABASE"),
    ("ALTER SYSTEM SET work_mem = '1MB'", "ALTER SYSTEM"),
    ("ALTER SYSTEM RESET ALL", "ALTER SYSTEM"),
    ("CREATE ROLE r", "CREATE ROLE"),
    ("CREATE USER u", "CREATE USER"),
    ("CREATE GROUP g", "CREATE GROUP"),
    ("ALTER ROLE r SUPERUSER", "ALTER ROLE"),
    ("ALTER ROLE CURRENT_USER SET work_mem = '1MB'", "ALTER ROLE"),
    ("ALTER USER u PASSWORD 'x'", "ALTER USER"),
    ("ALTER GROUP g ADD USER u", "ALTER GROUP"),
    ("DROP ROLE r", "DROP ROLE"),
    ("DROP USER IF EXISTS u", "DROP USER"),
    ("DROP GROUP g", "DROP GROUP"),
    ("GRANT pg_read_all_data TO u", "GRANT of a role"),
    ("GRANT r TO u WITH ADMIN OPTION", "GRANT of a role"),
    ('GRANT "on" TO u', "GRANT of a role"),
    ("REVOKE r FROM u", "REVOKE of a role"),
    ("REVOKE ADMIN OPTION FOR r FROM u", "REVOKE of a role"),
    ("SET ROLE postgres", "SET ROLE"),
    ("SET LOCAL ROLE postgres", "SET ROLE"),
    ("SET SESSION ROLE postgres", "SET ROLE"),
    ("SET role = 'postgres'", "SET ROLE"),
    ("SET role TO DEFAULT", "SET ROLE"),
    ('SET "Role" = postgres', "SET ROLE"),
    ("RESET ROLE", "RESET ROLE"),
    ("SET SESSION AUTHORIZATION postgres", "SET SESSION AUTHORIZATION"),
    ("SET SESSION AUTHORIZATION DEFAULT", "SET SESSION AUTHORIZATION"),
    ("SET LOCAL SESSION AUTHORIZATION postgres", "SET SESSION AUTHORIZATION"),
    ("SET session_authorization = 'postgres'", "SET SESSION AUTHORIZATION"),
    ("RESET SESSION AUTHORIZATION", "RESET SESSION AUTHORIZATION"),
    ("RESET session_authorization", "RESET SESSION AUTHORIZATION"),
    ("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", "SET SESSION CHARACTERISTICS"),
    ("RESET ALL", "RESET ALL"),
    ("DISCARD ALL", "DISCARD"),
    ("DISCARD TEMP", "DISCARD"),
    ("BEGIN", "BEGIN"),
    ("BEGIN ISOLATION LEVEL SERIALIZABLE", "BEGIN"),
    ("START TRANSACTION", "START TRANSACTION"),
    ("COMMIT", "COMMIT"),
    ("COMMIT AND CHAIN", "COMMIT"),
    ("END", "END"),
    ("END TRANSACTION", "END"),
    ("ROLLBACK", "ROLLBACK"),
    ("ABORT", "ABORT"),
    ("SAVEPOINT s", "SAVEPOINT"),
    ("RELEASE SAVEPOINT s", "RELEASE SAVEPOINT"),
    ("RELEASE s", "RELEASE SAVEPOINT"),
    ("ROLLBACK TO SAVEPOINT s", "ROLLBACK TO SAVEPOINT"),
    ("ROLLBACK TO s", "ROLLBACK TO SAVEPOINT"),
    ("PREPARE TRANSACTION 'x'", "PREPARE TRANSACTION"),
    ("PREPARE q AS SELECT 1; EXECUTE q; DEALLOCATE q", "PREPARE"),
    ("COMMIT PREPARED 'x'", "COMMIT PREPARED"),
    ("ROLLBACK PREPARED 'x'", "ROLLBACK PREPARED"),
    ("VACUUM", "VACUUM"),
    ("VACUUM (ANALYZE) t", "VACUUM"),
    ("VACUUM FULL t", "VACUUM"),
    ("CREATE INDEX CONCURRENTLY i ON t (a)", "CREATE INDEX CONCURRENTLY"),
    ("CREATE UNIQUE INDEX CONCURRENTLY ON t (a)", "CREATE INDEX CONCURRENTLY"),
    ("DROP INDEX CONCURRENTLY i", "DROP INDEX CONCURRENTLY"),
    ("REINDEX INDEX CONCURRENTLY i", "REINDEX CONCURRENTLY"),
    ("REINDEX (VERBOSE) TABLE CONCURRENTLY t", "REINDEX CONCURRENTLY"),
    ("REINDEX DATABASE d", "REINDEX DATABASE"),
    ("REINDEX SCHEMA s", "REINDEX SCHEMA"),
    ("REINDEX SYSTEM d", "REINDEX SYSTEM"),
    ("CLUSTER", "CLUSTER without a table"),
    ("CLUSTER VERBOSE", "CLUSTER without a table"),
    ("ALTER TABLE p DETACH PARTITION c CONCURRENTLY", "DETACH PARTITION ... CONCURRENTLY"),
    ("CREATE TABLESPACE ts LOCATION '/tmp/ts'", "CREATE TABLESPACE"),
    ("DROP TABLESPACE ts", "DROP TABLESPACE"),
    ("LISTEN jobs", "LISTEN"),
    ("UNLISTEN *", "UNLISTEN"),
    ("COPY t TO PROGRAM 'gzip > /tmp/t.gz'", "COPY ... PROGRAM"),
    ("COPY t (a, b) FROM PROGRAM 'cat /etc/passwd'", "COPY ... PROGRAM"),
    ("COPY (SELECT 1) TO '/tmp/x.csv'", "COPY ... a file"),
    ("COPY t FROM E'/tmp/x.csv' WITH (FORMAT csv)", "COPY ... a file"),
    ("COPY t FROM STDIN", "COPY ... STDIN"),
    ("COPY (SELECT * FROM t) TO STDOUT", "COPY ... STDOUT"),
    ("LOAD 'auto_explain'", "LOAD"),
]

# How each refused statement is written: what comes before it, whether in lower case.
VARIANTS = {
    "as is": ("", False),
    "lower case": ("", True),
    "after comments": ("/* why: /* nested */ */\n-- x\n  ", False),
    "second statement": ("SELECT 1;\n", False),
    "after a DO block": ("DO $$ BEGIN PERFORM 1; END $$; ", True),
}

IDENTITY = "a timer runs as the role that saved it"
DATABASE = "a timer works inside its own database"
TRANSACTION = "a run is one transaction, committed together with the run's bookkeeping"
SAVEPOINT = "use a DO block with BEGIN ... EXCEPTION"
NO_BLOCK = "it cannot run inside a transaction block, and a run is one transaction"
REASONS = {
    "CREATE DATABASE": DATABASE,
    "DROP DATABASE": DATABASE,
    "ALTER DATABASE": DATABASE,
    "ALTER SYSTEM": "it changes the whole server's configuration; " + DATABASE,
    "GRANT of a role": IDENTITY + " and cannot manage roles",
    "REVOKE of a role": IDENTITY + " and cannot manage roles",
    "SET ROLE": IDENTITY,
    "RESET ROLE": IDENTITY,
    "SET SESSION AUTHORIZATION": IDENTITY,
    "RESET SESSION AUTHORIZATION": IDENTITY,
    "SET SESSION CHARACTERISTICS": "beyond this run; use SET TRANSACTION",
    "RESET ALL": "reset the run's own settings (pgtimers.timer, pgtimers.due_at)",
    "DISCARD": "the state of the runner's session",
    "BEGIN": TRANSACTION,
    "START TRANSACTION": TRANSACTION,
    "COMMIT": TRANSACTION,
    "END": TRANSACTION,
    "ROLLBACK": TRANSACTION,
    "ABORT": TRANSACTION,
    "PREPARE TRANSACTION": TRANSACTION,
    "PREPARE": "would outlive the run in the runner's session",
    "COMMIT PREPARED": TRANSACTION,
    "ROLLBACK PREPARED": TRANSACTION,
    "SAVEPOINT": SAVEPOINT,
    "RELEASE SAVEPOINT": SAVEPOINT,
    "ROLLBACK TO SAVEPOINT": SAVEPOINT,
    "VACUUM": NO_BLOCK,
    "CREATE INDEX CONCURRENTLY": NO_BLOCK,
    "DROP INDEX CONCURRENTLY": NO_BLOCK,
    "REINDEX CONCURRENTLY": NO_BLOCK,
    "REINDEX DATABASE": NO_BLOCK,
    "REINDEX SCHEMA": NO_BLOCK,
    "REINDEX SYSTEM": NO_BLOCK,
    "CLUSTER without a table": NO_BLOCK,
    "DETACH PARTITION ... CONCURRENTLY": NO_BLOCK,
    "CREATE TABLESPACE": "tablespaces belong to the whole server, and " + NO_BLOCK,
    "DROP TABLESPACE": "tablespaces belong to the whole server, and " + NO_BLOCK,
    "LISTEN": "a run's session does not receive notifications",
    "UNLISTEN": "a run's session does not receive notifications",
    "COPY ... PROGRAM": "it runs a program on the database server; " + DATABASE,
    "COPY ... a file": "it reads or writes a file on the database server; " + DATABASE,
    "COPY ... STDIN": "a timer has no client to copy from or to",
    "COPY ... STDOUT": "a timer has no client to copy from or to",
    "LOAD": "it loads a library into the runner's server process",
}
for _role in ("ROLE", "USER", "GROUP"):
    for _verb in ("CREATE", "ALTER", "DROP"):
        REASONS[f"{_verb} {_role}"] = IDENTITY + " and cannot manage roles"


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize(("text", "statement"), REFUSED)
def test_refused_statements_are_named_with_where_and_why(
    checker: psycopg.Connection, text: str, statement: str, variant: str
) -> None:
    before, lower = VARIANTS[variant]
    e = sql_error(checker, before + (text.lower() if lower else text) + ";")
    line = before.count("\n") + 1
    column = len(before) - before.rfind("\n")
    assert isinstance(e, errors.InsufficientPrivilege)
    assert e.sqlstate == "42501"
    msg = message(e)
    assert msg.startswith(f"the timer's SQL may not use {statement}: "), msg
    assert msg.endswith(f" (line {line}, column {column})"), msg
    assert REASONS[statement] in msg


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "SET ROLE postgres",
            "the timer's SQL may not use SET ROLE: a timer runs as the role that saved it"
            " (line 1, column 1)",
        ),
        (
            "SELECT 1;\nCOMMIT;\nSELECT 2",
            "the timer's SQL may not use COMMIT: a run is one transaction, committed together"
            " with the run's bookkeeping, so the SQL cannot end it or start another (a procedure"
            " that commits cannot do it either: the SQL runs inside a function); to split work,"
            " use several timers; or save the timer with autonomous => true (line 2, column 1)",
        ),
        (
            "COPY t FROM PROGRAM 'curl example.com'",
            "the timer's SQL may not use COPY ... PROGRAM: it runs a program on the database"
            " server; a timer works inside its own database (line 1, column 1)",
        ),
    ],
)
def test_refusal_messages(checker: psycopg.Connection, text: str, expected: str) -> None:
    assert message(sql_error(checker, text)) == expected


def test_the_first_refused_statement_is_named(checker: psycopg.Connection) -> None:
    e = sql_error(checker, "SELECT 1; LISTEN a; SET ROLE b; COMMIT")
    assert message(e).startswith("the timer's SQL may not use LISTEN:")


def test_a_refused_word_inside_a_begin_atomic_body_is_no_statement(
    checker: psycopg.Connection,
) -> None:
    body = "CREATE PROCEDURE p() LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2; END"
    check_sql(checker, body)  # END closes the body; it is no transaction END
    e = sql_error(checker, body + "; END")
    assert message(e).startswith("the timer's SQL may not use END:")


# --- syntax errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error", "line", "column"),
    [
        ("SELEC 1", 'syntax error at or near "SELEC"', 1, 1),
        ("SELECT 1;\n  SELEC 1", 'syntax error at or near "SELEC"', 2, 3),
        ("SELECT 1 1", 'syntax error at or near "1"', 1, 10),
        ("SELECT 1; SELECT 2 2; SELECT 3", 'syntax error at or near "2"', 1, 20),
        ("SELECT 1 FROM t;\nSELECT 1 FROM FROM t", 'syntax error at or near "FROM"', 2, 15),
        ("SELECT 'a', 'a' 'a'", "syntax error at or near \"'a'\"", 1, 17),
        ("\tSELECT 'é€😀'\n\t\tFROM WHERE", 'syntax error at or near "WHERE"', 2, 8),
        ("SELECT 'é€😀', 1 1", 'syntax error at or near "1"', 1, 17),
        ("SELECT (1", "syntax error at end of input", 1, 10),
        ("SELECT 1 +\n\n  -- a comment\n", "syntax error at end of input", 1, 11),
        ("SELECT 'abc", 'unterminated quoted string at or near "\'abc"', 1, 8),
        ("SELECT 1;\nSELECT $$abc", 'unterminated dollar-quoted string at or near "$$abc"', 2, 8),
        ("SELECT /* abc", 'unterminated /* comment at or near "/* abc"', 1, 8),
        ('SELECT "abc', 'unterminated quoted identifier at or near ""abc"', 1, 8),
        ("SELECT 1a", 'trailing junk after numeric literal at or near "1a"', 1, 8),
        (
            "CREATE FUNCTION f() RETURNS int LANGUAGE sql\nBEGIN ATOMIC SELECT 1; SELEC 2; END",
            'syntax error at or near "SELEC"',
            2,
            24,
        ),
        ("SELECT 1; COMMIT; SELEC 1", 'syntax error at or near "SELEC"', 1, 19),
    ],
)
def test_syntax_errors_name_line_and_column(
    checker: psycopg.Connection, text: str, error: str, line: int, column: int
) -> None:
    e = sql_error(checker, text)
    assert isinstance(e, errors.SyntaxError)
    assert e.sqlstate == "42601"
    assert message(e) == f"the timer's SQL does not parse: {error} (line {line}, column {column})"
    if "at or near" in error:
        # where PostgreSQL itself puts it, parsing the text as a query
        with pytest.raises(errors.SyntaxError) as info:
            checker.execute(text.encode())
        position = int(info.value.diag.statement_position or 0)
        before = text[: position - 1]
        assert (line, column) == (before.count("\n") + 1, len(before) - before.rfind("\n"))


def test_a_huge_token_in_a_syntax_error_is_shortened(checker: psycopg.Connection) -> None:
    e = sql_error(checker, "SELECT 1;\nSELECT '" + "x" * 5000)
    assert message(e) == (
        "the timer's SQL does not parse: unterminated quoted string at or near"
        " \"'" + "x" * 39 + '…" (line 2, column 8)'
    )


def test_syntax_error_position_in_a_long_sql(checker: psycopg.Connection) -> None:
    text = (
        "SELECT 1 FROM t WHERE a = 1;\n" * 2000
        + "SELECT 1 FROM t WHERE a = = 1;\n"
        + "SELECT 1;" * 10
    )
    e = sql_error(checker, text)
    assert message(e) == (
        'the timer\'s SQL does not parse: syntax error at or near "=" (line 2001, column 27)'
    )


@pytest.mark.parametrize(
    ("text", "command", "line", "column"),
    [
        ("\\c other", "\\c", 1, 1),
        ("SELECT 1;\n\\gexec", "\\gexec", 2, 1),
        ("\\copy t FROM 'x.csv'", "\\copy", 1, 1),
        ("SELECT 1 \\g", "\\g", 1, 10),
        ("  \\set x 1\nSELECT :x", "\\set", 1, 3),
        ("SELECT 'a\\b';\n\\i file.sql", "\\i", 2, 1),
    ],
)
def test_psql_meta_commands_are_refused(
    checker: psycopg.Connection, text: str, command: str, line: int, column: int
) -> None:
    e = sql_error(checker, text)
    assert e.sqlstate == "42601"
    assert message(e) == (
        f"the timer's SQL may not use {command}: psql meta-commands like \\c do not work"
        f" in a timer (line {line}, column {column})"
    )


@pytest.mark.parametrize("text", ["SELECT E'\\\\c'", "SELECT '\\c'", "SELECT $$\\c$$ -- \\c"])
def test_backslashes_in_strings_and_comments_are_no_meta_commands(
    checker: psycopg.Connection, text: str
) -> None:
    check_sql(checker, text)


# --- empty and too big ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [None, "", " ", "\n\t", "-- only a comment", "/* a /* b */ */", ";", " ; ; ", "-- c\n;\n"],
)
def test_empty_sql_is_refused(checker: psycopg.Connection, text: str | None) -> None:
    e = sql_error(checker, text)
    assert isinstance(e, errors.InvalidParameterValue)
    assert message(e) == "the timer's SQL is empty"


@pytest.mark.parametrize("filler", ["x", "é"])
def test_64_kb_is_the_limit(checker: psycopg.Connection, filler: str) -> None:
    head = "SELECT '"
    width = len(filler.encode())
    body = filler * ((65536 - len(head) - 1) // width)
    text = head + body + "'" + " " * ((65536 - len(head) - 1) % width)
    assert len(text.encode()) == 65536
    check_sql(checker, text)
    e = sql_error(checker, text + " ")
    assert isinstance(e, errors.ProgramLimitExceeded)
    assert message(e) == "the timer's SQL is 65537 bytes; the limit is 65536 (64 KB)"


def test_the_size_is_checked_before_parsing(checker: psycopg.Connection) -> None:
    e = sql_error(checker, "SELEC " + "x" * 69994)
    assert e.sqlstate == "54000"
    assert message(e) == "the timer's SQL is 70000 bytes; the limit is 65536 (64 KB)"


# --- lexer internals -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "heads"),
    [
        ("SELECT 1", [["SELECT"]]),
        ("/* c */ set  LOCAL\n role x;;", [["SET", "LOCAL", "ROLE", "X"]]),
        ("SET \"Role\" = 'x'", [["SET", '"Role"', "=", "''"]]),
        ("REINDEX (VERBOSE) TABLE CONCURRENTLY t", [["REINDEX", "TABLE", "CONCURRENTLY", "T"]]),
        ("COPY (SELECT 1) TO STDOUT; select 2", [["COPY", "TO", "STDOUT"], ["SELECT"]]),
        (
            "CREATE FUNCTION f() BEGIN ATOMIC SELECT 1; SELECT 2; END; CREATE PROCEDURE p()"
            " BEGIN ATOMIC SELECT CASE WHEN true THEN 1 END; END; END",
            [
                ["CREATE", "FUNCTION", "F", "BEGIN", "ATOMIC", "SELECT", "1"],
                [
                    "CREATE",
                    "PROCEDURE",
                    "P",
                    "BEGIN",
                    "ATOMIC",
                    "SELECT",
                    "CASE",
                    "WHEN",
                    "TRUE",
                    "THEN",
                    "1",
                    "END",
                ],
                ["END"],
            ],
        ),
    ],
)
def test_statement_heads(checker: psycopg.Connection, text: str, heads: list[list[str]]) -> None:
    rows = checker.execute("SELECT head FROM timers._sql_statements(%s) ORDER BY n", [text])
    assert [r[0] for r in rows] == heads


def test_statement_positions(checker: psycopg.Connection) -> None:
    text = "SELECT 1;\n  /* x */ SELECT 2; ;\nSELECT 3"
    rows = checker.execute("SELECT n, pos FROM timers._sql_statements(%s) ORDER BY n", [text])
    assert rows.fetchall() == [
        (1, 1),
        (2, text.index("SELECT 2") + 1),
        (3, text.index("SELECT 3") + 1),
    ]


WS = " \t\n\r\f\v"
TAG = re.compile(r"\$(?:[A-Za-z_\x80-\U0010ffff][A-Za-z_0-9\x80-\U0010ffff]*)?\$")


def _ident_start(c: str) -> bool:
    return (c.isascii() and (c.isalpha() or c == "_")) or not c.isascii()


def _ident_cont(c: str) -> bool:
    return _ident_start(c) or (c.isascii() and c.isdigit()) or c == "$"


def _glued(s: str, j: int) -> int:
    """Past a word glued onto a number or a parameter, as the scanner takes it (junk)."""
    if j < len(s) and _ident_start(s[j]):
        j += 1
        while j < len(s) and _ident_cont(s[j]):
            j += 1
    return j


def _line_comment(s: str, i: int) -> int:
    j = i
    while j < len(s) and s[j] not in "\n\r":
        j += 1
    return j


def _block_comment(s: str, i: int) -> int:
    """Past a /* ... */ comment; they nest."""
    depth, j = 0, i
    while j < len(s):
        if s.startswith("/*", j):
            depth, j = depth + 1, j + 2
        elif s.startswith("*/", j):
            depth, j = depth - 1, j + 2
            if depth == 0:
                break
        else:
            j += 1
    return min(j, len(s))


def _escape_string(s: str, i: int) -> int:
    """Past E'...', where a backslash escapes the next character."""
    j = i + 2
    while j < len(s):
        if s[j] == "\\" or (s[j] == "'" and s.startswith("'", j + 1)):
            j += 2
        elif s[j] == "'":
            j += 1
            break
        else:
            j += 1
    return min(j, len(s))


def _quoted(s: str, i: int) -> int:
    """Past '...' or "...", where the quote doubled stands for itself."""
    c, j = s[i], i + 1
    while j < len(s):
        if s[j] == c:
            if not s.startswith(c, j + 1):
                return j + 1
            j += 2
        else:
            j += 1
    return j


def _dollar(s: str, i: int) -> tuple[int, str | None]:
    """A dollar-quoted string ('s'), else a parameter like $1."""
    m = TAG.match(s, i)
    if m:
        k = s.find(m.group(0), m.end())
        return (len(s) if k < 0 else k + len(m.group(0))), "s"
    j = i + 1
    while j < len(s) and s[j].isascii() and s[j].isdigit():
        j += 1
    return (_glued(s, j) if j > i + 1 else j), None


def _number(s: str, i: int) -> int:
    j = i + 1
    while j < len(s) and s[j].isascii() and (s[j].isdigit() or s[j] in "_."):
        j += 1
    return _glued(s, j)


def _word(s: str, i: int) -> int:
    j = i + 1
    while j < len(s) and _ident_cont(s[j]):
        j += 1
    return j


def _token(s: str, i: int) -> tuple[int, str | None]:
    """Where the token at i ends, and its kind when it is a region."""
    c = s[i]
    if c in WS:
        return i + 1, None
    if s.startswith("--", i):
        return _line_comment(s, i), "t"
    if s.startswith("/*", i):
        return _block_comment(s, i), "t"
    if c in "Ee" and s.startswith("'", i + 1):
        return _escape_string(s, i), "s"
    if c in "'\"":
        return _quoted(s, i), "s" if c == "'" else "q"
    if c == "$":
        return _dollar(s, i)
    if _ident_start(c):
        return _word(s, i), None
    if c.isascii() and c.isdigit():
        return _number(s, i), None
    return i + 1, None


def reference_regions(s: str) -> list[tuple[int, int, str]]:
    """Strings 's', comments 't' and quoted identifiers 'q' as PostgreSQL's scanner finds them."""
    i, out = 0, []
    while i < len(s):
        j, kind = _token(s, i)
        if kind is not None:
            out.append((i, j, kind))
        i = j
    return out


FRAGMENTS = [
    "'",
    "''",
    "E'",
    "e'",
    "\\",
    "\\'",
    "$$",
    "$a$",
    "$b$",
    "$fn$",
    "a",
    "x$",
    "b$$c",
    "1",
    "12",
    "/*",
    "*/",
    "--",
    "\n",
    '"',
    '""',
    ";",
    "(",
    ")",
    " ",
    "SET",
    "ROLE",
    "é",
    "date",
    "*",
    "/",
    "-",
    "+",
    "=",
    ".",
    "$1",
    "SELECT",
    "E",
    "END",
    "BEGIN",
    "\t",
    "€",
    "U&",
    "/**/",
    "**/",
]


def lexed_regions(conn: psycopg.Connection, text: str, coarse: bool) -> list[tuple[int, int, str]]:
    rows = conn.execute(
        "SELECT pos, tok, kind FROM timers._sql_tokens(%s, %s) WHERE kind IN ('s', 't', 'q')"
        " ORDER BY n",
        [text, coarse],
    )
    return [(p - 1, p - 1 + len(t), k) for p, t, k in rows]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=40).map("".join))
def test_lexer_agrees_with_the_scanner_on_any_text(checker: psycopg.Connection, text: str) -> None:
    expected = reference_regions(text)
    assert lexed_regions(checker, text, False) == expected
    assert lexed_regions(checker, text, True) == expected
    code = checker.execute("SELECT timers._sql_code(%s)", [text]).fetchone()
    assert code is not None and len(code[0]) == len(text)


@pytest.mark.parametrize(
    "text",
    [
        # dollar quotes whose insides, lexed as code, run past their end
        "".join(f"SELECT $t{i}$ ' $t{i}$ ; -- $t{i}$ '\n" for i in range(300)),
        "".join(f"DO $f{i}$ SELECT '$$'; END$f{i}$;\n" for i in range(300)),
        # comments nested deeper than the pattern follows
        "".join(
            f"SELECT {i}; /* 1 /* 2 /* 3 /* 4 /* 5 /* 6 /* 7 */ */ */ */ */ */ */ x */\n"
            for i in range(50)
        ),
    ],
)
def test_lexer_fallbacks_agree_with_the_scanner(checker: psycopg.Connection, text: str) -> None:
    expected = reference_regions(text)
    assert lexed_regions(checker, text, False) == expected
    assert lexed_regions(checker, text, True) == expected


# --- rights, side effects, speed -----------------------------------------------------


def test_admins_and_runners_may_call_the_checks_others_may_not(db: Database) -> None:
    with db.connect("pgt_alice") as alice:
        alice.execute("SELECT timers._check_sql('SELECT 1')")
        alice.execute("SELECT timers._check_name('ok')")
        with pytest.raises(errors.InsufficientPrivilege, match="may not use SET ROLE"):
            alice.execute("SELECT timers._check_sql('SET ROLE postgres')")
        with pytest.raises(errors.SyntaxError, match="does not parse"):
            alice.execute("SELECT timers._check_sql('SELEC 1')")
    with db.connect() as su:
        granted = su.execute(
            "SELECT has_function_privilege(r, f::regprocedure, 'execute')"
            " FROM (VALUES ('pgtimers_runner', 'timers._check_sql(text,boolean)'),"
            " ('pgtimers_reader', 'timers._check_sql(text,boolean)'),"
            " ('pgtimers_reader', 'timers._check_name(text)')) AS v(r, f)"
        ).fetchall()
        assert granted == [(True,), (False,), (False,)]
    with db.connect("pgt_nobody") as nobody, pytest.raises(errors.InsufficientPrivilege):
        nobody.execute("SELECT timers._check_sql('SELECT 1')")


def test_checks_leave_nothing_behind_and_keep_the_transaction(conn: psycopg.Connection) -> None:
    with conn.transaction():
        conn.execute("CREATE TABLE kept (a int)")
        conn.execute("SELECT timers._check_sql('SELECT 1; SELECT 2')")
        with pytest.raises(errors.SyntaxError), conn.transaction():
            conn.execute("SELECT timers._check_sql('SELEC 1')")
        conn.execute("INSERT INTO kept VALUES (1)")
    assert conn.execute("SELECT count(*) FROM kept").fetchone() == (1,)
    probes = conn.execute(
        "SELECT count(*) FROM pg_proc WHERE proname LIKE 'pgtimers_sqlcheck%'"
    ).fetchone()
    assert probes == (0,)


def _shapes(k: int) -> dict[str, str]:
    """SQL texts of about 64 KB / k each, of the shapes that stress the lexer."""
    return {
        "many small statements": "SELECT 1;" * (65536 // 9 // k),
        "SET statements": "SET work_mem = '64MB';\n" * (65536 // 23 // k),
        "strings, dollar quotes, comments": (
            "SELECT a.b, 'it''s', $$x;y$$, \"Q\"\"q\" FROM t WHERE x >= 1.5e3 -- c\n /* x */ ;\n"
            * (65536 // 77 // k)
        ),
        "one big DO block": "DO $$ BEGIN "
        + "  PERFORM 1; RAISE NOTICE 'x %', 1; IF a > b THEN x := y; END IF;\n" * (950 // k)
        + " END $$",
        "functions with their own tags": "".join(
            f"CREATE FUNCTION f{i}() RETURNS int LANGUAGE sql AS $f{i}$ SELECT 1 $f{i}$;\n"
            for i in range(850 // k)
        ),
        "a syntax error at the end": "SELECT 1 FROM t WHERE a = 1;\n" * (2250 // k) + "SELEC 1",
    }


SIZES_64_KB = _shapes(1)
SIZES_16_KB = _shapes(4)


def _best_check_s(checker: psycopg.Connection, text: str) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        with contextlib.suppress(errors.SyntaxError):
            check_sql(checker, text)
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.parametrize("shape", list(SIZES_64_KB))
def test_64_kb_is_checked_in_linear_time(checker: psycopg.Connection, shape: str) -> None:
    text = SIZES_64_KB[shape]
    assert 60000 < len(text.encode()) <= 65536
    # Not a stopwatch (the machine's load decides that): 4 times the text must cost
    # about 4 times as much; a lexer gone quadratic costs 16 times. The 16 KB check
    # runs in the same moment, so load slows both alike.
    small = _best_check_s(checker, SIZES_16_KB[shape])
    big = _best_check_s(checker, text)
    said = f"{shape}: 64 KB {big * 1000:.0f} ms, 16 KB {small * 1000:.0f} ms"
    assert big < 8 * small + 0.02, said
