"""Runner fixtures: `pgtimers run` as real subprocesses, and small helpers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.conftest import Database

# the shared helpers, also importable from here, where tests used to find them
from tests.support.runner import RunnerProcess as RunnerProcess
from tests.support.wait import wait_until as wait_until


@pytest.fixture
def start_runner(db: Database, tmp_path: Path) -> Iterator[Callable[..., RunnerProcess]]:
    """Start `pgtimers run --dsn <the test database>` (plus args); waits until it serves."""
    started: list[RunnerProcess] = []

    def start(
        *args: str, dsn: str | None = None, wait: bool = True, env: dict[str, str] | None = None
    ) -> RunnerProcess:
        log = tmp_path / f"runner{len(started)}.log"
        dsn_args = [] if "--config" in args else ["--dsn", dsn or db.dsn]
        runner = RunnerProcess([*dsn_args, *args], log, env)
        started.append(runner)
        if wait:
            runner.wait_for("event=serving")
        return runner

    yield start
    for runner in started:
        runner.kill()
        runner._log.close()


def save(
    conn: psycopg.Connection, name: str, schedule: str, sql: str, **options: Any
) -> dict[str, Any]:
    """timers.save with named options; returns the status row."""
    names = "".join(f", {k} => %({k})s" for k in options)
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            f"SELECT * FROM timers.save(%(n)s, %(s)s, %(q)s{names})",
            {"n": name, "s": schedule, "q": sql, **options},
        ).fetchone()
    assert row is not None
    return row


def status(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM timers.status WHERE name = %s", [name]).fetchone()
    assert row is not None, f"no timer {name}"
    return row


def timer_row(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM timers.timers WHERE name = %s", [name]).fetchone()
    assert row is not None, f"no timer {name}"
    return row


def history(conn: psycopg.Connection, name: str) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT kind, due_at, ok, error, reason, rows FROM timers.runs WHERE timer = %s"
            " ORDER BY due_at NULLS LAST, id",
            [name],
        ).fetchall()


# Each run of these timers records which due time it ran, in a table with no
# unique constraint, so a double commit would show.
LOG_TABLE = "CREATE TABLE fired (timer text, due text, at timestamptz DEFAULT clock_timestamp())"
LOG_SQL = (
    "INSERT INTO fired (timer, due) "
    "VALUES (current_setting('pgtimers.timer'), current_setting('pgtimers.due_at'))"
)


@pytest.fixture
def fired(conn: psycopg.Connection) -> Callable[..., list[tuple[str, str]]]:
    """Make the `fired` table; the fixture reads it back as (timer, due) rows in order."""
    conn.execute(LOG_TABLE)

    def read(timer: str | None = None) -> list[tuple[str, str]]:
        rows = conn.execute(
            "SELECT timer, due FROM fired WHERE %(t)s::text IS NULL OR timer = %(t)s ORDER BY at",
            {"t": timer},
        ).fetchall()
        return [(r[0], r[1]) for r in rows]

    return read
