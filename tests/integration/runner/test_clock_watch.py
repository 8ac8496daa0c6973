"""The runner notices the server's clock being set, against its own monotonic clock."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from pgtimers.runner.control import watch_clock


class FakeControl:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def fetchval(self, sql: str, *args: Any) -> Any:
        self.calls.append((sql, *args))
        return []


@pytest.mark.parametrize(
    ("db_step", "elapsed", "jump_called"),
    [(1.0, 1.0, False), (61.0, 1.0, True), (-59.0, 1.0, False), (2.5, 1.0, False)],
)
def test_watch_clock(db_step: float, elapsed: float, jump_called: bool) -> None:
    control = FakeControl()
    before = dt.datetime(2027, 1, 4, 9, 0, tzinfo=dt.timezone.utc)
    now = before + dt.timedelta(seconds=db_step)
    asyncio.run(watch_clock(control, "db", "r", before.timestamp(), elapsed, now))
    assert bool(control.calls) is jump_called
    if jump_called:
        _, start, end, _runner = control.calls[0]
        assert (start, end) == (before + dt.timedelta(seconds=elapsed), now)
