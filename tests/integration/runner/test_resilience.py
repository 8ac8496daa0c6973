"""--all-databases on a server of its own, and the embedded default server (crashes,
restarts and failover: tests/faults)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pgtimers.cli.dsn import ENVIRONMENT
from pgtimers.schema.install import install
from tests.conftest import Server
from tests.integration.runner.conftest import LOG_SQL, LOG_TABLE, save
from tests.support.embedded import embedded_server
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
Fired = Callable[..., list[tuple[str, str]]]


# ------------------------------------------------------------ a server of our own


@pytest.fixture(scope="module")
def own_server() -> Iterator[Server]:
    """A separate embedded PostgreSQL (so it can be restarted, and --all-databases
    sees no other test's databases)."""
    with embedded_server("pgtimers-own-") as dsn:
        yield Server(dsn)


def _create(server: Server, name: str, with_schema: bool) -> str:
    with server.admin() as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = server.dsn_for(name)
    if with_schema:
        install(dsn)
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(LOG_TABLE)
    return dsn


def _fired(dsn: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        return [(r[0], r[1]) for r in c.execute("SELECT timer, due FROM fired ORDER BY at")]


def test_all_databases_serves_each_installed_one_and_finds_new_ones(
    own_server: Server, start_runner: StartRunner
) -> None:
    server = own_server
    first = _create(server, "app_one", with_schema=True)
    second = _create(server, "app_two", with_schema=False)
    with psycopg.connect(first, autocommit=True) as c:
        save(c, "one", "every 1s", LOG_SQL)
    runner = start_runner("--all-databases", dsn=server.dsn, env={"PGTIMERS_DISCOVER_EVERY": "1"})
    wait_until(lambda: len(_fired(first)) >= 1, what="app_one's timer")
    # installed later: picked up at the next look (every 30 s by default, 1 s here)
    install(second)
    with psycopg.connect(second, autocommit=True) as c:
        c.execute(LOG_TABLE)
        save(c, "two", "every 1s", LOG_SQL)
    wait_until(lambda: len(_fired(second)) >= 1, timeout=10, what="app_two's timer")
    assert runner.stop() == 0
    assert "database=app_two" in runner.log()


def test_without_a_dsn_it_runs_on_the_embedded_server_and_prints_the_dsn() -> None:
    # Not pytest's tmp_path: as root, the server runs as another user, and every new
    # pytest session makes /tmp/pytest-of-root private again (0700) under its feet.
    tmp_path = Path(tempfile.mkdtemp(prefix="pgtimers-embedded-"))
    log = tmp_path / "embedded.log"
    runner = RunnerProcess(
        [], log, env={"PGTIMERS_DATA_DIR": str(tmp_path / "data")}, unset=ENVIRONMENT
    )
    try:
        runner.wait_for("event=serving", timeout=60)
        printed = next(ln for ln in runner.log().splitlines() if ln.strip().startswith("psql '"))
        dsn = printed.strip().removeprefix("psql '").removesuffix("'")
        with psycopg.connect(dsn, autocommit=True) as c:
            assert c.execute("SELECT timers._live_runners()").fetchone() == (1,)
        assert (tmp_path / "data" / "pgdata" / "PG_VERSION").exists()
        assert runner.stop() == 0
    finally:
        runner.kill()
        shutil.rmtree(tmp_path, ignore_errors=True)
