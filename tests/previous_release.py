"""The previous release of pgtimers, taken from git for upgrade tests: its files in a
folder of their own, and its Python (runner, install) run from there."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.support.runner import PYTHON, RunnerProcess

REPO = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str | None:
    """git's output in the repository, or None when git or the history is missing."""
    if shutil.which("git") is None:
        return None
    done = subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, check=False, timeout=60
    )
    return done.stdout.decode().strip() if done.returncode == 0 else None


# The commit of the last release (the last landed stop): a database of it is what an
# install of this tree upgrades, while its runners still run. Move it at each release.
# (The parent of the commit that added the newest migration is no release: that schema,
# from while 0027 was being written, returns a bigint from timers._attempt_recorded,
# which the released 0027 no longer drops, and HEAD's code cannot upgrade it.)
PREVIOUS_RELEASE = "8684a2a"


def previous_release() -> str:
    """The commit of the previous release (PGTIMERS_PREVIOUS_RELEASE, else
    PREVIOUS_RELEASE); skips the test when git or that history is missing."""
    chosen = os.environ.get("PGTIMERS_PREVIOUS_RELEASE") or PREVIOUS_RELEASE
    commit = _git("rev-parse", "--verify", "--quiet", f"{chosen}^{{commit}}")
    if not commit:
        pytest.skip(f"commit {chosen} is not in this checkout's git history (shallow clone?)")
    return commit


def checkout(commit: str, into: Path) -> Path:
    """The files of `commit` in the folder `into` (git archive); returns the folder."""
    tar = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", commit],
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(into, filter="data")
    return into


def environ(release: Path) -> dict[str, str]:
    """The environment that imports pgtimers from `release` (with the cwd there: `python
    -m` puts the cwd first on the path)."""
    path = os.pathsep.join(p for p in (str(release), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def python(release: Path, code: str) -> str:
    """Run Python code with `release`'s pgtimers; its output (a failure raises)."""
    done = subprocess.run(
        [PYTHON, "-c", code],
        cwd=release,
        env=environ(release),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def install(release: Path, dsn: str) -> str:
    """Install `release`'s schema into the database; the revision it is at."""
    where = python(release, "import pgtimers; print(pgtimers.__file__)")
    assert where.startswith(str(release)), f"pgtimers imported from {where}, not {release}"
    return python(release, f"from pgtimers.schema.install import install; print(install({dsn!r}))")


class OldRunner(RunnerProcess):
    """`pgtimers run` of `release`'s code."""

    def __init__(self, release: Path, args: list[str], log: Path) -> None:
        """Start it from `release`, its log going to `log`."""
        self.log_path = log
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "pgtimers", "run", *args],
            cwd=release,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=environ(release),
        )
