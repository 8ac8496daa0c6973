"""The runner's connections with a deadline on every wait for the server: a session that
has not answered within its deadline (a network path that stopped moving packets, a hung
pooler) is cut off and the caller makes it again, with one log line; and TCP keepalives
on the client's socket, so that a peer gone quiet is noticed even while a long statement
runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import time
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import asyncpg

from pgtimers.runner import log

T = TypeVar("T")

# A quick statement's deadline (a look, a heartbeat, the bookkeeping of a lost run).
QUICK = 10.0
# Added to a run's own time limit for a worker's round trip: the server cancels the run at
# its limit and answers; no answer this much later means the path is gone.
MARGIN = 15.0

# The client's TCP keepalives: a peer that does not acknowledge for IDLE + INTERVAL *
# COUNT seconds (or data left unacknowledged for USER_TIMEOUT) ends the connection, also
# while the runner waits for a long statement's answer. A userspace proxy or pooler that
# hangs still acknowledges: the deadlines above catch those.
KEEPALIVE_IDLE = 5
KEEPALIVE_INTERVAL = 2
KEEPALIVE_COUNT = 3
USER_TIMEOUT_MS = 15_000

_NAMED = re.compile(r"timers\.(\w+)")


class Stalled(TimeoutError):
    """A session did not answer within its deadline and was cut off."""

    def __init__(self, session: str, doing: str, waited: float) -> None:
        self.session = session
        self.doing = doing
        self.waited = waited
        super().__init__(f"no answer to {doing} within {waited:.1f}s: the connection was cut off")


class Session(asyncpg.Connection):
    """An asyncpg connection whose queries wait at most `deadline` seconds for the server
    (None: for ever); `label` and `database` name it in the connection_stalled line."""

    deadline: float | None = QUICK
    label = "runner"
    database = "?"

    @contextlib.contextmanager
    def deadline_of(self, seconds: float | None) -> Iterator[None]:
        """Within the block, the session's deadline is `seconds`."""
        before, self.deadline = self.deadline, seconds
        try:
            yield
        finally:
            self.deadline = before

    async def fetchval(
        self, query: str, *args: Any, column: int = 0, timeout: float | None = None
    ) -> Any:
        """asyncpg's fetchval, within the deadline."""
        return await self._within(query, super().fetchval(query, *args, column=column))

    async def fetchrow(self, query: str, *args: Any, **kwargs: Any) -> Any:
        """asyncpg's fetchrow, within the deadline."""
        return await self._within(query, super().fetchrow(query, *args, **kwargs))

    async def fetch(self, query: str, *args: Any, **kwargs: Any) -> Any:
        """asyncpg's fetch, within the deadline."""
        return await self._within(query, super().fetch(query, *args, **kwargs))

    async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str:
        """asyncpg's execute, within the deadline."""
        return await self._within(query, super().execute(query, *args))

    async def _within(self, query: str, call: Awaitable[T]) -> T:
        seconds = self.deadline
        if seconds is None:
            return await call
        task = asyncio.ensure_future(call)
        started = time.monotonic()
        try:
            done, _ = await asyncio.wait({task}, timeout=seconds)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task in done:
            return task.result()
        # cut off, not cancelled: a cancel request would have to cross the same dead path
        self.terminate()
        with contextlib.suppress(BaseException):
            await task
        stalled = Stalled(self.label, _doing(query), time.monotonic() - started)
        log.event(
            logging.WARNING,
            "connection_stalled",
            database=self.database,
            session=self.label,
            doing=stalled.doing,
            waited_s=f"{stalled.waited:.1f}",
            note="the connection was cut off; it is made again",
        )
        raise stalled


def _doing(query: str) -> str:
    found = _NAMED.search(query)
    return f"timers.{found.group(1)}" if found else " ".join(query.split()[:2])


def keep_alive(conn: asyncpg.Connection) -> None:
    """TCP keepalives and a user timeout on a connection's socket (TCP only; where the
    platform has them)."""
    transport = getattr(conn, "_transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in (
            ("TCP_KEEPIDLE", KEEPALIVE_IDLE),
            ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
            ("TCP_KEEPCNT", KEEPALIVE_COUNT),
            ("TCP_USER_TIMEOUT", USER_TIMEOUT_MS),
        ):
            if hasattr(socket, option):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
