"""Static checks of sql/0002_schedule.sql and docs/schedules.md (no database needed)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SQL = (ROOT / "sql" / "0002_schedule.sql").read_text()
DOCS = (ROOT / "docs" / "schedules.md").read_text()

# The list every bad-schedule error ends with (modeled on seed 002's HTTP 400).
EXAMPLES = (
    'use a schedule like "every 10s", "every 5m", "every 2h", "hourly", "hourly :15", '
    '"daily 16:00", "daily 02:00,13:30", "weekdays 11:00", "sun-thu 11:00", '
    '"mon,wed,fri 09:30", "monthly 1 02:00", "trading nepse 15:05" (the trading days of '
    'calendar nepse), "cron 0 9 * * 1-5", "once 2027-01-04 09:00" or "in 30m"'
)


def _functions() -> dict[str, str]:
    """Each CREATE FUNCTION statement of the file, by name."""
    found = {}
    for m in re.finditer(r"CREATE OR REPLACE FUNCTION (timers\.\w+)\((.*?)\$\$;", SQL, re.S):
        found[m.group(1)] = m.group(0)
    return found


def test_examples_text_is_the_seed_list() -> None:
    body = re.search(r"FUNCTION timers\._schedule_examples\(\).*?SELECT (.*?)::text", SQL, re.S)
    assert body is not None
    pieces = re.findall(r"'((?:[^']|'')*)'", body.group(1))
    assert "".join(p.replace("''", "'") for p in pieces) == EXAMPLES


def test_every_example_is_documented() -> None:
    for example in re.findall(r'"([^"]+)"', EXAMPLES):
        assert f"`{example}`" in DOCS, example


def test_every_function_is_locked_down_and_granted() -> None:
    revoke = SQL[SQL.index("REVOKE ALL ON FUNCTION") :]
    for name in _functions():
        assert f"{name}(" in revoke.split("FROM PUBLIC")[0], f"{name} is not revoked from PUBLIC"
        assert f"{name}(" in revoke.split("FROM PUBLIC")[1], f"{name} is not granted"


def test_functions_pin_their_search_path() -> None:
    for name, text in _functions().items():
        if "LANGUAGE sql" in text:
            # inlinable helpers: everything is schema-qualified instead
            assert "SET search_path" not in text, name
            assert re.search(r"OPERATOR\(pg_catalog\.|pg_catalog\.", text) or "'" in text, name
        else:
            assert "SET search_path = pg_catalog, pg_temp" in text, name


def test_next_runs_is_commented() -> None:
    assert "COMMENT ON FUNCTION timers.next_runs(text, integer, timestamptz, text)" in SQL
