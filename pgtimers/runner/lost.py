"""Runs whose session ended while they ran: which of them to record as a failed attempt of
what was claimed (timers._run_lost), and which to leave for the next claim to run again."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A run whose session was lost from outside (a network cut, a terminated backend, a
# restarting server) is run again by the next claim: its transaction rolled back, so its
# due time is still owed and runs once. The same claim lost this many times in a row is
# the run's doing (it terminates its own backend, say) and is recorded as failed.
LOST_LIMIT = 3
# Losses of a claim older than this are forgotten: "in a row" means within this window.
FORGET_AFTER = 600.0

# The classes of a server's FATAL error that come from outside the run: the connection,
# an operator or a restart (57: terminated, crash, shutdown), resources, the system; and
# the idle-in-transaction limit, which ends a session whose runner stopped talking
# mid-transaction (its path stalled): a run's SQL cannot set it (timers._session_reset).
_OUTSIDE = ("08", "57", "53", "58", "25P03")

CLAIMED = "pgtimers: claimed"  # the notice of timers._say_claimed


@dataclass(frozen=True)
class Claim:
    """What a worker's session was running: timers._say_claimed's notice."""

    kind: str
    id: int
    due_at: str | None
    at: str

    @property
    def key(self) -> tuple[str, int, str | None]:
        """The claim's identity: the same due time of the same timer."""
        return (self.kind, self.id, self.due_at)

    def label(self) -> str:
        """kind:id, as the run_error lines name a claim."""
        return f"{self.kind}:{self.id}"


def claim_from_notice(message: str, detail: str | None, mark: str) -> Claim | None:
    """The claim a notice announces, if it is timers._say_claimed's with this connection's
    mark (a timer's SQL can raise a notice of that text, never with the mark)."""
    if message != CLAIMED or not detail:
        return None
    try:
        said: dict[str, Any] = json.loads(detail)
        if said.get("mark") != mark:
            return None
        return Claim(str(said["kind"]), int(said["id"]), said.get("due_at"), str(said["at"]))
    except (ValueError, KeyError, TypeError):
        return None


def server_error(exc: BaseException) -> BaseException:
    """The error the server sent when it ended the session: asyncpg reports the closed
    connection (08003) and keeps the server's FATAL error as its cause."""
    cause = exc.__cause__
    if cause is not None and getattr(cause, "severity", None) and getattr(cause, "sqlstate", None):
        return cause
    return exc


def ended_by_the_run(exc: BaseException) -> bool:
    """Whether the server ended the session with an error of the run's own (exit_on_error
    makes the SQL's error FATAL; a transaction timeout it set; a PANIC of its backend), not
    one from outside it."""
    said = server_error(exc)
    severity = getattr(said, "severity_en", None) or getattr(said, "severity", None)
    sqlstate = getattr(said, "sqlstate", None) or ""
    return severity in ("FATAL", "PANIC") and not sqlstate.startswith(_OUTSIDE)


def _describe(exc: BaseException) -> tuple[str, str]:
    said = server_error(exc)
    sqlstate = getattr(said, "sqlstate", None) or ""
    severity = getattr(said, "severity_en", None) or getattr(said, "severity", None)
    text = str(said) or type(said).__name__
    head = " ".join(x for x in (severity if said is not exc else None, sqlstate) if x)
    return sqlstate, (f"{head}: {text}" if head else text)


@dataclass(frozen=True)
class Lost:
    """A lost run to record: what was claimed and the outcome to record for it."""

    claim: Claim
    error: str
    sqlstate: str

    def outcome(self) -> dict[str, str]:
        """timers._run_lost's p_lost."""
        return {"error": self.error, "sqlstate": self.sqlstate, "at": self.claim.at}


class LostRuns:
    """The losses of one database's runs, shared by its workers: what to record, and the
    counts of losses from outside, per claim. `clock` is time.monotonic in the runner."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._losses: dict[tuple[str, int, str | None], tuple[int, float]] = {}
        self.to_record: list[Lost] = []

    def note(self, claim: Claim, exc: BaseException) -> int | None:
        """A session ended while `claim` ran: queue it to be recorded (None) when the run
        ended it or it was lost LOST_LIMIT times in a row, else the losses so far."""
        now = self._clock()
        self._losses = {k: v for k, v in self._losses.items() if now - v[1] < FORGET_AFTER}
        sqlstate, said = _describe(exc)
        if ended_by_the_run(exc):
            error = f"the run ended the runner's session ({said})"
        else:
            count = self._losses.get(claim.key, (0, now))[0] + 1
            if count < LOST_LIMIT:
                self._losses[claim.key] = (count, now)
                return count
            error = (
                f"the runner's session ended during this run {count} times in a row ({said});"
                " it is not run again"
            )
        self._losses.pop(claim.key, None)
        self.to_record.append(Lost(claim, error, sqlstate or "08006"))
        return None

    def take(self) -> list[Lost]:
        """The lost runs to record now (each is given out once)."""
        taken, self.to_record = self.to_record, []
        return taken

    def give_back(self, lost: list[Lost]) -> None:
        """Lost runs that could not be recorded now (the connection failed again)."""
        self.to_record = lost + self.to_record
