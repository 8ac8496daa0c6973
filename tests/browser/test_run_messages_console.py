"""The timer's page shows what each run said: a short message as it is, a long one folded
under its first line until it is opened."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.browser.test_timer_page import open_page

SHORT = "NOTICE: 3 rows"
LONG = "\n".join(f"NOTICE: batch {i} of 40 loaded" for i in range(1, 41)) + "\nHINT: prune it"


def test_the_history_shows_short_messages_and_folds_long_ones(
    page: Any, console: str, conn: psycopg.Connection
) -> None:
    conn.execute("SELECT timers.save('said', 'every 10m', 'SELECT 1')")
    for minutes, text in ((3, ""), (2, SHORT), (1, LONG)):
        conn.execute(
            "INSERT INTO timers.runs (timer_id, timer, kind, started_at, ok, messages)"
            " SELECT id, name, 'scheduled', now() - make_interval(mins => %s), true, %s"
            " FROM timers.timers WHERE name = 'said'",
            [minutes, text],
        )
    open_page(page, console, "#/timer/said")
    cells = page.locator("#timer-runs tbody tr td.messages")
    cells.nth(2).wait_for()
    newest, short, quiet = cells.nth(0), cells.nth(1), cells.nth(2)
    assert quiet.inner_text() == ""
    assert short.locator("details").count() == 0
    assert short.locator("pre").inner_text() == SHORT
    folded = newest.locator("details")
    assert folded.locator("summary").inner_text() == "NOTICE: batch 1 of 40 loaded (41 lines)"
    assert not folded.locator("pre").is_visible()
    folded.locator("summary").click()
    assert folded.locator("pre").is_visible()
    assert folded.locator("pre").inner_text() == LONG
