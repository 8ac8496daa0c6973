"""GET /api/timers/<name>/history gives each run's messages: what it said (its NOTICE,
INFO and WARNING messages, its error's DETAIL and HINT), '' when it said nothing."""

from __future__ import annotations

import psycopg

from tests.integration.http.conftest import Client

SAID = "NOTICE: 3 of 10 done\nWARNING: slow\nDETAIL: file x: line 3\nHINT: fix it"


def test_the_history_gives_each_runs_messages(api: Client, conn: psycopg.Connection) -> None:
    resp = api.post("/api/timers", {"name": "t", "schedule": "every 10m", "sql": "SELECT 1"})
    assert resp.status == 200, resp.text
    conn.execute(
        "INSERT INTO timers.runs (timer_id, timer, kind, started_at, ok, error, messages)"
        " SELECT id, name, 'scheduled', now() - interval '2 minutes', false, 'boom', %s"
        " FROM timers.timers WHERE name = 't'",
        [SAID],
    )
    conn.execute(
        "INSERT INTO timers.runs (timer_id, timer, kind, started_at, ok)"
        " SELECT id, name, 'scheduled', now() - interval '1 minute', true"
        " FROM timers.timers WHERE name = 't'"
    )
    runs = api.get("/api/timers/t/history").json()["runs"]
    assert [(r["ok"], r["messages"]) for r in runs] == [(True, ""), (False, SAID)]
