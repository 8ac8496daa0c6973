"""GET/POST /api/timers and the run/enable/delete routes: shapes, status codes, errors."""

from __future__ import annotations

import psycopg
import pytest

from tests.conftest import Database
from tests.integration.http.conftest import Client

STATUS_FIELDS = [
    "name", "database", "schedule", "sql", "enabled", "created_ms", "updated_ms", "created_by",
    "next_run_ms", "last_run_ms", "last_due_ms", "last_late_ms", "max_late_ms", "last_ok",
    "last_error", "last_took_ms", "last_rows", "runs", "failures", "failures_24h", "skipped",
    "last_skip_ms", "last_skip_reason", "caught_up", "running", "timezone", "catch_up",
    "start_at", "end_at", "max_runs", "expired", "locked", "retries", "retry_delay",
    "pause_after", "jitter", "priority", "paused_ms", "catch_up_window", "autonomous",
    "deadline", "deadline_missed_ms", "deadline_missed", "history", "last_success_ms",
    "managed_by", "run_group", "waiting_for_group",
]  # fmt: skip


def test_empty_list(api: Client) -> None:
    resp = api.get("/api/timers")
    assert resp.status == 200
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert list(body) == ["now_ms", "timers", "may_export"]
    assert body["timers"] == []
    assert body["may_export"] is True  # the token's role is the runner's
    assert isinstance(body["now_ms"], int) and body["now_ms"] > 1_700_000_000_000


def test_save_returns_the_status_row_exactly(api: Client, conn: psycopg.Connection) -> None:
    resp = api.post(
        "/api/timers",
        {"name": "shop_totals", "schedule": "every 5m", "sql": "SELECT 1"},
    )
    assert resp.status == 200, resp.text
    timer = resp.json()
    assert list(timer) == STATUS_FIELDS
    row = conn.execute(
        "SELECT row_to_json(s)::text FROM timers.status s WHERE name = 'shop_totals'"
    ).fetchone()
    assert row is not None
    assert resp.text == row[0]
    assert timer["enabled"] is True and timer["last_ok"] is None and timer["next_run_ms"] > 0
    listed = api.get("/api/timers").json()["timers"]
    assert [t["name"] for t in listed] == ["shop_totals"]
    assert list(listed[0]) == STATUS_FIELDS


def test_save_with_every_option(api: Client) -> None:
    resp = api.post(
        "/api/timers",
        {
            "name": "opts",
            "schedule": "daily 16:00",
            "sql": "SELECT 1",
            "enabled": False,
            "timezone": "Asia/Kathmandu",
            "catch_up": "latest",
            "start_at": "2030-01-01T00:00:00Z",
            "end_at": 1956528000000,
            "max_runs": 3,
            "timeout": 90,
            "locked": False,
        },
    )
    assert resp.status == 200, resp.text
    timer = resp.json()
    assert timer["enabled"] is False and timer["next_run_ms"] == 0
    assert timer["timezone"] == "Asia/Kathmandu"
    assert timer["catch_up"] == "latest"
    assert timer["start_at"].startswith("2030-01-01")
    assert timer["end_at"].startswith("2032-")
    assert timer["max_runs"] == 3


def test_bad_schedule_is_the_seed_message(api: Client) -> None:
    resp = api.post("/api/timers", {"name": "bad_one", "schedule": "every day", "sql": "SELECT 1"})
    assert resp.status == 400
    assert resp.error.startswith(
        'bad "every" schedule \'every day\'; use a schedule like "every 10s", "every 5m"'
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "x", "schedule": "hourly"}, "key 'sql' is missing from the body"),
        (
            {"name": "x", "schedule": "hourly", "sql": "SELECT 1", "colour": 1},
            "unknown key 'colour'",
        ),
        (
            {"name": 5, "schedule": "hourly", "sql": "SELECT 1"},
            "key 'name' must be a string, not 5",
        ),
        (
            {"name": "x", "schedule": "hourly", "sql": "SELECT 1", "enabled": "yes"},
            "key 'enabled' must be true or false, not \"yes\"",
        ),
        (
            {"name": "x", "schedule": "hourly", "sql": "SELECT 1", "max_runs": 1.5},
            "key 'max_runs' must be a whole number, not 1.5",
        ),
        (
            {"name": "x", "schedule": "hourly", "sql": "SELECT 1", "max_runs": True},
            "key 'max_runs' must be a whole number, not true",
        ),
        (
            {"name": "x", "schedule": "hourly", "sql": "SELECT 1", "max_runs": 2**70},
            "key 'max_runs' is out of range",
        ),
        ({"name": None, "schedule": "hourly", "sql": "SELECT 1"}, "must be a string, not null"),
        ([1, 2], "the body must be a JSON object"),
        ({"name": "x", "schedule": "hourly", "sql": "SELECT \u0000"}, "NUL character"),
    ],
)
def test_body_errors_name_the_key(api: Client, body: object, message: str) -> None:
    resp = api.post("/api/timers", body)
    assert resp.status == 400
    assert message in resp.error


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{", "the body is not valid JSON"),
        (b"", "the body must be a JSON object"),
        (b'{"name": NaN}', "the body is not valid JSON"),
        (b"\xff\xfe", "the body is not valid JSON"),
        (b'{"name": "\\ud800", "schedule": "hourly", "sql": "SELECT 1"}', "not valid Unicode"),
        (b"[" * 100000 + b"]" * 100000, "the body is not valid JSON"),
    ],
)
def test_raw_body_errors(api: Client, raw: bytes, message: str) -> None:
    resp = api.post("/api/timers", raw=raw)
    assert resp.status == 400
    assert message in resp.error


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "bad name!", "schedule": "hourly", "sql": "SELECT 1"}, "bad name!"),
        ({"name": "x", "schedule": "hourly", "sql": "SELEC 1"}, "syntax error"),
        (
            {"name": "x", "schedule": "hourly", "sql": "SELECT 1", "timezone": "Mars/Base"},
            "Mars/Base",
        ),
        (
            {"name": "x", "schedule": "hourly", "sql": "SELECT 1", "catch_up": "most"},
            "bad catch_up 'most'",
        ),
        ({"name": "x", "schedule": "hourly", "sql": "SELECT 1", "max_runs": 0}, "bad max_runs 0"),
        ({"name": "x", "schedule": "hourly", "sql": "SELECT 1", "timeout": "soon"}, "soon"),
        ({"name": "x", "schedule": "hourly", "sql": "SELECT 1", "start_at": "someday"}, "someday"),
        (
            {"name": "x", "schedule": "hourly", "sql": "SELECT 1", "test_clock": "nope"},
            "no test clock 'nope'",
        ),
        (
            {"name": "x", "schedule": "hourly", "sql": "ALTER SYSTEM SET work_mem = '1MB'"},
            "ALTER SYSTEM",
        ),
    ],
)
def test_sql_errors_are_400_with_the_message(api: Client, body: object, message: str) -> None:
    resp = api.post("/api/timers", body)
    assert resp.status in (400, 403), resp.text
    assert message in resp.error


def test_enable_disable_delete(api: Client) -> None:
    assert (
        api.post(
            "/api/timers", {"name": "nightly", "schedule": "daily 02:00", "sql": "SELECT 1"}
        ).status
        == 200
    )
    off = api.post("/api/timers/nightly/enable", {"enabled": False})
    assert off.status == 200, off.text
    assert off.json()["enabled"] is False and off.json()["next_run_ms"] == 0
    assert list(off.json()) == STATUS_FIELDS
    on = api.post("/api/timers/nightly/enable")  # no body: on
    assert on.json()["enabled"] is True and on.json()["next_run_ms"] > 0
    again_off = api.post("/api/timers/nightly/enable", {"enabled": False})
    assert again_off.json()["enabled"] is False
    on2 = api.post("/api/timers/nightly/enable", {"enabled": True})
    assert on2.json()["enabled"] is True
    bad = api.post("/api/timers/nightly/enable", {"enabled": "no"})
    assert bad.status == 400 and "key 'enabled'" in bad.error
    deleted = api.post("/api/timers/nightly/delete")
    assert deleted.status == 200 and deleted.json() == {"deleted": True}
    assert api.get("/api/timers").json()["timers"] == []


@pytest.mark.parametrize("route", ["run", "enable", "delete"])
def test_unknown_timer_is_404(api: Client, route: str, db: Database) -> None:
    resp = api.post(f"/api/timers/ghost/{route}")
    assert resp.status == 404
    assert resp.error == f"there is no timer 'ghost' in database {db.name}"


@pytest.mark.parametrize("route", ["run", "enable", "delete"])
def test_get_on_a_post_route_is_405(api: Client, route: str) -> None:
    resp = api.get(f"/api/timers/x/{route}")
    assert resp.status == 405
    assert resp.headers["allow"] == "POST"
    assert resp.error == f"GET is not allowed on /api/timers/x/{route}: use POST"


def test_unknown_route_is_404_json(api: Client) -> None:
    resp = api.get("/api/nothing")
    assert resp.status == 404
    assert resp.error == "there is no route GET /api/nothing"


def test_body_over_the_limit_is_413(api: Client) -> None:
    resp = api.post(
        "/api/timers",
        {"name": "big", "schedule": "hourly", "sql": "SELECT 1 -- " + "x" * 1_100_000},
    )
    assert resp.status == 413
    assert "too large" in resp.error


def test_sql_over_64kb_is_400(api: Client) -> None:
    resp = api.post(
        "/api/timers", {"name": "big", "schedule": "hourly", "sql": "SELECT 1 -- " + "x" * 70_000}
    )
    assert resp.status == 400
    assert "64" in resp.error


def test_locked_timer_is_403(api: Client) -> None:
    assert (
        api.post(
            "/api/timers",
            {"name": "fixed", "schedule": "hourly", "sql": "SELECT 1", "locked": True},
        ).status
        == 200
    )
    resp = api.post("/api/timers/fixed/delete")
    assert resp.status == 403
    assert "is locked" in resp.error


def test_names_are_case_insensitive_and_url_decoded(api: Client) -> None:
    assert (
        api.post(
            "/api/timers", {"name": "Daily-Totals", "schedule": "hourly", "sql": "SELECT 1"}
        ).status
        == 200
    )
    assert (
        api.post("/api/timers/daily-totals/enable", {"enabled": False}).json()["name"]
        == "Daily-Totals"
    )
    assert api.post("/api/timers/Daily%2DTotals/delete").json() == {"deleted": True}
