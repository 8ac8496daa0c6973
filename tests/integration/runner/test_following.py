"""Timers that wait for other timers on real runners: fan-in on 1 s schedules, and
exactly once per (follower, due time) when a runner dies between an upstream's commit
and the follower's run, or during the follower's run (issue 34)."""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from tests.conftest import scalar
from tests.integration.runner.conftest import LOG_SQL, save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
Fired = Callable[..., list[tuple[str, str]]]


def fired_at(conn: psycopg.Connection) -> list[tuple[str, str, object]]:
    """Every run's (timer, due, commit order): `fired` rows with their insert time."""
    return [
        (r[0], r[1], r[2])
        for r in conn.execute("SELECT timer, due, at FROM fired ORDER BY at").fetchall()
    ]


def test_fan_in_a_follower_runs_once_per_due_time_after_both_upstreams(
    conn: psycopg.Connection, fired: Fired, start_runner: StartRunner
) -> None:
    with conn.transaction():
        save(conn, "ticks", "every 1s", LOG_SQL)
        save(conn, "prices", "every 1s", LOG_SQL)
        save(conn, "candles", "after", LOG_SQL, after=["ticks", "prices"])
    runner = start_runner()
    wait_until(lambda: len(fired("candles")) >= 3, timeout=20, what=runner.log)
    runner.stop()
    rows = fired_at(conn)
    follower = [(due, at) for timer, due, at in rows if timer == "candles"]
    dues = [due for due, _ in follower]
    assert len(dues) == len(set(dues)), f"a due time ran twice: {dues}"
    for due, at in follower:
        # each upstream committed that due time, before the follower started it
        for upstream in ("ticks", "prices"):
            ups = [a for t, d, a in rows if t == upstream and d == due]
            assert len(ups) == 1, (upstream, due, rows)
            assert ups[0] < at  # type: ignore[operator]
    # and no due time both upstreams ran was left without its follower's run or skip
    both = {d for t, d, _ in rows if t == "ticks"} & {d for t, d, _ in rows if t == "prices"}
    handled = set(dues) | {
        str(r[0])
        for r in conn.execute(
            "SELECT timers._iso(due_at) FROM timers.runs"
            " WHERE timer = 'candles' AND kind = 'skipped'"
        )
    }
    pending = {
        str(r[0])
        for r in conn.execute(
            "SELECT timers._iso(due_at) FROM timers.follow_dues WHERE state <> 'done'"
        )
    }
    assert both <= handled | pending


def test_a_runner_that_dies_after_the_upstream_commit_leaves_the_follower_to_another(
    conn: psycopg.Connection, fired: Fired, start_runner: StartRunner
) -> None:
    # the upstream's run commits through _fire in this session (a runner's batch), which
    # then goes no further, as a runner killed right after the commit would
    with conn.transaction():
        save(conn, "import_ticks", "every 1s", LOG_SQL)
        save(conn, "candles", "after", LOG_SQL, after=["import_ticks"])
    wait_until(
        lambda: scalar(
            conn, "SELECT next_due_at <= now() FROM timers.timers WHERE name = 'import_ticks'"
        )
    )
    with conn.transaction():
        result = scalar(conn, "SELECT timers._fire('gone', '{}', '{}', false, 600000)")
        conn.execute("SELECT timers.enable('import_ticks', false)")
    conn.execute("RESET search_path")
    assert result["timer"] == "import_ticks" and result["ok"] is True, result
    due = result["due_at"]
    assert fired("candles") == []
    assert scalar(conn, "SELECT state FROM timers.follow_dues") == "ready"
    # two runners start: one of them runs the follower's due time, once
    first, second = start_runner(), start_runner()
    wait_until(lambda: fired("candles"), timeout=20, what=first.log)
    wait_until(
        lambda: scalar(conn, "SELECT count(*) FROM timers.follow_dues WHERE state <> 'done'") == 0
    )
    first.stop()
    second.stop()
    assert fired("candles") == [("candles", due)]


def test_a_follower_whose_run_dies_with_its_runner_runs_once_on_another(
    conn: psycopg.Connection, fired: Fired, start_runner: StartRunner
) -> None:
    # the follower's runs wait while the gate has a row
    conn.execute("CREATE TABLE gate (x int)")
    conn.execute("INSERT INTO gate VALUES (1)")
    with conn.transaction():
        save(conn, "import_ticks", "every 1s", LOG_SQL)
        save(
            conn,
            "candles",
            "after",
            "SELECT pg_sleep(CASE WHEN EXISTS (SELECT FROM public.gate) THEN 30 ELSE 0 END); "
            + LOG_SQL,
            after=["import_ticks"],
        )
    dying = start_runner()
    # the follower's first due time is running: the runner dies, and its session with it
    backend = wait_until(
        lambda: conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgtimers: candles'"
            " AND state = 'active'"
        ).fetchone(),
        timeout=20,
        what=dying.log,
    )[0]
    conn.execute("SELECT timers.enable('import_ticks', false)")
    dying.kill()
    conn.execute("SELECT pg_terminate_backend(%s)", [backend])
    running = scalar(
        conn, "SELECT array_agg(timers._iso(due_at)) FROM timers.follow_dues WHERE state = 'ready'"
    )
    assert running, "the due time that was running is still to run"
    conn.execute("DELETE FROM gate")
    after = start_runner()
    wait_until(
        lambda: scalar(conn, "SELECT count(*) FROM timers.follow_dues WHERE state <> 'done'") == 0,
        timeout=20,
        what=after.log,
    )
    after.stop()
    dues = [d for _, d in fired("candles")]
    assert len(dues) == len(set(dues)), dues
    assert set(running) <= set(dues)
