"""Request bodies: strict JSON objects whose unknown keys and wrong types are a 400
naming the key. Values are checked for type only; their meaning is checked by
the SQL functions, whose messages are passed on verbatim."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from pgtimers.http.errors import HttpError
from pgtimers.options import OPTIONS, REQUIRED

BIGINT_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

# key -> (kind, required); kinds: str, bool, int (bigint), int32 (integer), time (ISO text or
# Unix ms), interval (text or seconds), tables, names (timers'). A timer's keys are its
# options' (options.py).
SAVE_KEYS: dict[str, tuple[str, bool]] = {
    **dict.fromkeys(REQUIRED, ("str", True)),
    **{option.name: (option.kind, False) for option in OPTIONS},
}
ENABLE_KEYS: dict[str, tuple[str, bool]] = {"enabled": ("bool", False)}
KEEP_KEYS: dict[str, tuple[str, bool]] = {
    "tables": ("tables", True),
    "keep": ("str", True),
    "schedule": ("str", False),
}
BACKFILL_KEYS: dict[str, tuple[str, bool]] = {
    "from_at": ("time", True),
    "to_at": ("time", True),
}
_KIND_WORDS = {
    "str": "a string",
    "bool": "true or false",
    "int": "a whole number",
    "int32": "a whole number",
    "time": "a time (ISO 8601 text, or Unix milliseconds)",
    "interval": "an interval (text like '5 minutes', or a number of seconds)",
    "tables": "a list of table names",
    "names": "a list of timer names",
}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_object(raw: bytes, keys: dict[str, tuple[str, bool]], empty_ok: bool) -> dict[str, Any]:
    """The body as a checked dict (only known keys); an empty body is {} when empty_ok."""
    if not raw.strip():
        if empty_ok:
            return {}
        raise HttpError(400, f"the body must be a JSON object with {_list(keys)}")
    body = read_json(raw)
    if not isinstance(body, dict):
        raise HttpError(400, f"the body must be a JSON object with {_list(keys)}")
    return check_object(body, keys)


def read_json(raw: bytes) -> Any:
    """The body's JSON value (NaN and Infinity are not JSON), or a 400."""
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise HttpError(400, f"the body is not valid JSON: {exc}") from None


def check_object(
    body: dict[str, Any], keys: dict[str, tuple[str, bool]], where: str = "the body"
) -> dict[str, Any]:
    """The known keys of an object, each checked for its kind: an unknown key, a
    missing one or a value of the wrong type is a 400 naming it."""
    for key in body:
        if key not in keys:
            raise HttpError(400, f"unknown key {key!r} in {where}; the keys are {_list(keys)}")
    checked: dict[str, Any] = {}
    for key, (kind, required) in keys.items():
        if key not in body:
            if required:
                raise HttpError(400, f"key {key!r} is missing from {where}")
            continue
        checked[key] = _check(key, kind, body[key], required)
    return checked


def _list(keys: dict[str, tuple[str, bool]]) -> str:
    return ", ".join(keys)


def _wrong(key: str, kind: str, value: Any) -> HttpError:
    shown = json.dumps(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return HttpError(400, f"key {key!r} must be {_KIND_WORDS[kind]}, not {shown}")


def _text(key: str, value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise HttpError(400, f"key {key!r} is not valid Unicode text") from None
    if "\x00" in value:
        raise HttpError(400, f"key {key!r} must not contain a NUL character")
    return value


def _check(key: str, kind: str, value: Any, required: bool) -> Any:
    if value is None:
        if required:
            raise _wrong(key, kind, value)
        return None
    if kind == "str":
        if not isinstance(value, str):
            raise _wrong(key, kind, value)
        return _text(key, value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise _wrong(key, kind, value)
        return value
    if kind in ("int", "int32"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _wrong(key, kind, value)
        high = BIGINT_MAX if kind == "int" else INT_MAX
        if not -high - 1 <= value <= high:
            raise HttpError(400, f"key {key!r} is out of range")
        return value
    if kind == "time":
        return _time(key, value)
    if kind == "interval":
        return _interval(key, value)
    if kind == "names":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _wrong(key, kind, value)
        return [_text(key, v) for v in value]
    return _tables(key, value)


def _time(key: str, value: Any) -> str:
    if isinstance(value, str):
        return _text(key, value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(key, "time", value)
    try:
        when = dt.datetime.fromtimestamp(value / 1000, dt.timezone.utc)
    except (OverflowError, ValueError, OSError):
        raise HttpError(400, f"key {key!r} is out of range: {value} ms") from None
    return when.isoformat()


def _interval(key: str, value: Any) -> str:
    if isinstance(value, str):
        return _text(key, value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong(key, "interval", value)
    if not -1e12 < value < 1e12:
        raise HttpError(400, f"key {key!r} is out of range: {value} seconds")
    return f"{value} seconds"


def _tables(key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not value or len(value) > 100:
        raise HttpError(400, f"key {key!r} must be a list of 1 to 100 table names")
    for item in value:
        if not isinstance(item, str):
            raise _wrong(key, "tables", value)
        _text(key, item)
    return list(value)
