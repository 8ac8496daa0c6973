"""Keyed timer fixtures: the runner fixtures, a test clock, and a log table of fires."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.integration.runner.conftest import start_runner  # noqa: F401 (a fixture)

# Each fire writes one row: which key, which owed time, which transaction, as whom.
# No unique constraint, so a double commit would show.
LOG_TABLE = """
CREATE TABLE fired_keyed (
    id bigserial PRIMARY KEY,
    key text NOT NULL,
    due text NOT NULL,
    xid text NOT NULL,
    who name NOT NULL,
    note text NOT NULL DEFAULT ''
);
GRANT ALL ON fired_keyed, fired_keyed_id_seq TO PUBLIC
"""
LOG_SQL = (
    "INSERT INTO public.fired_keyed (key, due, xid, who) VALUES (current_setting('pgtimers.timer'),"
    " current_setting('pgtimers.due_at'), pg_current_xact_id()::text, current_user)"
)


def log_sql(note: str) -> str:
    """LOG_SQL that also writes a note (to tell SQL versions apart)."""
    return (
        "INSERT INTO public.fired_keyed (key, due, xid, who, note) VALUES"
        " (current_setting('pgtimers.timer'), current_setting('pgtimers.due_at'),"
        f" pg_current_xact_id()::text, current_user, '{note}')"
    )


Fired = Callable[[], list[tuple[str, str]]]


@pytest.fixture
def fired(conn: psycopg.Connection) -> Fired:
    """Make the log table; read it back as (key, due) rows in the order they committed."""
    conn.execute(LOG_TABLE)

    def read() -> list[tuple[str, str]]:
        rows = conn.execute("SELECT key, due FROM fired_keyed ORDER BY id").fetchall()
        return [(r[0], r[1]) for r in rows]

    return read


def fired_rows(conn: psycopg.Connection) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM fired_keyed ORDER BY id").fetchall()


def arm(
    conn: psycopg.Connection, key: str, owed_at: str | None, sql: str = LOG_SQL, **options: Any
) -> dict[str, Any]:
    """timers.arm with named options (owed_at None: its policy sets it); the timers.keyed row."""
    names = "".join(f", {k} => %({k})s" for k in options)
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            f"SELECT * FROM timers.arm(%(key)s, %(owed)s, %(sql)s{names})",
            {"key": key, "owed": owed_at, "sql": sql, **options},
        ).fetchone()
    assert row is not None
    return row


def call(conn: psycopg.Connection, fn: str, *args: Any) -> dict[str, Any]:
    """SELECT * FROM timers.<fn>(args...): a timers.keyed row."""
    marks = ", ".join(["%s"] * len(args))
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(f"SELECT * FROM timers.{fn}({marks})", list(args)).fetchone()
    assert row is not None
    return row


def keyed(conn: psycopg.Connection, key: str) -> dict[str, Any]:
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM timers.keyed WHERE key = %s", [key]).fetchone()
    assert row is not None, f"no keyed timer {key}"
    return row


def events(conn: psycopg.Connection, key: str | None = None) -> list[tuple[str, str, str]]:
    """(key, event, cause) of the keyed events, oldest first."""
    rows = conn.execute(
        "SELECT key, event, cause FROM timers.keyed_events"
        " WHERE %(k)s::text IS NULL OR key = %(k)s ORDER BY id",
        {"k": key},
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def advance(
    conn: psycopg.Connection, to: str, clock: str = "c", **kwargs: Any
) -> tuple[dict[str, Any], list[str]]:
    """CALL timers.advance_test_clock(clock, to); its result and NOTICEs."""
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    extra = "".join(f", {k} => %({k})s" for k in kwargs)
    row = conn.execute(
        f"CALL timers.advance_test_clock(%(clock)s, %(to)s{extra})",
        {"clock": clock, "to": to, **kwargs},
    ).fetchone()
    assert row is not None
    return row[0], notices
