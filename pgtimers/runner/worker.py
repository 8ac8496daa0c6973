"""One worker: a connection that claims a run-now request, a due timer or a keyed timer
and runs it, all in one transaction (claim, time limit, the SQL, bookkeeping, commit)."""

from __future__ import annotations

import logging
import time
from typing import Any

import asyncpg

from pgtimers.runner import log
from pgtimers.runner.connect import close, connect
from pgtimers.runner.queries import query

# A timer whose run raised (not a failed SQL, which is recorded: an error of the
# run machinery itself) is left alone this long, so it cannot make a hot loop.
QUARANTINE_SECONDS = 30.0

# After a full round (run-now requests, due timers, then keyed timers) fired a keyed
# timer, the worker claims only keyed timers for this long: the rest of a clock's owed
# keyed timers fire back to back without the claims that found nothing a moment ago.
# Then it makes a full round again, so that a run-now request or a due timer waits at
# most this long (plus one fire) behind a long row of keyed fires, even with --workers 1.
KEYED_STREAK_SECONDS = 0.1


class Worker:
    """Claims and runs one thing at a time on its own connection."""

    def __init__(self, dsn: str, database: str, runner_id: str, name: str) -> None:
        self.dsn = dsn
        self.database = database
        self.runner_id = runner_id
        self.name = name
        self.conn: asyncpg.Connection | None = None
        self._quarantine: dict[int, float] = {}
        self._quarantine_keyed: dict[int, float] = {}
        # until when (time.monotonic()) this worker claims keyed timers only
        self._keyed_until = 0.0

    async def open(self) -> None:
        """Connect, unless the worker's connection is open."""
        if self.conn is None or self.conn.is_closed():
            self.conn = await connect(self.dsn, application_name=f"pgtimers runner {self.name}")

    async def close(self) -> None:
        """Close the worker's connection, if any."""
        conn, self.conn = self.conn, None
        if conn is not None:
            await close(conn)

    def _quarantined(self, keyed: bool = False) -> list[int]:
        now = time.monotonic()
        if keyed:
            self._quarantine_keyed = {k: v for k, v in self._quarantine_keyed.items() if v > now}
            return list(self._quarantine_keyed)
        self._quarantine = {k: v for k, v in self._quarantine.items() if v > now}
        return list(self._quarantine)

    async def run_one(self) -> dict[str, Any] | None:
        """Claim and run one due timer, run-now request or keyed timer; None when
        nothing was due.

        Raises asyncpg/OSError when the connection fails (the transaction is then
        rolled back by the server: the due time stays for the next claim)."""
        await self.open()
        assert self.conn is not None
        result = None
        if time.monotonic() < self._keyed_until:
            result = await self._claim_and_run(self.conn, keyed_only=True)
            if not result:
                self._keyed_until = 0.0  # none left (or the fire raised): a full round next
        if result is None:
            result = await self._claim_and_run(self.conn)
        if result is not None:
            await self.conn.execute(query("reset_session"))
        return result

    async def _claim_and_run(
        self, conn: asyncpg.Connection, keyed_only: bool = False
    ) -> dict[str, Any] | None:
        """One transaction: claim (a run-now request, a due timer, then a keyed timer;
        with keyed_only a keyed timer only), run it, commit."""
        claimed: list[tuple[str, int]] = []  # what was claimed, for the error path
        try:
            async with conn.transaction():
                if not keyed_only:
                    result = await self._run_request_or_due(conn, claimed)
                    if result is not None:
                        return result
                result = await self._fire_keyed(conn, claimed)
                if result and not keyed_only:
                    self._keyed_until = time.monotonic() + KEYED_STREAK_SECONDS
                return result
        except asyncpg.PostgresError as exc:
            what = claimed[0] if claimed else None
            if what and what[0] != "request" and not _connection_error(exc):
                quarantine = self._quarantine_keyed if what[0] == "keyed" else self._quarantine
                quarantine[what[1]] = time.monotonic() + QUARANTINE_SECONDS
            log.event(
                logging.ERROR,
                "run_error",
                database=self.database,
                worker=self.name,
                claimed=f"{what[0]}:{what[1]}" if what else None,
                sqlstate=getattr(exc, "sqlstate", None),
                error=str(exc),
            )
            if _connection_error(exc):
                raise
            return {}

    async def _run_request_or_due(
        self, conn: asyncpg.Connection, claimed: list[tuple[str, int]]
    ) -> dict[str, Any] | None:
        """The oldest run-now request, else the earliest due timer: run it; None when
        there is neither."""
        request = await conn.fetchrow(query("claim_request"))
        if request is not None:
            claimed.append(("request", request["id"]))
            await conn.fetchval(query("set_timeout"), str(request["timeout_ms"]))
            result = await conn.fetchval(query("run_request"), request["id"], self.runner_id)
            return result or {}
        skip = self._quarantined()
        due = await conn.fetchrow(query("claim_due"), skip)
        if due is None:
            due = await conn.fetchrow(query("claim_due_test_clock"), skip)
        if due is None:
            return None
        claimed.append(("timer", due["id"]))
        await conn.fetchval(query("set_timeout"), str(due["timeout_ms"]))
        result = await conn.fetchval(
            query("run_due"), due["id"], due["next_due_at"], self.runner_id
        )
        return result or {}

    async def _fire_keyed(
        self, conn: asyncpg.Connection, claimed: list[tuple[str, int]]
    ) -> dict[str, Any] | None:
        """The next keyed timer in tick order on a clock whose fire lock this
        transaction takes (sql/code/14_keyed.sql): fire it; None when none is owed."""
        keyed = await conn.fetchrow(query("claim_keyed"), self._quarantined(keyed=True))
        if keyed is None:
            return None
        claimed.append(("keyed", keyed["id"]))
        await conn.fetchval(query("set_timeout"), str(keyed["timeout_ms"]))
        result = await conn.fetchval(
            query("fire_keyed"), keyed["id"], keyed["owed_at"], self.runner_id
        )
        return result or {}


def _connection_error(exc: BaseException) -> bool:
    sqlstate = getattr(exc, "sqlstate", "") or ""
    return isinstance(exc, (asyncpg.InterfaceError, OSError)) or sqlstate.startswith(("08", "57P"))
