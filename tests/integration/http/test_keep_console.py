"""Keep data for... over HTTP (GET /api/tables, POST /api/keep), the console's files,
and the OpenAPI document."""

from __future__ import annotations

import psycopg

from tests.integration.http.conftest import Client
from tests.integration.http.test_keep_data_for import PARTITIONED


def test_tables_and_keep(api: Client, conn: psycopg.Connection) -> None:
    conn.execute(PARTITIONED)
    conn.execute("CREATE TABLE plain (x int)")
    conn.execute("CREATE TABLE days (d date) PARTITION BY RANGE (d)")
    tables = api.get("/api/tables").json()["tables"]
    assert [t["table"] for t in tables] == ["public.days", "public.events"]
    assert tables[1]["partitions"] == 4 and tables[1]["timer"] == "keep_events"
    assert tables[1]["key"] == "RANGE (at)" and tables[1]["may_keep"] is True
    resp = api.post("/api/keep", {"tables": ["public.events", "days"], "keep": "6 months"})
    assert resp.status == 200, resp.text
    saved = resp.json()["timers"]
    assert [t["name"] for t in saved] == ["keep_events", "keep_days"]
    assert {t["schedule"] for t in saved} == {"monthly 1 02:00"}
    assert saved[0]["sql"] == "SELECT * FROM timers.drop_old_partitions('public.events', '6 mons')"


def test_keep_is_all_or_nothing(api: Client, conn: psycopg.Connection) -> None:
    conn.execute(PARTITIONED)
    conn.execute("CREATE TABLE plain (x int)")
    resp = api.post(
        "/api/keep", {"tables": ["events", "plain"], "keep": "1 year", "schedule": "daily 03:00"}
    )
    assert resp.status == 400
    assert resp.error.startswith("table public.plain is not partitioned")
    assert api.get("/api/timers").json()["timers"] == []
    missing = api.post("/api/keep", {"tables": ["nope"], "keep": "1 year"})
    assert missing.status == 400 and missing.error == 'relation "nope" does not exist'
    bad = api.post("/api/keep", {"tables": ["events"], "keep": "forever"})
    assert bad.status == 400 and "forever" in bad.error
    assert api.post("/api/keep", {"tables": [], "keep": "1 year"}).status == 400


def test_console_files(api: Client) -> None:
    anonymous = api.anonymous()
    index = anonymous.get("/")
    assert index.status == 200
    assert index.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in index.headers["content-security-policy"]
    assert '<script src="/console/console.js"' in index.text
    for name, kind in (("console.js", "text/javascript"), ("console.css", "text/css")):
        resp = anonymous.get(f"/console/{name}")
        assert resp.status == 200 and resp.headers["content-type"].startswith(kind)
    assert anonymous.get("/console/../queries.sql").status == 404
    assert anonymous.get("/console/nothing.js").status == 404


def test_openapi_document(api: Client) -> None:
    doc = api.anonymous().get("/api/openapi.json").json()
    assert doc["openapi"].startswith("3.0")
    assert set(doc["paths"]) >= {
        "/api/timers", "/api/timers/{name}/run", "/api/timers/{name}/enable",
        "/api/timers/{name}/delete", "/api/stats", "/metrics",
    }  # fmt: skip
    timer = doc["components"]["schemas"]["Timer"]
    saved = api.post("/api/timers", {"name": "t", "schedule": "hourly", "sql": "SELECT 1"}).json()
    assert list(timer["properties"]) == list(saved)
