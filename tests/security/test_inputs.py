"""Hostile names, options and SQL text are stored verbatim or refused cleanly.

"Cleanly": a clear SQLSTATE and a message naming the bad part, nothing changed
(every table of schema timers and the executors fingerprint the same) and no
audit row. Names and SQL carry quotes, semicolons, backslashes, dollar quotes,
newlines, NUL, right-to-left and zero-width characters and emoji; SQL is tried
at 65,536 and 65,537 bytes (in ASCII and in 4-byte characters), names at 64 and
65 characters. Roles with such names save and run timers too (the executors are
made with format(%I)).
"""

from __future__ import annotations

import re

import psycopg
import pytest
from psycopg import errors
from psycopg import sql as pgsql

from tests.conftest import Database
from tests.security.helpers import (
    ALICE,
    audit_count,
    connect,
    exec_as,
    fingerprint,
    fresh_role,
    save,
)

LIMIT = 65536

HOSTILE_NAMES = [
    "",
    "a" * 65,
    "a b",
    "a'b",
    "a;b",
    'a"b',
    "a\\b",
    "$$",
    "a\nb",
    "abc\n",
    "a\tb",
    "a\rb",
    "a\x1b[31mred",
    "caf\u00e9",
    "n\u0456ghtly",  # Cyrillic i: a look-alike of "nightly"
    "abc\u202edcb",  # right-to-left override
    "a\u200bb",  # zero-width space
    "a\ufeffb",  # zero-width no-break space (BOM)
    "t\U0001f600",  # emoji
    "a/b",
    "a.b",
    "'; DROP TABLE timers.timers; --",
    "x' OR '1'='1",
]


def _refused_cleanly(
    db: Database, call: str, params: list[object], sqlstate: str, words: str
) -> str:
    before = fingerprint(db)
    audits = audit_count(db)
    with connect(db, ALICE) as alice, pytest.raises(psycopg.Error) as caught:
        alice.execute(call, params)
    assert caught.value.sqlstate == sqlstate, caught.value
    message = caught.value.diag.message_primary or ""
    assert words in message
    assert fingerprint(db) == before
    assert audit_count(db) == audits
    return message


def _all_refused_cleanly(
    db: Database, call: str, cases: list[tuple[list[object], str, str]]
) -> list[str]:
    """Each case (params, SQLSTATE, words in the message) refused so; nothing changed, no audit."""
    before = fingerprint(db)
    audits = audit_count(db)
    wrong = []
    with connect(db, ALICE) as alice:
        for params, sqlstate, words in cases:
            try:
                alice.execute(call, params)
            except psycopg.Error as exc:
                message = exc.diag.message_primary or ""
                if exc.sqlstate != sqlstate or words not in message:
                    wrong.append(f"{params!r}: {exc.sqlstate} {message}")
                continue
            wrong.append(f"{params!r}: accepted")
    assert fingerprint(db) == before
    assert audit_count(db) == audits
    return wrong


def test_bad_timer_names_are_refused_cleanly(db: Database) -> None:
    cases: list[tuple[list[object], str, str]] = [
        ([n], "22023", "bad timer name") for n in [*HOSTILE_NAMES, None]
    ]
    call = "SELECT timers.save(%s, 'daily 02:00', 'SELECT 1')"
    wrong = _all_refused_cleanly(db, call, cases)
    assert wrong == [], "\n".join(wrong)
    with connect(db, ALICE) as alice:
        for name in HOSTILE_NAMES:
            with pytest.raises(errors.InvalidParameterValue) as caught:
                alice.execute(call, [name])
            message = caught.value.diag.message_primary or ""
            assert not re.search(r"[\x00-\x1f\x7f]", message), f"echoed raw: {message!r}"


@pytest.mark.parametrize(
    ("what", "call"),
    [
        ("calendar", "SELECT timers.save_calendar(%s)"),
        ("test clock", "SELECT timers.create_test_clock(%s, '2027-01-01')"),
    ],
    ids=["calendar", "test_clock"],
)
def test_bad_calendar_and_test_clock_names_are_refused(db: Database, what: str, call: str) -> None:
    cases: list[tuple[list[object], str, str]] = [
        ([n], "22023", f"bad {what} name") for n in HOSTILE_NAMES
    ]
    wrong = _all_refused_cleanly(db, call, cases)
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize(
    "call",
    [
        "SELECT timers.save_calendar(%s)",
        "SELECT timers.create_test_clock(%s, '2027-01-01')",
        "SELECT timers.set_policy(%s, '14 days')",
        "SELECT timers.arm(%s, '2030-01-01', 'SELECT 1')",
        "SELECT timers.arm('job:task:x:2027', '2030-01-01', 'SELECT 1', test_clock => %s)",
        "SELECT timers.arm('job:task:x:2027', '2030-01-01', 'SELECT 1',"
        " version => %s || repeat('x', 200))",
        "SELECT timers.save('t1', 'daily 02:00', 'SELECT 1', test_clock => %s)",
        "SELECT timers.save('t1', 'daily 02:00', 'SELECT 1', catch_up => %s)",
    ],
    ids=["calendar", "test_clock", "policy", "key", "arm-test_clock", "version", "save-test_clock",
         "catch_up"],
)  # fmt: skip
def test_refused_names_are_not_echoed_with_control_characters(db: Database, call: str) -> None:
    with connect(db, ALICE) as alice, pytest.raises(errors.InvalidParameterValue) as caught:
        alice.execute(call, ["x\n\x1b[2Jfake log line"])
    assert not re.search(r"[\x00-\x1f\x7f]", str(caught.value.diag.message_primary))
    assert not re.search(r"[\x00-\x1f\x7f]", str(caught.value.diag.message_hint or ""))


@pytest.mark.parametrize(
    "call",
    [
        "SELECT timers.enable(%s)",
        "SELECT timers.delete(%s)",
        "SELECT timers.is_trading_day(%s, '2027-01-01')",
        "SELECT timers.move(%s, '2030-01-01')",
        "SELECT timers.delete_test_clock(%s)",
    ],
)
def test_unknown_names_are_not_echoed_with_control_characters(db: Database, call: str) -> None:
    with connect(db, ALICE) as alice, pytest.raises(psycopg.Error) as caught:
        alice.execute(call, ["x\n\x1b[2Jfake log line"])
    assert caught.value.sqlstate in ("P0002", "22023"), caught.value
    assert not re.search(r"[\x00-\x1f\x7f]", str(caught.value.diag.message_primary))
    assert not re.search(r"[\x00-\x1f\x7f]", str(caught.value.diag.message_hint or ""))


def test_names_with_nul_never_reach_the_functions(db: Database) -> None:
    """A NUL cannot be in a text value: the driver or the server refuses it, nothing changes."""
    before = fingerprint(db)
    with connect(db, ALICE) as alice:
        with pytest.raises(psycopg.DataError):
            alice.execute("SELECT timers.save(%s, 'daily 02:00', 'SELECT 1')", ["a\x00b"])
        with pytest.raises(psycopg.Error) as caught:
            alice.execute("SELECT timers.save(E'a\\000b', 'daily 02:00', 'SELECT 1')")
        assert caught.value.sqlstate in ("22021", "22P05", "22025")
    assert fingerprint(db) == before


@pytest.mark.parametrize("name", ["a", "A-b_9", "a" * 64, "-" * 64, "_", "9"])
def test_good_names_are_stored_as_given(db: Database, name: str) -> None:
    with connect(db, ALICE) as alice:
        save(alice, name, "SELECT 1")
        row = alice.execute("SELECT name FROM timers.status").fetchone()
    assert row == (name,)


def test_a_name_differing_only_in_case_is_the_same_timer(db: Database) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "Nightly", "SELECT 1")
        save(alice, "NIGHTLY", "SELECT 2")
        assert alice.execute("SELECT name, sql FROM timers.status").fetchall() == [
            ("NIGHTLY", "SELECT 2")
        ]


# --------------------------------------------------------------------------- options


BAD_OPTIONS: list[tuple[str, list[object], str, str]] = [
    ("timezone => %s", ["UTC'; DROP TABLE timers.timers; --"], "22023", ""),
    ("timezone => %s", ["Europe/Paris\n"], "22023", ""),
    ("timezone => %s", ["../../../etc/passwd"], "22023", ""),
    ("catch_up => %s", ["skip'; --"], "22023", "bad catch_up"),
    ("test_clock => %s", ["x'; --"], "22023", "no test clock"),
    ("max_runs => %s", [0], "22023", "bad max_runs"),
    ("timeout => %s::interval", ["0 seconds"], "22023", "bad timeout"),
    ("timeout => %s::interval", ["25 hours"], "22023", "bad timeout"),
    ("enabled => %s", [None], "22004", "not NULL"),
    ("locked => %s", [None], "22004", "not NULL"),
    ("max_runs => %s", [-(2**63)], "22023", "bad max_runs"),
    ("timeout => %s::interval", ["-1 second"], "22023", "bad timeout"),
    ("timeout => %s::interval", ["178000000 years"], "22023", "bad timeout"),
    ("start_at => %s::timestamptz", ["infinity"], "22008", "bad start_at"),
    ("start_at => %s::timestamptz", ["-infinity"], "22008", "bad start_at"),
    ("start_at => %s::timestamptz", ["294276-12-31"], "22008", "bad start_at"),
    ("start_at => %s::timestamptz", ["4713-01-01 BC"], "22008", "bad start_at"),
    ("end_at => %s::timestamptz", ["infinity"], "22008", "bad end_at"),
    ("end_at => %s::timestamptz", ["200000-01-01"], "22008", "bad end_at"),
]

EXTREME_TIMES = ["infinity", "-infinity", "294276-12-31", "4713-01-01 BC", "10000-01-01"]
TIME_ARGUMENTS = [
    ("owed_at", "SELECT timers.arm('j:task:report:1', %s::timestamptz, 'SELECT 1')"),
    ("late_at", "SELECT timers.arm('j:task:report:2', now(), 'SELECT 1', late_at => %s)"),
    ("after", "SELECT timers.next_runs('daily 16:00', 3, %s)"),
    ("frozen_at", "SELECT timers.create_test_clock('far', %s)"),
]


def test_bad_options_are_refused_cleanly(db: Database) -> None:
    wrong = []
    for options, params, sqlstate, words in BAD_OPTIONS:
        call = f"SELECT timers.save('t1', 'daily 02:00', 'SELECT 1', {options})"
        wrong += _all_refused_cleanly(db, call, [(params, sqlstate, words)])
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize(("what", "call"), TIME_ARGUMENTS, ids=[a for a, _ in TIME_ARGUMENTS])
def test_extreme_times_are_refused_naming_the_argument(db: Database, what: str, call: str) -> None:
    wrong = _all_refused_cleanly(db, call, [([t], "22008", f"bad {what}") for t in EXTREME_TIMES])
    assert wrong == [], "\n".join(wrong)


BAD_SCHEDULES = [
    "",
    "daily 25:00",
    "every 0s",
    "every 25h",
    "daily 02:00'; DROP TABLE timers.timers; --",
    "cron * * * *",
    "cron 1 2 3 4 5 6",
    "trading \u202eLAC 15:05",
    "once 2001-01-01 00:00",
    "monthly 32 02:00",
    "daily 02:00\nhourly",
    "\U0001f600",
]


def test_bad_schedules_are_refused_cleanly(db: Database) -> None:
    cases: list[tuple[list[object], str, str]] = [([s], "22023", "") for s in BAD_SCHEDULES]
    wrong = _all_refused_cleanly(db, "SELECT timers.save('t1', %s, 'SELECT 1')", cases)
    assert wrong == [], "\n".join(wrong)


# --------------------------------------------------------------------------- SQL text


TRICKY_SQL = [
    "SELECT 'it''s; -- not a comment /* nor this */'",
    "SELECT $$a 'quoted' $tag$ string; COMMIT$$",
    "SELECT $tag$ $$ ; ROLLBACK $tag$",
    "SELECT $_1$x$_1$, $\u00e9$y$\u00e9$",
    "SELECT E'back\\\\slash \\' quote \\n'",
    "SELECT '\\' AS one_backslash",
    'SELECT "weird ""col"" name;" FROM (SELECT 1 AS "weird ""col"" name;") s',
    "SELECT 'RTL \u202e txet', 'zero\u200bwidth', '\U0001f600\U0001f389',"
    " '\u00fcn\u00efc\u00f6d\u00e9',"
    " '\u05e2\u05d1\u05e8\u05d9\u05ea', '\u0645\u0631\u062d\u0628\u0627'",
    "SELECT 1;\n\n-- a trailing comment, no newline at the end",
    "SELECT 1 /* nested /* comment */ still a comment */",
    "SELECT U&'\\0041', U&'d\\0061t\\+000061'",
    "SELECT 1\r\n;\r\nSELECT 2\r\n",
    "SELECT 1;;;SELECT 2;",
    "DO $do$ BEGIN PERFORM 'COMMIT; SET ROLE postgres'; END $do$",
    'CREATE TEMP TABLE "; COMMIT; --" ("ROLLBACK" int); INSERT INTO "; COMMIT; --" VALUES (1)',
    'SELECT 1 AS "\U0001f600"',
]


def test_tricky_sql_is_stored_verbatim_and_runs(db: Database) -> None:
    for sql in TRICKY_SQL:
        with connect(db, ALICE) as alice:
            save(alice, "t1", sql)
            stored = alice.execute("SELECT sql FROM timers.status WHERE name = 't1'").fetchone()
            audited = alice.execute(
                "SELECT detail->>'sql' FROM timers.audit WHERE action = 'save'"
                " ORDER BY id DESC LIMIT 1"
            ).fetchone()
        assert stored == (sql,)
        assert audited == (sql,)
        exec_as(db, ALICE, sql)


def _sized(total: int, unit: str) -> str:
    """SELECT '<filler>' of exactly `total` bytes, the filler made of `unit` characters."""
    head, tail = "SELECT '", "'"
    room = total - len(head) - len(tail)
    size = len(unit.encode())
    text = head + unit * (room // size) + "x" * (room % size) + tail
    assert len(text.encode()) == total
    return text


@pytest.mark.parametrize("unit", ["x", "\u00e9", "\U0001f600"], ids=["ascii", "2-byte", "4-byte"])
def test_sql_of_64_kb_is_accepted(db: Database, unit: str) -> None:
    sql = _sized(LIMIT, unit)
    with connect(db, ALICE) as alice:
        save(alice, "big", sql)
        row = alice.execute("SELECT octet_length(sql) FROM timers.status").fetchone()
    assert row == (LIMIT,)
    exec_as(db, ALICE, sql)


@pytest.mark.parametrize("unit", ["x", "\u00e9", "\U0001f600"], ids=["ascii", "2-byte", "4-byte"])
def test_sql_of_64_kb_and_one_byte_is_refused(db: Database, unit: str) -> None:
    message = _refused_cleanly(
        db,
        "SELECT timers.save('big', 'daily 02:00', %s)",
        [_sized(LIMIT + 1, unit)],
        "54000",
        "65537 bytes",
    )
    assert "65536" in message


def test_the_limit_counts_bytes_not_characters(db: Database) -> None:
    sql = "SELECT '" + "\u00e9" * 33000 + "'"  # 33,009 characters, 66,009 bytes
    _refused_cleanly(db, "SELECT timers.save('big', 'daily 02:00', %s)", [sql], "54000", "bytes")


EMPTY_OR_UNPARSABLE: list[tuple[str | None, str]] = [
    ("", "22023"),
    ("   \n\t ", "22023"),
    ("-- only a comment", "22023"),
    (";;;", "22023"),
    (None, "22023"),
    ("SELEC 1", "42601"),
    ("SELECT 'unterminated", "42601"),
    ("SELECT $$unterminated", "42601"),
    ("SELECT 1 /* unterminated", "42601"),
    ("\\c postgres", "42601"),
    ("SELECT 1 \\gexec", "42601"),
    ("SELECT 1; SELEC 2", "42601"),
]


def test_empty_or_unparsable_sql_is_refused_cleanly(db: Database) -> None:
    cases: list[tuple[list[object], str, str]] = [
        ([sql], state, "the timer's SQL") for sql, state in EMPTY_OR_UNPARSABLE
    ]
    wrong = _all_refused_cleanly(db, "SELECT timers.save('t1', 'daily 02:00', %s)", cases)
    assert wrong == [], "\n".join(wrong)
    with connect(db, ALICE) as alice:
        for sql, state in EMPTY_OR_UNPARSABLE:
            if state == "42601":
                with pytest.raises(errors.SyntaxError) as caught:
                    alice.execute("SELECT timers.save('t1', 'daily 02:00', %s)", [sql])
                message = caught.value.diag.message_primary or ""
                assert re.search(r"line \d+, column \d+", message), message


def test_a_parse_error_names_the_line_and_column(db: Database) -> None:
    message = _refused_cleanly(
        db,
        "SELECT timers.save('t1', 'daily 02:00', %s)",
        ["SELECT '\U0001f600;';\n  -- x\n  SELEC 1"],
        "42601",
        "does not parse",
    )
    assert "line 3, column 3" in message, message


# --------------------------------------------------------------------------- odd role names


@pytest.mark.parametrize(
    "prefix",
    ["pgt q\"uo'te", "pgt; DROP TABLE x; --", "pgt \u00e9\U0001f600", "PGT-Upper"],
    ids=["quotes", "semicolon", "unicode", "upper"],
)
def test_roles_with_odd_names_save_and_run_as_themselves(db: Database, prefix: str) -> None:
    with db.connect() as su:
        su.execute("CREATE TABLE public.who_ran (who name DEFAULT current_user)")
        su.execute("GRANT ALL ON public.who_ran TO PUBLIC")
    with fresh_role(db, "pgtimers_admin", prefix=prefix) as role:
        with connect(db, role) as conn:
            save(conn, "t1", "INSERT INTO public.who_ran DEFAULT VALUES")
        exec_as(db, role, "INSERT INTO public.who_ran DEFAULT VALUES")
        with db.connect() as su:
            assert su.execute("SELECT owner FROM timers.timers").fetchone() == (role,)
            assert su.execute("SELECT who FROM public.who_ran").fetchall() == [(role,)]
            assert su.execute("SELECT actor, session FROM timers.audit").fetchall() == [
                (role, role)
            ]
    with fresh_role(db, "pgtimers_reader", prefix=prefix) as reader:
        with connect(db, reader) as conn:
            quoted = pgsql.Identifier(reader).as_string(conn)
            with pytest.raises(errors.InsufficientPrivilege) as caught:
                save(conn, "t2", "SELECT 1")
        assert reader in str(caught.value.diag.message_primary)
        assert (
            caught.value.diag.message_hint
            == f"An administrator can run: GRANT pgtimers_admin TO {quoted};"
        )
