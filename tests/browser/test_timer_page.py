"""The console's pages in a real browser: a timer's page (charts with a point per run,
the history with a skip and its reason, the next due times, the audit), what a reader
without rights sees there (no SQL, no audit), the Monitor's truth (never ran, 1 row,
overdue) and the keyed timers page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database, scalar
from tests.integration.http.conftest import PASSWORD, TOKEN
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

# fails on the hour: a due time at minute 0 divides by zero
FAILS_ON_THE_HOUR = (
    "SELECT 1 / (extract(minute FROM current_setting('pgtimers.due_at')::timestamptz)::int)"
)


def open_page(page: Any, console: str, fragment: str) -> None:
    page.goto(console + "?token=" + TOKEN + fragment)
    page.locator("#who", has_text="as token").wait_for()


def _history_timer(conn: psycopg.Connection, db: Database, tmp_path: Path) -> RunnerProcess:
    """Timer `hist` on a test clock: due times missed while no runner served it (skipped,
    with their reason), then 18 runs, 3 of them failing."""
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-04 00:00Z')")
    conn.execute(
        "SELECT timers.save('hist', 'every 10m', %s, test_clock => 'c')", [FAILS_ON_THE_HOUR]
    )
    conn.execute("CALL timers.advance_test_clock('c', '2027-01-04 00:35Z')")  # no runner: missed
    runner = RunnerProcess(["--dsn", db.dsn], tmp_path / "runner.log")
    runner.wait_for("event=serving")
    wait_until(
        lambda: scalar(conn, "SELECT count(*) FROM timers.runs WHERE kind = 'skipped'") > 0,
        timeout=20,
        what="the missed due times skipped",
    )
    conn.execute("CALL timers.advance_test_clock('c', '2027-01-04 03:35Z')")
    return runner


def test_timer_page_charts_history_next_and_audit(
    page: Any,
    console: str,
    conn: psycopg.Connection,
    db: Database,
    tmp_path: Path,
    shot: Callable[[Any, str], Path],
) -> None:
    runner = _history_timer(conn, db, tmp_path)
    try:
        runs = scalar(conn, "SELECT count(*) FROM timers.runs WHERE kind <> 'skipped'")
        failed = scalar(conn, "SELECT count(*) FROM timers.runs WHERE ok = false")
        reason = scalar(conn, "SELECT reason FROM timers.runs WHERE kind = 'skipped' LIMIT 1")
        assert runs == 18 and failed == 3 and reason

        open_page(page, console, "#/")
        page.locator('#timers tr[data-name="hist"] a.timer-link').click()
        page.locator("#timer-page").wait_for(state="visible")
        assert page.url.endswith(f"#/timer/hist?db={db.name}")
        late = page.locator("svg[data-chart=late]")
        late.wait_for()
        # a dot per run, a mark per skipped due time, in each of the two run charts
        assert late.locator("circle.pt").count() == runs
        assert late.locator("circle.pt.failed").count() == failed
        assert late.locator("path.pt.skipped").count() >= 1
        assert page.locator("svg[data-chart=took] circle.pt").count() == runs
        assert page.locator("svg[data-chart=failures] rect.bar.failed").count() >= 1
        assert "18 runs (3 failed)" in page.locator("#timer-chart-summary").inner_text()

        skipped = page.locator("#timer-runs tbody tr.skipped").first
        assert skipped.locator("td.reason").inner_text() == reason
        failed_row = page.locator("#timer-runs tbody tr.failed").first
        assert "division by zero" in failed_row.locator("td.error").inner_text()

        assert page.locator("#timer-zone").inner_text() == "UTC"
        nexts = page.locator("#timer-next li")
        assert nexts.count() == 10
        assert nexts.first.inner_text().startswith("Mon, 4 Jan 2027, 03:40:00")
        assert page.locator("#timer-sql").inner_text() == FAILS_ON_THE_HOUR
        assert page.locator("#timer-audit tbody tr").first.locator("td").nth(1).inner_text() == (
            "save"
        )
        shot(page, "1-timer-page")

        page.click("#timer-window button[data-window='7d']")
        page.locator("#timer-chart-summary", has_text="in the last 7 days").wait_for()
        assert page.locator("svg[data-chart=late] circle.pt").count() == runs
    finally:
        runner.terminate()


def test_a_reader_sees_no_sql_and_no_audit(
    page: Any, console: str, conn: psycopg.Connection, basic: bool
) -> None:
    conn.execute("SELECT timers.save('secretive', 'daily 02:00', 'SELECT 42 AS secret_marker')")
    page.goto(console + "#/timer/secretive")
    page.locator("#signin").wait_for(state="visible")
    page.fill("#signin-form [name=role]", "pgt_http_reader")
    page.fill("#signin-form [name=password]", PASSWORD)
    page.click("#signin-form button[type=submit]")
    page.locator("#timer-page").wait_for(state="visible")
    page.locator("#timer-sql.hidden").wait_for()
    assert "only pgtimers_admin and the timer's owner" in page.locator("#timer-sql").inner_text()
    page.locator("#timer-audit-none", has_text="pgtimers_admin only").wait_for()
    assert not page.locator("#timer-audit").is_visible()
    assert "secret_marker" not in page.content()
    assert page.locator("#timer-next li").count() == 10
    # the list has no SQL either
    page.click("header h1 a")
    page.locator('#timers tr[data-name="secretive"]').wait_for()
    assert "secret_marker" not in page.content()


def test_monitor_tells_the_truth(
    page: Any,
    console: str,
    conn: psycopg.Connection,
    runner: RunnerProcess,
    shot: Callable[[Any, str], Path],
) -> None:
    conn.execute("SELECT timers.save('waiting', 'daily 02:00', 'SELECT 1')")
    conn.execute("SELECT timers.save('one_row', 'daily 03:00', 'SELECT 1')")
    # a clock three hours back: its timer's next due time passed long ago, and no run
    conn.execute("SELECT timers.create_test_clock('old', now() - interval '3 hours')")
    conn.execute("SELECT timers.save('stuck', 'every 1h', 'SELECT 1', test_clock => 'old')")
    open_page(page, console, "#/")
    page.locator('#timers tr[data-name="one_row"] button.run').click()
    page.locator("#message.ok", has_text="timer one_row ran: ok, 1 row in").wait_for()
    page.locator('#timers tr[data-name="one_row"] .result.ok').wait_for()
    assert "ok · 1 row · " in page.locator('#timers tr[data-name="one_row"] .result').inner_text()

    waiting = page.locator('#monitor-timers li[data-name="waiting"]')
    waiting.wait_for()
    assert waiting.get_attribute("class") == "never"
    assert waiting.locator(".why").inner_text() == "never ran"
    one = page.locator('#monitor-timers li[data-name="one_row"]')
    one.locator(".facts", has_text="ok · 1 row").wait_for()
    assert "1 rows" not in page.locator("#monitor").inner_text()

    stuck = page.locator('#monitor-timers li[data-name="stuck"]')
    assert stuck.get_attribute("class") == "trouble"
    assert "overdue by" in stuck.locator(".why").inner_text()
    assert page.locator("#monitor-timers li").first.get_attribute("data-name") == "stuck"
    next_run = page.locator('#timers tr[data-name="stuck"] .next').inner_text()
    assert next_run.startswith("overdue by ") and next_run.endswith(" h"), next_run
    shot(page, "1-monitor")


def test_keyed_timers_page(page: Any, console: str, conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.arm('job_1:task:file:2027', '2030-01-01Z', 'SELECT 1')")
    conn.execute("SELECT timers.arm('job_1:deadline:at_risk:2027', '2030-01-02Z', 'SELECT 1')")
    conn.execute("SELECT timers.hold('job_1:deadline:at_risk:2027', 'ask_1')")
    conn.execute("SELECT timers.arm('clk_1#US:rung:notice 30d:2027@0', '2029-06-01Z', 'SELECT 1')")
    open_page(page, console, "#/")
    page.click("#keyed-open")
    page.locator("#keyed-page").wait_for(state="visible")
    page.locator("#keyed-list tbody tr").nth(2).wait_for()
    keys = page.locator("#keyed-list tbody tr td:first-child").all_inner_texts()
    # tick order: by owed time, held ones last
    assert keys == [
        "clk_1#US:rung:notice 30d:2027@0",
        "job_1:task:file:2027",
        "job_1:deadline:at_risk:2027",
    ]
    owners = {
        r.locator("td").first.inner_text(): r.locator("td").all_inner_texts()
        for r in page.locator("#keyed-owners tbody tr").all()
    }
    assert owners["job_1"][1:3] == ["1", "1"]  # one armed, one held
    assert owners["job_1"][-1].startswith("job_1:task:file:2027")
    page.select_option("#keyed-filter [name=status]", "held")
    page.click("#keyed-filter button[type=submit]")
    page.locator("#keyed-list tbody tr").nth(1).wait_for(state="detached")
    assert page.locator("#keyed-list tbody tr td:first-child").all_inner_texts() == [
        "job_1:deadline:at_risk:2027"
    ]
    assert not page.locator("#keyed-page button.run, #keyed-page button.delete").count()
