"""Autonomous timers in the console, in a real browser: the New timer form's Autonomous
box saves a timer whose SQL needs it (VACUUM), which the form refuses without it, with the
SQL check's message naming autonomous => true; the timer's page says how it runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from tests.browser.test_policies_console import open_page
from tests.conftest import scalar


def fill_vacuum(page: Any, name: str, autonomous: bool) -> None:
    page.click("#new-timer-open")
    form = page.locator("#new-timer-form")
    form.locator("[name=name]").fill(name)
    form.locator("[name=schedule]").fill("daily 03:00")
    form.locator("[name=sql]").fill("VACUUM")
    form.locator("[name=autonomous]").set_checked(autonomous)
    form.locator("button[type=submit]").click()


def test_the_new_timer_form_saves_an_autonomous_timer(
    page: Any, console: str, conn: psycopg.Connection, shot: Callable[[Any, str], Path]
) -> None:
    open_page(page, console, "#/")
    fill_vacuum(page, "vacuum_atomic", autonomous=False)
    page.locator("#message.error", has_text="autonomous => true").wait_for()
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0
    page.click("#new-timer-cancel")

    fill_vacuum(page, "vacuum_nightly", autonomous=True)
    page.locator("#message.ok", has_text="timer vacuum_nightly saved").wait_for()
    assert scalar(conn, "SELECT autonomous FROM timers.status WHERE name = 'vacuum_nightly'")
    shot(page, "1-saved")

    page.locator('#timers tr[data-name="vacuum_nightly"] a.timer-link').click()
    page.locator("#timer-page").wait_for(state="visible")
    how = page.locator("#timer-autonomous")
    how.wait_for()
    assert how.inner_text().startswith("yes: statement by statement")
