"""POST /api/apply and GET /api/export: a dry run by default, create/update/unchanged,
prune of the set's own timers only, a locked timer, errors that name the timer, a reader
refused, and an export that applies back as unchanged only."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import scalar
from tests.integration.http.conftest import Client

NIGHTLY = {"name": "nightly", "schedule": "daily 02:00", "sql": "SELECT 1"}
HOURLY = {"name": "hourly_sum", "schedule": "hourly :15", "sql": "SELECT 2", "retries": 2}


def _plan(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(row["action"], row["name"]) for row in body["plan"]]


def _names(conn: psycopg.Connection) -> list[tuple[str, str | None]]:
    rows = conn.execute("SELECT name, managed_by FROM timers.timers ORDER BY name").fetchall()
    return [(r[0], r[1]) for r in rows]


def test_a_post_is_a_dry_run_unless_dry_run_false(api: Client, conn: psycopg.Connection) -> None:
    resp = api.post("/api/apply", {"timer": [NIGHTLY, HOURLY]})
    assert resp.status == 200, resp.text
    body = resp.json()
    assert list(body) == ["dry_run", "plan", "changed"]
    assert body["dry_run"] is True and body["changed"] == 2
    assert _plan(body) == [("create", "nightly"), ("create", "hourly_sum")]
    assert body["plan"][1]["changes"]["retries"] == 2
    assert _names(conn) == []
    assert scalar(conn, "SELECT count(*) FROM timers.audit WHERE action = 'apply'") == 0
    # ?dry_run=true says the same, and changes nothing either
    assert api.post("/api/apply?dry_run=true", {"timer": [NIGHTLY]}).json()["dry_run"] is True
    assert _names(conn) == []

    made = api.post("/api/apply?dry_run=false", {"timer": [NIGHTLY, HOURLY]}).json()
    assert made["dry_run"] is False and made["changed"] == 2
    assert _names(conn) == [("hourly_sum", "apply"), ("nightly", "apply")]
    assert scalar(conn, "SELECT count(*) FROM timers.audit WHERE action = 'apply'") == 1


def test_apply_updates_what_changed_and_leaves_the_rest_untouched(
    api: Client, conn: psycopg.Connection
) -> None:
    assert api.post("/api/apply?dry_run=false", {"timer": [NIGHTLY, HOURLY]}).status == 200
    before = scalar(conn, "SELECT updated_at FROM timers.timers WHERE name = 'nightly'")
    changed = {**HOURLY, "schedule": "hourly :45"}
    body = api.post("/api/apply?dry_run=false", {"timer": [NIGHTLY, changed]}).json()
    assert _plan(body) == [("unchanged", "nightly"), ("update", "hourly_sum")]
    assert body["changed"] == 1
    assert body["plan"][0]["changes"] == {}
    assert body["plan"][1]["changes"]["schedule"] == {"from": "hourly :15", "to": "hourly :45"}
    assert scalar(conn, "SELECT schedule FROM timers.timers WHERE name = 'hourly_sum'") == (
        "hourly :45"
    )
    assert scalar(conn, "SELECT updated_at FROM timers.timers WHERE name = 'nightly'") == before


def test_prune_deletes_only_the_sets_own_timers(api: Client, conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.save('by_hand', 'daily 03:00', 'SELECT 3')")
    other = {"managed_by": "billing", "timer": [{**NIGHTLY, "name": "invoices"}]}
    assert api.post("/api/apply?dry_run=false", other).status == 200
    assert api.post("/api/apply?dry_run=false", {"timer": [NIGHTLY, HOURLY]}).status == 200

    # without prune, a timer left out of the set stays
    kept = api.post("/api/apply?dry_run=false", {"timer": [NIGHTLY]}).json()
    assert _plan(kept) == [("unchanged", "nightly")]
    dry = api.post("/api/apply?prune=true", {"timer": [NIGHTLY]}).json()
    assert _plan(dry) == [("unchanged", "nightly"), ("delete", "hourly_sum")]
    assert len(_names(conn)) == 4
    pruned = api.post("/api/apply?prune=true&dry_run=false", {"timer": [NIGHTLY]}).json()
    assert _plan(pruned) == [("unchanged", "nightly"), ("delete", "hourly_sum")]
    assert pruned["changed"] == 1
    assert _names(conn) == [("by_hand", None), ("invoices", "billing"), ("nightly", "apply")]
    # an empty set of its own prunes all of it, and still nothing of the others
    empty = api.post("/api/apply?prune=true&dry_run=false", {}).json()
    assert _plan(empty) == [("delete", "nightly")]
    assert _names(conn) == [("by_hand", None), ("invoices", "billing")]


def test_a_locked_timer_that_would_change_is_refused(api: Client, conn: psycopg.Connection) -> None:
    locked = {**NIGHTLY, "locked": True}
    assert api.post("/api/apply?dry_run=false", {"timer": [locked, HOURLY]}).status == 200
    same = api.post("/api/apply?dry_run=false", {"timer": [locked, HOURLY]})
    assert same.status == 200 and same.json()["changed"] == 0
    moved = {**locked, "schedule": "daily 04:00"}
    for query in ("", "?dry_run=false"):
        refused = api.post("/api/apply" + query, {"timer": [moved, {**HOURLY, "retries": 5}]})
        assert refused.status == 403, refused.text
        assert refused.error.startswith('timer "nightly": ')
        assert "locked" in refused.error
    # all or nothing: the other timer's change was not made either
    assert scalar(conn, "SELECT retries FROM timers.timers WHERE name = 'hourly_sum'") == 2
    assert scalar(conn, "SELECT schedule FROM timers.timers WHERE name = 'nightly'") == (
        "daily 02:00"
    )


@pytest.mark.parametrize(
    ("timer", "message"),
    [
        # the SQL's own checks, as timers.save's
        ({"retries": 101}, 'timer "bad": bad retries 101'),
        ({"schedule": "every blue moon"}, 'timer "bad": '),
        ({"timezone": "Mars/Olympus"}, 'timer "bad": '),
        ({"schedule": "trading nowhere 10:00"}, "there is no calendar 'nowhere'"),
        ({"test_clock": "no_such_clock"}, 'timer "bad": '),
        # the body's types, checked before the SQL
        ({"retries": "three"}, "timer \"bad\": key 'retries' must be a whole number"),
        ({"enabled": "yes"}, "timer \"bad\": key 'enabled' must be true or false"),
        ({"colour": "red"}, "timer \"bad\": unknown key 'colour' in a timer"),
    ],
)
def test_a_bad_option_names_the_timer(
    api: Client, conn: psycopg.Connection, timer: dict[str, Any], message: str
) -> None:
    spec = {"timer": [NIGHTLY, {**NIGHTLY, "name": "bad", **timer}]}
    resp = api.post("/api/apply?dry_run=false", spec)
    assert resp.status == 400, resp.text
    assert message in resp.error
    assert _names(conn) == []


@pytest.mark.parametrize(
    ("query", "raw", "message"),
    [
        ("", b"", "the body must be a spec"),
        ("", b"{not json", "the body is not valid JSON"),
        ("", b"[]", "the body must be a spec"),
        ("", b'{"timers": []}', "unknown key 'timers' of a spec"),
        ("", b'{"timer": {"name": "x"}}', "the spec's 'timer' must be an array"),
        ("", b'{"timer": [1]}', "timer #1 (no name): must be a JSON object"),
        ("", b'{"timer": [{"name": "x"}]}', "timer \"x\": key 'schedule' is missing"),
        ("", b'{"managed_by": 7}', "'managed_by' must be a string"),
        ("", b'{"managed_by": "no\\nline"}', "bad managed_by"),
        ("", b'{"timer": [{"name": "a", "schedule": "daily 02:00", "sql": "SELECT 1"},'
         b' {"name": "A", "schedule": "daily 02:00", "sql": "SELECT 1"}]}', "named twice"),
        ("", b'{"calendar": [{"name": "c", "days": []}]}', "unknown key 'days' in a calendar"),
        ("", b'{"calendar": [{"name": "c", "holidays": [{"when": "x"}]}]}',
         "calendar \"c\": unknown key 'when' in an entry of holidays"),
        ("", b'{"calendar": [{"name": "c", "holidays": [{"day": "someday"}]}]}',
         'calendar "c": '),
        ("?dry_run=no", b"{}", "bad dry_run 'no': use true or false"),
        ("?prune=1", b"{}", "bad prune '1': use true or false"),
        ("?dryrun=false", b"{}", "unknown parameter 'dryrun'"),
    ],
)  # fmt: skip
def test_a_bad_body_is_a_400_naming_what_is_wrong(
    api: Client, conn: psycopg.Connection, query: str, raw: bytes, message: str
) -> None:
    resp = api.post("/api/apply" + query, raw=raw)
    assert resp.status == 400, resp.text
    assert message in resp.error
    assert _names(conn) == []


def test_a_reader_may_neither_apply_nor_export(
    api: Client, basic: bool, conn: psycopg.Connection
) -> None:
    conn.execute("SELECT timers.save('by_hand', 'daily 03:00', 'SELECT 3')")
    for role in ("pgt_http_reader", "pgt_http_nobody"):
        caller = api.as_basic(role)
        refused = caller.post("/api/apply", {"timer": [NIGHTLY]})
        assert refused.status == 403, refused.text
        # a reader is told the role it lacks; a role with no rights, that it has none
        assert ("pgtimers_admin" if role == "pgt_http_reader" else "permission") in refused.error
        exported = caller.get("/api/export")
        assert exported.status == 403, exported.text
    assert api.as_basic("pgt_http_reader").get("/api/timers").json()["may_export"] is False
    admin = api.as_basic("pgt_http_admin")
    assert admin.get("/api/timers").json()["may_export"] is True
    assert admin.post("/api/apply?dry_run=false", {"timer": [NIGHTLY]}).status == 200
    assert _names(conn) == [("by_hand", None), ("nightly", "apply")]


SET = {
    "calendar": [
        {
            "name": "nepse",
            "week": "sun-thu",
            "valid_from": "2026-01-01",
            "valid_until": "2027-12-31",
            "holidays": [{"day": "2027-01-11", "note": 'Prithvi "Jayanti"'}],
            "trading_days": [{"day": "2027-01-15"}],
        }
    ],
    "timer": [
        {
            "name": "close",
            "schedule": "trading nepse 15:05",
            "sql": "SELECT 1;\n-- a 'quoted' line",
            "timezone": "Asia/Kathmandu",
            "retries": 3,
            "retry_delay": "1 minute",
            "priority": -5,
            "deadline": "10 minutes",
            "locked": True,
            "enabled": False,
        },
        {"name": "every5", "schedule": "every 5m", "sql": "SELECT 3", "catch_up": "all"},
        {"name": "other", "schedule": "daily 09:00", "sql": "SELECT 4", "max_runs": 7},
    ],
}


def test_an_export_applies_back_as_unchanged_only(api: Client, conn: psycopg.Connection) -> None:
    assert api.post("/api/apply?dry_run=false", SET).json()["changed"] == 4
    audit = scalar(conn, "SELECT count(*) FROM timers.audit")
    updated = scalar(conn, "SELECT array_agg(updated_at ORDER BY name) FROM timers.timers")

    resp = api.get("/api/export")
    assert resp.status == 200, resp.text
    spec = resp.json()
    assert spec == scalar(conn, "SELECT timers.export()")
    assert [t["name"] for t in spec["timer"]] == ["close", "every5", "other"]
    assert spec["calendar"][0]["holidays"] == [{"day": "2027-01-11", "note": 'Prithvi "Jayanti"'}]

    back = api.post("/api/apply?dry_run=false", spec)
    assert back.status == 200, back.text
    body = back.json()
    assert body["changed"] == 0
    assert _plan(body) == [
        ("unchanged", "calendar:nepse"),
        ("unchanged", "close"),
        ("unchanged", "every5"),
        ("unchanged", "other"),
    ]
    # nothing was touched: no audit row but the apply's own, no updated_at moved
    assert scalar(conn, "SELECT count(*) FROM timers.audit") == audit + 1
    after = scalar(conn, "SELECT array_agg(updated_at ORDER BY name) FROM timers.timers")
    assert after == updated

    some = api.get("/api/export?timers=c*").json()
    assert [t["name"] for t in some["timer"]] == ["close"]
    assert [c["name"] for c in some["calendar"]] == ["nepse"]
    assert api.get("/api/export?timers=o?her").json()["calendar"] == []


def test_applying_an_export_of_timers_saved_by_hand_changes_nothing(
    api: Client, conn: psycopg.Connection
) -> None:
    conn.execute("SELECT timers.save('by_hand', 'every 5m', 'SELECT 3')")
    spec = api.get("/api/export").json()
    body = api.post("/api/apply?dry_run=false", spec).json()
    # a label is no change by itself: it stays saved by hand, out of any set's prune
    assert body["plan"] == [{"action": "unchanged", "name": "by_hand", "changes": {}}]
    assert scalar(conn, "SELECT managed_by FROM timers.timers WHERE name = 'by_hand'") is None
