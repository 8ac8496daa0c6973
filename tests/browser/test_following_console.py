"""The console's timer page shows what a timer follows and what follows it, each with its
last result (issue 34), in a real browser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database, scalar
from tests.integration.http.conftest import TOKEN
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until


def test_a_timers_page_shows_what_it_follows_and_what_follows_it(
    page: Any, console: str, conn: psycopg.Connection, db: Database, tmp_path: Path
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-04 00:00Z')")
    with conn.transaction():
        conn.execute("SELECT timers.save('ticks', 'every 10m', 'SELECT 1', test_clock => 'c')")
        conn.execute("SELECT timers.save('prices', 'every 10m', 'SELECT 1 / 0', test_clock => 'c')")
        conn.execute(
            "SELECT timers.save('candles', 'after', 'SELECT 1', after => ARRAY['ticks', 'prices'])"
        )
        conn.execute("SELECT timers.save('report', 'after', 'SELECT 1', after => ARRAY['candles'])")
    runner = RunnerProcess(["--dsn", db.dsn], tmp_path / "runner.log")
    try:
        runner.wait_for("event=serving")
        conn.execute("CALL timers.advance_test_clock('c', '2027-01-04 00:10Z')")
        wait_until(
            lambda: scalar(conn, "SELECT count(*) FROM timers.runs WHERE timer = 'report'") > 0,
            timeout=20,
            what=runner.log,
        )
    finally:
        runner.terminate()
    page.goto(console + "?token=" + TOKEN + "#/timer/candles")
    page.locator("#who", has_text="as token").wait_for()
    items = page.locator("#timer-follows li")
    items.first.wait_for()
    texts = [items.nth(i).inner_text() for i in range(items.count())]
    assert texts[0].startswith("follows ticks · ok"), texts
    assert texts[1].startswith("follows prices · failed"), texts
    assert "division by zero" in texts[1]
    assert texts[2].startswith("followed by report · "), texts
    # a timer that nothing follows and that follows nothing shows no such box
    conn.execute("SELECT timers.save('alone', 'every 10m', 'SELECT 1')")
    page.goto(console + "?token=" + TOKEN + "#/timer/alone")
    page.locator("#timer-title", has_text="alone").wait_for()
    # (shown for candles a moment ago: hidden once alone's page has loaded)
    page.locator("#timer-follows-box").wait_for(state="hidden")
