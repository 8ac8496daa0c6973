"""Every ```sql block of docs/*.md marked `<!-- runnable -->` runs as it is on a fresh
database with a runner up, and the timers it fires do not fail (those of a block marked
`<!-- runnable; its runs fail on purpose -->` do fail). A ```python block marked
`<!-- runnable -->` is a webhook receiver (docs/operations.md, Getting told): run as it is,
it gets a runner's signed POST of an event and turns an unsigned one away."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest

from tests.conftest import Database
from tests.integration.sqlblocks import (
    ROOT,
    Block,
    python_blocks,
    run_psql,
    runner_up,
    sql_blocks,
    stray_markers,
)
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

DOCS = sorted((ROOT / "docs").glob("*.md"))
RUNNABLE = [block for path in DOCS for block in sql_blocks(path) if block.runnable]
RECEIVERS = [block for path in DOCS for block in python_blocks(path)]


def test_markers_sit_right_before_a_sql_block() -> None:
    stray = {path.name: lines for path in DOCS if (lines := stray_markers(path))}
    assert stray == {}, "a <!-- runnable --> marker must be the line right before ```sql"


def test_the_docs_have_runnable_blocks() -> None:
    assert len(RUNNABLE) >= 5, [b.id for b in RUNNABLE]


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_a_runnable_block_runs(
    block: Block, db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    with runner_up(db, tmp_path / "runner.log") as runner:
        done = run_psql(db, block.sql)
    assert done.returncode == 0, f"{done.stderr}\n{done.stdout}\nrunner log:\n{runner.log()}"
    failed = conn.execute(
        "SELECT timer, kind, error FROM timers.runs WHERE ok = false AND kind <> 'skipped'"
    ).fetchall()
    assert bool(failed) == block.fails_on_purpose, f"runs that failed:\n{failed}\n{done.stdout}"
    keyed_failed = conn.execute(
        "SELECT key, error FROM timers.keyed_timers WHERE error <> ''"
    ).fetchall()
    assert keyed_failed == [], f"keyed timers that failed:\n{done.stdout}"


def test_the_docs_have_a_runnable_receiver() -> None:
    assert RECEIVERS, "docs/operations.md, Getting told: a runnable Python receiver"


@pytest.mark.parametrize("block", RECEIVERS, ids=[b.id for b in RECEIVERS])
def test_a_runnable_receiver_gets_a_signed_event(
    block: Block, db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    out = (tmp_path / "receiver.out").open("w")
    receiver = subprocess.Popen(
        [sys.executable, "-c", block.sql],
        env={"PGTIMERS_SECRET": "s3cret", "PORT": str(port)},
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    config = tmp_path / "pgtimers.toml"
    config.write_text(
        f"dsn = {json.dumps(db.dsn)}\n[[notify]]\n"
        f'url = "http://127.0.0.1:{port}/"\nsecret = "s3cret"\n'
    )
    runner = RunnerProcess(["--config", str(config)], tmp_path / "runner.log")
    try:
        runner.wait_for("event=serving")
        conn.execute(
            "INSERT INTO timers.events (event, timer, error) VALUES ('failed', 'nightly', 'boom')"
        )
        conn.execute("NOTIFY pgtimers_events")
        wait_until(
            lambda: "nightly failed: boom" in (tmp_path / "receiver.out").read_text(),
            20,
            "the receiver printing the event",
        )
        delivered = "SELECT state, last_status FROM timers.deliveries"
        wait_until(lambda: conn.execute(delivered).fetchone() == ("delivered", 204), 10)
        unsigned = urllib.request.Request(f"http://127.0.0.1:{port}/", data=b"{}", method="POST")
        deadline = time.monotonic() + 5
        with pytest.raises(urllib.error.HTTPError) as refused:
            while time.monotonic() < deadline:
                urllib.request.urlopen(unsigned, timeout=5)
        assert refused.value.code == 401
    finally:
        runner.stop()
        receiver.kill()
        receiver.wait(10)
        out.close()
