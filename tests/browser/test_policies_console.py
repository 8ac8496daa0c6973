"""The run policies and backfills in the console, in a real browser: the New timer form
saves retries, retry delay and priority (a bad value shows the SQL's message and saves
nothing); a timer's page shows its policies, an Attempt column and retries and backfills
marked in its history; the list says "paused" for a timer pause_after turned off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database, scalar
from tests.integration.http.conftest import TOKEN
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

# the 10:00 due time fails on its first attempt and succeeds on its retry; the others run ok
LUCKY = (
    "SELECT CASE WHEN current_setting('pgtimers.due_at') = '2027-01-04T10:00:00Z'"
    " THEN 1 / (current_setting('pgtimers.attempt')::int - 1) ELSE 1 END"
)


def open_page(page: Any, console: str, fragment: str) -> None:
    page.goto(console + "?token=" + TOKEN + fragment)
    page.locator("#who", has_text="as token").wait_for()


def fill_new_timer(page: Any, name: str, **fields: str) -> None:
    page.click("#new-timer-open")
    form = page.locator("#new-timer-form")
    form.locator("[name=name]").fill(name)
    form.locator("[name=schedule]").fill("every 10m")
    form.locator("[name=sql]").fill("SELECT 1")
    for key, value in fields.items():
        form.locator(f"[name={key}]").fill(value)
    form.locator("button[type=submit]").click()


def test_the_new_timer_form_saves_retries_and_priority(
    page: Any, console: str, conn: psycopg.Connection, shot: Callable[[Any, str], Path]
) -> None:
    open_page(page, console, "#/")
    fill_new_timer(page, "bad_retries", retries="101")
    page.locator("#message.error", has_text="bad retries 101").wait_for()
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0
    page.click("#new-timer-cancel")

    fill_new_timer(page, "retrying", retries="3", retry_delay="10 seconds", priority="5")
    page.locator("#message.ok", has_text="timer retrying saved").wait_for()
    page.locator('#timers tr[data-name="retrying"]').wait_for()
    row = conn.execute(
        "SELECT retries, retry_delay::text, pause_after, jitter, priority FROM timers.status"
        " WHERE name = 'retrying'"
    ).fetchone()
    assert row == (3, "00:00:10", None, None, 5)  # empty fields: the defaults
    shot(page, "1-saved")

    page.locator('#timers tr[data-name="retrying"] a.timer-link').click()
    page.locator("#timer-page").wait_for(state="visible")
    retries = page.locator("#timer-retries")
    retries.wait_for()
    assert retries.inner_text() == "3 · the first after 10 s, doubling, at most 1 h"
    assert page.locator("#timer-priority").inner_text() == "5"


def test_the_timer_page_shows_attempts_retries_and_backfills(
    page: Any,
    console: str,
    conn: psycopg.Connection,
    db: Database,
    tmp_path: Path,
    shot: Callable[[Any, str], Path],
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-04 09:30Z')")
    conn.execute(
        "SELECT timers.save('lucky', 'every 1h', %s, test_clock => 'c', retries => 2,"
        " retry_delay => '1 minute', jitter => '5 seconds')",
        [LUCKY],
    )
    conn.execute(
        "SELECT timers.save('fragile', 'every 1h', 'SELECT 1 / 0', test_clock => 'c',"
        " pause_after => 1)"
    )
    runner = RunnerProcess(["--dsn", db.dsn], tmp_path / "runner.log")
    try:
        runner.wait_for("event=serving")
        conn.execute("CALL timers.advance_test_clock('c', '2027-01-04 10:30Z')")
        ident = scalar(
            conn, "SELECT timers.backfill('lucky', '2027-01-04 08:00Z', '2027-01-04 10:00Z')"
        )
        wait_until(
            lambda: (
                scalar(conn, "SELECT state FROM timers.backfills WHERE id = %s", [ident]) == "done"
            ),
            timeout=30,
            what="the backfill to end",
        )
    finally:
        runner.terminate()

    open_page(page, console, "#/")
    fragile = page.locator('#timers tr[data-name="fragile"]')
    fragile.locator(".badge.paused").wait_for()
    assert fragile.locator(".next").inner_text() == "paused"
    shot(page, "1-paused")

    open_page(page, console, f"#/timer/lucky?db={db.name}")
    page.locator("#timer-runs tbody tr").nth(3).wait_for()
    rows = page.locator("#timer-runs tbody tr")
    assert page.locator("#timer-runs thead th").nth(1).inner_text() == "Attempt"
    seen = sorted(
        (r.locator("td.kind").inner_text(), r.locator("td.attempt").inner_text())
        for r in rows.all()
    )
    assert seen == [
        (f"backfill #{ident}", "1"),
        (f"backfill #{ident}", "1"),
        ("retry", "2"),
        ("scheduled", "1"),
    ]
    assert page.locator("#timer-runs .tag.retry").count() == 1
    assert page.locator("#timer-runs .tag.backfill").count() == 2
    retries = page.locator("#timer-retries").inner_text()
    assert retries == "2 · the first after 1 min, doubling, at most 1 h"
    settings = page.locator("#timer-settings").inner_text()
    assert "up to 5 s after each due time" in settings
    assert "never" in settings  # pause after
    shot(page, "2-history")
