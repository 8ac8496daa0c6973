"""A small TOML writer for `pgtimers export`: strings (SQL of several lines as a literal
'''…''' block when that reads back the same, else a basic string with escapes),
integers, booleans, dates and times, and arrays of tables one level deep."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
# what a basic string must escape besides \ and ": the control characters TOML forbids
_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
# a literal block cannot hold ''' or control characters other than tab and newline
_NOT_LITERAL = re.compile("'''|[\x00-\x08\x0b-\x1f\x7f]|'$")


def key(name: str) -> str:
    """A key, quoted when it is not bare."""
    return name if _BARE_KEY.match(name) else basic(name)


def basic(text: str) -> str:
    """A basic string with every character TOML requires escaped."""
    out = []
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def string(text: str) -> str:
    """A string; several lines as a literal block when it reads back unchanged."""
    if "\n" in text and not _NOT_LITERAL.search(text):
        # a newline right after the opening ''' is dropped by readers: it stands for none
        return "'''\n" + text + "'''"
    return basic(text)


def value(item: Any) -> str:
    """One value: string, integer, float, boolean, date, date-time or array of them."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float):
        return repr(item)
    if isinstance(item, str):
        return string(item)
    if isinstance(item, dt.datetime | dt.date | dt.time):
        return item.isoformat()
    if isinstance(item, Sequence):
        return "[" + ", ".join(value(v) for v in item) + "]"
    raise TypeError(f"no TOML for {type(item).__name__}")


def _is_tables(item: Any) -> bool:
    return isinstance(item, list) and bool(item) and all(isinstance(v, Mapping) for v in item)


def table(header: str, fields: Mapping[str, Any], order: Sequence[str] = ()) -> str:
    """`[[header]]` with its keys (those named in `order` first, in that order), then its
    arrays of tables as `[[header.key]]`; a None value is left out."""
    names = list(dict.fromkeys([*(k for k in order if k in fields), *fields]))
    lines = [f"[[{header}]]"]
    nested = []
    for name in names:
        item = fields[name]
        if item is None or (isinstance(item, list) and not item):
            continue
        if _is_tables(item):
            nested.append((name, item))
        else:
            lines.append(f"{key(name)} = {value(item)}")
    for name, rows in nested:
        for row in rows:
            lines.append("")
            lines.append(table(f"{header}.{key(name)}", row).rstrip("\n"))
    return "\n".join(lines) + "\n"


Tables = Sequence[tuple[str, Sequence[Mapping[str, Any]]]]


def document(top: Mapping[str, Any], tables: Tables, order: Sequence[str] = ()) -> str:
    """A file: top-level keys, then each array of tables, a blank line between tables."""
    parts = [f"{key(k)} = {value(v)}\n" for k, v in top.items() if v is not None]
    for header, rows in tables:
        parts.extend(table(header, row, order) for row in rows)
    return "\n".join(parts)
