"""Option values that PostgreSQL reads (times, intervals). Each is cast alone before a
command uses it, so a bad one's error names the option the user typed (`bad
--retry-delay: 'soon' (invalid input syntax for type interval: "soon")`) and nothing
is changed; what a value means (its range) is still checked by the SQL function."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

import psycopg

from pgtimers.cli.exit_codes import ExitCode
from pgtimers.queries import beside

_q = beside(__file__, "values.sql")
_CONTROL = re.compile("[\x01-\x1f\x7f-\x9f]")

# (option as typed, its value or None when not given, "time" or "interval")
Check = tuple[str, str | None, str]


def quoted(value: str, most: int = 80) -> str:
    """A value as the SQL functions quote it in a message: cut, control characters as '?'."""
    shown = value if len(value) <= most else value[:most] + "…"
    return "'" + _CONTROL.sub("?", shown).replace("'", "''") + "'"


def bad_value(conn: psycopg.Connection, checks: Iterable[Check]) -> str | None:
    """The error of the first given value PostgreSQL cannot read as its kind, or None."""
    for option, value, kind in checks:
        if value is None:
            continue
        try:
            conn.execute(_q(kind), {"value": value})
        except psycopg.DataError as exc:
            return f"bad {option}: {quoted(value)} ({exc.diag.message_primary or exc})"
    return None


def refuse(message: str) -> int:
    """Say what is wrong on stderr; the exit code of bad input."""
    print(f"pgtimers: {message}", file=sys.stderr)
    return ExitCode.BAD_INPUT
