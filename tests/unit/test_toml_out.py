"""The TOML writer of `pgtimers export`: what it writes reads back the same with tomllib."""

from __future__ import annotations

import sys
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pgtimers.cli import toml_out

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_TEXT = st.text(st.characters(exclude_categories=["Cs"]))


@given(_TEXT)
def test_any_string_reads_back_the_same(text: str) -> None:
    assert tomllib.loads(f"x = {toml_out.string(text)}")["x"] == text


@given(st.lists(_TEXT, min_size=1, max_size=4).map("\n".join))
def test_lines_of_sql_read_back_the_same(text: str) -> None:
    assert tomllib.loads(f"x = {toml_out.string(text)}")["x"] == text


def test_sql_of_several_lines_is_a_literal_block_when_that_is_safe() -> None:
    sql = "SELECT 'a\\b'\n  FROM t\n WHERE x = \"y\";"
    assert toml_out.string(sql) == f"'''\n{sql}'''"
    assert toml_out.string("SELECT '''\nx") == "\"SELECT '''\\nx\""
    assert toml_out.string("a\r\nb").startswith('"')


def test_a_document_of_timers_and_calendars_reads_back() -> None:
    timers: list[dict[str, Any]] = [
        {"sql": "SELECT 1;\n", "name": "a", "schedule": "every 5m", "retries": 3, "locked": True},
        {"name": "b c", "schedule": "hourly", "sql": "x", "timezone": None},
    ]
    calendars: list[dict[str, Any]] = [
        {
            "name": "nepse",
            "week": "sun-thu",
            "holidays": [{"day": "2026-12-25", "note": 'Christmas "day"'}],
            "weeks": [],
        }
    ]
    text = toml_out.document(
        {"managed_by": "shop"}, [("timer", timers), ("calendar", calendars)], ["name", "schedule"]
    )
    assert text.index('name = "a"') < text.index("schedule") < text.index("sql = '''")
    back = tomllib.loads(text)
    assert back["managed_by"] == "shop"
    assert back["timer"] == [{k: v for k, v in t.items() if v is not None} for t in timers]
    assert back["calendar"] == [{k: v for k, v in calendars[0].items() if v != []}]


def test_a_key_named_in_the_order_and_the_fields_is_written_once() -> None:
    text = toml_out.table("calendar", {"name": "n", "week": "mon"}, ["name", "x", "name"])
    assert text == '[[calendar]]\nname = "n"\nweek = "mon"\n'
