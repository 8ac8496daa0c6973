"""Operational trouble of one database (a full disk, a shutdown, a connection refused, a
serialization failure): not a defect of any timer, so nothing is quarantined; the
database's workers wait a little, with backoff, and try again, the outage is said once,
and the due times lost meanwhile are skipped with a reason that says what happened."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

from pgtimers.runner import log

# The classes of SQLSTATE that say the server could not do the work now, whoever's it
# was: resources (53: disk full, out of memory, too many connections), operator
# intervention (57: shutdown, cancel), system (58: I/O), connection (08), transaction
# rollback (40: serialization failure, deadlock).
OPERATIONAL = ("53", "57", "58", "08", "40")
# Waits before the next try, the last repeated: back within a second or two of the end.
STEPS = (0.25, 0.5, 1.0, 2.0)
# After the trouble ended, due times found late this long afterwards are still said to
# be late because of it (when they fell within it).
REMEMBER = 600.0


def is_operational(sqlstate: str | None) -> bool:
    """Whether an error's SQLSTATE is the server's trouble, not a defect of a timer's
    machinery."""
    return bool(sqlstate) and str(sqlstate).startswith(OPERATIONAL)


class Trouble:
    """One database's operational trouble, shared by its workers. `clock` is
    time.monotonic and `wall` the wall clock (UTC) in the runner; tests pass fakes."""

    def __init__(
        self,
        database: Callable[[], str],
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc),
    ) -> None:
        self._database = database
        self._clock = clock
        self._wall = wall
        self._tries = 0
        self._retry_at = 0.0
        self.on = False  # a trouble is going on
        self.began: dt.datetime | None = None  # when the trouble now (or last) began
        self.ended: dt.datetime | None = None  # when the last one ended
        self._ended_at = -REMEMBER  # (clock) when the last one ended
        self.said = ""  # "<sqlstate>: <error>" of the trouble now or last

    def hit(self, sqlstate: str, error: str) -> float:
        """The server refused work with an operational error: the wait before the next
        try (shared by the database's workers). The first of an outage is logged."""
        now = self._clock()
        wait = STEPS[min(self._tries, len(STEPS) - 1)]
        self._tries += 1
        self._retry_at = max(self._retry_at, now + wait)
        if not self.on:
            self.on = True
            self.began, self.ended = self._wall(), None
            self.said = f"{sqlstate}: {error}"
            log.event(
                logging.WARNING,
                "database_trouble",
                database=self._database(),
                sqlstate=sqlstate,
                error=error,
                note="the server could not do the runner's work; tried again within"
                f" {STEPS[-1]:g}s, nothing quarantined",
            )
        return wait

    def wait_left(self) -> float:
        """Seconds until the database's workers may try again (0: now)."""
        return max(0.0, self._retry_at - self._clock())

    def worked(self) -> None:
        """A fire went through: the trouble, if any, is over (said once)."""
        if not self.on:
            return
        self.on = False
        self.ended = self._wall()
        self._ended_at = self._clock()
        assert self.began is not None
        log.event(
            logging.INFO,
            "database_trouble_over",
            database=self._database(),
            lasted_s=f"{(self.ended - self.began).total_seconds():.1f}",
        )
        self._tries = 0
        self._retry_at = 0.0

    def late_note(self) -> dict[str, Any] | None:
        """For the skip reasons of due times found late now: the trouble going on, or the
        last one if it ended less than REMEMBER seconds ago ({from, to, what}); else None."""
        if self.began is None or (not self.on and self._clock() - self._ended_at >= REMEMBER):
            return None
        ended = self._wall() if self.on else self.ended
        assert ended is not None
        return {
            "from": self.began.isoformat(),
            "to": ended.isoformat(),
            "what": f"the server refused the runner's work ({self.said})",
        }
