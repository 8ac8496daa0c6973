"""Log lines of the runner: one line per event, key=value, easy to grep.

ts=2027-01-04T09:00:00.012Z level=warning event=run_failed timer=x database=app due=... error="..."
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import sys
from collections.abc import Mapping
from typing import Any

LOGGER = logging.getLogger("pgtimers.runner")

# A value longer than this is cut (as the SQL cuts errors): one line stays a line.
MAX_VALUE = 8000
# Characters a value cannot show as they are: control characters (C0, DEL, C1:
# CR, ESC, NEL and the rest), the Unicode line and paragraph separators, and the
# bidi controls, which reorder how the rest of a line reads. Each is written as a
# backslash, u and four hex digits, so a value can neither end its line nor drive the
# terminal that shows it.
_UNSAFE = r"\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_ESCAPE = re.compile(rf'[\\"{_UNSAFE}]')
_QUOTE = re.compile(rf'[\s"=\\{_UNSAFE}]')
_NAMED = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}
# What a key may hold; anything else becomes `_` (keys are code's, but stay safe).
_NOT_KEY = re.compile(r"[^A-Za-z0-9_.]")


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or f"\\u{ord(char):04x}"


def _value(value: Any) -> str:
    text = "" if value is None else str(value)
    if len(text) > MAX_VALUE:
        text = f"{text[:MAX_VALUE]} … [cut: {len(text)} characters in all]"
    if text and not _QUOTE.search(text):
        return text
    return '"' + _ESCAPE.sub(_escaped, text) + '"'


def _key(key: str) -> str:
    return _NOT_KEY.sub("_", key) or "_"


def line(event: str, **fields: Any) -> str:
    """`event=<event> k=v ...`, values quoted when they hold spaces, quotes or `=`, and
    every control or line-separator character escaped."""
    parts = [f"event={_value(event)}"]
    parts.extend(
        f"{_key(key)}={_value(value)}" for key, value in fields.items() if value is not None
    )
    return " ".join(parts)


def event(level: int, name: str, **fields: Any) -> None:
    """Log one event line at `level`."""
    LOGGER.log(level, line(name, **fields))


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        when = dt.datetime.fromtimestamp(record.created, dt.timezone.utc)
        stamp = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
        return f"ts={stamp} level={record.levelname.lower()} {record.getMessage()}"


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    # whatever sys.stderr is when a line is written (a test's capture, a redirect made
    # after setup), not the one of the first setup
    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def setup(level: int = logging.INFO) -> None:
    """Send the runner's lines to stderr (idempotent)."""
    if any(getattr(h, "_pgtimers", False) for h in LOGGER.handlers):
        return
    handler = _Stderr(sys.stderr)
    handler.setFormatter(_Formatter())
    handler._pgtimers = True  # type: ignore[attr-defined]
    LOGGER.addHandler(handler)
    LOGGER.setLevel(level)
    LOGGER.propagate = False


def run_result(database: str, result: Mapping[str, Any]) -> None:
    """The lines of one run's result: one per skip event, one when it failed (with its
    attempt, and its retry or why none follows), one when it paused the timer."""
    timer = result.get("timer")
    for skip in result.get("skipped") or []:
        skip_event(database, timer, skip)
    if result.get("ok") is False:
        event(
            logging.WARNING,
            "run_failed",
            timer=timer,
            database=database,
            kind=result.get("kind"),
            due=result.get("due_at"),
            attempt=result.get("attempt") if result.get("attempt", 1) != 1 else None,
            took_ms=result.get("took_ms"),
            sqlstate=result.get("sqlstate") or None,
            error=result.get("error"),
            retry_at=result.get("retry_at"),
            gave_up=result.get("gave_up"),
        )
    # (a retry not made is a skipped due time: its line is the skip's, above)
    if result.get("paused"):
        event(
            logging.WARNING,
            "timer_paused",
            timer=timer,
            database=database,
            due=result.get("due_at"),
            note="failed pause_after due times in a row; timers.enable turns it on again",
        )
    # (a run that yielded is no attempt: held.py says so)
    if "yielded" not in result and result.get("ok") is not False and result.get("kind") is not None:
        LOGGER.debug(
            line(
                "run_ok",
                timer=timer,
                database=database,
                kind=result.get("kind"),
                due=result.get("due_at"),
                took_ms=result.get("took_ms"),
                late_ms=result.get("late_ms"),
                rows=result.get("rows"),
            )
        )


def skip_event(database: str, timer: Any, skip: Mapping[str, Any]) -> None:
    """One line for one skip event (one or many due times of one timer)."""
    event(
        logging.WARNING,
        "run_skipped",
        timer=timer if timer is not None else skip.get("timer"),
        database=database,
        due=skip.get("first"),
        last_due=skip.get("last") if skip.get("last") != skip.get("first") else None,
        count=skip.get("count"),
        reason=skip.get("reason"),
    )
