"""Webhook deliveries of one database's events, at least once: a task of its own beside
the control session and the workers, which never holds up a fire.

A round: take a slot of the connection budget, connect, enqueue each target's new
events and claim what is due (sql/code/21_deliveries.sql; the claim commits the lease),
close and give the slot back; POST the claimed events, all at once, each with a 10 s
limit, on no connection of the database; then a slot again, for a moment, to write what
came of each. A round starts on an event's NOTIFY (the control session listens), when a
retry is due, or every POLL_EVERY seconds (a lease that ended: a runner killed during a
POST; events while the control session was parked)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import asyncpg

from pgtimers import __version__
from pgtimers.runner import log
from pgtimers.runner.clock import REAL, Clock, wait_any
from pgtimers.runner.connect import close, connect
from pgtimers.runner.queries import query
from pgtimers.runner.serving import Serving
from pgtimers.runner.session import Session
from pgtimers.runner.webhooks import SIGNATURE_HEADER, body, event_fields, signature, timer_link

POST_TIMEOUT = 10.0
# A claimed delivery is this runner's for this long: longer than a POST's limit and the
# writing of its result, so that only a runner that died loses it.
LEASE = float(os.environ.get("PGTIMERS_DELIVERY_LEASE", "60"))
POLL_EVERY = float(os.environ.get("PGTIMERS_DELIVERY_POLL", "30"))
RETRY_MARGIN = 0.2
BATCH = 20  # deliveries claimed (and POSTed at once) per round
# a round that failed (the database unreachable, a bug): tried again this often
RETRY_FAULT = 5.0
_MAX_ERROR = 2000


@dataclass
class Outcome:
    """What came of one POST: the HTTP status (None: no answer) and the error, if any."""

    status: int | None
    error: str = ""

    @property
    def delivered(self) -> bool:
        """A 2xx answer."""
        return self.status is not None and 200 <= self.status < 300


class Deliveries:
    """Delivers the events of one database to the [[notify]] targets until `stopping`."""

    def __init__(
        self,
        serving: Serving,
        database: Callable[[], str],
        ready: Callable[[], bool],
        stops: tuple[asyncio.Event, ...],
        alive: Callable[[], None],
        clock: Clock = REAL,
    ) -> None:
        self.s = serving
        self.clock = clock
        self._database = database
        self._ready = ready  # the control session serves (registered, trusted, primary)
        self._stops = stops
        self._alive = alive
        self.wake = asyncio.Event()  # set on a NOTIFY pgtimers_events
        self._targets = {t.name: t for t in serving.notify}
        # when this runner's failed deliveries are due again (clock)
        self._retries: list[float] = []

    async def run(self) -> None:
        """Rounds until stopping; a failed round is logged and tried again."""
        timeout = aiohttp.ClientTimeout(total=POST_TIMEOUT + 5)
        headers = {"User-Agent": f"pgtimers/{__version__}"}
        async with aiohttp.ClientSession(timeout=timeout, headers=headers) as http:
            said = ""
            while not self._stopping():
                wait = POLL_EVERY
                if self._ready():
                    try:
                        more = await self._round(http)
                        said = ""
                        wait = 0.0 if more else self._until_retry()
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # logged once while it repeats, tried again
                        wait = RETRY_FAULT
                        if str(exc) != said:
                            said = str(exc)
                            log.event(
                                logging.WARNING,
                                "deliveries_failed",
                                database=self._database(),
                                error_type=type(exc).__name__,
                                error=str(exc),
                                retry_in=f"{RETRY_FAULT:g}s",
                            )
                else:
                    wait = 1.0
                await self._sleep(wait)

    def _stopping(self) -> bool:
        return any(s.is_set() for s in self._stops)

    def _until_retry(self) -> float:
        """The wait for the next retry of this runner's (a moment after it, so that the
        database's clock has passed it too), at most POLL_EVERY."""
        now = self.clock.now()
        self._retries = [at for at in self._retries if at > now]
        if not self._retries:
            return POLL_EVERY
        return min(POLL_EVERY, min(self._retries) - now + RETRY_MARGIN)

    async def _sleep(self, seconds: float) -> None:
        """Until `seconds` passed, a NOTIFY came, or stopping."""
        if seconds <= 0:
            return
        await wait_any(self.clock, *self._stops, self.wake, timeout=seconds)

    async def _round(self, http: aiohttp.ClientSession) -> bool:
        """Enqueue, claim, POST, write back; whether a full batch was claimed (more may
        be due at once)."""
        self.wake.clear()
        claimed = await self._with_connection(self._claim)
        if claimed is None:
            return False
        outcomes = await asyncio.gather(*(self._post(http, row) for row in claimed))
        if claimed:
            # written also when a stop came meanwhile: else the lease ends and another
            # runner POSTs them again
            await asyncio.wait_for(
                self._with_connection(lambda conn: self._write(conn, claimed, outcomes), ()),
                POST_TIMEOUT,
            )
        return len(claimed) >= BATCH

    async def _with_connection(
        self, work: Callable[[Session], Any], stops: tuple[asyncio.Event, ...] | None = None
    ) -> Any:
        """`work` on a connection of its own, in a slot of the budget for just as long
        (None when one of `stops` (default: the stops) came first)."""
        stops = self._stops if stops is None else stops
        async with self.s.budget.slot(self.s.dsn, stops, self._alive) as got:
            if not got:
                return None
            conn = await connect(
                self.s.dsn, "pgtimers runner deliveries", "deliveries", self._database()
            )
            try:
                return await work(conn)
            finally:
                await close(conn)

    async def _claim(self, conn: Session) -> list[asyncpg.Record]:
        runner = self.s.runner_id
        for target in self._targets.values():
            events = list(target.events) if target.events is not None else None
            await conn.fetchval(
                query("deliveries_enqueue"), target.name, events, target.timers, runner
            )
        rows: list[asyncpg.Record] = await conn.fetch(
            query("deliveries_claim"), list(self._targets), runner, BATCH, LEASE
        )
        return rows

    async def _post(self, http: aiohttp.ClientSession, row: asyncpg.Record) -> Outcome:
        """One POST of one claimed delivery."""
        target = self._targets[row["target"]]
        database = self._database()
        link = timer_link(self.s.console(), database, row["timer"])
        data = body(event_fields(dict(row), database, link), target.format)
        headers = {"Content-Type": "application/json"}
        if target.secret:
            headers[SIGNATURE_HEADER] = signature(target.secret, data)
        try:
            # asyncio's own limit: aiohttp's rounds one of 10 s up to the next second
            return await asyncio.wait_for(self._send(http, target.url, data, headers), POST_TIMEOUT)
        except asyncio.TimeoutError:
            return Outcome(None, f"no answer within {POST_TIMEOUT:g}s")
        except aiohttp.ClientError as exc:
            return Outcome(None, f"{type(exc).__name__}: {exc}"[:_MAX_ERROR])

    async def _send(
        self, http: aiohttp.ClientSession, url: str, data: bytes, headers: dict[str, str]
    ) -> Outcome:
        async with http.post(url, data=data, headers=headers) as answer:
            if 200 <= answer.status < 300:
                return Outcome(answer.status)
            text = (await answer.text(errors="replace"))[:200]
            return Outcome(answer.status, f"HTTP {answer.status}: {text}".strip())

    async def _write(
        self, conn: Session, rows: Sequence[asyncpg.Record], outcomes: Sequence[Outcome]
    ) -> None:
        """What came of each POST, and the log lines of those that failed."""
        runner = self.s.runner_id
        for row, outcome in zip(rows, outcomes, strict=True):
            if outcome.delivered:
                await conn.fetchval(
                    query("delivery_done"), row["event_id"], row["target"], runner, outcome.status
                )
                log.LOGGER.debug(
                    log.line(
                        "delivered",
                        database=self._database(),
                        target=row["target"],
                        kind=row["event"],
                        event_id=row["event_id"],
                        timer=row["timer"],
                        delivery_id=row["delivery_id"],
                        attempt=row["attempts"],
                    )
                )
                continue
            failed = await conn.fetchrow(
                query("delivery_failed"),
                row["event_id"],
                row["target"],
                runner,
                outcome.status,
                outcome.error,
            )
            self._say_failed(row, outcome, failed)

    def _say_failed(self, row: asyncpg.Record, outcome: Outcome, failed: Any) -> None:
        state = failed["state"] if failed is not None else None
        next_at: dt.datetime | None = failed["next_at"] if failed is not None else None
        if next_at is not None:
            left = (next_at - dt.datetime.now(dt.timezone.utc)).total_seconds()
            self._retries.append(self.clock.now() + max(0.0, left))
        fields: dict[str, Any] = {
            "database": self._database(),
            "target": row["target"],
            "kind": row["event"],
            "event_id": row["event_id"],
            "timer": row["timer"],
            "delivery_id": row["delivery_id"],
            "attempt": row["attempts"],
            "status": outcome.status,
            "error": outcome.error,
        }
        if state == "undeliverable":
            log.event(
                logging.ERROR,
                "delivery_given_up",
                **fields,
                note="24 hours after the event: undeliverable (timers.deliveries)",
            )
        else:
            log.event(
                logging.WARNING,
                "delivery_failed",
                **fields,
                retry_at=next_at.isoformat() if next_at is not None else None,
            )


async def stop_quietly(task: asyncio.Task[None] | None) -> None:
    """Wait for a delivery task that saw the stop (cut off a POST in flight: its lease
    ends, and another runner delivers it)."""
    if task is None:
        return
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(task, POST_TIMEOUT + 5)
