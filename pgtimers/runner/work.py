"""The workers of one database: each fires timers on its own connection while there is
work, the burst worker only while all others run, and each reconnects alone."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from pgtimers.runner import log
from pgtimers.runner.serving import LOOK_EVERY, Backoff, Serving
from pgtimers.runner.worker import Worker, is_connection_error


class WorkerPool:
    """The worker side of a DatabaseRunner: waiting for work, firing, failing alone."""

    s: Serving
    stopping: asyncio.Event
    started: asyncio.Event
    database: str
    serving: bool
    _work: asyncio.Condition
    _has_work: bool
    _running: int
    _recheck: asyncio.Event
    _nothing_to_claim: bool
    _leaving: bool

    async def _pause(self, seconds: float) -> None:
        raise NotImplementedError  # DatabaseRunner's: wait, showing life to the watchdog

    def _burst(self) -> int:
        # --workers 1 runs one timer at a time; otherwise one more while all are busy
        return 0 if self.s.workers == 1 else 1

    async def _signal_work(self) -> None:
        async with self._work:
            self._has_work = True
            self._work.notify_all()

    async def _wait_for_work(self, burst: bool) -> bool:
        """Until there is work for this worker (or stopping: False). Without a control
        session (lost, or being made again) the workers look by themselves every second."""

        def ready() -> bool:
            return (
                self._leaving
                or self.stopping.is_set()
                or (self._has_work and (not burst or self._running >= self.s.workers))
            )

        async with self._work:
            if not self.started.is_set():
                # nothing runs before the first registration has applied the downtime rules
                await self._work.wait_for(lambda: self.started.is_set() or self._leaving)
            if self.serving or burst:
                await self._work.wait_for(ready)
            else:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._work.wait_for(ready), LOOK_EVERY)
            if self._leaving or self.stopping.is_set():
                return False
            if not burst:
                self._running += 1
                self._work.notify_all()
            return True

    async def _work_loop(self, worker: Worker, burst: bool) -> None:
        """Take work while there is some; the burst worker only while all others run.

        A base worker whose fire ran something fires again at once, without waiting for
        the control session: so the keyed timers of a clock (one fire at a time, each its
        own transaction) fire back to back. It goes back to waiting when a claim finds
        nothing (or its run raised). A lost connection is this worker's alone: it logs
        once, makes it again (at once, then every half second) and goes on."""
        again = False
        backoff = Backoff()
        lost = False
        try:
            while not self.stopping.is_set() and not self._leaving:
                if not again and not await self._wait_for_work(burst):
                    return
                if again and not burst:
                    async with self._work:
                        self._running += 1
                try:
                    worker.database = self.database
                    result = await worker.run_one()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a worker never ends by an error
                    again = False
                    lost = await self._worker_failed(worker, exc, backoff, lost)
                    continue
                finally:
                    if not burst:
                        async with self._work:
                            self._running -= 1
                            self._work.notify_all()
                if lost:
                    log.event(
                        logging.INFO, "worker_back", database=self.database, worker=worker.name
                    )
                    lost = False
                backoff.healthy()
                again = self._after_fire(result, burst)
        finally:
            await worker.close()

    async def _worker_failed(
        self, worker: Worker, exc: Exception, backoff: Backoff, lost: bool
    ) -> bool:
        """Log a worker's failure (a lost connection once), close it, wait; lost or not."""
        if self.stopping.is_set():
            return lost
        await worker.close()
        if is_connection_error(exc):
            if not lost:
                log.event(
                    logging.WARNING,
                    "worker_lost",
                    database=self.database,
                    worker=worker.name,
                    error=str(exc) or type(exc).__name__,
                )
            await self._pause(backoff.next_wait())
            return True
        log.event(
            logging.ERROR,
            "worker_failed",
            database=self.database,
            worker=worker.name,
            error_type=type(exc).__name__,
            error=str(exc),
        )
        await self._pause(1.0)
        return lost

    def _after_fire(self, result: dict[str, Any] | None, burst: bool) -> bool:
        """Note what a fire did; whether this worker fires again at once."""
        if result is None:
            self._has_work = False
            self._nothing_to_claim = True
            self._recheck.set()
            return False
        if not result:
            # a run that raised (or a timer another run took): wait for the control
            # session, not a hot loop
            self._recheck.set()
            return False
        log.run_result(self.database, result)
        # the burst worker goes back to waiting, where it fires again while all others
        # run; the control session is asked only when a claim finds nothing (above)
        return not burst
