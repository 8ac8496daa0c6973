"""Relative times and tables of the CLI, without a database."""

from __future__ import annotations

import datetime as dt

import pytest

from pgtimers.cli.format import relative, result_word, span, table, timestamp, utc_minute

NOW = 1_792_647_871_000


@pytest.mark.parametrize(
    ("ms", "expected"),
    [
        (0, "-"),
        (NOW + 180_000, "in 3 min"),
        (NOW - 12_000, "12 s ago"),
        (NOW + 500, "now"),
        (NOW + 2 * 3_600_000 + 5, "in 2 h"),
        (NOW - 3 * 86_400_000, "3 d ago"),
    ],
)
def test_relative(ms: int, expected: str) -> None:
    assert relative(ms, NOW) == expected


def test_timestamp_and_result() -> None:
    assert timestamp(0) == "-"
    assert timestamp(1_792_647_900_000) == "2026-10-22T05:45:00+00:00"
    assert [result_word(v) for v in (None, True, False)] == ["-", "ok", "FAILED"]


def test_table_aligns_and_cuts() -> None:
    text = table(["name", "sql"], [["a", "x" * 100], ["bbbb", "line\nbreak"]], width=10)
    lines = text.splitlines()
    assert lines[0] == "name  sql"
    assert lines[1] == "----  ----------"
    assert lines[2] == "a     xxxxxxxxx…"
    assert lines[3] == "bbbb  line break"


def test_utc_minute_and_span_as_the_seed() -> None:
    kathmandu = dt.timezone(dt.timedelta(hours=5, minutes=45))
    assert utc_minute(dt.datetime(2028, 2, 1, 19, 45, tzinfo=kathmandu)) == "2028-02-01 14:00Z"
    assert utc_minute(dt.datetime(2028, 2, 1, 14, 0, 30, tzinfo=dt.timezone.utc)) == (
        "2028-02-01 14:00:30Z"
    )
    assert utc_minute(None) == "—"
    assert span(dt.timedelta(days=54, hours=10, minutes=30)) == "54d 10h 30m"
    assert span(dt.timedelta(seconds=5)) == "5s"
    assert span(dt.timedelta(0)) == "0m"
    assert span(-dt.timedelta(hours=2)) == "-2h"
    assert span(None) == "—"
