"""The catch-up window: a due time missed while no runner served runs late only when it is
less than catch_up_window old as a runner comes back; older ones are skipped, named."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import psycopg
import pytest

from tests.conftest import scalar
from tests.integration.runner.conftest import LOG_SQL, history, save, status, timer_row
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
Fired = Callable[..., list[tuple[str, str]]]
T0 = "2027-01-04 09:00:00+00"
WINDOW_REASON = "no runner was serving the database; older than its catch_up_window"


def minute(n: int) -> str:
    return f"2027-01-04T09:{n:02d}:00Z"


# Down from 09:00 to 09:05:30 on a test clock: 09:01 … 09:05 are missed. A window of 150 s
# reaches back to 09:03:00, exclusive (09:03 is 150 s old, not less): 09:04 and 09:05 are
# within it. A window of 20 s holds none of them.
@pytest.mark.parametrize(
    ("catch_up", "window", "runs", "too_old", "coalesced"),
    [
        ("skip", "150 seconds", [5], [1, 2, 3], [4]),
        ("latest", "150 seconds", [5], [1, 2, 3], [4]),
        ("all", "150 seconds", [4, 5], [1, 2, 3], []),
        ("skip", "20 seconds", [], [1, 2, 3, 4, 5], []),
        ("latest", "20 seconds", [], [1, 2, 3, 4, 5], []),
        ("all", "20 seconds", [], [1, 2, 3, 4, 5], []),
        ("skip", "1 hour", [5], [], [1, 2, 3, 4]),
        ("all", "1 hour", [1, 2, 3, 4, 5], [], []),
    ],
)
def test_only_due_times_within_the_window_run_after_downtime(
    conn: psycopg.Connection,
    start_runner: StartRunner,
    fired: Fired,
    catch_up: str,
    window: str,
    runs: list[int],
    too_old: list[int],
    coalesced: list[int],
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    save(conn, "m", "every 1m", LOG_SQL, test_clock="c", catch_up=catch_up, catch_up_window=window)
    conn.execute("CALL timers.advance_test_clock('c', '2027-01-04 09:05:30+00')")
    assert fired() == []  # no runner: nothing ran yet
    start_runner()
    wait_until(
        lambda: (
            timer_row(conn, "m")["next_due_at"]
            == dt.datetime.fromisoformat("2027-01-04 09:06:00+00:00")
        ),
        what="back on schedule",
    )
    assert fired() == [("m", minute(n)) for n in runs]
    skips = [r for r in history(conn, "m") if r["kind"] == "skipped"]
    assert [r["due_at"].minute for r in skips] == sorted(too_old + coalesced)
    old = [r["due_at"].minute for r in skips if r["reason"].startswith(WINDOW_REASON)]
    assert old == too_old
    assert all(window_text(conn, window) in r["reason"] for r in skips if r["due_at"].minute in old)
    assert status(conn, "m")["skipped"] == len(too_old) + len(coalesced)
    assert status(conn, "m")["catch_up_window"] == scalar(conn, "SELECT %s::interval", [window])


def window_text(conn: psycopg.Connection, window: str) -> str:
    """The window as PostgreSQL prints it, in parentheses as the reason names it."""
    return f"({scalar(conn, 'SELECT %s::interval::text', [window])})"


def test_a_window_never_holds_back_a_due_time_while_a_runner_is_up(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired
) -> None:
    # a runner that is up runs a late due time whose successor has not come, however late
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    save(conn, "d", "daily 09:01", LOG_SQL, test_clock="c", catch_up_window="1 second",
         timezone="UTC")  # fmt: skip
    start_runner()
    conn.execute("CALL timers.advance_test_clock('c', '2027-01-04 10:00:00+00')")
    assert fired() == [("d", minute(1))]
    assert status(conn, "d")["skipped"] == 0


# A real runner stopped across a due time and back after it: within the window the due
# time runs late; beyond it, it is skipped with the window's reason. Without a window,
# catch_up 'skip' would skip both (docs/running.md, "Catch-up and skips").
@pytest.mark.parametrize(("window", "runs"), [("1 minute", True), ("1 second", False)])
def test_a_runner_stopped_across_a_due_time(
    conn: psycopg.Connection, start_runner: StartRunner, fired: Fired, window: str, runs: bool
) -> None:
    runner = start_runner()
    # due 3.5 s from now: after the stopped runner's last heartbeat plus the 2 s margin
    due = scalar(conn, "SELECT date_trunc('second', clock_timestamp()) + interval '4 s'")
    save(conn, "r", "every 1h", LOG_SQL, start_at=due, catch_up_window=window)
    assert runner.stop() == 0
    wait_until(
        lambda: scalar(conn, "SELECT clock_timestamp() > %s + interval '2.5 s'", [due]),
        what="the due time to pass, and 2.5 s more",
    )
    assert fired() == []
    back = start_runner()
    wait_until(lambda: timer_row(conn, "r")["next_due_at"] > due, what="back on schedule")
    iso = due.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if runs:
        wait_until(lambda: fired(), what="the late run")
        assert fired() == [("r", iso)]
        assert status(conn, "r")["skipped"] == 0
    else:
        # the runner skipped it as it registered, before it served: it never runs now
        assert fired() == []
        assert status(conn, "r")["last_skip_reason"] == (
            "no runner was serving the database; older than its catch_up_window (00:00:01)"
        )
        assert "event=run_skipped" in back.log() and "catch_up_window" in back.log()
