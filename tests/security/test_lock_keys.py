"""No role outside pgtimers can stall timers or runners with a lock of its own.

Advisory locks are open to every role that can connect, and their keys are easy to
guess (pgtimers once used (28775, timer id) for "running", (28776, 0) for a live
runner, (28776, 1) for runner starts and (28777, 0) for keyed fires). Here a plain
login role, member of nothing, takes each of those keys (and more) while a real
runner must keep working; and pgtimers' own locks (row locks of timers.locks and of
the timers) cannot be taken by that role or by a reader.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Database
from tests.security.helpers import ALICE, READER, Runner, connect, fresh_role, save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until


@pytest.fixture
def plain(db: Database) -> Iterator[psycopg.Connection]:
    """A session of a LOGIN role that is a member of nothing."""
    with fresh_role(db, prefix="pgt_plain") as name, connect(db, name) as conn:
        yield conn


@pytest.fixture
def ticks(db: Database) -> Database:
    with db.connect() as su:
        su.execute("CREATE TABLE public.ticks (at timestamptz DEFAULT clock_timestamp())")
        su.execute("GRANT INSERT ON public.ticks TO PUBLIC")
    return db


def _count(db: Database, query: str) -> int:
    with db.connect() as su:
        row = su.execute(query).fetchone()
        assert row is not None
        return int(row[0])


def test_running_keys_held_by_a_plain_role_do_not_stop_timers(
    ticks: Database, plain: psycopg.Connection, tmp_path: Path
) -> None:
    db = ticks
    with connect(db, ALICE) as alice:
        save(alice, "victim", "INSERT INTO public.ticks DEFAULT VALUES", schedule="every 1s")
    with db.connect() as su:
        row = su.execute("SELECT id FROM timers.timers WHERE name = 'victim'").fetchone()
        assert row is not None
    plain.execute("SELECT pg_advisory_lock(28775, g) FROM generate_series(1, 200) g")
    plain.execute("SELECT pg_advisory_lock(28775, %s)", [row[0]])
    runner = Runner(db, tmp_path / "runner.log")
    try:
        assert wait_until(lambda: _count(db, "SELECT count(*) FROM public.ticks") >= 3, 10)
        # not running while it waits for its next due time, whatever keys are held
        time.sleep(0.1)
        states = {_running(db) for _ in range(20)}
        assert False in states
    finally:
        runner.terminate()
    # held keys would stop it for good; a skip or two is the load of a busy machine. The due
    # times before the runner served (its start takes seconds on a loaded machine) are
    # skipped for that, not for the keys.
    assert (
        _count(
            db,
            "SELECT count(*) FROM timers.runs WHERE timer = 'victim' AND kind = 'skipped'"
            " AND reason NOT LIKE 'no runner was serving%'",
        )
        <= 3
    )


def _running(db: Database) -> bool:
    with db.connect() as su:
        row = su.execute("SELECT running FROM timers.status WHERE name = 'victim'").fetchone()
        assert row is not None
        return bool(row[0])


def test_the_keyed_fire_key_held_by_a_plain_role_does_not_stop_keyed_timers(
    ticks: Database, plain: psycopg.Connection, tmp_path: Path
) -> None:
    db = ticks
    plain.execute("SELECT pg_advisory_lock(28777, 0)")
    plain.execute("SELECT pg_advisory_lock(28777, g) FROM generate_series(1, 50) g")
    runner = Runner(db, tmp_path / "runner.log")
    try:
        with connect(db, ALICE) as alice:
            alice.execute(
                "SELECT timers.arm('j:task:tick:1', now(),"
                " 'INSERT INTO public.ticks DEFAULT VALUES')"
            )
        assert wait_until(
            lambda: (
                _count(db, "SELECT count(*) FROM timers.keyed_timers WHERE status = 'fired' AND ok")
                == 1
            ),
            10,
        )
    finally:
        runner.terminate()


@pytest.mark.parametrize("lock", ["pg_advisory_lock(28776, 1)", "pg_advisory_lock(28776, 0)"])
def test_runner_start_keys_held_by_a_plain_role_do_not_stop_a_runner(
    ticks: Database, plain: psycopg.Connection, tmp_path: Path, lock: str
) -> None:
    db = ticks
    plain.execute(f"SELECT {lock}")
    started = time.monotonic()
    runner = Runner(db, tmp_path / "runner.log")  # waits for event=serving (15 s at most)
    try:
        assert time.monotonic() - started < 10
        assert _count(db, "SELECT timers._live_runners()") == 1
    finally:
        runner.terminate()
    assert _count(db, "SELECT timers._live_runners()") == 0


def test_a_plain_role_cannot_fake_a_live_runner(db: Database, plain: psycopg.Connection) -> None:
    """With no runner up, CALL timers.run says so at once (55000), whatever a role holds."""
    plain.execute("SELECT pg_advisory_lock_shared(28776, 0)")
    plain.execute("SET application_name = 'pgtimers runner control'")
    assert _count(db, "SELECT timers._live_runners()") == 0
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
        alice.execute("SET statement_timeout = '5s'")
        with pytest.raises(errors.ObjectNotInPrerequisiteState, match="no pgtimers runner"):
            alice.execute("CALL timers.run('t0')")


@pytest.mark.parametrize("role", ["plain", "reader"])
def test_pgtimers_own_locks_are_out_of_reach(
    db: Database, plain: psycopg.Connection, role: str
) -> None:
    with connect(db, READER) as reader:
        conn = plain if role == "plain" else reader
        for statement in (
            "SELECT 1 FROM timers.locks FOR UPDATE",
            "LOCK TABLE timers.locks IN EXCLUSIVE MODE",
            "SELECT 1 FROM timers.timers FOR UPDATE",
            "SELECT 1 FROM timers.runners FOR UPDATE",
            "LOCK TABLE timers.runners IN SHARE ROW EXCLUSIVE MODE",
        ):
            with pytest.raises(errors.InsufficientPrivilege), conn.transaction():
                conn.execute(statement)


def test_a_held_runner_start_lock_is_named_and_waited_for_at_most_10_s(
    db: Database, tmp_path: Path
) -> None:
    """Only pgtimers' roles can hold it (here: a stuck superuser session); the runner
    says who holds it, then serves when it is free."""
    holder = db.connect(autocommit=False)
    holder.execute("SET application_name = 'stuck admin'")
    holder.execute("SELECT 1 FROM timers.locks WHERE name = 'runner_start' FOR UPDATE")
    runner = None
    try:
        runner = RunnerProcess(["--dsn", db.dsn, "--workers", "1"], tmp_path / "runner.log")
        runner.wait_for("stuck admin", 25)
        assert "runner_start" in runner.log()
        holder.rollback()
        runner.wait_for("event=serving", 15)
    finally:
        holder.close()
        if runner is not None:
            runner.stop(15)
