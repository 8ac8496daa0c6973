"""The files of `pgtimers apply`: TOML with `[[timer]]` and `[[calendar]]` tables, read and
checked before the database is asked (unknown keys, wrong types, duplicate names, the
SQL of `sql_file`), and turned into the spec timers.apply takes. Every error names the
file and the line; tomllib gives no positions, so a table's line is found in the text."""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import difflib
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pgtimers.options import OPTIONS, REQUIRED

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (dependency: tomli; python_version < "3.11")
    import tomli as tomllib

# what each key may hold; an interval is text PostgreSQL reads ('30 seconds')
_TEXT, _INT, _BOOL, _TIME, _DAY = "text", "integer", "boolean", "time", "date"
_NAMES = "names"
# an option's kind (options.py) -> what its key holds in a file
_OPTION_KEY = {
    "bool": _BOOL,
    "str": _TEXT,
    "time": _TIME,
    "int": _INT,
    "int32": _INT,
    "names": _NAMES,
}
TIMER_KEYS: dict[str, str] = {
    **dict.fromkeys(REQUIRED, _TEXT),
    "sql_file": _TEXT,
    **{option.name: _OPTION_KEY.get(option.kind, _TEXT) for option in OPTIONS},
}
CALENDAR_KEYS = {"name": _TEXT, "week": _TEXT, "valid_from": _DAY, "valid_until": _DAY}
CALENDAR_LISTS: dict[str, dict[str, str]] = {
    "weeks": {"from_day": _DAY, "week": _TEXT},
    "holidays": {"day": _DAY, "note": _TEXT},
    "trading_days": {"day": _DAY, "note": _TEXT},
}
TOP_KEYS = {"timer", "calendar", "managed_by"}
_HEADER = re.compile(r"^\s*\[\[\s*([A-Za-z0-9_.\s]+?)\s*\]\]")


class SpecError(Exception):
    """Bad files: every error found, each `FILE:LINE: what`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


@dataclasses.dataclass
class Spec:
    """The spec of a set of files and where each timer and calendar was written."""

    timers: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    calendars: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    managed_by: str | None = None
    # lower(name) -> "FILE:LINE" of its table
    where: dict[str, str] = dataclasses.field(default_factory=dict)
    where_calendar: dict[str, str] = dataclasses.field(default_factory=dict)

    def as_json(self, managed_by: str | None = None) -> dict[str, Any]:
        """The spec timers.apply takes; `calendar` only when a file has one."""
        spec: dict[str, Any] = {"timer": self.timers}
        if self.calendars:
            spec["calendar"] = self.calendars
        label = managed_by if managed_by is not None else self.managed_by
        if label is not None:
            spec["managed_by"] = label
        return spec


def _outside_strings(text: str) -> list[tuple[int, str]]:
    """The numbered lines that do not start inside a multi-line string (quotes, escapes
    and comments followed as TOML reads them)."""
    lines: list[tuple[int, str]] = []
    opened: str | None = None  # the quote of the string we are in, if any
    at, number, end = 0, 1, len(text)
    starts_inside = False
    while at <= end:
        if at == end or text[at] == "\n":
            if not starts_inside:
                line_start = text.rfind("\n", 0, at) + 1
                lines.append((number, text[line_start:at]))
            if opened in ('"', "'", "#"):
                opened = None  # a one-line string or a comment ends with its line
            number, at, starts_inside = number + 1, at + 1, opened is not None
            continue
        char = text[at]
        if opened is None:
            for quote in ('"""', "'''", '"', "'", "#"):
                if text.startswith(quote, at):
                    opened, at = quote, at + len(quote)
                    break
            else:
                at += 1
        elif opened == "#":
            at += 1
        elif char == "\\" and opened in ('"', '"""'):
            at += 2 if at + 1 < end and text[at + 1] != "\n" else 1
        elif text.startswith(opened, at):
            at += len(opened)
            if len(opened) == 3:  # up to two quotes more belong to the string
                extra = 0
                while extra < 2 and at < end and text[at] == opened[0]:
                    at, extra = at + 1, extra + 1
            opened = None
        else:
            at += 1
    return lines


class _Lines:
    """The lines of a file that start outside strings, read once, to find tables and keys."""

    def __init__(self, text: str) -> None:
        self.rows = _outside_strings(text)
        self.numbers = [number for number, _ in self.rows]

    def headers(self, table: str, after: int = 0) -> list[int]:
        """The line numbers of the `[[table]]` headers after line `after`."""
        return [
            number
            for number, line in self.rows[bisect.bisect_right(self.numbers, after) :]
            if (found := _HEADER.match(line)) and re.sub(r"\s", "", found.group(1)) == table
        ]

    def key(self, start: int, key: str) -> int:
        """The line of `key = …` in the table that starts on line `start` (else `start`)."""
        pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        for number, line in self.rows[bisect.bisect_right(self.numbers, start) :]:
            if re.match(r"^\s*\[", line):
                break
            if pattern.match(line):
                return number
        return start


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return "a date or time"
    if isinstance(value, list):
        return "an array"
    return "a table"


def _value(kind: str, value: Any) -> tuple[Any, str | None]:
    """The value as JSON for its kind, or None and what was wanted."""
    if kind == _BOOL:
        return (value, None) if isinstance(value, bool) else (None, "true or false")
    if kind == _INT:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return (value, None) if ok else (None, "an integer")
    if kind == _TIME:
        if isinstance(value, dt.datetime):
            return value.isoformat(), None
        return (value, None) if isinstance(value, str) else (None, "a date-time")
    if kind == _NAMES:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return (value, None) if ok else (None, "an array of timer names")
    if kind == _DAY:
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return value.isoformat(), None
        return (value, None) if isinstance(value, str) else (None, "a date (YYYY-MM-DD)")
    return (value, None) if isinstance(value, str) else (None, "a string")


def _unknown(key: str, known: Sequence[str]) -> str:
    near = difflib.get_close_matches(key, known, n=1)
    return f"unknown key '{key}'" + (f" (did you mean '{near[0]}'?)" if near else "")


class _Reader:
    """Reads one file into a Spec, adding every error it finds."""

    def __init__(self, path: Path, text: str, spec: Spec, errors: list[str]) -> None:
        self.path, self.text, self.spec, self.errors = path, text, spec, errors
        self.kind = "timer"
        self.lines = _Lines(text)

    def fail(self, line: int, what: str, message: str) -> None:
        self.errors.append(f"{self.path}:{line}: {what}{message}")

    def table(
        self, raw: Any, line: int, what: str, keys: dict[str, str], lists: dict[str, Any]
    ) -> dict[str, Any] | None:
        """One table's keys checked and converted; None when it is not a table."""
        if not isinstance(raw, dict):
            self.fail(line, what, f"must be a table, not {_kind_of(raw)}")
            return None
        out: dict[str, Any] = {}
        for key, value in raw.items():
            at = self.lines.key(line, key)
            if key in lists:
                out[key] = self.rows(value, at, what, key, lists[key])
            elif key not in keys:
                self.fail(at, what, _unknown(key, [*keys, *lists]))
            else:
                converted, wanted = _value(keys[key], value)
                if wanted is None:
                    out[key] = converted
                else:
                    shown = _kind_of(value) + (f" ({value!r})" if isinstance(value, str) else "")
                    self.fail(at, what, f"{key} must be {wanted}, not {shown}")
        return out

    def rows(self, value: Any, line: int, what: str, key: str, keys: dict[str, str]) -> Any:
        if not isinstance(value, list):
            self.fail(line, what, f"{key} must be an array of tables, not {_kind_of(value)}")
            return []
        headers = self.lines.headers(f"{self.kind}.{key}", after=line)
        found = [
            self.table(row, headers[i] if i < len(headers) else line, f"{what}{key}: ", keys, {})
            for i, row in enumerate(value)
        ]
        return [row for row in found if row is not None]

    def name(self, raw: dict[str, Any], table: dict[str, Any], line: int, kind: str) -> str | None:
        """The table's name; None when it has none or a wrong one (said already)."""
        if "name" not in raw:
            self.fail(line, f"[[{kind}]]: ", 'no name (name = "…")')
        name = table.get("name")
        return name if isinstance(name, str) else None

    def timer(self, raw: Any, line: int) -> None:
        label = raw.get("name") if isinstance(raw, dict) else None
        what = f'timer "{label}": ' if isinstance(label, str) else "[[timer]]: "
        table = self.table(raw, line, what, TIMER_KEYS, {})
        if table is None:
            return
        name = self.name(raw, table, line, "timer")
        if "schedule" not in raw:
            self.fail(line, what, 'no schedule (schedule = "…")')
        self.sql(table, raw, line, what)
        if name is None:
            return
        before = self.spec.where.get(name.lower())
        if before is not None:
            self.fail(line, what, f"is named twice (also at {before})")
            return
        self.spec.where[name.lower()] = f"{self.path}:{line}"
        self.spec.timers.append(table)

    def sql(self, table: dict[str, Any], raw: dict[str, Any], line: int, what: str) -> None:
        if "sql" in raw and "sql_file" in raw:
            self.fail(line, what, "has both sql and sql_file: keep one")
        elif "sql" not in raw and "sql_file" not in raw:
            self.fail(line, what, 'no SQL: add sql = "…" or sql_file = "file.sql"')
        elif "sql_file" in table:
            relative = table.pop("sql_file")
            source = self.path.parent / relative
            at = self.lines.key(line, "sql_file")
            try:
                table["sql"] = source.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                self.fail(at, what, f"cannot read sql_file {relative!r} ({source}: {reason})")

    def calendar(self, raw: Any, line: int) -> None:
        label = raw.get("name") if isinstance(raw, dict) else None
        what = f'calendar "{label}": ' if isinstance(label, str) else "[[calendar]]: "
        table = self.table(raw, line, what, CALENDAR_KEYS, CALENDAR_LISTS)
        if table is None:
            return
        name = self.name(raw, table, line, "calendar")
        if name is None:
            return
        before = self.spec.where_calendar.get(name.lower())
        if before is not None:
            self.fail(line, what, f"is named twice (also at {before})")
            return
        self.spec.where_calendar[name.lower()] = f"{self.path}:{line}"
        self.spec.calendars.append(table)

    def read(self) -> None:
        try:
            data = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            found = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
            line = found.group(1) if found else "1"
            self.errors.append(f"{self.path}:{line}: not TOML: {exc}")
            return
        for key in data:
            if key not in TOP_KEYS:
                at = self.lines.key(0, key) if key else 1
                headers = self.lines.headers(key)
                self.fail(headers[0] if headers else at, "", _unknown(key, sorted(TOP_KEYS)))
        label = data.get("managed_by")
        if label is not None:
            self.managed_by(label)
        for kind, read in (("timer", self.timer), ("calendar", self.calendar)):
            self.kind = kind
            tables = data.get(kind, [])
            lines = self.lines.headers(kind)
            if not isinstance(tables, list):
                self.fail(self.lines.key(0, kind), "", f"{kind} must be [[{kind}]] tables")
                continue
            for index, raw in enumerate(tables):
                line = lines[index] if index < len(lines) else self.lines.key(0, kind)
                read(raw, line)

    def managed_by(self, label: Any) -> None:
        at = self.lines.key(0, "managed_by")
        if not isinstance(label, str):
            self.fail(at, "", f"managed_by must be a string, not {_kind_of(label)}")
        elif self.spec.managed_by not in (None, label):
            self.fail(at, "", f"managed_by {label!r} differs from {self.spec.managed_by!r}")
        else:
            self.spec.managed_by = label


def read_files(paths: Sequence[Path]) -> Spec:
    """Every file read and checked; raises SpecError with all the errors found."""
    spec = Spec()
    errors: list[str] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            errors.append(f"{path}: cannot read it ({reason})")
            continue
        _Reader(path, text, spec, errors).read()
    if errors:
        raise SpecError(errors)
    return spec
