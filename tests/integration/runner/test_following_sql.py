"""Timers that wait for other timers, in SQL without a runner: the refusals at save and
delete, and fan-in, failure, skip and retry on a test clock, fired by timers._fire as a
runner's batch would (issue 34)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import errors

from tests.conftest import scalar
from tests.integration.runner.conftest import LOG_SQL, history, save
from tests.support.wait import wait_until

T0 = dt.datetime(2027, 1, 4, 9, 0, 0, tzinfo=dt.timezone.utc)
Fired = Callable[..., list[tuple[str, str]]]
FAIL_FIRST = (
    "INSERT INTO fired (timer, due) VALUES (current_setting('pgtimers.timer'), "
    "(1 / (current_setting('pgtimers.attempt')::int - 1))::text)"
)


def iso(seconds: int) -> str:
    """The due time T0 + seconds as pgtimers.due_at says it."""
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def advance(conn: psycopg.Connection, seconds: int, clock: str = "c") -> None:
    """Move test clock `clock` to T0 + seconds, firing what falls due on the way (each
    step of CALL timers.advance_test_clock stops at the next due time)."""
    target = T0 + dt.timedelta(seconds=seconds)
    for _ in range(20):
        conn.execute("CALL timers.advance_test_clock(%s, %s)", [clock, target])
        fire_all(conn)
        if scalar(conn, "SELECT now FROM timers.test_clocks WHERE name = %s", [clock]) == target:
            return
    raise AssertionError(f"clock {clock} did not reach {target}")


def fire_all(conn: psycopg.Connection) -> list[Any]:
    """timers._fire until nothing is left (the runner's batch, one fire a transaction)."""
    results: list[Any] = []
    for _ in range(50):
        r = scalar(conn, "SELECT timers._fire('test', '{}', '{}', false, 600000)")
        conn.execute("RESET search_path")
        if r is None:
            return results
        results.append(r)
    raise AssertionError(f"still firing: {results[-3:]}")


def upstreams(conn: psycopg.Connection, u2_sql: str = LOG_SQL, **u2: Any) -> None:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    with conn.transaction():
        save(conn, "u1", "every 10s", LOG_SQL, test_clock="c")
        save(conn, "u2", "every 10s", u2_sql, test_clock="c", **u2)
        save(conn, "f", "after", LOG_SQL, after=["u1", "U2"])


def test_a_follower_runs_once_per_due_time_after_all_its_upstreams(
    conn: psycopg.Connection, fired: Fired
) -> None:
    upstreams(conn)
    advance(conn, 10)
    # the follower ran after both upstreams, with their due time
    assert fired() == [("u1", iso(10)), ("u2", iso(10)), ("f", iso(10))]
    advance(conn, 20)
    assert fired("f") == [("f", iso(10)), ("f", iso(20))]
    # nothing is run twice, and the rows done are pruned once both upstreams passed them
    assert fire_all(conn) == []
    assert scalar(conn, "SELECT array_agg(due_at ORDER BY due_at) FROM timers.follow_dues") == [
        T0 + dt.timedelta(seconds=20)
    ]
    assert scalar(conn, "SELECT runs FROM timers.status WHERE name = 'f'") == 2


def test_the_follower_waits_for_every_upstream(conn: psycopg.Connection, fired: Fired) -> None:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    conn.execute("SELECT timers.create_test_clock('d', %s)", [T0])
    with conn.transaction():
        save(conn, "u1", "every 10s", LOG_SQL, test_clock="c")
        save(conn, "u2", "every 10s", LOG_SQL, test_clock="d")
        save(conn, "f", "after", LOG_SQL, after=["u1", "u2"])
    advance(conn, 10)
    fire_all(conn)
    assert fired("f") == []
    advance(conn, 10, "d")
    assert fired("f") == [("f", iso(10))]


def test_a_failed_upstream_skips_the_followers_due_time_with_its_reason(
    conn: psycopg.Connection, fired: Fired
) -> None:
    upstreams(conn, "SELECT 1 / 0")
    advance(conn, 10)
    assert fired("f") == []
    runs = history(conn, "f")
    assert [(r["kind"], r["due_at"]) for r in runs] == [("skipped", T0 + dt.timedelta(seconds=10))]
    assert runs[0]["reason"].startswith(f"u2 failed at due time {iso(10)}: division by zero")


def test_a_retry_that_succeeds_releases_the_follower(
    conn: psycopg.Connection, fired: Fired
) -> None:
    upstreams(conn, FAIL_FIRST, retries=1, retry_delay="1 second")
    advance(conn, 10)
    fire_all(conn)
    # u2's first attempt failed, its retry is to come: the follower waits, nothing skipped
    assert fired("f") == []
    assert history(conn, "f") == []
    assert scalar(conn, "SELECT state FROM timers.follow_dues") == "waiting"
    advance(conn, 12)
    fire_all(conn)
    assert fired("f") == [("f", iso(10))]
    assert [r["kind"] for r in history(conn, "f")] == ["scheduled"]


def test_a_skipped_upstream_due_time_skips_the_followers(
    conn: psycopg.Connection, fired: Fired
) -> None:
    upstreams(conn)
    advance(conn, 10)
    fire_all(conn)
    # u2 off at due time 20: u1 runs it, u2 does not, and passes it at 30
    conn.execute("SELECT timers.enable('u2', false)")
    advance(conn, 20)
    conn.execute("SELECT timers.enable('u2', true)")
    advance(conn, 30)
    fire_all(conn)
    assert fired("f") == [("f", iso(10)), ("f", iso(30))]
    skipped = [r for r in history(conn, "f") if r["kind"] == "skipped"]
    assert [r["due_at"] for r in skipped] == [T0 + dt.timedelta(seconds=20)]
    assert skipped[0]["reason"] == f"u2 did not run at due time {iso(20)} (it is off)"


def test_a_chain_of_followers(conn: psycopg.Connection, fired: Fired) -> None:
    upstreams(conn)
    save(conn, "g", "after", LOG_SQL, after=["f"])
    advance(conn, 10)
    fire_all(conn)
    assert [t for t, _ in fired()][-2:] == ["f", "g"]
    assert fired("g") == [("g", iso(10))]


@pytest.mark.parametrize(
    ("after", "sqlstate", "text"),
    [
        (["nope"], "P0002", "timer 'f' follows timer 'nope', which does not exist"),
        (["f"], "22023", "that makes a cycle, f follows f"),
        ([], "22023", "has schedule 'after' but follows no timer"),
    ],
)
def test_bad_after_is_refused_and_changes_nothing(
    conn: psycopg.Connection, after: list[str], sqlstate: str, text: str
) -> None:
    save(conn, "u1", "every 10s", LOG_SQL)
    with pytest.raises(psycopg.Error) as e:
        save(conn, "f", "after", LOG_SQL, after=after)
    assert e.value.sqlstate == sqlstate
    assert text in str(e.value)
    assert scalar(conn, "SELECT count(*) FROM timers.timers WHERE name = 'f'") == 0


def test_a_cycle_through_others_is_refused_naming_them(conn: psycopg.Connection) -> None:
    save(conn, "u1", "every 10s", LOG_SQL)
    save(conn, "a", "after", LOG_SQL, after=["u1"])
    save(conn, "b", "after", LOG_SQL, after=["a"])
    with pytest.raises(errors.InvalidParameterValue, match="a follows b follows a"):
        save(conn, "a", "after", LOG_SQL, after=["u1", "b"])
    assert scalar(conn, "SELECT timers._follow_names(id) FROM timers.timers WHERE name = 'a'") == [
        "u1"
    ]


def test_after_needs_schedule_after(conn: psycopg.Connection) -> None:
    save(conn, "u1", "every 10s", LOG_SQL)
    with pytest.raises(
        errors.InvalidParameterValue, match="a timer that waits for others has schedule 'after'"
    ):
        save(conn, "f", "every 10s", LOG_SQL, after=["u1"])
    with pytest.raises(errors.InvalidParameterValue, match='bad "after" schedule'):
        save(conn, "f", "after 5m", LOG_SQL, after=["u1"])


def test_links_survive_a_rename_by_case(conn: psycopg.Connection) -> None:
    save(conn, "u1", "every 10s", LOG_SQL)
    save(conn, "f", "after", LOG_SQL, after=["u1"])
    save(conn, "U1", "every 20s", LOG_SQL)
    assert scalar(conn, "SELECT timers._follow_names(id) FROM timers.timers WHERE name = 'f'") == [
        "U1"
    ]


def test_deleting_a_followed_timer_is_refused_unless_cascade(conn: psycopg.Connection) -> None:
    save(conn, "u1", "every 10s", LOG_SQL)
    save(conn, "u2", "every 10s", LOG_SQL)
    save(conn, "f", "after", LOG_SQL, after=["u1", "u2"])
    save(conn, "g", "after", LOG_SQL, after=["u1"])
    with pytest.raises(
        errors.DependentObjectsStillExist, match="timer 'u1' is followed by 'f', 'g'"
    ):
        conn.execute("SELECT timers.delete('u1')")
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 4
    conn.execute("SELECT timers.delete('u1', cascade => true)")
    # f keeps u2; g followed nothing else and is gone with it
    assert scalar(conn, "SELECT array_agg(name ORDER BY name) FROM timers.timers") == ["f", "u2"]
    assert scalar(conn, "SELECT timers._follow_names(id) FROM timers.timers WHERE name = 'f'") == [
        "u2"
    ]
    # a follower itself goes without cascade
    conn.execute("SELECT timers.delete('f')")
    assert scalar(conn, "SELECT count(*) FROM timers.follows") == 0


def test_a_followers_own_retry_runs_its_due_time_again(
    conn: psycopg.Connection, fired: Fired
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', %s)", [T0])
    with conn.transaction():
        save(conn, "u1", "every 10s", LOG_SQL, test_clock="c")
        save(conn, "f", "after", FAIL_FIRST, after=["u1"], retries=1, retry_delay="1 second")
    advance(conn, 10)
    assert fired("f") == []
    row = conn.execute("SELECT retry_due_at, retry_attempt FROM timers.timers WHERE name = 'f'")
    assert row.fetchone() == (T0 + dt.timedelta(seconds=10), 2)
    # its retry is on the server's clock, a second after the failure
    wait_until(lambda: fire_all(conn) and fired("f"), timeout=10)
    assert fired("f") == [("f", "1")]
    assert [(r["kind"], r["ok"]) for r in history(conn, "f")] == [
        ("scheduled", False),
        ("retry", True),
    ]
