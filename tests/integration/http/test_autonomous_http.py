"""POST /api/timers with autonomous: saved and shown, a bad type a 400 naming it, refusals
of its SQL passed on; the console's form and details carry it."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import scalar
from tests.integration.http.conftest import Client


def timer(**options: Any) -> dict[str, Any]:
    return {"name": "t", "schedule": "every 10m", "sql": "VACUUM", **options}


def test_autonomous_round_trip(api: Client, conn: psycopg.Connection) -> None:
    resp = api.post("/api/timers", timer(autonomous=True))
    assert resp.status == 200, resp.text
    assert resp.json()["autonomous"] is True
    assert scalar(conn, "SELECT autonomous FROM timers.timers WHERE name = 't'") is True
    assert api.get("/api/timers").json()["timers"][0]["autonomous"] is True
    # absent or null: false, as for locked
    for body in (timer(sql="SELECT 1"), timer(sql="SELECT 1", autonomous=None)):
        resp = api.post("/api/timers", body)
        assert resp.status == 200, resp.text
        assert resp.json()["autonomous"] is False


@pytest.mark.parametrize("value", ["true", 1, "yes", [True]])
def test_autonomous_must_be_a_boolean(api: Client, conn: psycopg.Connection, value: Any) -> None:
    resp = api.post("/api/timers", timer(autonomous=value))
    assert resp.status == 400
    assert "'autonomous' must be true or false" in resp.error
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0


def test_vacuum_without_autonomous_is_refused_with_the_hint(api: Client) -> None:
    resp = api.post("/api/timers", timer())
    assert resp.status >= 400
    assert "may not use VACUUM" in resp.text
    assert "autonomous => true" in resp.text


def test_the_openapi_document_and_the_console_name_it(api: Client) -> None:
    doc = api.get("/api/openapi.json").json()
    schemas = doc["components"]["schemas"]
    bodies = [s for s in schemas.values() if "autonomous" in s.get("properties", {})]
    assert len(bodies) >= 2  # the timer and the body that saves one
    assert 'name="autonomous" type="checkbox"' in api.get("/").text
    # the form's fields are read by name (each box as true or false): test_options.py
    # checks the form has one for every option the console shows
    assert "body[input.name] = input.checked" in api.get("/console/console.js").text
    assert "timer-autonomous" in api.get("/console/timer.js").text
