"""The jsonb the runner reads from the database, typed and parsed in one place: a batch of
fires (timers._fire_many's {fired, results, more}), each fire's answer (a run's result, a
claim to run under its own time limit, a failure of the run machinery, an autonomous
attempt, or nothing), the start of serving (timers._runner_start) and the skips it and a
clock jump report, and the control session's look at what is due (a row, not jsonb,
typed here too). What is not known here is passed through untouched: a new key is no
error, a missing one takes the default the SQL means."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypedDict

# The time limit of a fire unless its timer has its own: the SQL's default timeout,
# timers._run_timeout(), and connect.sql's session statement_timeout are the same (a test,
# tests/integration/test_options_sql.py, checks both). The one default of the runner's: the
# batch's limit, its round trip's deadline, an autonomous finish's.
RUN_TIMEOUT_MS = 600_000


class Skip(TypedDict, total=False):
    """Due times skipped by a rule (timers._skip's event): one skipped line."""

    timer: str
    first: str
    last: str
    count: int
    reason: str


class RunResult(TypedDict, total=False):
    """What a fire did, as the runner logs it (timers._fire's result, a run's result)."""

    timer: str
    timer_id: int
    kind: str
    due_at: str
    ok: bool
    attempt: int
    took_ms: int
    late_ms: int
    rows: int
    sqlstate: str
    error: str
    retry_at: str
    gave_up: bool
    paused: bool
    skipped: list[Skip]
    # the run waited for a lock past its lock wait limit (timers._yielded): held back
    yielded: str
    waited_ms: int
    lock_timeout: str
    # a held timer ran (it had yielded before)
    ran_after_yield: bool


@dataclass(frozen=True)
class Ran:
    """A fire's result to log (and to learn holds from)."""

    result: RunResult

    @property
    def yielded(self) -> bool:
        """The run yielded on a lock: its due time is still owed."""
        return "yielded" in self.result

    @property
    def keyed(self) -> bool:
        """A keyed timer's fire."""
        return self.result.get("kind") == "keyed"


@dataclass(frozen=True)
class Unrun:
    """A fire that leaves nothing to log: its machinery raised (said and quarantined
    where it was read), or the due time was another run's."""

    why: str  # "raised" or "taken"


@dataclass(frozen=True)
class OwnTimeout:
    """{"claim": kind, "id", "due_at", "timeout_ms", "timer_id"}: a claimed fire whose
    timer has a time limit of its own, run by the runner in a second step."""

    kind: str
    id: int
    due_at: str | None
    timeout_ms: int
    timer_id: int | None  # a backfill's timer (id is the backfill's)

    @property
    def quarantined(self) -> int:
        """What a failure of its run quarantines: the timer."""
        return self.timer_id or self.id


@dataclass(frozen=True)
class MachineryFailed:
    """{"failed": kind, "id", "sqlstate", "error"}: the run machinery raised (not the
    timer's SQL, whose failure is a RunResult)."""

    kind: str
    id: int
    sqlstate: str | None
    error: str | None


@dataclass(frozen=True)
class AutonomousStart:
    """{"autonomous": attempt}: an autonomous attempt, committed as started."""

    attempt: Mapping[str, Any]


Answer = Ran | Unrun | OwnTimeout | MachineryFailed | AutonomousStart
# what a worker hands its pool for each fire
Outcome = Ran | Unrun


def parse_answer(raw: Mapping[str, Any] | None) -> Answer:
    """One fire's jsonb answer (NULL or {}: nothing to log, the due time was another's)."""
    if not raw:
        return Unrun("taken")
    if "claim" in raw:
        return OwnTimeout(
            kind=str(raw["claim"]),
            id=int(raw["id"]),
            due_at=raw.get("due_at"),
            timeout_ms=int(raw["timeout_ms"]),
            timer_id=int(raw["timer_id"]) if raw.get("timer_id") is not None else None,
        )
    if "autonomous" in raw:
        return AutonomousStart(raw["autonomous"])
    if "failed" in raw:
        return MachineryFailed(
            kind=str(raw["failed"]),
            # 0 (or null, from a schema of the previous release): the claim itself failed
            id=int(raw.get("id") or 0),
            sqlstate=raw.get("sqlstate"),
            error=raw.get("error"),
        )
    return Ran(RunResult(**raw))  # type: ignore[typeddict-item]


@dataclass(frozen=True)
class Batch:
    """timers._fire_many's {fired, results, more}: how many it fired, the answers it
    hands the runner (failed, skipped, paused or needing it), whether more is due."""

    fired: int
    answers: list[Answer] = field(default_factory=list)
    more: bool = False


def parse_batch(raw: Mapping[str, Any]) -> Batch:
    """timers._fire_many's result."""
    return Batch(
        fired=int(raw.get("fired") or 0),
        answers=[parse_answer(r) for r in raw.get("results") or []],
        more=bool(raw.get("more")),
    )


@dataclass(frozen=True)
class Started:
    """timers._runner_start's answer: the downtime's skips, whether it came back from
    parking (it served all along), and how many other runners serve the database."""

    skipped: list[Skip]
    resumed: bool
    other_runners: int | None


def parse_started(raw: Mapping[str, Any]) -> Started:
    """timers._runner_start's result."""
    others = raw.get("other_runners")
    return Started(
        skipped=parse_skips(raw.get("skipped")),
        resumed=bool(raw.get("resumed")),
        other_runners=None if others is None else int(others),
    )


def parse_skips(raw: Any) -> list[Skip]:
    """A list of skip events (timers._runner_start's, timers._clock_jump's)."""
    return [Skip(**s) for s in raw or []]  # type: ignore[typeddict-item]


def parse_run_result(raw: Mapping[str, Any] | None) -> RunResult | None:
    """A run's result (timers._run_lost's, say); None for NULL or {} (nothing recorded)."""
    return RunResult(**raw) if raw else None  # type: ignore[typeddict-item]


class Wake(NamedTuple):
    """timers._next_wake's row: the server's clock, the earliest due time of anything (it
    may have passed: a run holds it), and the earliest due time still to come."""

    db_now: dt.datetime
    wake_at: dt.datetime | None
    next_at: dt.datetime | None
