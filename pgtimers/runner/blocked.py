"""Head-of-line, said: when every worker of a database has been busy with one round trip for
longer than BLOCKED_AFTER seconds (waiting on a lock, or on anything) while other timers are
due, one line says so, once a minute: which timers the workers run, what they wait on, who
blocks them and how many timers are due meanwhile."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from pgtimers.runner import log
from pgtimers.runner.queries import query
from pgtimers.runner.session import Session

BLOCKED_AFTER = 3.0  # under a run's lock wait limit (5 s): a yield cycle is seen
SAY_EVERY = 60.0
RUNNING = "pgtimers: "  # a worker session's application_name while it runs a timer


class _Worker(Protocol):
    pid: int | None
    busy_since: float | None


class BlockedWatch:
    """When to say that a database's workers are all blocked. `clock` is time.monotonic in
    the runner; tests pass a fake."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        after: float = BLOCKED_AFTER,
        every: float = SAY_EVERY,
    ) -> None:
        self._clock = clock
        self._after = after
        self._every = every
        self._said_at: float | None = None

    def waiting(self, busy_since: Sequence[float | None]) -> float | None:
        """Seconds all workers have been busy (the shortest of them), when each is busy and
        has been for longer than `after`, and nothing was said in the last `every`
        seconds; else None (nothing to look at)."""
        now = self._clock()
        if not busy_since or any(s is None for s in busy_since):
            return None
        if self._said_at is not None and now - self._said_at < self._every:
            return None
        waited = now - max(s for s in busy_since if s is not None)
        return waited if waited > self._after else None

    def say(self, due: int) -> bool:
        """Whether to say it now (other timers are due); then not again for `every`."""
        if due < 1:
            return False
        self._said_at = self._clock()
        return True


async def watch(
    control: Session, database: str, workers: Sequence[_Worker], watch_: BlockedWatch
) -> None:
    """Look at the workers' sessions when all have been busy too long; say so when other
    timers are due (the control session's loop calls it at each look)."""
    waited = watch_.waiting([w.busy_since for w in workers])
    pids = [w.pid for w in workers if w.pid is not None]
    if waited is None or not pids:
        return
    rows = await control.fetch(query("workers_blocked"), pids)
    due = int(rows[0]["due"]) if rows else 0
    if not watch_.say(due):
        return
    names = [r["application_name"] or "" for r in rows]
    log.event(
        logging.WARNING,
        "workers_blocked",
        database=database,
        waiting_s=f"{waited:.1f}",
        timers=",".join(n[len(RUNNING) :] if n.startswith(RUNNING) else "-" for n in names),
        wait_events=",".join(
            f"{r['wait_event_type']}:{r['wait_event']}" if r["wait_event"] else "-" for r in rows
        ),
        blocked_by=",".join(str(p) for p in sorted({p for r in rows for p in r["blocked_by"]}))
        or "-",
        due=due,
        note="every worker waits; runs yield after their lock wait limit (docs/running.md)",
    )
