"""POST /api/timers/<name>/run through CALL timers.run and a live runner."""

from __future__ import annotations

import threading
import time

from tests.conftest import Database
from tests.integration.http.conftest import Client
from tests.support.runner import RunnerProcess


def test_run_without_a_runner_is_503(api: Client, db: Database) -> None:
    assert (
        api.post("/api/timers", {"name": "t", "schedule": "hourly", "sql": "SELECT 1"}).status
        == 200
    )
    resp = api.post("/api/timers/t/run")
    assert resp.status == 503
    assert (
        resp.error == f"no pgtimers runner serves database {db.name}, so timer 't' cannot run now"
    )


def test_run_now_ok_and_failing(api: Client, runner: RunnerProcess) -> None:
    api.post(
        "/api/timers",
        {"name": "fill", "schedule": "daily 02:00", "sql": "SELECT * FROM generate_series(1, 3)"},
    )
    api.post("/api/timers", {"name": "broken", "schedule": "daily 02:00", "sql": "SELECT 1/0"})
    ok = api.post("/api/timers/fill/run")
    assert ok.status == 200, ok.text
    body = ok.json()
    assert list(body) == ["name", "finished", "ok", "error", "took_ms", "rows"]
    assert body["name"] == "fill" and body["finished"] is True and body["ok"] is True
    assert body["error"] == "" and body["rows"] == 3
    failed = api.post("/api/timers/broken/run").json()
    assert failed["finished"] is True and failed["ok"] is False
    assert "division by zero" in failed["error"]
    timers = {t["name"]: t for t in api.get("/api/timers").json()["timers"]}
    assert timers["fill"]["last_ok"] is True and timers["fill"]["last_rows"] == 3
    assert timers["broken"]["last_ok"] is False
    assert "division by zero" in timers["broken"]["last_error"]
    assert timers["broken"]["failures"] == 1


def test_run_while_running_is_409_and_a_disabled_timer_runs(
    api: Client, runner: RunnerProcess
) -> None:
    api.post(
        "/api/timers",
        {"name": "slow", "schedule": "daily 02:00", "sql": "SELECT pg_sleep(3)", "enabled": False},
    )
    first: dict[str, object] = {}
    thread = threading.Thread(target=lambda: first.update(api.post("/api/timers/slow/run").json()))
    thread.start()
    deadline = time.monotonic() + 10
    while not api.get("/api/timers").json()["timers"][0]["running"]:
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.05)
    second = api.post("/api/timers/slow/run")
    assert second.status == 409
    assert second.error == "timer 'slow' is running"
    thread.join(30)
    assert first["finished"] is True and first["ok"] is True
