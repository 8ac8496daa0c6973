"""The doorbells of the databases whose control session is parked: a session that waits
for the runner there (CALL timers.run, a test clock's advance) rings (timers._ring), and
a control session of another database of the same server sees it in pg_locks and wakes
the parked one, which comes back at once instead of after its look interval."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

LOOK_EVERY = 0.5  # seconds: how often one of the server's control sessions looks


@dataclass
class Doorbells:
    """The doorbells of one server's parked databases, by database name."""

    _bells: dict[str, asyncio.Event] = field(default_factory=dict)
    _looked_at: float = -LOOK_EVERY

    def hang(self, database: str) -> asyncio.Event:
        """The doorbell of a database that parks; set when somebody rings there."""
        bell = self._bells[database] = asyncio.Event()
        return bell

    def take_down(self, database: str) -> None:
        """The database is back (or gone): no doorbell."""
        self._bells.pop(database, None)

    @property
    def hung(self) -> int:
        """How many databases are parked (have a doorbell)."""
        return len(self._bells)

    def look_now(self, now: float) -> bool:
        """Whether the caller (a control session that serves) should look for rings now:
        some database is parked, and nobody looked for LOOK_EVERY seconds."""
        if not self._bells or now - self._looked_at < LOOK_EVERY:
            return False
        self._looked_at = now
        return True

    def ring(self, databases: Iterable[str]) -> None:
        """Wake the parked databases where somebody rings."""
        for name in databases:
            bell = self._bells.get(name)
            if bell is not None:
                bell.set()
