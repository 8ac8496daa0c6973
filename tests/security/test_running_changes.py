"""A runaway timer can be stopped promptly, and a huge error cannot flood storage or logs.

timers.enable(name, false) and timers.delete(name) used to answer 55P03 "is running"
for as long as back-to-back runs went on; now they answer at once, no new run starts,
and the running one finishes. timers.cancel(name) cuts a run off. An error of
10,000,000 characters was stored whole and logged as one 10 MB line; now errors are
cut to 8,000 characters, marked as cut.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import errors

from tests.conftest import Database
from tests.security.helpers import ALICE, READER, Runner, connect, save
from tests.support.wait import wait_until


@pytest.fixture
def runner(db: Database, tmp_path: Path) -> Iterator[Runner]:
    proc = Runner(db, tmp_path / "runner.log")
    try:
        yield proc
    finally:
        proc.terminate()


def _one(db: Database, query: str, *args: object) -> object:
    with db.connect() as su:
        row = su.execute(query, list(args)).fetchone()
        return None if row is None else row[0]


def _running(db: Database, name: str) -> bool:
    return bool(_one(db, "SELECT running FROM timers.status WHERE name = %s", name))


def _started_runs(db: Database, name: str) -> int:
    query = "SELECT count(*) FROM timers.runs WHERE timer = %s AND kind <> 'skipped'"
    return int(str(_one(db, query, name)))


@pytest.fixture
def busy(db: Database, runner: Runner) -> str:
    """A timer due every second whose runs take 1.5 s: it runs back to back."""
    with connect(db, ALICE) as alice:
        save(alice, "busy", "SELECT pg_sleep(1.5)", schedule="every 1s")
    assert wait_until(lambda: _running(db, "busy"), 10)
    return "busy"


def test_turning_a_running_timer_off_takes_effect_at_once(db: Database, busy: str) -> None:
    with connect(db, ALICE) as alice:
        started = time.monotonic()
        row = alice.execute("SELECT enabled FROM timers.enable('busy', false)").fetchone()
        assert time.monotonic() - started < 1.0
        assert row == (False,)
        asked = _one(db, "SELECT clock_timestamp()")
    assert wait_until(lambda: not _running(db, busy), 5)
    time.sleep(2.5)  # two more due times pass
    assert not _running(db, busy)
    with db.connect() as su:
        after = su.execute(
            "SELECT count(*) FROM timers.runs WHERE timer = 'busy' AND kind <> 'skipped'"
            " AND started_at > %s",
            [asked],
        ).fetchone()
        last = su.execute(
            "SELECT ok FROM timers.runs WHERE timer = 'busy' AND kind <> 'skipped'"
            " ORDER BY started_at DESC LIMIT 1"
        ).fetchone()
        state = su.execute(
            "SELECT enabled, next_run_ms FROM timers.status WHERE name = 'busy'"
        ).fetchone()
        audit = su.execute(
            "SELECT detail->>'while_running' FROM timers.audit WHERE action = 'disable'"
        ).fetchone()
    assert after == (0,)
    assert last == (True,)  # the running one finished
    assert state == (False, 0)
    assert audit == ("true",)


def test_deleting_a_running_timer_takes_effect_at_once(db: Database, busy: str) -> None:
    with connect(db, ALICE) as alice:
        started = time.monotonic()
        row = alice.execute("SELECT timers.delete('busy')").fetchone()
        assert time.monotonic() - started < 1.0
        assert row == ({"deleted": True},)
        assert alice.execute("SELECT count(*) FROM timers.status").fetchone() == (0,)
        with pytest.raises(errors.NoDataFound):
            alice.execute("SELECT timers.enable('busy')")
    assert wait_until(
        lambda: _one(db, "SELECT count(*) FROM timers.timers WHERE name = 'busy'") == 0, 5
    )
    runs = _started_runs(db, busy)
    time.sleep(2.0)
    assert _started_runs(db, busy) == runs
    assert _one(db, "SELECT count(*) FROM timers.pending_changes") == 0


def test_turning_it_on_again_while_it_runs_keeps_it_running(db: Database, busy: str) -> None:
    with connect(db, ALICE) as alice:
        alice.execute("SELECT timers.enable('busy', false)")
        row = alice.execute("SELECT enabled FROM timers.enable('busy', true)").fetchone()
        assert row == (True,)
    runs = _started_runs(db, busy)
    assert wait_until(lambda: _started_runs(db, busy) >= runs + 2, 8)


def test_a_running_timer_is_still_not_saved_over(db: Database, busy: str) -> None:
    with connect(db, ALICE) as alice, pytest.raises(errors.LockNotAvailable, match="running"):
        save(alice, "busy", "SELECT 2", schedule="every 1s")


def test_cancel_cuts_a_run_off(db: Database, runner: Runner) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "long", "SELECT pg_sleep(60)", schedule="in 1s")
        assert alice.execute("SELECT timers.cancel('long')").fetchone() == (
            {"name": "long", "running": False, "cancelled": False},
        )
    assert wait_until(lambda: _running(db, "long"), 10)
    with connect(db, ALICE) as alice:
        row = alice.execute("SELECT timers.cancel('long')").fetchone()
    assert row is not None and row[0]["cancelled"] is True
    assert wait_until(lambda: not _running(db, "long"), 5)
    with db.connect() as su:
        run = su.execute("SELECT ok, error FROM timers.runs WHERE timer = 'long'").fetchone()
        audit = su.execute("SELECT actor FROM timers.audit WHERE action = 'cancel'").fetchone()
    assert run is not None and run[0] is False and run[1].startswith("cancelled: ")
    assert audit == (ALICE,)
    with connect(db, READER) as reader, pytest.raises(errors.InsufficientPrivilege):
        reader.execute("SELECT timers.cancel('long')")


def test_a_huge_error_is_cut(db: Database, runner: Runner) -> None:
    with connect(db, ALICE) as alice:
        save(
            alice,
            "loud",
            "DO $$ BEGIN RAISE EXCEPTION '%', repeat('x', 10000000); END $$",
        )
        row = alice.execute("CALL timers.run('loud')").fetchone()
    assert row is not None
    error = row[0]["error"]
    assert error.startswith("xxxx") and error.endswith("[cut: 10000000 characters in all]")
    assert len(error) < 8100
    with db.connect() as su:
        stored = su.execute(
            "SELECT length(t.last_error), length(r.error) FROM timers.timers t"
            " JOIN timers.runs r ON r.timer_id = t.id WHERE t.name = 'loud'"
        ).fetchone()
    assert stored is not None and max(stored) < 8100
    line = next(x for x in runner.log().splitlines() if "event=run_failed" in x)
    assert len(line) < 9000
