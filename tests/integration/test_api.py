"""timers.save / enable / delete / set_timezone / status from SQL, as psql users call them."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.rows import dict_row

STATUS_FIELDS = [
    "name",
    "database",
    "schedule",
    "sql",
    "enabled",
    "created_ms",
    "updated_ms",
    "created_by",
    "next_run_ms",
    "last_run_ms",
    "last_due_ms",
    "last_late_ms",
    "max_late_ms",
    "last_ok",
    "last_error",
    "last_took_ms",
    "last_rows",
    "runs",
    "failures",
    "failures_24h",
    "skipped",
    "last_skip_ms",
    "last_skip_reason",
    "caught_up",
    "running",
    "timezone",
    "catch_up",
    "start_at",
    "end_at",
    "max_runs",
    "expired",
    "locked",
    "retries",
    "retry_delay",
    "pause_after",
    "jitter",
    "priority",
    "paused_ms",
    "catch_up_window",
    "autonomous",
    "deadline",
    "deadline_missed_ms",
    "deadline_missed",
    "history",
    "last_success_ms",
    "managed_by",
    "run_group",
    "waiting_for_group",
]


def save(conn: psycopg.Connection, *args: Any, **kwargs: Any) -> dict[str, Any]:
    names = ", ".join(f"{k} => %({k})s" for k in kwargs)
    params: dict[str, Any] = {f"a{i}": a for i, a in enumerate(args)}
    params.update(kwargs)
    positional = ", ".join(f"%(a{i})s" for i in range(len(args)))
    call = ", ".join(x for x in (positional, names) if x)
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(f"SELECT to_jsonb(s) AS j FROM timers.save({call}) s", params).fetchone()
    assert row is not None
    result: dict[str, Any] = row["j"]
    return result


def audit(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT actor, action, object FROM timers.audit ORDER BY id").fetchall()


def test_save_returns_the_status_row_with_the_seed_fields(conn: psycopg.Connection) -> None:
    status = save(conn, "shop_totals", "every 5m", "SELECT 1")
    assert set(status) == set(STATUS_FIELDS)
    assert status["name"] == "shop_totals"
    assert status["schedule"] == "every 5m"
    assert status["enabled"] is True
    assert (status["created_by"],) == conn.execute("SELECT current_user::text").fetchone()
    assert status["last_ok"] is None
    assert status["last_error"] == ""
    assert status["runs"] == 0 and status["skipped"] == 0 and status["running"] is False
    assert status["next_run_ms"] % 300_000 == 0
    now_ms = conn.execute("SELECT (extract(epoch FROM now()) * 1000)::bigint").fetchone()
    assert now_ms is not None
    assert 0 < status["next_run_ms"] - now_ms[0] <= 300_000
    assert status["timezone"] == "UTC" and status["catch_up"] == "skip"
    assert (status["retries"], status["pause_after"], status["jitter"], status["priority"]) == (
        0, None, None, 0,
    )  # fmt: skip
    assert status["retry_delay"] == "00:00:30" and status["paused_ms"] == 0


def test_status_view_columns_are_in_contract_order(conn: psycopg.Connection) -> None:
    cur = conn.execute("SELECT * FROM timers.status LIMIT 0")
    assert cur.description is not None
    assert [c.name for c in cur.description] == STATUS_FIELDS


def test_replace_keeps_one_timer_and_names_are_case_insensitive(conn: psycopg.Connection) -> None:
    save(conn, "Nightly", "daily 02:00", "SELECT 1")
    status = save(conn, "NIGHTLY", "daily 03:00", "SELECT 2")
    assert status["name"] == "NIGHTLY" and status["sql"] == "SELECT 2"
    assert conn.execute("SELECT count(*) FROM timers.timers").fetchone() == (1,)
    assert [a[1] for a in audit(conn)] == ["save", "save"]


def test_disabled_timer_has_no_next_run_and_enable_rearms(conn: psycopg.Connection) -> None:
    status = save(conn, "nightly", "daily 02:00", "SELECT 1", enabled=False)
    assert status["enabled"] is False and status["next_run_ms"] == 0
    row = conn.execute("SELECT to_jsonb(s) FROM timers.enable('nightly') s").fetchone()
    assert row is not None and row[0]["enabled"] is True and row[0]["next_run_ms"] > 0
    row = conn.execute("SELECT to_jsonb(s) FROM timers.enable('nightly', false) s").fetchone()
    assert row is not None and row[0]["next_run_ms"] == 0
    assert [a[1] for a in audit(conn)] == ["save", "enable", "disable"]


def test_delete_returns_deleted_and_unknown_is_p0002(conn: psycopg.Connection) -> None:
    save(conn, "nightly", "daily 02:00", "SELECT 1")
    assert conn.execute("SELECT timers.delete('nightly')").fetchone() == ({"deleted": True},)
    assert conn.execute("SELECT count(*) FROM timers.status").fetchone() == (0,)
    with pytest.raises(errors.NoDataFound, match="there is no timer 'nightly' in database"):
        conn.execute("SELECT timers.delete('nightly')")
    with pytest.raises(errors.NoDataFound):
        conn.execute("SELECT timers.enable('nightly')")


def test_save_notifies_the_runner_channel(conn: psycopg.Connection) -> None:
    conn.execute("LISTEN pgtimers")
    save(conn, "n1", "hourly", "SELECT 1")
    conn.execute("SELECT timers.enable('n1', false)")
    conn.execute("SELECT timers.delete('n1')")
    events = [n.payload for n in conn.notifies(timeout=1, stop_after=3)]
    assert len(events) == 3
    assert all('"timer": "n1"' in e for e in events)
    assert ['"save"' in events[0], '"enable"' in events[1], '"delete"' in events[2]] == [True] * 3


@pytest.mark.parametrize(
    ("kwargs", "sqlstate", "match"),
    [
        ({"name": "bad name"}, "22023", "bad timer name 'bad name'"),
        ({"name": "x" * 65}, "22023", "bad timer name"),
        (
            {"schedule": "every day"},
            "22023",
            "bad \"every\" schedule 'every day'; use a schedule like",
        ),
        ({"sql": "SELEC 1"}, "42601", "does not parse"),
        ({"sql": "SET ROLE postgres"}, "42501", "SET ROLE"),
        ({"timezone": "Mars/Olympus"}, "22023", "unknown time zone 'Mars/Olympus'"),
        ({"catch_up": "some"}, "22023", "bad catch_up 'some'"),
        ({"catch_up_window": "-1 minute"}, "22023", "bad catch_up_window '-00:01:00'"),
        ({"catch_up_window": "0"}, "22023", "bad catch_up_window '00:00:00'"),
        ({"catch_up_window": "366 days"}, "22023", "bad catch_up_window '366 days'"),
        ({"catch_up_window": "1 year 1 second"}, "22023", "bad catch_up_window '1 year 00:00:01'"),
        ({"max_runs": 0}, "22023", "bad max_runs 0"),
        ({"timeout": "0 s"}, "22023", "bad timeout"),
        ({"schedule": "trading nepse 15:05"}, "22023", "there is no calendar 'nepse' in database"),
        ({"test_clock": "nope"}, "22023", "there is no test clock 'nope'"),
        ({"schedule": "once 2001-01-01 00:00"}, "22023", "is in the past"),
        ({"start_at": "2030-01-02", "end_at": "2030-01-01"}, "22023", "is not after start_at"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(
    conn: psycopg.Connection, kwargs: dict[str, Any], sqlstate: str, match: str
) -> None:
    save(conn, "keep", "daily 02:00", "SELECT 1")
    before = conn.execute("SELECT to_jsonb(t) FROM timers.timers t").fetchall()
    args = {"name": "keep", "schedule": "daily 09:00", "sql": "SELECT 2", **kwargs}
    with pytest.raises(psycopg.Error, match=match) as info:
        save(conn, **args)
    assert info.value.sqlstate == sqlstate
    assert conn.execute("SELECT to_jsonb(t) FROM timers.timers t").fetchall() == before
    assert len(audit(conn)) == 1


def test_set_timezone_replans_timers_without_their_own_zone(conn: psycopg.Connection) -> None:
    save(conn, "local", "daily 16:00", "SELECT 1")
    save(conn, "pinned", "daily 16:00", "SELECT 1", timezone="UTC")
    assert conn.execute("SELECT timers.set_timezone('Asia/Kathmandu')").fetchone() == (
        "Asia/Kathmandu",
    )
    rows: dict[str, str] = dict(
        conn.execute(
            "SELECT name, to_char(next_due_at AT TIME ZONE 'UTC', 'HH24:MI') FROM timers.timers"
        ).fetchall()
    )
    assert rows == {"local": "10:15", "pinned": "16:00"}
    with pytest.raises(errors.InvalidParameterValue):
        conn.execute("SELECT timers.set_timezone('Nowhere/Land')")
    # A one-shot's wall time is read in the new default zone too.
    conn.execute("SELECT timers.set_timezone('UTC')")
    save(conn, "oneshot", "once 2090-06-01 12:00", "SELECT 1")
    conn.execute("SELECT timers.set_timezone('Asia/Kathmandu')")
    row = conn.execute(
        "SELECT to_char(next_due_at AT TIME ZONE 'UTC', 'HH24:MI') FROM timers.timers"
        " WHERE name = 'oneshot'"
    ).fetchone()
    assert row == ("06:15",)
    assert conn.execute("SELECT timers._default_zone()").fetchone() == ("Asia/Kathmandu",)
    assert [a[1] for a in audit(conn)][-1] == "set_timezone"


def test_in_is_stored_as_once_and_expires_without_next_time(conn: psycopg.Connection) -> None:
    status = save(conn, "soon", "in 30m", "SELECT 1")
    assert status["schedule"].startswith("once ")
    assert status["expired"] is False and status["next_run_ms"] > 0


def test_start_and_end_window(conn: psycopg.Connection) -> None:
    status = save(
        conn, "win", "every 1h", "SELECT 1", start_at="2090-01-01 00:30+00", end_at="2090-01-02+00"
    )
    row = conn.execute("SELECT extract(epoch FROM '2090-01-01 00:30+00'::timestamptz) * 1000")
    first = row.fetchone()
    assert first is not None and status["next_run_ms"] == int(first[0])
    status = save(conn, "gone", "every 1h", "SELECT 1", end_at="2001-01-01+00")
    assert status["expired"] is True and status["next_run_ms"] == 0


def test_locked_timer_needs_a_superuser_unlock(conn: psycopg.Connection) -> None:
    save(conn, "guarded", "daily 02:00", "SELECT 1", locked=True)
    with pytest.raises(errors.InsufficientPrivilege, match="is locked"):
        save(conn, "guarded", "daily 03:00", "SELECT 1")
    with pytest.raises(errors.InsufficientPrivilege, match="is locked"):
        conn.execute("SELECT timers.delete('guarded')")
    with pytest.raises(errors.InsufficientPrivilege, match="is locked"):
        conn.execute("SELECT timers.enable('guarded', false)")
    conn.execute("SELECT timers.unlock('guarded')")
    assert conn.execute("SELECT timers.delete('guarded')").fetchone() == ({"deleted": True},)
    assert [a[1] for a in audit(conn)] == ["save", "unlock", "delete"]
