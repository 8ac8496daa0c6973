"""The run policies over HTTP (POST /api/timers with retries, retry_delay, pause_after,
jitter, priority): good values saved and shown, each bad value a 400 naming the option
that changes nothing; and the backfill routes (make, list, cancel; rights; 404s)."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, scalar
from tests.integration.http.conftest import Client
from tests.support.runner import RunnerProcess

POLICIES = ["retries", "retry_delay", "pause_after", "jitter", "priority", "paused_ms"]
BACKFILL_FIELDS = [
    "id", "timer", "from_at", "to_at", "total", "done", "failed", "state", "requested_by",
    "requested_at", "next_at", "ended_at", "note",
]  # fmt: skip


def timer(**options: Any) -> dict[str, Any]:
    return {"name": "t", "schedule": "every 10m", "sql": "SELECT 1", **options}


def save(api: Client, **options: Any) -> dict[str, Any]:
    resp = api.post("/api/timers", timer(**options))
    assert resp.status == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def test_every_policy_is_saved_and_shown(api: Client, conn: psycopg.Connection) -> None:
    resp = api.post(
        "/api/timers",
        timer(retries=3, retry_delay="10 seconds", pause_after=5, jitter=30, priority=-7),
    )
    assert resp.status == 200, resp.text
    body = resp.json()
    assert list(body)[-16:-10] == POLICIES
    assert {k: body[k] for k in POLICIES} == {
        "retries": 3,
        "retry_delay": "00:00:10",
        "pause_after": 5,
        "jitter": "00:00:30",
        "priority": -7,
        "paused_ms": 0,
    }
    # the body is the status row, intervals as PostgreSQL prints them
    row = scalar(conn, "SELECT row_to_json(s)::text FROM timers.status s WHERE name = 't'")
    assert resp.text == row
    assert api.get("/api/timers").json()["timers"][0]["retry_delay"] == "00:00:10"


@pytest.mark.parametrize(
    "options",
    [{}, {"retries": None, "retry_delay": None, "pause_after": None, "jitter": None,
          "priority": None}],
    ids=["absent", "null"],
)  # fmt: skip
def test_absent_or_null_is_the_default(api: Client, options: dict[str, Any]) -> None:
    body = save(api, **options)
    assert {k: body[k] for k in POLICIES} == {
        "retries": 0,
        "retry_delay": "00:00:30",
        "pause_after": None,
        "jitter": None,
        "priority": 0,
        "paused_ms": 0,
    }


def test_intervals_as_text_or_seconds(api: Client) -> None:
    assert save(api, retry_delay=90, jitter=1.5)["retry_delay"] == "00:01:30"
    assert save(api, retry_delay="1 hour", jitter="0")["jitter"] is None  # 0: none
    assert save(api, jitter=1.5)["jitter"] == "00:00:01.5"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retries": -1}, "bad retries -1: use 0"),
        ({"retries": 101}, "bad retries 101"),
        ({"retries": "3"}, "key 'retries' must be a whole number, not \"3\""),
        ({"retries": 1.5}, "key 'retries' must be a whole number, not 1.5"),
        ({"retries": True}, "key 'retries' must be a whole number, not true"),
        ({"retries": 2**31}, "key 'retries' is out of range"),
        ({"retry_delay": "soon"}, "bad retry_delay: 'soon' (invalid input syntax"),
        ({"retry_delay": 0.5}, "bad retry_delay '00:00:00.5': use 1 second to 1 hour"),
        ({"retry_delay": "2 hours"}, "bad retry_delay '02:00:00'"),
        ({"retry_delay": False}, "key 'retry_delay' must be an interval"),
        ({"pause_after": 0}, "bad pause_after 0"),
        ({"pause_after": 10001}, "bad pause_after 10001"),
        ({"pause_after": "2"}, "key 'pause_after' must be a whole number"),
        ({"jitter": "-1 second"}, "bad jitter '-00:00:01'"),
        ({"jitter": "2 hours"}, "bad jitter '02:00:00'"),
        ({"jitter": "10 minutes"}, "must be less than the 00:10:00 between the timer's due"),
        ({"jitter": "later"}, "bad jitter: 'later' (invalid input syntax for type interval"),
        ({"jitter": [1]}, "key 'jitter' must be an interval"),
        ({"priority": 101}, "bad priority 101: use -100 to 100"),
        ({"priority": -101}, "bad priority -101"),
        ({"priority": {}}, "key 'priority' must be a whole number"),
        ({"priority": -(2**31) - 1}, "key 'priority' is out of range"),
        ({"catch_up_window": "-1 minute"}, "bad catch_up_window '-00:01:00'"),
        ({"catch_up_window": 0}, "bad catch_up_window '00:00:00'"),
        ({"catch_up_window": "2 years"}, "bad catch_up_window '2 years'"),
        ({"catch_up_window": "later"}, "bad catch_up_window: 'later' (invalid input syntax"),
        ({"catch_up_window": True}, "key 'catch_up_window' must be an interval"),
    ],
)
def test_a_bad_value_is_a_400_naming_it_and_changes_nothing(
    api: Client, conn: psycopg.Connection, options: dict[str, Any], message: str
) -> None:
    before = save(api, retries=2, priority=5)
    audit = scalar(conn, "SELECT count(*) FROM timers.audit")
    resp = api.post("/api/timers", timer(sql="SELECT 2", **options))
    assert resp.status == 400, resp.text
    assert message in resp.error
    after = api.get("/api/timers").json()["timers"]
    assert after == [before]  # the timer as it was: SQL, policies, updated_ms
    assert scalar(conn, "SELECT count(*) FROM timers.audit") == audit
    other = api.post("/api/timers", dict(timer(**options), name="new_one"))
    assert other.status == 400 and message in other.error
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 1


def test_the_catch_up_window_is_saved_and_shown(api: Client, conn: psycopg.Connection) -> None:
    assert save(api)["catch_up_window"] is None
    body = save(api, catch_up_window="2 hours")
    assert list(body)[-10] == "catch_up_window" and body["catch_up_window"] == "02:00:00"
    assert save(api, catch_up_window=90)["catch_up_window"] == "00:01:30"  # seconds
    assert scalar(conn, "SELECT catch_up_window FROM timers.timers") == dt.timedelta(seconds=90)
    assert save(api, catch_up_window=None)["catch_up_window"] is None


def test_the_deadline_and_history_are_saved_and_shown(
    api: Client, conn: psycopg.Connection
) -> None:
    body = save(api)
    assert (body["deadline"], body["history"], body["deadline_missed"]) == (None, "all", 0)
    body = save(api, deadline="15 minutes", history="failures")
    assert (body["deadline"], body["history"]) == ("00:15:00", "failures")
    assert save(api, deadline=90)["deadline"] == "00:01:30"  # seconds
    assert scalar(conn, "SELECT history FROM timers.timers") == "all"  # absent: the default


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"deadline": "0 seconds"}, "bad deadline"),
        ({"deadline": "2 years"}, "bad deadline"),
        ({"deadline": "soon"}, "deadline"),
        ({"history": "some"}, "bad history 'some'"),
    ],
)
def test_a_bad_deadline_or_history_is_refused_naming_it(
    api: Client, conn: psycopg.Connection, options: dict[str, Any], message: str
) -> None:
    resp = api.post("/api/timers", timer(**options))
    assert resp.status == 400 and message in resp.error, resp.text
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0


def test_a_bad_time_is_named_too(api: Client) -> None:
    resp = api.post("/api/timers", timer(start_at="someday", timeout="5 minutes"))
    assert resp.status == 400
    assert resp.error.startswith("bad start_at: 'someday' (invalid input syntax for type")


def test_the_openapi_document_has_every_option(api: Client) -> None:
    doc = api.anonymous().get("/api/openapi.json").json()
    body = doc["components"]["schemas"]["SaveTimer"]["properties"]
    assert body["retries"]["type"] == "integer" and body["retries"]["maximum"] == 100
    assert body["priority"]["minimum"] == -100 and body["priority"]["maximum"] == 100
    assert body["pause_after"]["minimum"] == 1 and body["pause_after"]["nullable"] is True
    for key in ("retry_delay", "jitter", "catch_up_window"):
        assert [s["type"] for s in body[key]["oneOf"]] == ["string", "number"]
    timer_fields = doc["components"]["schemas"]["Timer"]["properties"]
    assert timer_fields["catch_up_window"]["nullable"] is True
    assert set(doc["paths"]) >= {
        "/api/timers/{name}/backfill", "/api/backfills", "/api/backfills/{id}/cancel",
    }  # fmt: skip
    backfill = doc["components"]["schemas"]["Backfill"]
    assert list(backfill["properties"]) == BACKFILL_FIELDS


# ------------------------------------------------------------------------- backfills


def _hours_ago(conn: psycopg.Connection, hours: int) -> dt.datetime:
    at: dt.datetime = scalar(
        conn, "SELECT date_trunc('hour', now()) - make_interval(hours => %s)", [hours]
    )
    return at


def _hourly(api: Client, name: str = "h") -> None:
    body = {"name": name, "schedule": "hourly", "sql": "SELECT 1", "enabled": False}
    assert api.post("/api/timers", body).status == 200


def test_backfill_list_and_cancel(api: Client, conn: psycopg.Connection, db: Database) -> None:
    _hourly(api)
    _hourly(api, "other")
    from_at, to_at = _hours_ago(conn, 24), _hours_ago(conn, 0)
    resp = api.post(
        "/api/timers/H/backfill", {"from_at": from_at.isoformat(), "to_at": to_at.isoformat()}
    )
    assert resp.status == 200, resp.text
    made = resp.json()
    assert list(made) == BACKFILL_FIELDS
    assert (made["timer"], made["total"], made["done"], made["state"]) == ("h", 24, 0, "running")
    assert dt.datetime.fromisoformat(made["from_at"]) == from_at
    assert dt.datetime.fromisoformat(made["next_at"]) == from_at

    # Unix milliseconds, like the body's other times
    ms = api.post(
        "/api/timers/other/backfill",
        {"from_at": int(from_at.timestamp() * 1000), "to_at": int(to_at.timestamp()) * 1000},
    )
    assert ms.status == 200, ms.text
    assert ms.json()["total"] == 24

    listed = api.get("/api/backfills")
    assert listed.status == 200
    assert [b["id"] for b in listed.json()] == [ms.json()["id"], made["id"]]  # newest first
    assert [b["timer"] for b in api.get("/api/backfills?timer=H").json()] == ["h"]
    assert api.get("/api/backfills?timer=nobody").json() == []
    assert len(api.get("/api/backfills?timer=").json()) == 2

    cancelled = api.post(f"/api/backfills/{made['id']}/cancel")
    assert cancelled.status == 200, cancelled.text
    assert list(cancelled.json()) == BACKFILL_FIELDS
    assert cancelled.json()["state"] == "cancelled" and cancelled.json()["next_at"] is None
    again = api.post(f"/api/backfills/{made['id']}/cancel")  # an ended one stays as it is
    assert again.status == 200 and again.json()["state"] == "cancelled"

    ghost = api.post("/api/backfills/999999/cancel")
    assert ghost.status == 404
    assert ghost.error == f"there is no backfill 999999 in database {db.name}"
    for bad in ("abc", "1.5", "99999999999999999999"):
        resp = api.post(f"/api/backfills/{bad}/cancel")
        assert resp.status == 400 and "bad backfill id" in resp.error


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"from_at": "2020-01-01T00:00:00Z"}, 400, "key 'to_at' is missing from the body"),
        ({"from_at": "soon", "to_at": "2020-01-02Z"}, 400, "bad from_at: 'soon'"),
        ({"from_at": "2020-01-01Z", "to_at": "later"}, 400, "bad to_at: 'later'"),
        ({"from_at": "2020-01-02Z", "to_at": "2020-01-01Z"}, 400, "is not after from_at"),
        ({"from_at": "2020-01-01Z", "to_at": "2999-01-01Z"}, 400, "is after now"),
        ({"from_at": "2000-01-01Z", "to_at": "2020-01-01Z"}, 400, "more than 10000 due times"),
        ({"from_at": True, "to_at": 0}, 400, "key 'from_at' must be a time"),
        ({"from_at": 0, "to_at": 0, "n": 1}, 400, "unknown key 'n'"),
        ({"from_at": None, "to_at": 0}, 400, "key 'from_at' must be a time"),
    ],
)
def test_a_bad_backfill_is_refused_and_makes_none(
    api: Client, body: dict[str, Any], status: int, message: str
) -> None:
    _hourly(api)
    resp = api.post("/api/timers/h/backfill", body)
    assert resp.status == status, resp.text
    assert message in resp.error
    assert api.get("/api/backfills").json() == []


def test_backfill_of_an_unknown_timer_is_404(api: Client, db: Database) -> None:
    resp = api.post("/api/timers/ghost/backfill", {"from_at": 0, "to_at": 3_600_000})
    assert resp.status == 404
    assert resp.error == f"there is no timer 'ghost' in database {db.name}"


def test_an_admin_backfills_a_reader_lists_but_may_not_backfill_or_cancel(
    api: Client, basic: bool, conn: psycopg.Connection
) -> None:
    _hourly(api)
    body = {"from_at": _hours_ago(conn, 3).isoformat(), "to_at": _hours_ago(conn, 0).isoformat()}
    made = api.as_basic("pgt_http_admin").post("/api/timers/h/backfill", body).json()
    assert made["requested_by"] == "pgt_http_admin"  # as the caller's role
    reader = api.as_basic("pgt_http_reader")
    refused = reader.post("/api/timers/h/backfill", body)
    assert refused.status == 403
    assert "pgtimers_admin" in refused.error
    cancel = reader.post(f"/api/backfills/{made['id']}/cancel")
    assert cancel.status == 403
    assert [b["id"] for b in reader.get("/api/backfills").json()] == [made["id"]]
    assert api.get("/api/backfills").json()[0]["state"] == "running"
    nobody = api.as_basic("pgt_http_nobody").get("/api/backfills")
    assert nobody.status == 403


def test_a_backfill_runs_and_its_runs_show_in_the_history(
    api: Client, conn: psycopg.Connection, runner: RunnerProcess
) -> None:
    _hourly(api)
    body = {"from_at": _hours_ago(conn, 3).isoformat(), "to_at": _hours_ago(conn, 0).isoformat()}
    made = api.post("/api/timers/h/backfill", body).json()
    deadline = time.monotonic() + 30
    while api.get("/api/backfills").json()[0]["state"] == "running":
        assert time.monotonic() < deadline, "the backfill never ended"
        time.sleep(0.1)
    ended = api.get("/api/backfills?timer=h").json()[0]
    assert (ended["state"], ended["done"], ended["failed"]) == ("done", 3, 0)
    runs = api.get("/api/timers/h/history").json()["runs"]
    assert [(r["kind"], r["attempt"], r["backfill"]) for r in runs] == [
        ("backfill", 1, made["id"])
    ] * 3
