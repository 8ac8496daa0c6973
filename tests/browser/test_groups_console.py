"""Run groups in the console, in a real browser: the list shows a timer's group, and
"waiting for group" while it is due and its group's max_running timers are running; the
timer's page says its group, and that it waits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database
from tests.integration.http.conftest import TOKEN


def test_the_list_shows_the_group_and_the_wait(
    page: Any,
    console: str,
    db: Database,
    conn: psycopg.Connection,
    shot: Callable[[Any, str], Path],
) -> None:
    for name in ("report_a", "report_b"):
        conn.execute("SELECT timers.save(%s, 'every 1h', 'SELECT 1', run_group => 'heavy')", [name])
    conn.execute("SELECT timers.save('alone', 'every 1h', 'SELECT 1')")
    # both due now (no runner serves the test's database); report_a "runs": another
    # session holds its row lock, as a run does
    conn.execute(
        "UPDATE timers.timers SET next_due_at = date_trunc('hour', now()) WHERE run_group = 'heavy'"
    )
    with db.connect(autocommit=False) as run:
        run.execute("SELECT 1 FROM timers.timers WHERE name = 'report_a' FOR UPDATE")
        page.goto(console + "?token=" + TOKEN + "#/")
        page.locator("#who", has_text="as token").wait_for()
        waiting = page.locator('#timers tr[data-name="report_b"]')
        waiting.locator(".badge.group", has_text="group heavy").wait_for()
        assert waiting.locator(".next").inner_text() == "waiting for group heavy"
        running = page.locator('#timers tr[data-name="report_a"]')
        assert running.locator(".next").inner_text() == "running now"
        alone = page.locator('#timers tr[data-name="alone"]')
        assert alone.locator(".badge.group").count() == 0
        shot(page, "1-waiting")
        waiting.locator("a.timer-link").click()
        page.locator("#timer-run-group", has_text="heavy · waiting: the group is full").wait_for()
        shot(page, "2-timer-page")
        run.rollback()
