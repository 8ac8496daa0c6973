"""pgtimers through a real PgBouncer (the distribution's package, started here with its
default settings and a private ini): the runner serves timers through session pooling,
the CLI and timers.save work through transaction pooling, and the runner refuses
transaction pooling at start, in one line naming the pool mode and what to do."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.conftest import Database, scalar
from tests.integration.runner.conftest import LOG_SQL, LOG_TABLE
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

PGBOUNCER = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/bin")
pytestmark = pytest.mark.skipif(PGBOUNCER is None, reason="pgbouncer is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Bouncer:
    """One pgbouncer process in front of the test server, in one pool mode."""

    def __init__(self, server_dsn: str, pool_mode: str, workdir: Path) -> None:
        params = conninfo_to_dict(server_dsn)
        self.user = str(params.get("user") or "postgres")
        self.port = _free_port()
        workdir.mkdir()
        users = workdir / "userlist.txt"
        # the password PgBouncer logs in to the server with (clients are trusted)
        users.write_text(f'"{self.user}" "{params.get("password") or ""}"\n')
        ini = workdir / "pgbouncer.ini"
        lines = [
            "[databases]",
            f"* = host={params.get('host') or '127.0.0.1'} port={params.get('port') or 5432}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {self.port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {users}",
            f"pool_mode = {pool_mode}",
        ]
        if os.geteuid() == 0:  # pgbouncer will not run as root
            lines.append("user = nobody")
            workdir.chmod(0o755)
            for path in (users, ini):
                path.touch()
                path.chmod(0o644)
        ini.write_text("\n".join(lines) + "\n")
        self.log_path = workdir / "pgbouncer.log"
        self._log = self.log_path.open("w")
        assert PGBOUNCER is not None
        self.proc = subprocess.Popen(
            [PGBOUNCER, str(ini)], stdout=self._log, stderr=subprocess.STDOUT
        )
        self._wait_listening()

    def _wait_listening(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"pgbouncer exited:\n{self.log_path.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"pgbouncer not listening:\n{self.log_path.read_text()}"
                    ) from None
                time.sleep(0.05)

    def dsn(self, dbname: str) -> str:
        return make_conninfo(host="127.0.0.1", port=str(self.port), dbname=dbname, user=self.user)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self._log.close()


@pytest.fixture
def bouncer(db: Database, tmp_path: Path) -> Iterator[Callable[[str], Bouncer]]:
    """Start a pgbouncer in a pool mode ('session', 'transaction') before the test server."""
    host = str(conninfo_to_dict(db.server.dsn).get("host") or "")
    if host.startswith("/") and os.geteuid() == 0:
        # pgbouncer refuses to run as root, and as nobody it cannot open the embedded
        # server's private socket directory: these run where the server is on TCP
        pytest.skip("pgbouncer needs the test server on TCP (PGTIMERS_TEST_DSN) when run as root")
    started: list[Bouncer] = []

    def start(pool_mode: str) -> Bouncer:
        b = Bouncer(db.server.dsn, pool_mode, tmp_path / f"pgbouncer-{pool_mode}")
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


@pytest.fixture
def runners(tmp_path: Path) -> Iterator[Callable[[str], RunnerProcess]]:
    """Start `pgtimers run --dsn <dsn>` processes; killed at the end."""
    started: list[RunnerProcess] = []

    def start(dsn: str) -> RunnerProcess:
        proc = RunnerProcess(["--dsn", dsn], tmp_path / f"runner{len(started)}.log")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc._log.close()


def test_the_runner_serves_timers_through_session_pooling(
    db: Database,
    conn: psycopg.Connection,
    bouncer: Callable[[str], Bouncer],
    runners: Callable[[str], RunnerProcess],
) -> None:
    conn.execute(LOG_TABLE)
    conn.execute("SELECT timers.save('soon', 'in 1s', %s)", [LOG_SQL])
    pool = bouncer("session")
    runner = runners(pool.dsn(db.name))
    runner.wait_for("event=serving")
    wait_until(
        lambda: scalar(conn, "SELECT runs FROM timers.status WHERE name = 'soon'") == 1,
        what="the timer due in 1 s to run",
    )
    # the runner is seen (run-now finds it) and run-now through the pooler works too
    with psycopg.connect(pool.dsn(db.name), autocommit=True) as app:
        app.execute("SELECT timers.save('now', 'daily 03:00', %s)", [LOG_SQL])
        result = scalar(app, "CALL timers.run('now')")
    assert result["ok"] is True, result
    assert runner.stop() == 0
    fired = conn.execute("SELECT timer, count(*) FROM fired GROUP BY 1 ORDER BY 1").fetchall()
    assert fired == [("now", 1), ("soon", 1)]
    assert scalar(conn, "SELECT count(*) FROM timers.runs WHERE timer = 'soon'") == 1
    assert "level=error" not in runner.log() and "database_unavailable" not in runner.log()


def test_the_cli_and_saves_work_through_transaction_pooling(
    db: Database, conn: psycopg.Connection, bouncer: Callable[[str], Bouncer]
) -> None:
    pool = bouncer("transaction")
    dsn = pool.dsn(db.name)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pgtimers", *args, "--dsn", dsn],
            capture_output=True,
            text=True,
            check=False,
        )

    saved = cli("save", "from_cli", "every 5m", "SELECT 1")
    assert saved.returncode == 0, saved.stderr
    with psycopg.connect(dsn, autocommit=True) as app:
        for i in range(8):  # more than psycopg's prepare threshold of one statement
            app.execute("SELECT timers.save(%s, 'daily 02:00', 'SELECT 1')", [f"from_app_{i}"])
        assert scalar(app, "SELECT count(*) FROM timers.status") == 9
    listed = cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    names = {t["name"] for t in json.loads(listed.stdout)["timers"]}
    assert names == {"from_cli", *(f"from_app_{i}" for i in range(8))}


def test_the_runner_refuses_transaction_pooling_naming_the_pool_mode(
    db: Database,
    conn: psycopg.Connection,
    bouncer: Callable[[str], Bouncer],
    runners: Callable[[str], RunnerProcess],
) -> None:
    pool = bouncer("transaction")
    runner = runners(pool.dsn(db.name))
    runner.wait_for("event=pooled_connection")
    line = next(x for x in runner.log().splitlines() if "event=pooled_connection" in x)
    assert "level=error" in line
    assert "pool_mode = transaction" in line and "pool_mode = session" in line, line
    assert "connect it directly" in line, line
    assert "event=serving" not in runner.log()
    assert scalar(conn, "SELECT count(*) FROM timers.runners") == 0
    assert runner.stop() == 0
