"""The option list of pgtimers/options.py against the SQL, on a real server: timers.save's
signature (names, types and defaults in pg_proc) and what timers._timer_args reads from the
JSON form, so neither can drift from the other; and timers.save_json(jsonb), which the CLI, the
HTTP API and the console save through, saves what the named-argument form saves and
refuses what it refuses, with the same SQLSTATE and message."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pgtimers.options import BY_NAME, KEYS, OPTIONS, REQUIRED, Option, timer_json
from pgtimers.queries import beside
from pgtimers.runner import connect
from pgtimers.runner.answers import RUN_TIMEOUT_MS
from tests.conftest import Database, scalar

_SAVE_PARAMETERS = """
    SELECT a.name, format_type(a.type, NULL), pg_get_function_arg_default(p.oid, a.n::integer)
      FROM pg_proc p,
           unnest(p.proargnames, p.proargtypes::oid[]) WITH ORDINALITY AS a(name, type, n)
     WHERE p.pronamespace = 'timers'::regnamespace AND p.proname = 'save' AND p.pronargs > 1
     ORDER BY a.n"""
_TIMER_ARGS_OUT = """
    SELECT a.name, format_type(a.type, NULL)
      FROM pg_proc p,
           unnest(p.proargnames, p.proallargtypes, p.proargmodes)
               WITH ORDINALITY AS a(name, type, mode, n)
     WHERE p.oid = 'timers._timer_args(jsonb)'::regprocedure AND a.mode = 'o'
     ORDER BY a.n"""
_MINIMAL = {"name": "t", "schedule": "every 10m", "sql": "SELECT 1"}


def _parsed_default(text: str | None) -> tuple[bool, Any]:
    """(has a default, its value) of a pg_get_function_arg_default text."""
    if text is None:
        return False, None
    if text.startswith("NULL::"):
        return True, None
    if text in ("true", "false"):
        return True, text == "true"
    if re.fullmatch(r"-?\d+", text):
        return True, int(text)
    quoted = re.fullmatch(r"'((?:[^']|'')*)'::[a-z ]+", text)
    assert quoted, f"a default pgtimers cannot read: {text}"
    return True, quoted.group(1).replace("''", "'")


def _same(conn: psycopg.Connection, option: Option, server: Any) -> bool:
    """The server's value is the option's default (intervals compared by PostgreSQL)."""
    if option.kind == "interval" and server is not None and option.default is not None:
        same: bool = scalar(conn, "SELECT %s::interval = %s::interval", [server, option.default])
        return same
    return bool(server == option.default)


def test_timers_save_takes_the_options_in_order_with_their_types(
    conn: psycopg.Connection,
) -> None:
    rows = conn.execute(_SAVE_PARAMETERS).fetchall()
    assert [name for name, _, _ in rows] == list(KEYS)
    assert [kind for name, kind, _ in rows if name in BY_NAME] == [o.sql_type for o in OPTIONS]
    assert all(kind == "text" for name, kind, _ in rows if name in REQUIRED)


def test_timers_save_has_the_options_defaults(conn: psycopg.Connection) -> None:
    for name, _, text in conn.execute(_SAVE_PARAMETERS).fetchall():
        has, value = _parsed_default(text)
        if name in REQUIRED:
            assert not has, name
            continue
        option = BY_NAME[name]
        assert has, f"timers.save has no default for {name}"
        assert _same(conn, option, value), f"{name}: SQL {text}, Python {option.default!r}"


def test_the_json_form_reads_the_same_options_with_the_same_defaults(
    conn: psycopg.Connection,
) -> None:
    out = conn.execute(_TIMER_ARGS_OUT).fetchall()
    assert [name for name, _ in out] == list(KEYS)
    assert dict(out) == {**dict.fromkeys(REQUIRED, "text"), **{o.name: o.sql_type for o in OPTIONS}}
    read = scalar(
        conn, "SELECT to_jsonb(a) FROM timers._timer_args(%s::jsonb) a", [timer_json(_MINIMAL)]
    )
    for option in OPTIONS:
        assert _same(conn, option, read[option.name]), (option.name, read[option.name])
    # an unknown key's error lists the keys, in this order
    with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
        conn.execute("SELECT timers._timer_args('{\"nope\": 1}')")
    assert str(refused.value.diag.message_primary).endswith("use " + ", ".join(KEYS))


# a value other than the default for every option (test_clock and run_group exclude
# autonomous: two timers; after needs schedule 'after': a third)
SAMPLES: list[dict[str, Any]] = [
    {
        "enabled": False,
        "timezone": "Asia/Kathmandu",
        "catch_up": "all",
        "start_at": "2030-01-01 00:00:00+00",
        "end_at": "2031-01-01 00:00:00+00",
        "max_runs": 5,
        "timeout": "45 seconds",
        "locked": True,
        "retries": 2,
        "retry_delay": "10 seconds",
        "pause_after": 3,
        "jitter": "1 minute",
        "priority": 7,
        "catch_up_window": "2 hours",
        "autonomous": True,
        "deadline": "5 minutes",
        "history": "failures",
    },
    # (a run group is not for an autonomous timer)
    {"test_clock": "clk", "run_group": "heavy"},
    {"schedule": "after", "after": ["up"]},
]
_ROW = """
    SELECT to_jsonb(t) - ARRAY['id', 'name', 'created_at', 'updated_at', 'origin_at']
      FROM timers.timers t WHERE name = %s"""


def _named_save(conn: psycopg.Connection, values: dict[str, Any]) -> None:
    args = sql.SQL(", ").join(
        sql.SQL("{} => {}").format(sql.Identifier(key), sql.Placeholder(key)) for key in values
    )
    conn.execute(sql.SQL("SELECT timers.save({})").format(args), values)


def test_the_samples_set_every_option() -> None:
    assert {key for sample in SAMPLES for key in sample} - set(REQUIRED) == set(BY_NAME)


@pytest.mark.parametrize("sample", SAMPLES)
def test_the_json_form_saves_what_the_named_form_saves(
    conn: psycopg.Connection, sample: dict[str, Any]
) -> None:
    conn.execute("SELECT timers.create_test_clock('clk', '2029-06-01Z')")
    conn.execute("SELECT timers.save('up', 'every 10m', 'SELECT 1')")
    _named_save(conn, {**_MINIMAL, "name": "by_name", **sample})
    conn.execute(
        "SELECT timers.save_json(%s::jsonb)",
        [timer_json({**_MINIMAL, **sample, "name": "by_json"})],
    )
    assert scalar(conn, _ROW, ["by_json"]) == scalar(conn, _ROW, ["by_name"])


@pytest.mark.parametrize(
    "bad",
    [
        {"retries": 101},
        {"retry_delay": "2 hours"},
        {"pause_after": 0},
        {"jitter": "2 hours"},
        {"priority": 500},
        {"catch_up": "sometimes"},
        {"catch_up_window": "2 years"},
        {"timeout": "2 days"},
        {"max_runs": 0},
        {"start_at": "2031-01-01Z", "end_at": "2030-01-01Z"},
        {"test_clock": "nope"},
        {"test_clock": "clk", "autonomous": True},
        {"deadline": "2 years"},
        {"history": "some"},
        {"timezone": "Mars/Olympus"},
        {"schedule": "every day"},
        {"name": "bad name"},
        {"sql": "VACUUM"},
        {"schedule": "after", "after": ["nope"]},
        {"after": ["t"]},
    ],
    ids=lambda bad: ",".join(bad),
)
def test_the_json_form_refuses_what_the_named_form_refuses(
    conn: psycopg.Connection, bad: dict[str, Any]
) -> None:
    conn.execute("SELECT timers.create_test_clock('clk', '2029-06-01Z')")
    with pytest.raises(psycopg.Error) as named:
        _named_save(conn, {**_MINIMAL, **bad})
    with pytest.raises(psycopg.Error) as by_json:
        conn.execute("SELECT timers.save_json(%s::jsonb)", [timer_json({**_MINIMAL, **bad})])
    assert named.value.sqlstate is not None and not named.value.sqlstate.startswith("XX")
    assert (by_json.value.sqlstate, by_json.value.diag.message_primary) == (
        named.value.sqlstate,
        named.value.diag.message_primary,
    )
    assert by_json.value.diag.message_hint == named.value.diag.message_hint
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[]", "a timer is a JSON object with name, schedule and sql, not array"),
        ("null", "a timer is a JSON object with name, schedule and sql, not null"),
        ('{"name": "t", "schedule": "hourly", "sql": "SELECT 1", "x": 1}', "unknown option 'x'"),
    ],
)
def test_the_json_form_takes_one_object(conn: psycopg.Connection, body: str, message: str) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=re.escape(message)):
        conn.execute("SELECT timers.save_json(%s::jsonb)", [body])


def test_the_json_form_needs_pgtimers_admin(db: Database) -> None:
    with db.connect("pgt_reader") as reader, pytest.raises(psycopg.errors.InsufficientPrivilege):
        reader.execute("SELECT timers.save_json(%s::jsonb)", [timer_json(_MINIMAL)])
    with db.connect("pgt_alice") as alice:
        alice.execute("SELECT timers.save_json(%s::jsonb)", [timer_json(_MINIMAL)])
    with db.connect() as conn:
        assert scalar(conn, "SELECT owner FROM timers.timers") == "pgt_alice"


def test_a_runs_default_time_limit_is_one_in_sql_and_the_runner(conn: psycopg.Connection) -> None:
    """A timer without a timeout runs within the runner's own limit, and a worker session's
    statements have it too: three places that must agree (a claim whose limit differs from
    the runner's is answered back, not run in the batch)."""
    assert scalar(conn, "SELECT timers._ms(timers._run_timeout())") == RUN_TIMEOUT_MS
    settings = beside(connect.__file__, "connect.sql")("run_session_settings")
    found = re.search(r"statement_timeout = '([^']+)'", settings)
    assert found, settings
    assert scalar(conn, "SELECT timers._ms(%s::interval)", [found.group(1)]) == RUN_TIMEOUT_MS
    assert BY_NAME["timeout"].default is None  # the SQL's default stands
