"""The jsonb answers of timers._fire read into the runner's types (pgtimers/runner/answers.py)."""

from __future__ import annotations

import pytest

from pgtimers.runner.answers import MachineryFailed, Unrun, parse_answer


@pytest.mark.parametrize("id_", [0, None])
def test_a_failed_claim_names_no_timer_and_is_read_all_the_same(id_: int | None) -> None:
    """A claim that itself raised has no id: 0 from this schema, null from the previous
    release's (whose runner read it with int() and lost the worker)."""
    answer = parse_answer({"failed": "claim", "id": id_, "sqlstate": "55P03", "error": "lock"})
    assert answer == MachineryFailed(kind="claim", id=0, sqlstate="55P03", error="lock")


def test_a_failed_run_names_its_timer() -> None:
    answer = parse_answer({"failed": "timer", "id": 42, "sqlstate": "XX000", "error": "boom"})
    assert isinstance(answer, MachineryFailed) and answer.id == 42


@pytest.mark.parametrize("raw", [None, {}])
def test_nothing_recorded_is_a_due_time_taken_by_another(raw: dict[str, object] | None) -> None:
    assert parse_answer(raw) == Unrun("taken")
