"""The console in a real browser: sign in, new timer, run now (ok and failing),
the error shown, the on/off switch, the Monitor, Keep data for..."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from tests.integration.http.conftest import TOKEN
from tests.support.runner import RunnerProcess


def new_timer(page: Any, name: str, schedule: str, sql: str) -> None:
    page.click("#new-timer-open")
    form = page.locator("#new-timer-form")
    form.locator("[name=name]").fill(name)
    form.locator("[name=schedule]").fill(schedule)
    form.locator("[name=sql]").fill(sql)
    form.locator("button[type=submit]").click()


def row(page: Any, name: str) -> Any:
    return page.locator(f'#timers tbody tr[data-name="{name}"]')


def sign_in(page: Any, url: str) -> None:
    page.goto(url)
    page.locator("#signin").wait_for(state="visible")
    page.fill("#signin-form [name=token]", TOKEN)
    page.click("#signin-form button[type=submit]")
    page.locator("#list").wait_for(state="visible")


def test_timers_page(
    page: Any,
    console: str,
    runner: RunnerProcess,
    conn: psycopg.Connection,
    shot: Callable[[Any, str], Path],
) -> None:
    sign_in(page, console)
    page.locator("#empty").wait_for(state="visible")
    shot(page, "1-empty")

    new_timer(page, "fill", "daily 02:00", "SELECT * FROM generate_series(1, 3)")
    row(page, "fill").wait_for()
    assert "never ran" in row(page, "fill").locator(".result").inner_text()
    assert row(page, "fill").locator(".next").inner_text().startswith("in ")
    new_timer(page, "broken", "every 1h", "SELECT 1/0")
    row(page, "broken").wait_for()

    new_timer(page, "bad_one", "every day", "SELECT 1")
    page.locator("#message.error").wait_for()
    assert "bad \"every\" schedule 'every day'" in page.locator("#message").inner_text()
    page.click("#new-timer-cancel")
    shot(page, "2-bad-schedule")

    row(page, "fill").locator("button.run").click()
    page.locator("#message.ok", has_text="timer fill ran: ok, 3 rows").wait_for()
    page.locator('#timers tr[data-name="fill"] .result.ok').wait_for()
    assert "3 rows" in row(page, "fill").locator(".result").inner_text()

    row(page, "broken").locator("button.run").click()
    page.locator("#message.error", has_text="timer broken failed: division by zero").wait_for()
    page.locator('#timers tr[data-name="broken"] .result.failed').wait_for()
    assert "division by zero" in row(page, "broken").locator(".error").inner_text()
    first = page.locator("#monitor-timers li").first
    first.locator(".why", has_text="last run failed").wait_for()
    assert first.get_attribute("data-name") == "broken"
    assert "division by zero" in first.locator(".error").inner_text()
    assert "1 failed in 24 h" in first.locator(".facts").inner_text()
    shot(page, "3-after-runs")

    row(page, "fill").locator("input.switch").click()
    page.locator("#message.ok", has_text="timer fill is off").wait_for()
    page.locator('#timers tr[data-name="fill"] .next', has_text="off").wait_for()
    assert conn.execute("SELECT enabled FROM timers.timers WHERE name = 'fill'").fetchone() == (
        False,
    )
    assert not row(page, "fill").locator("input.switch").is_checked()
    shot(page, "4-switched-off")


def test_keep_data_for(
    page: Any, console: str, conn: psycopg.Connection, shot: Callable[[Any, str], Path]
) -> None:
    conn.execute(
        "CREATE TABLE events (at date NOT NULL) PARTITION BY RANGE (at);"
        "CREATE TABLE events_2001 PARTITION OF events"
        " FOR VALUES FROM ('2001-01-01') TO ('2002-01-01')"
    )
    sign_in(page, console)
    page.click("#keep-open")
    page.locator("#keep-tables input[value='public.events']").check()
    page.select_option("#keep-form [name=keep]", "1 year")
    shot(page, "1-form")
    page.click("#keep-form button[type=submit]")
    page.locator("#message.ok", has_text="saved keep_events").wait_for()
    row(page, "keep_events").wait_for()
    assert row(page, "keep_events").locator(".schedule").inner_text() == "monthly 1 02:00"
    shot(page, "2-saved")


def test_no_console_without_credentials(page: Any, console: str) -> None:
    page.goto(console)
    page.locator("#signin").wait_for(state="visible")
    page.fill("#signin-form [name=token]", "wrong-token-xxxxxxxxxx")
    page.click("#signin-form button[type=submit]")
    page.locator("#message.error", has_text="bad token").wait_for()
    assert page.locator("#signin").is_visible()


def test_token_link_signs_in(page: Any, console: str) -> None:
    """The link pgtimers run prints (`/?token=…`) signs the tab in and leaves the
    address bar without the token; a wrong one shows the sign-in form."""
    page.goto(console + "?token=" + TOKEN + "#top")
    page.locator("#who", has_text="as token").wait_for()
    assert page.url == console + "#top"
    assert page.evaluate("sessionStorage.getItem('pgtimers.auth')") == "Bearer " + TOKEN
    assert page.locator("#list").is_visible() and not page.locator("#signin").is_visible()
    page.evaluate("sessionStorage.clear()")
    page.goto(console + "?token=not-the-token-of-this-run")
    page.locator("#message.error", has_text="bad token").wait_for()
    assert page.locator("#signin").is_visible()
    assert "token" not in page.url
