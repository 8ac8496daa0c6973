"""How one database's workers meet failures, each alone: a connection the server refused
(no slot left) is said once per outage and tried again after REFUSED_RETRY; the server's
trouble (a full disk) waits as trouble.py says; a lost connection is said once and made
again with backoff; an error nobody expected is logged with its type and tried again."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pgtimers.runner import log
from pgtimers.runner.budget import ConnectionBudget, is_refused
from pgtimers.runner.life import Life
from pgtimers.runner.serving import Backoff
from pgtimers.runner.trouble import Trouble, is_operational
from pgtimers.runner.worker import is_connection_error

# The server refused a worker's connection (no slot left): tried again this often, so
# that a full server is not asked many times a second by every waiting worker.
REFUSED_RETRY = 1.0
# While the server is full, the databases' workers get a connection now and then (in
# turn): an outage of one database ends only after this long without a refusal.
REFUSED_QUIET = 60.0


class WorkerFailures:
    """The failures of one database's workers: what is said, and the waits."""

    def __init__(
        self, budget: ConnectionBudget, trouble: Trouble, life: Life, database: Callable[[], str]
    ) -> None:
        self.budget = budget
        self.trouble = trouble
        self.life = life
        self._database = database
        self._refused = False  # a refusal was said, and no connection has worked since
        self._refused_at = -1e9  # the last refusal of a worker's connection (clock)

    def worked(self) -> None:
        """A round trip went through: a refusal said before is over."""
        if self._refused:
            self._refused = False
            log.event(logging.INFO, "connections_accepted", database=self._database())

    async def failed(self, worker: str, exc: Exception, backoff: Backoff, lost: bool) -> bool:
        """Say a worker's failure (a lost connection once) and wait; lost or not."""
        if is_refused(exc):
            self.budget.refused()
            # said once per outage: the first refusal after REFUSED_QUIET s without one
            now, last = self.life.clock.now(), self._refused_at
            self._refused_at = now
            if now - last > REFUSED_QUIET:
                self._refused = True
                log.event(
                    logging.WARNING,
                    "connections_refused",
                    database=self._database(),
                    worker=worker,
                    error=str(exc),
                    held=self.budget.held,
                    limit=self.budget.limit,
                    hint="the server has no connection slot left for the runner: lower"
                    " --max-connections, or raise the server's max_connections",
                )
            await self.life.pause(REFUSED_RETRY)
            return lost
        sqlstate = getattr(exc, "sqlstate", None)
        if is_operational(sqlstate) and not is_connection_error(exc):
            # the server refused the round trip (its COMMIT on a full disk, say)
            self.trouble.hit(str(sqlstate), str(exc))
            await self.life.pause(self.trouble.wait_left())
            return lost
        if is_connection_error(exc):
            if not lost:
                log.event(
                    logging.WARNING,
                    "worker_lost",
                    database=self._database(),
                    worker=worker,
                    error=str(exc) or type(exc).__name__,
                )
            await self.life.pause(backoff.next_wait())
            return True
        self.unexpected(worker, exc)
        await self.life.pause(1.0)
        return lost

    def unexpected(self, worker: str, exc: Exception) -> None:
        """The worker_failed line: an error the worker did not expect, with its type."""
        log.event(
            logging.ERROR,
            "worker_failed",
            database=self._database(),
            worker=worker,
            error_type=type(exc).__name__,
            error=str(exc),
        )
