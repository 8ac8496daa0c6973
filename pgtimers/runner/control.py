"""Chores of a database's control session: wait while it is a standby, set its default
zone, prune old runs (the clock watch is clock_watch.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import asyncpg

from pgtimers.runner import log
from pgtimers.runner.queries import query
from pgtimers.runner.session import Session

STANDBY_LOOK_EVERY = 1.0  # seconds: a standby's promotion is seen this soon
# Pruning deletes runs past their retention in one call (after a long gap, many): its
# deadline is this, where the control session's other statements have QUICK's.
PRUNE_DEADLINE = 300.0


async def wait_for_primary(
    control: Session,
    database: str,
    stopping: asyncio.Event,
    pause: Callable[[float], Awaitable[None]],
) -> None:
    """On a standby nothing runs; look every second until it is promoted (or stopping)."""
    said = False
    while await control.fetchval(query("in_recovery")):
        if not said:
            log.event(
                logging.INFO, "standby", database=database, note="runs nothing until promoted"
            )
            said = True
        await pause(STANDBY_LOOK_EVERY)
        if stopping.is_set():
            return
    if said:
        log.event(logging.INFO, "promoted", database=database)


async def set_timezone(control: Session, database: str, zone: str | None) -> None:
    """--timezone: make `zone` the database's default zone, unless it is already."""
    if not zone or await control.fetchval(query("default_zone")) == zone:
        return
    try:
        await control.fetchval(query("set_timezone"), zone)
        log.event(logging.INFO, "timezone_set", database=database, zone=zone)
    except asyncpg.PostgresError as exc:
        log.event(logging.ERROR, "timezone_not_set", database=database, zone=zone, error=str(exc))


async def prune(control: Session, database: str) -> None:
    """Delete runs and run-now requests past their retention; log what went."""
    with control.deadline_of(PRUNE_DEADLINE):
        pruned = await control.fetchval(query("prune"))
    if pruned and (pruned.get("runs") or pruned.get("run_requests")):
        log.event(logging.INFO, "pruned", database=database, **pruned)
