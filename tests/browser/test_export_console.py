"""The console's Export button, in a real browser: it downloads pgtimers-<database>.toml,
which tomllib reads as exactly timers.export() (the same timers, calendars and keys, SQL
with line breaks, quotes and backslashes whole), and which applies back as unchanged
only; a reader sees no Export button."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database, scalar
from tests.integration.http.conftest import PASSWORD, TOKEN

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SET = {
    "managed_by": "ops",
    "calendar": [
        {
            "name": "nepse",
            "week": "sun-thu",
            "valid_from": "2026-01-01",
            "valid_until": "2027-12-31",
            "weeks": [{"from_day": "2027-06-01", "week": "mon-fri"}],
            "holidays": [
                {"day": "2027-01-11", "note": 'Prithvi "Jayanti"\\ day'},
                {"day": "2027-02-19"},
            ],
            "trading_days": [{"day": "2027-01-16", "note": "make-up\tday"}],
        }
    ],
    "timer": [
        {
            "name": "close",
            "schedule": "trading nepse 15:05",
            "sql": 'SELECT 1;\n-- a \'quoted\' "line" with a \\ and """ in it\nSELECT 2',
            "timezone": "Asia/Kathmandu",
            "retries": 3,
            "retry_delay": "1 minute",
            "priority": -5,
            "deadline": "10 minutes",
            "locked": True,
            "enabled": False,
            "max_runs": 9000000000,
        },
        {"name": "every5", "schedule": "every 5m", "sql": "SELECT 'é ✓'", "catch_up": "all"},
    ],
}


def _plan(conn: psycopg.Connection, spec: dict[str, Any]) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT action, name FROM timers.apply(%s::jsonb, dry_run => true)", [json.dumps(spec)]
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def test_export_downloads_the_timers_as_toml(
    page: Any,
    console: str,
    db: Database,
    conn: psycopg.Connection,
    tmp_path: Path,
    shot: Callable[[Any, str], Path],
) -> None:
    conn.execute("SELECT timers.apply(%s::jsonb, dry_run => false)", [json.dumps(SET)])
    page.goto(console + "?token=" + TOKEN + "#/")
    page.locator('#timers tr[data-name="close"]').wait_for()
    button = page.locator("#export")
    button.wait_for(state="visible")
    with page.expect_download() as info:
        button.click()
    download = info.value
    assert download.suggested_filename == f"pgtimers-{db.name}.toml"
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    page.locator("#message.ok", has_text="exported 2 timers and 1 calendar to pgtimers-").wait_for()
    shot(page, "1-exported")

    text = saved.read_text("utf-8")
    parsed = tomllib.loads(text)
    exported = scalar(conn, "SELECT timers.export()")
    assert parsed == exported
    assert parsed["timer"][0]["sql"] == SET["timer"][0]["sql"]  # type: ignore[index]
    assert "[[calendar.holidays]]" in text and '[[timer]]\nname = "close"' in text
    # the file applies back as unchanged only, with its set's label
    assert set(_plan(conn, {**parsed, "managed_by": "ops"})) == {
        ("unchanged", "calendar:nepse"),
        ("unchanged", "close"),
        ("unchanged", "every5"),
    }


def test_a_reader_has_no_export_button(
    page: Any, console: str, conn: psycopg.Connection, basic: bool
) -> None:
    conn.execute("SELECT timers.save('by_hand', 'daily 03:00', 'SELECT 3')")
    page.goto(console + "#/")
    page.locator("#signin").wait_for(state="visible")
    page.fill("#signin-form [name=role]", "pgt_http_reader")
    page.fill("#signin-form [name=password]", PASSWORD)
    page.click("#signin-form button[type=submit]")
    page.locator('#timers tr[data-name="by_hand"]').wait_for()
    assert page.locator("#export").is_hidden()
    # an administrator has it
    page.click("#signout")
    page.fill("#signin-form [name=role]", "pgt_http_admin")
    page.fill("#signin-form [name=password]", PASSWORD)
    page.click("#signin-form button[type=submit]")
    page.locator("#export").wait_for(state="visible")
