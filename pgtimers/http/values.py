"""Which value of a request body PostgreSQL could not read.

A statement that casts a body's times and intervals (`$7::text::timestamptz`) fails with
a data exception that does not say which key held the bad value. Only then, so a good
request pays nothing, each time and interval of the body is cast alone, and the 400
names its key as timers.save_many does: `bad retry_delay: 'soon' (invalid input syntax
for type interval: "soon")`."""

from __future__ import annotations

import re
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from pgtimers.http.errors import HttpError
from pgtimers.http.queries import query

_CASTS = {"time": "cast_time", "interval": "cast_interval"}
_CONTROL = re.compile("[\x01-\x1f\x7f-\x9f]")


def quoted(value: str, most: int = 80) -> str:
    """A value as SQL quotes it in a message (timers._quoted): cut, control characters
    as '?'."""
    shown = value if len(value) <= most else value[:most] + "…"
    return "'" + _CONTROL.sub("?", shown).replace("'", "''") + "'"


async def name_the_bad_value(
    conn: asyncpg.Pool[Any] | PoolConnectionProxy[Any],
    body: dict[str, Any],
    keys: dict[str, tuple[str, bool]],
) -> None:
    """Raise a 400 naming the first time or interval of `body` PostgreSQL cannot read;
    return when each of them reads."""
    for key, (kind, _) in keys.items():
        value = body.get(key)
        if value is None or kind not in _CASTS:
            continue
        try:
            await conn.fetchval(query(_CASTS[kind]), value)
        except asyncpg.exceptions.DataError as exc:
            message = getattr(exc, "message", None) or str(exc)
            raise HttpError(400, f"bad {key}: {quoted(value)} ({message})") from None
