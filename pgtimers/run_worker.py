"""One worker: a connection that claims a due timer or a run-now request and runs it,
all in one transaction (claim, time limit, the SQL, bookkeeping, commit)."""

from __future__ import annotations

import logging
import time
from typing import Any

import asyncpg

from pgtimers import run_log
from pgtimers.run_connect import connect
from pgtimers.run_queries import query

# A timer whose run raised (not a failed SQL, which is recorded: an error of the
# run machinery itself) is left alone this long, so it cannot make a hot loop.
QUARANTINE_SECONDS = 30.0


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

    async def open(self) -> None:
        if self.conn is None or self.conn.is_closed():
            self.conn = await connect(self.dsn, application_name=f"pgtimers runner {self.name}")

    async def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None and not conn.is_closed():
            try:
                await conn.close(timeout=5)
            except Exception:
                conn.terminate()

    def _quarantined(self, keyed: bool = False) -> list[int]:
        now = time.monotonic()
        if keyed:
            self._quarantine_keyed = {k: v for k, v in self._quarantine_keyed.items() if v > now}
            return list(self._quarantine_keyed)
        self._quarantine = {k: v for k, v in self._quarantine.items() if v > now}
        return list(self._quarantine)

    async def run_one(self) -> dict[str, Any] | None:
        """Claim and run one due timer or run-now request; None when nothing was due.

        Raises asyncpg/OSError when the connection fails (the transaction is then
        rolled back by the server: the due time stays for the next claim)."""
        await self.open()
        assert self.conn is not None
        result = await self._claim_and_run(self.conn)
        if result is not None:
            await self.conn.execute(query("reset_session"))
        return result

    async def _claim_and_run(self, conn: asyncpg.Connection) -> dict[str, Any] | None:
        claimed: Any = None
        try:
            async with conn.transaction():
                request = await conn.fetchrow(query("claim_request"))
                if request is not None:
                    claimed = ("request", request["id"])
                    await conn.fetchval(query("set_timeout"), str(request["timeout_ms"]))
                    result = await conn.fetchval(
                        query("run_request"), request["id"], self.runner_id
                    )
                    return result or {}
                skip = self._quarantined()
                due = await conn.fetchrow(query("claim_due"), skip)
                if due is None:
                    due = await conn.fetchrow(query("claim_due_test_clock"), skip)
                if due is None:
                    # keyed timers (sql/0009_keyed.sql): one fire per clock at a time, in tick order
                    keyed = await conn.fetchrow(query("claim_keyed"), self._quarantined(keyed=True))
                    if keyed is None:
                        return None
                    claimed = ("keyed", keyed["id"])
                    await conn.fetchval(query("set_timeout"), str(keyed["timeout_ms"]))
                    result = await conn.fetchval(
                        query("fire_keyed"), keyed["id"], keyed["owed_at"], self.runner_id
                    )
                    return result or {}
                claimed = ("timer", due["id"])
                await conn.fetchval(query("set_timeout"), str(due["timeout_ms"]))
                result = await conn.fetchval(
                    query("run_due"), due["id"], due["next_due_at"], self.runner_id
                )
                return result or {}
        except asyncpg.PostgresError as exc:
            if claimed and claimed[0] == "timer" and not _connection_error(exc):
                self._quarantine[claimed[1]] = time.monotonic() + QUARANTINE_SECONDS
            if claimed and claimed[0] == "keyed" and not _connection_error(exc):
                self._quarantine_keyed[claimed[1]] = time.monotonic() + QUARANTINE_SECONDS
            run_log.event(
                logging.ERROR,
                "run_error",
                database=self.database,
                worker=self.name,
                claimed=f"{claimed[0]}:{claimed[1]}" if claimed else None,
                sqlstate=getattr(exc, "sqlstate", None),
                error=str(exc),
            )
            if _connection_error(exc):
                raise
            return {}


def _connection_error(exc: BaseException) -> bool:
    sqlstate = getattr(exc, "sqlstate", "") or ""
    return isinstance(exc, (asyncpg.InterfaceError, OSError)) or sqlstate.startswith(("08", "57P"))
