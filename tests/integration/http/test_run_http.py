"""`pgtimers run --http ADDR` end to end: the runner serves the API and runs timers.

Skipped while the runner's command line does not start the HTTP server yet."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.conftest import Database
from tests.integration.http.conftest import TOKEN, Client
from tests.support.runner import RunnerProcess


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_pgtimers_run_serves_http(db: Database, tmp_path: Path) -> None:
    port = _free_port()
    config = tmp_path / "pgtimers.toml"
    config.write_text(f'http = "127.0.0.1:{port}"\nhttp_token = "{TOKEN}"\n')
    runner = RunnerProcess(["--dsn", db.dsn, "--config", str(config)], tmp_path / "runner.log")
    try:
        api = Client(port).as_token()
        deadline = time.monotonic() + 20
        while True:
            text = runner.log()
            try:
                if api.get("/api/timers").status == 200 and "event=serving" in text:
                    break
            except OSError:
                pass
            assert runner.proc.poll() is None, text
            assert time.monotonic() < deadline, text
            time.sleep(0.1)
        saved = api.post("/api/timers", {"name": "t", "schedule": "hourly", "sql": "SELECT 1"})
        assert saved.status == 200
        ran = api.post("/api/timers/t/run").json()
        assert ran["finished"] is True and ran["ok"] is True
        assert f'pgtimers_runner_up{{database="{db.name}"}} 1' in api.get("/metrics").text
    finally:
        runner.stop(30)
