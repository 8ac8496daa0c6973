"""The server's trouble, shared by a database's workers: backoff, said once, and the skip
reasons of due times lost to it (pgtimers/runner/trouble.py), on a fake clock."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from pgtimers.runner.trouble import REMEMBER, STEPS, Trouble, is_operational

T0 = dt.datetime(2027, 1, 4, 9, 0, tzinfo=dt.timezone.utc)


class Clock:
    """A monotonic clock and a wall clock that move only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def mono(self) -> float:
        return self.now

    def wall(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.now - 100.0)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def trouble(clock: Clock) -> Trouble:
    return Trouble(lambda: "app", clock.mono, clock.wall)


def test_operational_classes_are_the_servers_trouble() -> None:
    for sqlstate in ("53100", "53200", "57P01", "58030", "08006", "40001", "40P01"):
        assert is_operational(sqlstate)
    for defect in ("42P01", "22012", "XX000", "P0001", "", None):
        assert not is_operational(defect)


def test_tries_back_off_and_are_shared(clock: Clock, trouble: Trouble) -> None:
    waits = [trouble.hit("53100", "could not extend file") for _ in range(6)]
    assert waits == [*STEPS, STEPS[-1], STEPS[-1]]
    # every worker of the database waits until the latest retry time
    assert trouble.wait_left() == pytest.approx(STEPS[-1])
    clock.now += 1.5
    assert trouble.wait_left() == pytest.approx(STEPS[-1] - 1.5)
    clock.now += 1.0
    assert trouble.wait_left() == 0.0


def test_an_outage_is_said_once_and_its_end_once(
    clock: Clock, trouble: Trouble, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pgtimers.runner")
    for _ in range(4):
        trouble.hit("53100", "could not extend file")
        clock.now += 0.5
    trouble.worked()
    trouble.worked()
    lines = [r.getMessage() for r in caplog.records]
    assert sum("event=database_trouble " in line for line in lines) == 1
    assert sum("event=database_trouble_over" in line for line in lines) == 1
    assert "lasted_s=2.0" in lines[-1]
    # back to the first step after it ended
    assert trouble.hit("53100", "again") == STEPS[0]


def test_the_late_note_covers_the_outage_and_is_forgotten(clock: Clock, trouble: Trouble) -> None:
    assert trouble.late_note() is None
    trouble.hit("57P01", "terminating connection due to administrator command")
    clock.now += 3
    going = trouble.late_note()
    assert going is not None
    assert going["from"] == T0.isoformat()
    assert going["to"] == (T0 + dt.timedelta(seconds=3)).isoformat()  # still going: now
    assert "57P01" in going["what"]
    trouble.worked()
    clock.now += REMEMBER - 1
    ended = trouble.late_note()
    assert ended is not None and ended["to"] == (T0 + dt.timedelta(seconds=3)).isoformat()
    clock.now += 1
    assert trouble.late_note() is None
