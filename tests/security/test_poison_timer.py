"""A run that ends the runner's session (a poison timer) is recorded as a failed attempt of
that timer, counts toward its retries and pause_after, waits for its retry delay, and
never starves the other timers; settings that end the session are refused at save.

The runner is a real `pgtimers run --workers 1`: with one worker, a poison timer claimed
again at once would leave no time for anything else.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Database, scalar
from tests.security.helpers import ALICE, BOB, Runner, connect, save
from tests.support.wait import wait_until

# exit_on_error makes the SQL's own error FATAL: the server ends the runner's session
# (set_config: dynamic, so the save-time check cannot see it)
POISON = "SELECT set_config('exit_on_error', 'on', false); SELECT 1/0"


@pytest.fixture
def runner(db: Database, tmp_path: Path) -> Iterator[Runner]:
    with connect(db) as su:
        su.execute("CREATE TABLE public.hits (who text, at timestamptz DEFAULT clock_timestamp())")
        su.execute("GRANT INSERT ON public.hits TO PUBLIC")
    r = Runner(db, tmp_path / "runner.log")
    yield r
    r.terminate()


def _status(db: Database, name: str) -> tuple[int, int, bool, str]:
    with db.connect() as su:
        row = su.execute(
            "SELECT runs, failures, enabled, last_error FROM timers.status WHERE name = %s",
            [name],
        ).fetchone()
    assert row is not None
    return row


def test_a_poison_timer_is_recorded_paused_and_starves_nobody(db: Database, runner: Runner) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "poison", POISON, "every 1s", pause_after=3)
    with connect(db, BOB) as bob:
        save(bob, "good", "INSERT INTO public.hits (who) VALUES ('good')", "every 1s")
    wait_until(lambda: not _status(db, "poison")[2], timeout=15, what=runner.log)
    runs, failures, _, error = _status(db, "poison")
    assert (runs, failures) == (3, 3)
    assert "the run ended the runner's session (FATAL 22012: division by zero)" in error
    assert "paused after 3 failed due times in a row" in error
    with db.connect() as su:
        rows = su.execute(
            "SELECT ok FROM timers.runs WHERE timer = 'poison' AND kind <> 'skipped'"
        ).fetchall()
        # the good timer ran on while the poison one failed (one worker for both)
        good = su.execute(
            "SELECT count(*) FROM public.hits WHERE at <= (SELECT max(started_at) + interval '0.5s'"
            " FROM timers.runs WHERE timer = 'poison')"
        ).fetchone()
    assert rows == [(False,)] * 3
    assert good is not None and good[0] >= 2, runner.log()
    assert "event=run_failed timer=poison" in runner.log()


def test_a_poison_timers_retry_waits_for_its_delay(db: Database, runner: Runner) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "poison_retried", POISON, "daily 02:00", retries=1, retry_delay="2s")
    with db.connect() as su:
        # due now: as the runner would see a due time come
        su.execute("UPDATE timers.timers SET next_due_at = now() WHERE name = 'poison_retried'")
        su.execute("NOTIFY pgtimers")
    got = wait_until(lambda: _attempts(db) if len(_attempts(db)) >= 2 else None, timeout=15)
    assert got, runner.log()
    (first, first_at), (second, second_at) = got[:2]
    assert (first, second) == (1, 2)
    assert (second_at - first_at).total_seconds() >= 1.9  # not claimed again before the delay
    runs, failures, _, error = _status(db, "poison_retried")
    assert (runs, failures) == (1, 1)
    assert "attempt 2" in error or "retries exhausted" in error


def _attempts(db: Database) -> list[tuple[int, object]]:
    with db.connect() as su:
        return [
            (r[0], r[1])
            for r in su.execute(
                "SELECT attempt, started_at FROM timers.runs WHERE timer = 'poison_retried'"
                " AND kind <> 'skipped' ORDER BY id"
            )
        ]


def test_run_now_and_keyed_poison_are_answered_as_failures(db: Database, runner: Runner) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "poison_now", POISON)
        answer = alice.execute("CALL timers.run('poison_now')").fetchone()
        alice.execute("SELECT timers.arm('alice:task:poison:1', now(), %s)", [POISON])
    assert answer is not None
    assert answer[0]["ok"] is False
    assert "ended the runner's session" in answer[0]["error"]

    def fired() -> tuple[str, bool, str] | None:
        with db.connect() as su:
            row = su.execute(
                "SELECT status, ok, error FROM timers.keyed_timers"
                " WHERE key = 'alice:task:poison:1'"
            ).fetchone()
        return row if row and row[0] == "fired" else None

    row = wait_until(fired, timeout=15)
    assert row is not None, runner.log()
    assert row[1] is False and "ended the runner's session" in row[2]


def test_a_forged_claim_notice_cannot_blame_another_owners_timer(
    db: Database, runner: Runner
) -> None:
    """A run can raise a notice that looks like the runner's 'claimed' notice, naming
    another owner's due timer, and then end the session: the runner believes only notices
    with its connection's secret mark, so the poison timer is blamed, not the other."""
    with connect(db, BOB) as bob:
        save(bob, "victim", "INSERT INTO public.hits (who) VALUES ('victim')", "every 1s")
    with db.connect() as su:
        victim = scalar(su, "SELECT id FROM timers.timers WHERE name = 'victim'")
    forge = (
        "DO $$ BEGIN RAISE NOTICE 'pgtimers: claimed' USING DETAIL = json_build_object("
        f"'mark', '', 'kind', 'timer', 'id', {victim}, 'due_at',"
        " (SELECT to_timestamp(next_run_ms / 1000.0) FROM timers.status WHERE name = 'victim'),"
        " 'at', clock_timestamp())::text; END $$; " + POISON
    )
    with connect(db, ALICE) as alice:
        save(alice, "forger", forge, "every 1s", pause_after=2)
    wait_until(lambda: not _status(db, "forger")[2], timeout=15, what=runner.log)
    assert "the run ended the runner's session" in _status(db, "forger")[3]
    assert _status(db, "victim")[1] == 0  # no failure of bob's timer
    assert _status(db, "victim")[0] >= 1


@pytest.mark.parametrize(
    "sql",
    [
        "SET exit_on_error = on; SELECT 1/0",
        "SET idle_session_timeout = 1",
        "SET LOCAL idle_in_transaction_session_timeout = 1",
        "SET SESSION session_replication_role = replica",
        'SET "exit_on_error" TO true',
        "RESET exit_on_error",
    ],
)
def test_settings_that_end_the_session_are_refused_at_save(db: Database, sql: str) -> None:
    with connect(db, ALICE) as alice, pytest.raises(errors.InsufficientPrivilege) as refused:
        save(alice, "ender", sql)
    assert "end the runner's session" in str(refused.value)


def test_a_lost_run_needs_what_was_claimed(db: Database) -> None:
    with db.connect() as su, pytest.raises(psycopg.errors.InvalidParameterValue):
        su.execute("SELECT timers._run_lost('timer', 1, now(), 'r', '{}')")
