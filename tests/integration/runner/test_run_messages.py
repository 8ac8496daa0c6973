"""A run's messages: the NOTICE, INFO and WARNING messages its SQL raised, then its
error's DETAIL and HINT, kept with its timers.runs row and its failed event (the first
8 KB, then a line that says how much was cut); DEBUG and LOG are not kept, and a session
that is not a runner's hears nothing new."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.conftest import Database, scalar
from tests.integration.runner.conftest import save
from tests.integration.runner.test_autonomous import Owner, drop_owner, make_owner, save_autonomous
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]

# A function a timer calls: messages of every level, DEBUG and LOG sent to the client too
# (so that the runner, not the server, must leave them out)
CHATTY = """
CREATE FUNCTION public.chatty() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('client_min_messages', 'debug1', true);
    RAISE NOTICE 'step 1 of 3';
    RAISE DEBUG 'a debug line';
    RAISE INFO 'step 2 of 3';
    RAISE LOG 'a log line';
    RAISE WARNING 'step 3: % rows look odd', 2 USING DETAIL = 'ids 4 and 7', HINT = 'look';
END $$"""

FAILING = """
CREATE FUNCTION public.failing() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'about to load';
    RAISE EXCEPTION 'the load failed'
        USING DETAIL = 'file /x/y.csv: line 3', HINT = 'Fix the file and run it again.';
END $$"""

# 100 notices of 200 characters: about 20 KB
LOUD = """
CREATE FUNCTION public.loud() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..100 LOOP
        RAISE NOTICE '%', lpad(i::text, 200, 'é');
    END LOOP;
END $$"""

CHATTY_SAID = (
    "NOTICE: step 1 of 3\n"
    "INFO: step 2 of 3\n"
    "WARNING: step 3: 2 rows look odd\n"
    "DETAIL: ids 4 and 7\n"
    "HINT: look"
)
FAILING_SAID = (
    "NOTICE: about to load\nDETAIL: file /x/y.csv: line 3\nHINT: Fix the file and run it again."
)


@pytest.fixture
def owner(conn: psycopg.Connection, tmp_path: Path) -> Iterator[Owner]:
    """A login role that owns autonomous timers, reachable by password."""
    name = f"pgt_said_{os.getpid()}"
    make_owner(conn, name, tmp_path / "pgpass")
    yield Owner(name, tmp_path / "pgpass")
    drop_owner(conn, name)


def said(
    conn: psycopg.Connection, name: str, count: int = 1, expect: list[str] | None = None
) -> list[str]:
    """The messages of the timer's first `count` runs, once each has some; with `expect`,
    once they are that (the runner writes a run's notices a moment after its row, which
    may have its error's DETAIL and HINT already), or what they are after 20 s."""
    deadline = time.monotonic() + 20
    while True:
        rows = conn.execute(
            "SELECT messages FROM timers.runs WHERE timer = %s AND kind <> 'skipped'"
            " AND ok IS NOT NULL ORDER BY id",
            [name],
        ).fetchall()
        got = [r[0] for r in rows[:count]]
        if len(got) == count and all(got) and (expect is None or got == expect):
            return got
        if time.monotonic() > deadline:
            assert len(got) == count, f"{len(got)} runs of {name}"
            return got
        time.sleep(0.05)


def runs(conn: psycopg.Connection, name: str) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT id, kind, ok, messages FROM timers.runs WHERE timer = %s AND kind <> 'skipped'"
            " AND ok IS NOT NULL ORDER BY id",
            [name],
        ).fetchall()


def test_notice_info_and_warning_are_kept_in_order_and_debug_and_log_are_not(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    conn.execute(CHATTY)
    save(conn, "chatty", "in 1s", "SELECT public.chatty()")
    start_runner()
    assert said(conn, "chatty", expect=[CHATTY_SAID]) == [CHATTY_SAID]


def test_an_errors_detail_and_hint_follow_its_notices_in_the_run_and_its_failed_event(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    conn.execute(FAILING)
    save(conn, "failing", "in 1s", "SELECT public.failing()")
    start_runner()
    assert said(conn, "failing", expect=[FAILING_SAID]) == [FAILING_SAID]
    [run] = runs(conn, "failing")
    assert run["ok"] is False
    event = wait_until(
        lambda: conn.execute(
            "SELECT run_id, messages FROM timers.events WHERE event = 'failed' AND timer = %s"
            " AND messages <> ''",
            ["failing"],
        ).fetchone(),
        what="the failed event's messages",
    )
    assert event == (run["id"], FAILING_SAID)


def test_an_error_without_notices_keeps_its_detail_and_hint_in_the_run_and_event(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    save(conn, "bad_cast", "in 1s", "SELECT '{\"a\": 1'::jsonb")
    start_runner()
    [kept] = said(conn, "bad_cast")
    assert kept.startswith("DETAIL: ") and "\n" not in kept, kept  # jsonb's DETAIL, no HINT
    assert (
        scalar(
            conn, "SELECT messages FROM timers.events WHERE event = 'failed' AND timer = 'bad_cast'"
        )
        == kept
    )


def test_a_backfills_runs_keep_their_messages_and_so_does_their_failed_event(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    conn.execute(FAILING)
    save(conn, "b", "hourly", "SELECT public.failing()", enabled=False)
    to_at = scalar(conn, "SELECT date_trunc('hour', now()) - interval '1 hour'")
    conn.execute(
        "SELECT timers.backfill('b', %s::timestamptz - interval '2 hours', %s)", [to_at, to_at]
    )
    start_runner()
    want = [FAILING_SAID, FAILING_SAID]
    assert said(conn, "b", count=2, expect=want) == want
    pairs = wait_until(
        lambda: (
            (
                rows := conn.execute(
                    "SELECT e.messages, r.kind FROM timers.events e"
                    " JOIN timers.runs r ON r.id = e.run_id"
                    " WHERE e.event = 'failed' AND e.timer = 'b' AND e.messages <> '' ORDER BY e.id"
                ).fetchall()
            )[1:]
            and rows
        ),
        what="the backfill's failed events' messages",
    )
    assert pairs == [(FAILING_SAID, "backfill"), (FAILING_SAID, "backfill")]


def test_more_than_8_kb_is_cut_with_a_line_that_says_how_much(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    conn.execute(LOUD)
    save(conn, "loud", "in 1s", "SELECT public.loud()")
    start_runner()
    [kept] = said(conn, "loud")
    whole = "\n".join("NOTICE: " + str(i).rjust(200, "é") for i in range(1, 101))
    head, _, last = kept.rpartition("\n")
    assert len(head.encode()) <= 8192 < len(head.encode()) + 3  # 8 KB, never half an é
    assert whole.startswith(head)
    match = re.fullmatch(r"… \[([\d,]+) more bytes cut\]", last)
    assert match, last
    assert int(match.group(1).replace(",", "")) == len(whole.encode()) - len(head.encode())


def test_a_run_that_says_nothing_keeps_nothing_and_its_row_is_not_written_again(
    db: Database, conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    save(conn, "quiet", "every 1s", "SELECT 1")
    start_runner()
    wait_until(lambda: len(runs(conn, "quiet")) >= 3, what="three runs")
    assert {r["messages"] for r in runs(conn, "quiet")} == {""}

    def stats() -> tuple[int, int] | None:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT n_tup_ins, n_tup_upd FROM pg_stat_user_tables"
            " WHERE schemaname = 'timers' AND relname = 'runs'"
        ).fetchone()
        return (int(row[0]), int(row[1])) if row and row[0] >= 3 else None

    _inserted, updated = wait_until(stats, what="the runs' inserts in the statistics")
    assert updated == 0


def test_a_session_that_is_not_a_runners_hears_no_mark_of_a_run(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    conn.execute(CHATTY)
    save(conn, "direct", "in 1s", "SELECT public.chatty()")
    heard: list[tuple[str, str]] = []
    conn.add_notice_handler(lambda d: heard.append((d.sqlstate or "", d.message_primary or "")))
    wait_until(
        lambda: scalar(conn, "SELECT fire_at <= now() FROM timers.timers WHERE name = 'direct'"),
        what="the due time",
    )
    # the run's own routine, called in this session: it hears the run's own messages only
    with conn.transaction():
        conn.execute(
            "SELECT timers._run_due(id, next_due_at, 'psql')"
            " FROM timers.timers WHERE name = 'direct'"
        )
    assert ("00000", "step 1 of 3") in heard
    assert not [h for h in heard if h[0] == "PGT01" or "pgtimers: run" in h[1]], heard
    # CALL timers.run waits for a runner: its session hears nothing of the run
    heard.clear()
    start_runner()
    conn.execute("CALL timers.run('direct')")
    assert heard == [], heard
    # and the run in this session kept none (nobody heard them for it), the runner's all
    messages = wait_until(
        lambda: (m := [r["messages"] for r in runs(conn, "direct")])[1:] and m[1] and m,
        what="the run-now's messages",
    )
    assert messages == ["", CHATTY_SAID]


def test_an_autonomous_runs_notices_and_its_errors_detail_and_hint_are_kept(
    db: Database, conn: psycopg.Connection, owner: Owner, start_runner: StartRunner
) -> None:
    with db.connect(owner.name) as mine:
        mine.execute(CHATTY)
        mine.execute(FAILING)
        save_autonomous(mine, "auto_ok", "in 1s", "SELECT 1; SELECT public.chatty()")
        save_autonomous(mine, "auto_failing", "in 1s", "SELECT public.failing()")
    start_runner(env=owner.env)
    assert said(conn, "auto_ok", expect=[CHATTY_SAID]) == [CHATTY_SAID]
    assert said(conn, "auto_failing", expect=[FAILING_SAID]) == [FAILING_SAID]
    assert [r["ok"] for r in runs(conn, "auto_ok") + runs(conn, "auto_failing")] == [True, False]


SPOOF = """
CREATE FUNCTION public.spoof() RETURNS void LANGUAGE plpgsql AS $$
DECLARE v_other text;
BEGIN
    SELECT r.timer_id || ' ' || r.started_at INTO v_other FROM timers.runs r WHERE r.timer = 'b';
    RAISE NOTICE 'pgtimers: run' USING ERRCODE = 'PGT01', DETAIL = v_other;
    RAISE NOTICE 'after';
END $$"""


def test_a_run_cannot_pass_its_messages_off_as_another_runs(
    conn: psycopg.Connection, start_runner: StartRunner
) -> None:
    conn.execute(SPOOF)
    save(conn, "b", "every 1h", "SELECT 1")
    conn.execute(
        "INSERT INTO timers.runs (timer_id, timer, kind, started_at, ok)"
        " SELECT id, name, 'scheduled', now() - interval '1 minute', true"
        " FROM timers.timers WHERE name = 'b'"
    )
    other = scalar(conn, "SELECT timer_id FROM timers.runs WHERE timer = 'b'")
    save(conn, "a", "in 1s", "SELECT public.spoof()")
    start_runner()
    [kept] = said(conn, "a")
    # its own messages, the sham among them; the other timer's run untouched
    assert re.fullmatch(rf"NOTICE: pgtimers: run\nDETAIL: {other} \S.*\nNOTICE: after", kept), kept
    assert conn.execute("SELECT messages FROM timers.runs WHERE timer = 'b'").fetchall() == [("",)]


def test_the_cut_keeps_8_kb_of_whole_characters_and_counts_what_went_before(
    conn: psycopg.Connection,
) -> None:
    def cut(text: str | None, more: int = 0) -> str:
        return str(scalar(conn, "SELECT timers._messages_cut(%s, %s)", [text, more]))

    assert cut(None) == "" and cut("") == ""
    exact = "x" * 8192
    assert cut(exact) == exact  # 8 KB is kept whole
    assert cut("x" * 8193) == exact + "\n… [1 more bytes cut]"
    # 3-byte characters: 2,730 of them are 8,190 bytes, the next would be 8,193
    euros = "€" * 4000
    assert cut(euros) == "€" * 2730 + "\n… [3,810 more bytes cut]"
    # bytes the runner cut already count too, also when what came is short
    assert cut("NOTICE: a", 12345) == "NOTICE: a\n… [12,345 more bytes cut]"
    assert scalar(conn, "SELECT timers._error_said('', NULL)") == ""
    assert scalar(conn, "SELECT timers._error_said(NULL, 'do x')") == "HINT: do x"
