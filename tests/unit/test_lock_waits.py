"""The runner's policies for runs that wait on locks, on a fake clock: when to say that every
worker is blocked (blocked.py), and how long a timer whose run yielded is held back
(held.py)."""

from __future__ import annotations

import datetime as dt

from pgtimers.runner.blocked import BlockedWatch
from pgtimers.runner.held import HOLD_MAX, Held

T0 = dt.datetime(2027, 1, 4, 9, 0, 0, tzinfo=dt.timezone.utc)


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.now - 1000.0)


def test_blocked_is_said_only_when_every_worker_is_busy_past_the_threshold() -> None:
    clock = Clock()
    watch = BlockedWatch(clock, after=3.0, every=60.0)
    assert watch.waiting([]) is None
    assert watch.waiting([990.0, None, 990.0]) is None  # one worker free
    assert watch.waiting([990.0, 998.0, 990.0]) is None  # one busy for 2 s only
    assert watch.waiting([990.0, 996.0, 990.0]) == 4.0


def test_blocked_is_said_once_a_minute_and_only_when_something_is_due() -> None:
    clock = Clock()
    watch = BlockedWatch(clock, after=3.0, every=60.0)
    busy = [990.0, 990.0]
    assert watch.waiting(busy) == 10.0
    assert not watch.say(0)  # nothing else due: nothing to say, look again
    assert watch.waiting(busy) == 10.0
    assert watch.say(4)
    clock.now += 59
    assert watch.waiting(busy) is None
    clock.now += 1
    assert watch.waiting(busy) == 70.0
    assert watch.say(1)


def _yield(held: Held, ident: int, waited_ms: int = 5000) -> float:
    return held.yielded(
        {"timer_id": ident, "timer": f"t{ident}", "waited_ms": waited_ms, "lock_timeout": "5s"}
    )


def test_a_timer_whose_run_yielded_is_held_back_1s_doubling_to_30s_until_it_runs() -> None:
    clock = Clock()
    held = Held(lambda: "app", clock, clock.wall)
    holds = []
    for _ in range(7):
        holds.append(_yield(held, 1, waited_ms=0))
        assert held.skip() == [1]
        clock.now += holds[-1]
        assert held.skip() == []  # tried again when its hold ends
    assert holds == [1, 2, 4, 8, 16, HOLD_MAX, HOLD_MAX]
    held.ran(1)
    assert _yield(held, 1, waited_ms=0) == 1  # it ran: from 1 s again


def test_held_timers_are_tried_again_one_at_a_time() -> None:
    clock = Clock()
    held = Held(lambda: "app", clock, clock.wall)
    # three runs that waited 5 s on the same lock yield together
    assert [_yield(held, i) for i in (1, 2, 3)] == [1, 6, 11]
    clock.now += 1
    assert sorted(held.skip()) == [2, 3]
    # the first one ran (the lock is gone): the others are their own again
    held.ran(1)
    assert held.skip() == []


def test_the_late_note_says_each_held_timer_waited_for_a_lock() -> None:
    clock = Clock()
    held = Held(lambda: "app", clock, clock.wall)
    trouble = {"from": "a", "to": "b", "what": "c"}
    assert held.late_note(None) is None
    assert held.late_note(trouble) == trouble
    _yield(held, 7)
    note = held.late_note(trouble)
    assert note is not None and note["what"] == "c"
    mine = note["timers"]["7"]
    # from when its run began to wait until its hold ends
    assert mine["from"] == (T0 - dt.timedelta(seconds=5)).isoformat()
    assert mine["to"] == (T0 + dt.timedelta(seconds=1)).isoformat()
    assert "waited for a lock" in mine["what"] and "5s" in mine["what"]
