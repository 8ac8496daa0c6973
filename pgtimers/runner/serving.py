"""How a database is served: its settings, and the waits between tries to reach it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pgtimers.runner.budget import ConnectionBudget
from pgtimers.runner.notify_config import NotifyTarget

LOOK_EVERY = 1.0  # seconds: the runner looks at least this often
# Reconnecting: at once, then after 0.25 s, then every 0.5 s, so that a runner serves
# again within a second of the server taking connections. A control session that served
# for HEALTHY seconds ends an outage: the next one starts from "at once" again (and is
# logged), while one that fails as soon as it serves backs off.
RETRY_STEPS = (0.0, 0.25, 0.5)
HEALTHY = 1.0


@dataclass
class Serving:
    """How one database is served."""

    dsn: str
    workers: int
    runner_id: str
    timezone: str | None = None
    # with --all-databases: stop serving when the schema is gone instead of waiting for it
    leave_when_not_installed: bool = False
    # the worker connections to this database's server, shared with its other databases
    budget: ConnectionBudget = field(default_factory=ConnectionBudget)
    # the DSNs of timer owners' logins for autonomous runs (--owner-dsn), by owner
    owner_dsns: Mapping[str, str] = field(default_factory=dict)
    # the webhook targets ([[notify]]), and the console's address (with --http) for the
    # links in their events
    notify: tuple[NotifyTarget, ...] = ()
    console: Callable[[], str | None] = lambda: None


class Backoff:
    """Waits between tries: RETRY_STEPS, the last repeated; from the start after a while
    of health."""

    def __init__(self) -> None:
        self.tries = 0

    def next_wait(self) -> float:
        """The wait before the next try."""
        wait = RETRY_STEPS[min(self.tries, len(RETRY_STEPS) - 1)]
        self.tries += 1
        return wait

    def healthy(self) -> None:
        """It worked: the next outage starts from the first step."""
        self.tries = 0
