"""Static checks of the schedule error messages and docs/schedules.md (no database needed)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SQL = (ROOT / "sql" / "code" / "02_schedule_grammar.sql").read_text()
DOCS = (ROOT / "docs" / "schedules.md").read_text()

# The list every bad-schedule error ends with (modeled on seed 002's HTTP 400).
EXAMPLES = (
    'use a schedule like "every 10s", "every 5m", "every 2h", "hourly", "hourly :15", '
    '"daily 16:00", "daily 02:00,13:30", "weekdays 11:00", "sun-thu 11:00", '
    '"mon,wed,fri 09:30", "monthly 1 02:00", "trading nepse 15:05" (the trading days of '
    'calendar nepse), "cron 0 9 * * 1-5", "once 2027-01-04 09:00" or "in 30m"'
)


def test_examples_text_is_the_seed_list() -> None:
    body = re.search(r"FUNCTION timers\._schedule_examples\(\).*?SELECT (.*?)::text", SQL, re.S)
    assert body is not None
    pieces = re.findall(r"'((?:[^']|'')*)'", body.group(1))
    assert "".join(p.replace("''", "'") for p in pieces) == EXAMPLES


def test_every_example_is_documented() -> None:
    for example in re.findall(r'"([^"]+)"', EXAMPLES):
        assert f"`{example}`" in DOCS, example


def test_next_runs_is_commented() -> None:
    text = (ROOT / "sql" / "code" / "03_next_due.sql").read_text()
    assert "COMMENT ON FUNCTION timers.next_runs(text, integer, timestamptz, text)" in text
