"""Telling a person, end to end: a deadline missed while no runner served the database is
written by the next look and reaches a local webhook receiver once a runner is back, and a
failure then a recovery follow it there."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database, scalar
from tests.integration.runner.conftest import save
from tests.integration.runner.receiver import Receiver
from tests.integration.runner.test_webhooks import FAST, write_config
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
# fails while the flag says so
FLAGGED = "SELECT 1 / (CASE WHEN (SELECT broken FROM flag) THEN 0 ELSE 1 END)"


def got(receiver: Receiver, event: str) -> list[dict[str, Any]]:
    return [b for b in receiver.bodies() if b["event"] == event]


def test_a_deadline_missed_without_a_runner_then_a_failure_and_its_recovery_reach_a_receiver(
    db: Database, conn: psycopg.Connection, start_runner: StartRunner, tmp_path: Path
) -> None:
    receiver = Receiver()
    receiver.start()
    try:
        conn.execute("CREATE TABLE flag (broken boolean)")
        conn.execute("INSERT INTO flag VALUES (false)")
        save(conn, "report", "every 2s", FLAGGED, deadline="1 second")
        # no runner serves the database: its due times pass their deadline untaken
        time.sleep(3.5)
        # the next look (a runner's heartbeat, the console, GET /metrics) tells them
        assert scalar(conn, "SELECT timers._deadline_check()") == 1
        cfg = write_config(
            tmp_path,
            db,
            {"url": receiver.url, "events": ["deadline_missed", "failed", "recovered"]},
        )
        start_runner("--config", cfg, env=FAST)
        wait_until(lambda: got(receiver, "deadline_missed"), 20, "deadline_missed delivered")
        # (on a slow machine a due time between the look and the runner's start may be
        # told too: skipped at the start, or unserved)
        missed = [b for b in got(receiver, "deadline_missed") if b["why"] == "unserved"]
        assert missed, receiver.bodies()
        assert missed[0]["timer"] == "report" and missed[0]["database"] == db.name
        conn.execute("UPDATE flag SET broken = true")
        wait_until(lambda: got(receiver, "failed"), 20, "failed delivered")
        conn.execute("UPDATE flag SET broken = false")
        wait_until(lambda: got(receiver, "recovered"), 20, "recovered delivered")
        (recovered,) = got(receiver, "recovered")[:1]
        assert recovered["timer"] == "report"
        # what the receiver got, in order (shown with -s)
        for body in receiver.bodies():
            print(json.dumps(body, sort_keys=True))
        ids = [b["delivery_id"] for b in receiver.bodies()]
        assert len(ids) == len(set(ids))
    finally:
        receiver.stop()
