"""Which runs whose session ended are recorded as failed (pgtimers/runner/lost.py), with a
fake clock and asyncpg's own exceptions."""

from __future__ import annotations

import json

import asyncpg

from pgtimers.runner.lost import (
    FORGET_AFTER,
    LOST_LIMIT,
    Claim,
    LostRuns,
    claim_from_notice,
    ended_by_the_run,
)

CLAIM = Claim("timer", 7, "2027-01-04T09:00:00+00:00", "2027-01-04T09:00:00.01+00:00")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _server_said(sqlstate: str, severity: str, message: str) -> BaseException:
    """What asyncpg raises when the server sends an error and closes the connection."""
    said = asyncpg.PostgresError.new({"C": sqlstate, "S": severity, "V": severity, "M": message})
    closed = asyncpg.ConnectionDoesNotExistError(
        f"connection was closed in the middle of operation: {message}"
    )
    closed.__cause__ = said
    return closed


def test_a_fatal_error_of_the_run_is_recorded_at_once() -> None:
    lost = LostRuns(Clock())
    exc = _server_said("22012", "FATAL", "division by zero")
    assert ended_by_the_run(exc)
    assert lost.note(CLAIM, exc) is None
    (one,) = lost.take()
    assert one.claim == CLAIM
    assert one.sqlstate == "22012"
    assert one.error == "the run ended the runner's session (FATAL 22012: division by zero)"
    assert one.outcome() == {"error": one.error, "sqlstate": "22012", "at": CLAIM.at}
    assert lost.take() == []


def test_a_loss_from_outside_runs_again_until_it_repeats() -> None:
    lost = LostRuns(Clock())
    killed = _server_said("57P01", "FATAL", "terminating connection due to administrator command")
    assert not ended_by_the_run(killed)
    counts = [lost.note(CLAIM, killed) for _ in range(LOST_LIMIT)]
    assert counts == [*range(1, LOST_LIMIT), None]
    (one,) = lost.take()
    assert f"{LOST_LIMIT} times in a row" in one.error and "57P01" in one.error


def test_a_cut_connection_counts_as_outside() -> None:
    lost = LostRuns(Clock())
    assert lost.note(CLAIM, ConnectionResetError("reset by peer")) == 1
    assert lost.note(CLAIM, TimeoutError()) == 2
    other = Claim("timer", 7, "2027-01-04T09:00:01+00:00", CLAIM.at)  # the next due time
    assert lost.note(other, TimeoutError()) == 1
    assert lost.take() == []


def test_losses_are_forgotten_after_a_while() -> None:
    clock = Clock()
    lost = LostRuns(clock)
    for _ in range(LOST_LIMIT - 1):
        assert lost.note(CLAIM, OSError("gone")) is not None
    clock.now += FORGET_AFTER + 1
    assert lost.note(CLAIM, OSError("gone")) == 1


def test_lost_runs_not_recorded_go_back_first() -> None:
    lost = LostRuns(Clock())
    fatal = _server_said("25P04", "FATAL", "transaction timeout")
    lost.note(CLAIM, fatal)
    taken = lost.take()
    lost.note(Claim("keyed", 3, None, CLAIM.at), fatal)
    lost.give_back(taken)
    assert [one.claim.kind for one in lost.take()] == ["timer", "keyed"]


def test_only_notices_with_the_connections_mark_are_claims() -> None:
    detail = json.dumps({"mark": "m1", "kind": "timer", "id": 7, "due_at": None, "at": "x"})
    assert claim_from_notice("pgtimers: claimed", detail, "m1") == Claim("timer", 7, None, "x")
    assert claim_from_notice("pgtimers: claimed", detail, "m2") is None
    assert claim_from_notice("something else", detail, "m1") is None
    assert claim_from_notice("pgtimers: claimed", "not json", "m1") is None
    assert claim_from_notice("pgtimers: claimed", None, "m1") is None
    missing = json.dumps({"mark": "m1", "kind": "timer"})
    assert claim_from_notice("pgtimers: claimed", missing, "m1") is None
