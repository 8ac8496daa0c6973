"""Every ```sql block of docs/*.md marked `<!-- runnable -->` runs as it is on a fresh
database with a runner up, and the timers it fires do not fail (those of a block marked
`<!-- runnable; its runs fail on purpose -->` do fail)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests.conftest import Database
from tests.integration.sqlblocks import ROOT, Block, run_psql, runner_up, sql_blocks, stray_markers

DOCS = sorted((ROOT / "docs").glob("*.md"))
RUNNABLE = [block for path in DOCS for block in sql_blocks(path) if block.runnable]


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
