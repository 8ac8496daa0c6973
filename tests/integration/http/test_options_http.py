"""Every option over HTTP: POST /api/timers sends the body to timers.save_json as one JSON
object, so a null is the option's default (the key left out) and every option given is
saved as timers.save saves it."""

from __future__ import annotations

from typing import Any

import psycopg

from pgtimers.options import OPTIONS
from tests.conftest import scalar
from tests.integration.http.conftest import Client
from tests.integration.test_options_sql import SAMPLES

_MINIMAL = {"name": "t", "schedule": "every 10m", "sql": "SELECT 1"}
_ROW = (
    "SELECT to_jsonb(t) - ARRAY['id', 'created_at', 'updated_at', 'origin_at'] FROM timers.timers t"
)


def test_a_null_is_the_default(api: Client, conn: psycopg.Connection) -> None:
    resp = api.post("/api/timers", {**_MINIMAL, **{o.name: None for o in OPTIONS}})
    assert resp.status == 200, resp.text
    by_http = scalar(conn, _ROW)
    conn.execute("SELECT timers.delete('t')")
    conn.execute("SELECT timers.save('t', 'every 10m', 'SELECT 1')")
    assert scalar(conn, _ROW) == {**by_http, "next_due_at": scalar(conn, _ROW)["next_due_at"]}


def test_every_option_is_saved(api: Client, conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.create_test_clock('clk', '2029-06-01Z')")
    conn.execute("SELECT timers.save('up', 'every 10m', 'SELECT 1')")  # what a sample follows
    for number, sample in enumerate(SAMPLES):
        body: dict[str, Any] = {**_MINIMAL, "name": f"t{number}", **sample}
        resp = api.post("/api/timers", body)
        assert resp.status == 200, resp.text
        shown = resp.json()
        for key in sample:
            if key in shown and isinstance(sample[key], (bool, int)):
                assert shown[key] == sample[key], key
