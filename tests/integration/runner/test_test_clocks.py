"""Test clocks: frozen time the runner fires through, and downtime simulated without sleeping."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Database, scalar
from tests.integration.runner.conftest import LOG_SQL, history, save, status, timer_row
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
Fired = Callable[..., list[tuple[str, str]]]
T0 = "2027-01-04 09:00:00+00"


def minute(n: int) -> str:
    return f"2027-01-04T09:{n:02d}:00Z"


def advance(conn: psycopg.Connection, to: str, **kwargs: Any) -> tuple[dict[str, Any], list[str]]:
    """CALL timers.advance_test_clock('c', to); returns its result and the NOTICEs it sent."""
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    extra = "".join(f", {k} => %({k})s" for k in kwargs)
    row = conn.execute(
        f"CALL timers.advance_test_clock('c', %(to)s{extra})", {"to": to, **kwargs}
    ).fetchone()
    assert row is not None
    return row[0], notices


@pytest.fixture
def clock(conn: psycopg.Connection) -> str:
    made = conn.execute("SELECT timers.create_test_clock('c', %s)", [T0]).fetchone()
    assert made == ({"name": "c", "now": "2027-01-04T09:00:00Z"},)
    return "c"


def test_advance_fires_every_owed_due_time_in_order(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner, fired: Fired
) -> None:
    save(conn, "m1", "every 1m", LOG_SQL, test_clock=clock)
    save(conn, "m2", "every 2m", LOG_SQL, test_clock=clock)
    start_runner()
    result, notices = advance(conn, "2027-01-04 09:05:30+00")
    assert result == {
        "test_clock": "c",
        "now": "2027-01-04T09:05:30Z",
        "fired": 7,
        "runner": True,
        "replayed": 0,
    }
    assert notices == []
    assert fired("m1") == [("m1", minute(n)) for n in range(1, 6)]
    assert fired("m2") == [("m2", minute(n)) for n in (2, 4)]
    # each due time ran when the clock reached it: never late, nothing missed
    m1 = status(conn, "m1")
    assert (m1["runs"], m1["skipped"], m1["max_late_ms"]) == (5, 0, 0)
    assert timer_row(conn, "m1")["next_due_at"] == dt.datetime.fromisoformat(
        "2027-01-04 09:06:00+00:00"
    )


def test_redeliver_offers_each_due_time_twice_and_commits_it_once(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner, fired: Fired
) -> None:
    save(conn, "m1", "every 1m", LOG_SQL, test_clock=clock)
    start_runner()
    result, _ = advance(conn, "2027-01-04 09:03:00+00", redeliver=True)
    assert (result["fired"], result["replayed"]) == (3, 3)
    assert fired() == [("m1", minute(n)) for n in (1, 2, 3)]


@pytest.mark.parametrize(
    ("catch_up", "runs", "skipped"),
    [("skip", [], 5), ("latest", [5], 4), ("all", [1, 2, 3, 4, 5], 0)],
)
def test_catch_up_after_downtime(
    conn: psycopg.Connection,
    clock: str,
    start_runner: StartRunner,
    fired: Fired,
    catch_up: str,
    runs: list[int],
    skipped: int,
) -> None:
    save(conn, "m", "every 1m", LOG_SQL, test_clock=clock, catch_up=catch_up)
    result, notices = advance(conn, "2027-01-04 09:05:30+00")
    assert (result["runner"], result["fired"]) == (False, 0)
    assert any("no runner serves database" in n for n in notices)
    assert fired() == []
    runner = start_runner()
    wait_until(
        lambda: (
            timer_row(conn, "m")["next_due_at"]
            == dt.datetime.fromisoformat("2027-01-04 09:06:00+00:00")
        ),
        what="back on schedule",
    )
    assert fired() == [("m", minute(n)) for n in runs]
    st = status(conn, "m")
    assert st["skipped"] == skipped
    skips = [r for r in history(conn, "m") if r["kind"] == "skipped"]
    assert len(skips) == skipped
    assert all(r["reason"].startswith("no runner was serving the database") for r in skips)
    if skipped:
        assert st["last_skip_reason"].startswith("no runner was serving the database")
        assert runner.log().count("event=run_skipped") == 1
        assert f"count={skipped}" in runner.log()


def test_a_missed_one_shot_fires_late(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner, fired: Fired
) -> None:
    save(conn, "once", "once 2027-01-04 09:02", LOG_SQL, test_clock=clock)
    advance(conn, "2027-01-04 09:10:00+00")
    start_runner()
    wait_until(lambda: timer_row(conn, "once")["expired"], what="the one-shot to run")
    assert fired() == [("once", minute(2))]
    st = status(conn, "once")
    assert (st["runs"], st["skipped"], st["next_run_ms"], st["expired"]) == (1, 0, 0, True)
    assert st["last_late_ms"] == 8 * 60 * 1000


def test_max_runs_and_end_at_expire_the_timer(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner, fired: Fired
) -> None:
    save(conn, "three", "every 1m", LOG_SQL, test_clock=clock, max_runs=3)
    save(
        conn,
        "until",
        "every 1m",
        LOG_SQL,
        test_clock=clock,
        end_at=dt.datetime.fromisoformat("2027-01-04 09:02:30+00:00"),
    )
    start_runner()
    advance(conn, "2027-01-04 09:10:00+00")
    assert fired("three") == [("three", minute(n)) for n in (1, 2, 3)]
    assert fired("until") == [("until", minute(n)) for n in (1, 2)]
    for name in ("three", "until"):
        st = status(conn, name)
        assert (st["expired"], st["next_run_ms"]) == (True, 0), name
        assert timer_row(conn, name)["next_due_at"] is None


def test_backward_is_refused(conn: psycopg.Connection, clock: str) -> None:
    with pytest.raises(errors.InvalidParameterValue, match=r"^test_clock_backward: test clock 'c'"):
        conn.execute("CALL timers.advance_test_clock('c', '2027-01-04 08:00:00+00')")
    assert scalar(conn, "SELECT now FROM timers.test_clocks") == dt.datetime.fromisoformat(T0)


def test_advance_inside_a_transaction_block_is_a_clear_error(db: Database, clock: str) -> None:
    with db.connect(autocommit=False) as c:
        with pytest.raises(errors.ActiveSqlTransaction, match="inside a transaction block"):
            c.execute("CALL timers.advance_test_clock('c', '2027-01-04 09:05:00+00')")
        c.rollback()


def test_deleting_a_clock_voids_its_timers(conn: psycopg.Connection, clock: str) -> None:
    save(conn, "m", "every 1m", "SELECT 1", test_clock=clock)
    assert conn.execute("SELECT timers.delete_test_clock('c')").fetchone() == (
        {"deleted": True, "voided": 1},
    )
    st = status(conn, "m")
    assert (st["expired"], st["next_run_ms"], st["skipped"]) == (True, 0, 1)
    assert st["last_skip_reason"] == "test clock 'c' was deleted: the timer is void"
    assert timer_row(conn, "m")["test_clock"] is None
    with pytest.raises(errors.NoDataFound):
        conn.execute("SELECT timers.delete_test_clock('c')")


def test_test_clocks_need_admin(db: Database, clock: str) -> None:
    with db.connect("pgt_reader") as reader:
        for statement in (
            "SELECT timers.create_test_clock('x', now())",
            "CALL timers.advance_test_clock('c', '2028-01-01')",
            "SELECT timers.delete_test_clock('c')",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                reader.execute(statement)
    with db.connect("pgt_alice") as alice:
        assert scalar(alice, "SELECT timers.create_test_clock('x', %s)", [T0])["name"] == "x"
        with pytest.raises(errors.DuplicateObject):
            alice.execute("SELECT timers.create_test_clock('X', now())")
