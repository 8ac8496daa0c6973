"""The console tells what issue 30 adds: a timer's deadline, its missed due times and last
success on its page, a missed deadline on the Monitor, and charts that say when a timer
keeps failures only."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.conftest import Database
from tests.integration.http.conftest import TOKEN
from tests.support.runner import RunnerProcess


def open_page(page: Any, console: str, fragment: str) -> None:
    page.goto(console + "?token=" + TOKEN + fragment)
    page.locator("#who", has_text="as token").wait_for()


def test_a_missed_deadline_and_a_failures_only_history_show(
    page: Any, console: str, conn: psycopg.Connection, db: Database, tmp_path: Any
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-04 09:00Z')")
    conn.execute(
        "SELECT timers.save('eod', 'daily 17:00', 'SELECT 1 / 0', test_clock => 'c',"
        " timezone => 'UTC', deadline => '30 minutes')"
    )
    conn.execute(
        "SELECT timers.save('quiet', 'every 10m', 'SELECT 1', test_clock => 'c',"
        " history => 'failures')"
    )
    runner = RunnerProcess(["--dsn", db.dsn], tmp_path / "runner.log")
    try:
        runner.wait_for("event=serving")
        conn.execute("CALL timers.advance_test_clock('c', '2027-01-04 18:00Z')")
    finally:
        runner.terminate()

    open_page(page, console, "#/timer/eod?db=" + db.name)
    deadline = page.locator("#timer-deadline")
    deadline.wait_for()
    text = deadline.inner_text()
    assert "30 minutes" in text or "30 min" in text, text
    assert "1 missed" in text
    assert "missed" in (deadline.get_attribute("class") or "")

    # the Monitor lists it with the missed deadline
    open_page(page, console, "#/")
    page.locator("#monitor-timers", has_text="deadline 00:30:00 missed").wait_for()

    open_page(page, console, "#/timer/quiet?db=" + db.name)
    page.locator("#charts-failures-only").wait_for()
    assert page.locator("#timer-history").is_visible()
    assert page.locator("#timer-last-success").is_visible()
