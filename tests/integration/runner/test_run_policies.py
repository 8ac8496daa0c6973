"""Run policies on a test clock: retries with backoff, pause after failures, jitter,
priority, and the events they announce. Time moves only when a test advances the clock."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.rows import dict_row

from tests.conftest import Database, scalar
from tests.integration.runner.conftest import save, status, timer_row
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
T0 = "2027-01-04 09:00:00+00"
UTC = dt.timezone.utc

# Each committed run writes its timer, due time and attempt: a double commit would show.
DONE_TABLE = (
    "CREATE TABLE done (timer text, due text, attempt int,"
    " at timestamptz DEFAULT clock_timestamp())"
)
DONE_SQL = (
    "INSERT INTO done (timer, due, attempt) VALUES (current_setting('pgtimers.timer'),"
    " current_setting('pgtimers.due_at'), current_setting('pgtimers.attempt')::int)"
)
# fails (division by zero) on attempts before the third
THIRD_TIME_LUCKY = (
    DONE_SQL
    + " RETURNING 1 / (CASE WHEN current_setting('pgtimers.attempt')::int < 3 THEN 0 ELSE 1 END)"
)
ALWAYS_FAILS = "SELECT 1 / 0"


def at(hh_mm: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2027-01-04 {hh_mm}:00+00:00")


@pytest.fixture
def clock(conn: psycopg.Connection) -> str:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    conn.execute(DONE_TABLE)
    return "c"


def advance(conn: psycopg.Connection, to: str) -> dict[str, Any]:
    row = conn.execute("CALL timers.advance_test_clock('c', %s)", [f"2027-01-04 {to}:00+00"])
    result = row.fetchone()
    assert result is not None
    return dict(result[0])


def done(conn: psycopg.Connection, timer: str) -> list[tuple[str, int]]:
    rows = conn.execute("SELECT due, attempt FROM done WHERE timer = %s ORDER BY at", [timer])
    return [(r[0], r[1]) for r in rows.fetchall()]


def runs(conn: psycopg.Connection, timer: str) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT kind, due_at, attempt, ok, retry_at, reason, error FROM timers.runs"
            " WHERE timer = %s ORDER BY id",
            [timer],
        ).fetchall()


# ------------------------------------------------------------------------- retries


def test_a_timer_that_fails_twice_succeeds_on_its_third_attempt(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "t", "every 1h", THIRD_TIME_LUCKY, test_clock=clock, retries=3,
         retry_delay="1 minute")  # fmt: skip
    start_runner()
    advance(conn, "10:00")
    st = status(conn, "t")
    # attempt 1 failed; its retry is the next run, and the due time is not counted yet
    assert (st["runs"], st["failures"], st["last_ok"]) == (0, 0, False)
    assert "attempt 1 of 4; the next at 2027-01-04T10:01:00Z" in st["last_error"]
    assert st["next_run_ms"] == int(at("10:01").timestamp() * 1000)
    advance(conn, "10:30")
    assert done(conn, "t") == [("2027-01-04T10:00:00Z", 3)]  # one commit, on attempt 3
    history = runs(conn, "t")
    assert [(r["kind"], r["attempt"], r["ok"], r["retry_at"]) for r in history] == [
        ("scheduled", 1, False, at("10:01")),
        ("retry", 2, False, at("10:03")),  # the delay doubles: 1 min, then 2
        ("retry", 3, True, None),
    ]
    assert {r["due_at"] for r in history} == {at("10:00")}
    st = status(conn, "t")
    assert (st["runs"], st["failures"], st["failures_24h"], st["last_ok"], st["skipped"]) == (
        1, 0, 0, True, 0,
    )  # fmt: skip
    assert st["next_run_ms"] == int(at("11:00").timestamp() * 1000)


def test_attempt_is_1_without_retries(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "plain", "every 30m", DONE_SQL, test_clock=clock)
    start_runner()
    advance(conn, "10:00")
    assert done(conn, "plain") == [("2027-01-04T09:30:00Z", 1), ("2027-01-04T10:00:00Z", 1)]


def test_a_retry_that_would_reach_the_next_due_time_is_skipped_with_its_reason(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "t", "every 1h", ALWAYS_FAILS, test_clock=clock, retries=5,
         retry_delay="30 minutes")  # fmt: skip
    start_runner()
    advance(conn, "11:00")
    history = runs(conn, "t")
    # 10:00 fails, 10:30 fails, the next would be 11:30: past 11:00, so not made
    assert [(r["kind"], r["due_at"], r["attempt"], r["ok"]) for r in history[:3]] == [
        ("scheduled", at("10:00"), 1, False),
        ("retry", at("10:00"), 2, False),
        ("skipped", at("10:00"), 1, None),
    ]
    assert history[2]["reason"] == "retry would overlap the next due time"
    assert history[1]["retry_at"] is None
    st = status(conn, "t")
    # 10:00 counted once, as failed; 11:00 has had its first attempt
    assert (st["failures"], st["skipped"]) == (1, 1)
    assert st["last_skip_reason"] == "retry would overlap the next due time"


def test_retries_exhausted_count_one_failure(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "t", "every 1h", ALWAYS_FAILS, test_clock=clock, retries=1,
         retry_delay="1 minute")  # fmt: skip
    start_runner()
    advance(conn, "10:30")
    assert [(r["kind"], r["attempt"], r["ok"]) for r in runs(conn, "t")] == [
        ("scheduled", 1, False),
        ("retry", 2, False),
    ]
    st = status(conn, "t")
    assert (st["runs"], st["failures"], st["failures_24h"], st["skipped"]) == (1, 1, 1, 0)
    assert "retries exhausted: all 2 attempts failed" in st["last_error"]
    assert timer_row(conn, "t")["retry_at"] is None


def test_turning_a_timer_off_gives_up_its_retry(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "t", "every 1h", ALWAYS_FAILS, test_clock=clock, retries=3,
         retry_delay="5 minutes")  # fmt: skip
    start_runner()
    advance(conn, "10:00")
    conn.execute("SELECT timers.enable('t', false)")
    advance(conn, "10:30")
    history = runs(conn, "t")
    assert [(r["kind"], r["reason"]) for r in history] == [
        ("scheduled", ""),
        ("skipped", "turned off before its retry"),
    ]
    assert timer_row(conn, "t")["retry_at"] is None


# --------------------------------------------------------------- pause after failures


def test_pause_after_n_failed_due_times_and_enable_again(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "p", "every 1h", ALWAYS_FAILS, test_clock=clock, pause_after=2, retries=1,
         retry_delay="1 minute")  # fmt: skip
    start_runner()
    advance(conn, "10:30")
    assert timer_row(conn, "p")["enabled"] is True  # one failed due time (two attempts)
    advance(conn, "13:00")
    st = status(conn, "p")
    assert st["enabled"] is False and st["next_run_ms"] == 0 and st["paused_ms"] > 0
    assert st["last_error"].startswith("paused after 2 failed due times in a row (pause_after 2)")
    assert "division by zero" in st["last_error"]
    # nothing ran after the pause: 10:00 and 11:00, two attempts each
    assert [r["due_at"] for r in runs(conn, "p")] == [at("10:00")] * 2 + [at("11:00")] * 2
    trouble = scalar(conn, "SELECT trouble FROM timers.trouble WHERE name = 'p'")
    assert "paused after 2 failed due times in a row" in trouble
    audit = conn.execute(
        "SELECT actor, detail FROM timers.audit WHERE action = 'pause' AND object = 'p'"
    ).fetchall()
    assert len(audit) == 1 and audit[0][1]["failed_in_a_row"] == 2
    conn.execute("SELECT timers.enable('p')")
    row = timer_row(conn, "p")
    assert (row["enabled"], row["fail_streak"], row["paused_at"]) == (True, 0, None)
    assert status(conn, "p")["paused_ms"] == 0


def test_a_success_resets_the_streak(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    conn.execute("CREATE TABLE flip (fail boolean)")
    conn.execute("INSERT INTO flip VALUES (true)")
    flip = "SELECT 1 / CASE WHEN fail THEN 0 ELSE 1 END FROM flip"
    save(conn, "p", "every 1h", flip, test_clock=clock, pause_after=2)
    start_runner()
    advance(conn, "10:00")
    conn.execute("UPDATE flip SET fail = false")
    advance(conn, "11:00")
    conn.execute("UPDATE flip SET fail = true")
    advance(conn, "12:00")
    row = timer_row(conn, "p")
    assert (row["enabled"], row["fail_streak"]) == (True, 1)


# --------------------------------------------------------------------------- jitter


def test_jitter_is_a_fixed_offset_per_due_time_and_due_at_stays_nominal(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    save(conn, "j", "every 1h", DONE_SQL, test_clock=clock, jitter="20 minutes")
    offsets = []
    for hour in range(10, 14):
        conn.execute(
            "UPDATE timers.timers SET next_due_at = %s WHERE name = 'j'", [at(f"{hour}:00")]
        )
        row = timer_row(conn, "j")
        offsets.append(row["fire_at"] - row["next_due_at"])
        # the same due time gets the same offset, however often it is planned
        conn.execute("UPDATE timers.timers SET next_due_at = next_due_at WHERE name = 'j'")
        assert timer_row(conn, "j")["fire_at"] - row["next_due_at"] == offsets[-1]
    assert all(dt.timedelta(0) <= o < dt.timedelta(minutes=20) for o in offsets)
    assert len(set(offsets)) > 1  # spread, not one offset for every due time
    conn.execute("UPDATE timers.timers SET next_due_at = %s WHERE name = 'j'", [at("10:00")])
    fires_at = timer_row(conn, "j")["fire_at"]
    assert status(conn, "j")["next_run_ms"] == int(fires_at.timestamp() * 1000)
    start_runner()
    advance(conn, "10:59")
    assert done(conn, "j") == [("2027-01-04T10:00:00Z", 1)]
    # the run started at its jittered time: on a test clock it is not late at all
    assert scalar(conn, "SELECT last_run_at FROM timers.timers WHERE name = 'j'") == fires_at
    assert status(conn, "j")["last_late_ms"] == 0


def test_jitter_must_be_below_the_time_between_due_times(
    conn: psycopg.Connection, clock: str
) -> None:
    with pytest.raises(errors.InvalidParameterValue, match=r"bad jitter '00:05:00'.*less than"):
        save(conn, "j", "every 5m", "SELECT 1", test_clock=clock, jitter="5 minutes")
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0
    save(conn, "j", "every 5m", "SELECT 1", test_clock=clock, jitter="4 minutes 59 seconds")


# -------------------------------------------------------------------------- priority


def test_higher_priority_starts_first_when_workers_are_short(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    for name, priority in [("low", -5), ("plain", 0), ("high", 10), ("higher", 100)]:
        save(conn, name, "daily 10:00", DONE_SQL, test_clock=clock, priority=priority)
    start_runner("--workers", "1")
    advance(conn, "10:00")
    order = [r[0] for r in conn.execute("SELECT timer FROM done ORDER BY at").fetchall()]
    assert order == ["higher", "high", "plain", "low"]


def test_earlier_due_time_first_within_a_priority(
    conn: psycopg.Connection, clock: str, start_runner: StartRunner
) -> None:
    for name, due, priority in [("z", "09:10", 0), ("b", "10:00", 3), ("a", "09:30", 3)]:
        save(conn, name, f"daily {due}", DONE_SQL, test_clock=clock, priority=priority,
             catch_up="all")  # fmt: skip
    advance(conn, "10:00")  # no runner yet: all three are owed when it starts
    start_runner("--workers", "1")
    conn.execute("SELECT pg_sleep(0)")
    deadline = dt.datetime.now() + dt.timedelta(seconds=10)
    while scalar(conn, "SELECT count(*) FROM done") < 3 and dt.datetime.now() < deadline:
        conn.execute("SELECT pg_sleep(0.02)")
    order = [r[0] for r in conn.execute("SELECT timer FROM done ORDER BY at").fetchall()]
    assert order == ["a", "b", "z"]


# --------------------------------------------------------------------- bad values


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("retries", -1, "bad retries -1"),
        ("retries", 101, "bad retries 101"),
        ("retry_delay", "0 seconds", "bad retry_delay '00:00:00'"),
        ("retry_delay", "2 hours", "bad retry_delay '02:00:00'"),
        ("pause_after", 0, "bad pause_after 0"),
        ("jitter", "-1 second", "bad jitter '-00:00:01'"),
        ("jitter", "2 hours", "bad jitter '02:00:00'"),
        ("priority", 101, "bad priority 101"),
        ("priority", -101, "bad priority -101"),
    ],
)
def test_bad_policy_values_name_the_option_and_change_nothing(
    conn: psycopg.Connection, option: str, value: Any, message: str
) -> None:
    save(conn, "keep", "every 1h", "SELECT 1")
    with pytest.raises(errors.InvalidParameterValue, match=message):
        save(conn, "keep", "every 2h", "SELECT 2", **{option: value})
    assert status(conn, "keep")["schedule"] == "every 1h"


@pytest.mark.parametrize("option", ["retries", "retry_delay", "priority"])
def test_null_is_not_a_policy(conn: psycopg.Connection, option: str) -> None:
    with pytest.raises(errors.InvalidParameterValue, match=f"bad {option} NULL"):
        save(conn, "t", "every 1h", "SELECT 1", **{option: None})


def test_save_many_takes_the_policies_and_names_a_bad_one(conn: psycopg.Connection) -> None:
    timers = [
        {"name": "a", "schedule": "every 1h", "sql": "SELECT 1", "retries": 2, "priority": 5},
        {"name": "b", "schedule": "every 1h", "sql": "SELECT 1", "jitter": "1 minute"},
    ]
    assert scalar(conn, "SELECT timers.save_many(%s::jsonb)", [json.dumps(timers)]) == 2
    a = status(conn, "a")
    assert (a["retries"], a["priority"], a["retry_delay"]) == (2, 5, dt.timedelta(seconds=30))
    assert status(conn, "b")["jitter"] == dt.timedelta(minutes=1)
    bad = [{"name": "c", "schedule": "every 1h", "sql": "SELECT 1", "retries": "many"}]
    with pytest.raises(errors.InvalidParameterValue, match=r"timer 1: bad retries: 'many'"):
        conn.execute("SELECT timers.save_many(%s::jsonb)", [json.dumps(bad)])


# --------------------------------------------------------------------------- events


@pytest.fixture
def events(db: Database) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """LISTEN pgtimers_events on a connection of its own; read what has arrived."""
    with db.connect() as listener:
        listener.execute("LISTEN pgtimers_events")
        got: list[dict[str, Any]] = []

        def read() -> list[dict[str, Any]]:
            listener.execute("SELECT 1")  # take in what has come
            got.extend(json.loads(n.payload) for n in listener.notifies(timeout=0.3))
            return got

        yield read


def test_failures_retries_given_up_and_pauses_are_announced(
    conn: psycopg.Connection,
    clock: str,
    start_runner: StartRunner,
    events: Callable[[], list[dict[str, Any]]],
) -> None:
    save(conn, "e", "every 1h", ALWAYS_FAILS, test_clock=clock, retries=1,
         retry_delay="1 minute", pause_after=1)  # fmt: skip
    start_runner()
    advance(conn, "10:30")
    seen = events()
    assert [(e["event"], e["attempt"]) for e in seen] == [
        ("failed", 1),
        ("failed", 2),
        ("retry_given_up", 2),
        ("paused", 2),
    ]
    first = seen[0]
    assert set(first) >= {"database", "timer", "event", "due_at", "attempt", "error", "sqlstate"}
    assert (first["timer"], first["due_at"], first["sqlstate"]) == (
        "e", "2027-01-04T10:00:00Z", "22012",
    )  # fmt: skip
    assert first["error"] == "division by zero"
    assert first["retry_at"] == "2027-01-04T10:01:00Z"


def test_a_long_error_is_cut_to_fit_notify_and_the_event_still_comes(
    conn: psycopg.Connection,
    clock: str,
    start_runner: StartRunner,
    events: Callable[[], list[dict[str, Any]]],
) -> None:
    save(conn, "long", "every 1h", "DO $$ BEGIN RAISE EXCEPTION '%', repeat('é', 9000); END $$",
         test_clock=clock)  # fmt: skip
    start_runner()
    advance(conn, "10:00")
    [event] = [e for e in events() if e["event"] == "failed"]
    assert len(json.dumps(event, ensure_ascii=False).encode()) <= 8000
    assert event["error"].startswith("éé") and event["error"].endswith("[cut]")
    assert event["sqlstate"] == "P0001"


# --------------------------------------------------------------------------- crashes


def test_a_runner_killed_during_a_retry_leaves_nothing_and_the_attempt_is_redone(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    """On the server's clock: attempt 1 fails at once, attempt 2 is killed mid-run (SIGKILL),
    another runner makes attempt 2 again, which commits: one commit for the due time."""
    conn.execute(DONE_TABLE)
    slow_second = (
        DONE_SQL + "; SELECT pg_sleep(CASE WHEN current_setting('pgtimers.attempt') = '2'"
        " THEN 1.5 ELSE 0 END), 1 / (current_setting('pgtimers.attempt')::int - 1)"
    )
    save(conn, "r", "every 1h", slow_second, retries=2, retry_delay="1 second")
    first = start_runner()  # first: a due time older than the runner would be downtime
    row = conn.execute(
        "UPDATE timers.timers SET next_due_at = date_trunc('milliseconds', now())"
        " WHERE name = 'r' RETURNING next_due_at"
    ).fetchone()
    assert row is not None
    due = row[0].astimezone(UTC)
    conn.execute("NOTIFY pgtimers")
    wait_until(
        lambda: _running(conn) == ["r"] and timer_row(conn, "r")["retry_attempt"] == 2,
        what="attempt 2 to be running",
    )
    first.kill()
    assert done(conn, "r") == []
    second = start_runner()
    wait_until(lambda: timer_row(conn, "r")["retry_at"] is None, 15, "attempt 2 to commit")
    stamp = due.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".") + "Z"
    assert done(conn, "r") == [(stamp, 2)]
    assert [(r["kind"], r["attempt"], r["ok"]) for r in runs(conn, "r")] == [
        ("scheduled", 1, False),
        ("retry", 2, True),
    ]
    st = status(conn, "r")
    assert (st["runs"], st["failures"], st["skipped"]) == (1, 0, 0)
    assert second.stop() == 0


def _running(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT application_name FROM pg_stat_activity"
        " WHERE datname = current_database() AND application_name LIKE 'pgtimers: %'"
    ).fetchall()
    return [r[0].removeprefix("pgtimers: ") for r in rows]
