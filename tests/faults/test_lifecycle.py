"""The runner's life under a supervisor: SIGTERM at any moment exits 0, a runner that
cannot serve gives up with exit 1, systemd hears READY/STATUS/WATCHDOG/STOPPING and no
WATCHDOG while a loop is wedged, and an unexpected error is logged and tried again."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from pgtimers.runner import database as database_module
from pgtimers.runner import log
from pgtimers.runner import worker as worker_module
from pgtimers.runner.connect import connect
from pgtimers.runner.database import DatabaseRunner
from pgtimers.runner.serving import Serving
from tests.conftest import Database
from tests.faults.cluster import Cluster, free_port
from tests.integration.runner.conftest import LOG_SQL, save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

Start = Callable[..., RunnerProcess]


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a SIGTERM handler in place (SigCgt of /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (15 - 1)))
    return False


@pytest.mark.parametrize("after", [0.05, 0.1, 0.2, 0.3, 0.5, 1.0])
def test_sigterm_while_starting_exits_0(cluster: Cluster, runners: Start, after: float) -> None:
    proc = runners("--dsn", cluster.dsn("app"))
    time.sleep(after)
    # Before its first line runs, no Python program can catch a signal: that window is
    # the interpreter's start (about 15 ms on a quiet machine, longer on a loaded one).
    # From the first line of pgtimers on, SIGTERM is caught, whatever it is doing.
    wait_until(lambda: catches_sigterm(proc.pid), 5.0, "a SIGTERM handler from the start")
    assert proc.stop() == 0, proc.log()


def test_a_runner_that_cannot_serve_gives_up_with_exit_1(runners: Start) -> None:
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/app?connect_timeout=1"
    proc = runners("--dsn", nowhere, env={"PGTIMERS_GIVE_UP_AFTER": "2"})
    assert proc.proc.wait(30) == 1
    log = proc.log()
    assert "event=giving_up" in log
    assert log.count("event=database_unavailable") == 1  # the outage is said once, not per try


class NotifySocket:
    """A datagram socket standing in for systemd's: collects what the runner says."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.heard: list[tuple[float, str]] = []
        self._done = False
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._done:
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            self.heard.append((time.monotonic(), data.decode()))

    def said(self, state: str) -> list[float]:
        """When the runner said exactly `state`."""
        return [at for at, text in self.heard if text == state]

    def close(self) -> None:
        self._done = True
        self._thread.join()
        self.sock.close()


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[NotifySocket]:
    listening = NotifySocket(tmp_path / "notify.sock")
    yield listening
    listening.close()


def test_systemd_hears_ready_status_watchdog_and_stopping(
    cluster: Cluster, runners: Start, notify_socket: NotifySocket
) -> None:
    dsn = cluster.dsn("app")
    with psycopg.connect(dsn, autocommit=True) as conn:
        save(conn, "tick", "every 1s", LOG_SQL)
    env = {"NOTIFY_SOCKET": str(notify_socket.path), "WATCHDOG_USEC": "4000000"}
    proc = runners("--dsn", dsn, env=env)
    proc.wait_for("event=serving", timeout=30)
    wait_until(lambda: len(notify_socket.said("WATCHDOG=1")) >= 2, timeout=10, what="WATCHDOG")
    assert notify_socket.heard[0][1] == "READY=1"
    assert notify_socket.said("STATUS=serving 1 of 1 database(s)")
    # wedge the loop: its next look at the timers waits for this lock
    with psycopg.connect(dsn) as locker:
        locker.execute("LOCK TABLE timers.timers IN ACCESS EXCLUSIVE MODE")
        locked_at = time.monotonic()
        time.sleep(8)
        fed_while_locked = [t for t in notify_socket.said("WATCHDOG=1") if t > locked_at + 3.5]
        locker.rollback()
    assert fed_while_locked == []  # systemd would restart a runner wedged like this
    unlocked = time.monotonic()
    wait_until(
        lambda: [t for t in notify_socket.said("WATCHDOG=1") if t > unlocked],
        timeout=10,
        what="WATCHDOG again",
    )
    assert proc.stop() == 0
    assert notify_socket.heard[-1][1] == "STOPPING=1"


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_an_unexpected_error_is_logged_with_its_type_and_tried_again(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_connect = connect
    calls = {"control": 0}

    async def flaky_connect(dsn: str, *args: str) -> object:
        calls["control"] += 1
        if calls["control"] == 1:
            raise RuntimeError("a bug of ours")
        return await real_connect(dsn, *args)

    real_run_one = worker_module.Worker.run_one
    failed_once: list[bool] = []

    async def flaky_run_one(self: worker_module.Worker) -> object:
        if not failed_once:
            failed_once.append(True)
            raise KeyError("another bug")
        return await real_run_one(self)

    monkeypatch.setattr(database_module, "connect", flaky_connect)
    monkeypatch.setattr(database_module, "RETRY_FAULT", 0.1)
    monkeypatch.setattr(worker_module.Worker, "run_one", flaky_run_one)
    with db.connect() as conn:
        conn.execute("CREATE TABLE fired (timer text, due text)")
        save(conn, "tick", "every 1s", "INSERT INTO fired VALUES ('tick', 'x')")
    lines = _Lines()
    log.LOGGER.addHandler(lines)
    try:
        asyncio.run(_serve_for(db.dsn, seconds=3.0))
    finally:
        log.LOGGER.removeHandler(lines)
    text = "\n".join(lines.lines)
    assert "event=database_task_failed" in text and "error_type=RuntimeError" in text, text
    assert "event=worker_failed" in text and "error_type=KeyError" in text, text
    with db.connect() as conn:
        row = conn.execute("SELECT count(*) FROM fired").fetchone()
    assert row is not None and row[0] >= 1  # it served after both


async def _serve_for(dsn: str, seconds: float) -> None:
    stopping = asyncio.Event()
    runner = DatabaseRunner(Serving(dsn=dsn, workers=1, runner_id="in-process"), stopping)
    task = asyncio.create_task(runner.run())
    await asyncio.sleep(seconds)
    stopping.set()
    await asyncio.wait_for(task, 30)
