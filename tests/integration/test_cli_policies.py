"""The run policies and backfills from the CLI: `pgtimers save --retries …`, what `show`,
`list` and `history` print of them, `pgtimers backfill [--wait]`, `backfills` and
`cancel-backfill`; each bad value exits 2 naming its option and changes nothing."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from pgtimers.cli.main import main
from tests.conftest import Database, scalar
from tests.integration.runner.conftest import start_runner  # noqa: F401 (a fixture)
from tests.support.runner import RunnerProcess

StartRunner = Callable[..., RunnerProcess]
# fails on a due time's first attempt, succeeds on its retry
SECOND_TIME_LUCKY = "SELECT 1 / (current_setting('pgtimers.attempt')::int - 1)"


def cli(db: Database, *args: str) -> subprocess.CompletedProcess[str]:
    """`pgtimers ARGS --dsn DSN`, run in this process (the CLI's own process start is
    tested by test_cli.py): its exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    argv = [*args, "--dsn", db.dsn]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exited:  # argparse's usage errors
            code = exited.code if isinstance(exited.code, int) else 2
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def shown(db: Database, name: str) -> dict[str, str]:
    """`pgtimers show NAME`'s `key: value` lines."""
    result = cli(db, "show", name)
    assert result.returncode == 0, result.stderr
    return dict(re.findall(r"^ *([a-z_0-9]+): (.*)$", result.stdout, re.M))


def test_save_with_every_policy_and_show_them(db: Database) -> None:
    saved = cli(
        db, "save", "t", "every 10m", "SELECT 1", "--retries", "3", "--retry-delay",
        "10 seconds", "--pause-after", "5", "--jitter", "1 minute", "--priority", "-9",
    )  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    body = json.loads(saved.stdout)
    assert {
        k: body[k] for k in ("retries", "retry_delay", "pause_after", "jitter", "priority")
    } == {
        "retries": 3,
        "retry_delay": "00:00:10",
        "pause_after": 5,
        "jitter": "00:01:00",
        "priority": -9,
    }
    lines = shown(db, "t")
    assert lines["retries"] == "3" and lines["retry_delay"] == "00:00:10"
    assert lines["pause_after"] == "5" and lines["jitter"] == "00:01:00"
    assert lines["priority"] == "-9" and lines["paused_ms"] == "-"

    # saved again without them: the defaults
    again = json.loads(cli(db, "save", "t", "every 10m", "SELECT 1").stdout)
    assert (again["retries"], again["retry_delay"], again["pause_after"]) == (0, "00:00:30", None)
    assert (again["jitter"], again["priority"]) == (None, 0)
    assert shown(db, "t")["pause_after"] == "-"


def test_save_with_a_catch_up_window_and_show_it(db: Database) -> None:
    saved = cli(db, "save", "t", "daily 06:00", "SELECT 1", "--catch-up-window", "2 hours")
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout)["catch_up_window"] == "02:00:00"
    assert shown(db, "t")["catch_up_window"] == "02:00:00"
    again = json.loads(cli(db, "save", "t", "daily 06:00", "SELECT 1").stdout)
    assert again["catch_up_window"] is None


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--retries", "x"), "argument --retries: 'x' is not a whole number"),
        (("--retries", "101"), "bad retries 101: use 0"),
        (("--retries", "-1"), "bad retries -1"),
        (("--retries", "99999999999"), "argument --retries: '99999999999' is out of range"),
        (("--retry-delay", "soon"), "bad --retry-delay: 'soon' (invalid input syntax for type"),
        (("--retry-delay", "2 hours"), "bad retry_delay '02:00:00': use 1 second to 1 hour"),
        (("--retry-delay", "0"), "bad retry_delay '00:00:00'"),
        (("--pause-after", "0"), "bad pause_after 0"),
        (("--pause-after", "many"), "argument --pause-after: 'many' is not a whole number"),
        (("--jitter", "-1 second"), "bad jitter '-00:00:01'"),
        (("--jitter", "later"), "bad --jitter: 'later' (invalid input syntax for type interval"),
        (("--jitter", "10 minutes"), "must be less than the 00:10:00 between"),
        (("--priority", "101"), "bad priority 101: use -100 to 100"),
        (("--priority", "1.5"), "argument --priority: '1.5' is not a whole number"),
        (("--start-at", "someday"), "bad --start-at: 'someday' (invalid input syntax"),
        (("--timeout", "forever"), "bad --timeout: 'forever'"),
        (("--catch-up-window", "-1 minute"), "bad catch_up_window '-00:01:00'"),
        (("--catch-up-window", "2 years"), "bad catch_up_window '2 years'"),
        (("--catch-up-window", "soon"), "bad --catch-up-window: 'soon' (invalid input syntax"),
    ],
)
def test_a_bad_value_exits_2_naming_it_and_changes_nothing(
    db: Database, conn: psycopg.Connection, flags: tuple[str, ...], message: str
) -> None:
    assert cli(db, "save", "t", "every 10m", "SELECT 1", "--retries", "2").returncode == 0
    before = scalar(conn, "SELECT to_jsonb(t) FROM timers.timers t")
    audit = scalar(conn, "SELECT count(*) FROM timers.audit")
    result = cli(db, "save", "t", "every 10m", "SELECT 2", *flags)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""
    assert scalar(conn, "SELECT to_jsonb(t) FROM timers.timers t") == before
    assert scalar(conn, "SELECT count(*) FROM timers.audit") == audit


def test_retries_and_a_pause_show_in_history_and_list(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,  # noqa: F811
) -> None:
    conn.execute("SELECT timers.create_test_clock('c', '2027-01-04 09:00Z')")
    lucky = cli(
        db, "save", "lucky", "every 1h", SECOND_TIME_LUCKY, "--test-clock", "c",
        "--retries", "1", "--retry-delay", "1 minute",
    )  # fmt: skip
    assert lucky.returncode == 0, lucky.stderr
    fails = cli(
        db, "save", "fails", "every 1h", "SELECT 1 / 0", "--test-clock", "c", "--pause-after", "1"
    )
    assert fails.returncode == 0, fails.stderr
    start_runner()
    conn.execute("CALL timers.advance_test_clock('c', '2027-01-04 10:30Z')")

    history = cli(db, "history", "lucky")
    assert history.returncode == 0, history.stderr
    header, _rule, *rows = history.stdout.splitlines()
    assert header.split()[:3] == ["started", "kind", "attempt"]
    assert [row.split()[1:3] for row in rows] == [["retry", "2"], ["scheduled", "1"]]

    listed = cli(db, "list").stdout
    fails_row = next(line for line in listed.splitlines() if line.startswith("fails"))
    assert " paused " in fails_row
    lucky_row = next(line for line in listed.splitlines() if line.startswith("lucky"))
    assert " on " in lucky_row
    assert shown(db, "fails")["paused_ms"] != "-"  # when it was paused


def _range(conn: psycopg.Connection, hours: int) -> tuple[str, str]:
    to_at: dt.datetime = scalar(conn, "SELECT date_trunc('hour', now())")
    return (to_at - dt.timedelta(hours=hours)).isoformat(), to_at.isoformat()


def test_backfill_list_and_cancel_without_a_runner(db: Database, conn: psycopg.Connection) -> None:
    assert cli(db, "save", "h", "hourly", "SELECT 1", "--disabled").returncode == 0
    from_at, to_at = _range(conn, 3)
    made = cli(db, "backfill", "h", from_at, to_at)
    assert made.returncode == 0, made.stderr
    found = re.fullmatch(
        r"backfill (\d+): 3 due times of timer h from \S+ \S+ to \S+ \S+, oldest first\n",
        made.stdout,
    )
    assert found, made.stdout
    ident = found.group(1)

    listed = cli(db, "backfills")
    assert listed.returncode == 0
    header, _rule, row = listed.stdout.splitlines()
    assert header.split() == ["id", "timer", "from", "to", "done", "failed", "state", "by",
                              "asked", "note"]  # fmt: skip
    assert row.split()[:2] == [ident, "h"] and " 0/3 " in row and " running " in row
    rows = json.loads(cli(db, "backfills", "H", "--json").stdout)
    assert [(r["id"], r["total"], r["state"]) for r in rows] == [(int(ident), 3, "running")]
    assert json.loads(cli(db, "backfills", "other", "--json").stdout) == []
    assert "no backfills yet" in cli(db, "backfills", "other").stdout

    cancelled = cli(db, "cancel-backfill", ident)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.startswith(f"backfill {ident} cancelled after 0/3 done, 0 failed")
    as_json = json.loads(cli(db, "cancel-backfill", ident, "--json").stdout)
    assert as_json["state"] == "cancelled" and as_json["next_at"] is None
    assert scalar(conn, "SELECT count(*) FROM timers.runs") == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("backfill", "h", "soon", "2020-01-01Z"), "bad FROM: 'soon' (invalid input syntax"),
        (("backfill", "h", "2020-01-01Z", "later"), "bad TO: 'later'"),
        (("backfill", "h", "2020-01-02Z", "2020-01-01Z"), "is not after from_at"),
        (("backfill", "h", "2020-01-01Z", "2999-01-01Z"), "is after now"),
        (("backfill", "h", "2000-01-01Z", "2020-01-01Z"), "more than 10000 due times"),
        (("backfill", "ghost", "2020-01-01Z", "2020-01-02Z"), "there is no timer 'ghost'"),
        (("backfill", "h", "2020-01-01Z"), "the following arguments are required: TO"),
        (("cancel-backfill", "99999"), "there is no backfill 99999"),
        (("cancel-backfill", "x"), "'x' is not a whole number of 1 or more"),
    ],
)
def test_bad_backfill_input_exits_2_and_makes_none(
    db: Database, conn: psycopg.Connection, args: tuple[str, ...], message: str
) -> None:
    assert cli(db, "save", "h", "hourly", "SELECT 1").returncode == 0
    result = cli(db, *args)
    assert result.returncode == 2, result.stdout
    assert message in result.stderr
    assert result.stdout == ""
    assert scalar(conn, "SELECT count(*) FROM timers.backfills") == 0


@pytest.mark.parametrize(
    ("sql", "code", "end"),
    [("SELECT 1", 0, "done: 3 ran, 0 failed"), ("SELECT 1 / 0", 1, "done: 3 ran, 3 failed")],
    ids=["ok", "failing"],
)
def test_backfill_wait_follows_it_to_its_end(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,  # noqa: F811
    sql: str,
    code: int,
    end: str,
) -> None:
    assert cli(db, "save", "h", "hourly", sql, "--disabled").returncode == 0
    start_runner()
    from_at, to_at = _range(conn, 3)
    result = cli(db, "backfill", "h", from_at, to_at, "--wait")
    assert result.returncode == code, result.stderr + result.stdout
    lines = result.stdout.splitlines()
    assert lines[0].startswith("backfill ") and ": 3 due times of timer h" in lines[0]
    assert re.fullmatch(r"backfill \d+ " + re.escape(end), lines[-1])
    assert all(re.fullmatch(r"  \d/3 done, \d failed", line) for line in lines[1:-1])
    assert lines[-2].strip().startswith("3/3 done")
    kinds = conn.execute("SELECT kind, count(DISTINCT due_at) FROM timers.runs GROUP BY kind")
    assert kinds.fetchall() == [("backfill", 3)]


def test_backfill_wait_json_prints_the_row_at_its_end(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,  # noqa: F811
) -> None:
    assert cli(db, "save", "h", "hourly", "SELECT 1").returncode == 0
    start_runner()
    from_at, to_at = _range(conn, 2)
    result = cli(db, "backfill", "h", from_at, to_at, "--wait", "--json")
    assert result.returncode == 0, result.stderr
    row: dict[str, Any] = json.loads(result.stdout)
    assert (row["state"], row["total"], row["done"], row["failed"]) == ("done", 2, 2, 0)


def test_help_of_the_backfill_commands() -> None:
    for command in ("backfill", "backfills", "cancel-backfill"):
        sub = subprocess.run(
            [sys.executable, "-m", "pgtimers", command, "--help"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "example" in sub.stdout
    top = subprocess.run(
        [sys.executable, "-m", "pgtimers", "save", "--help"], capture_output=True, text=True
    )
    for flag in ("--retries N", "--retry-delay INTERVAL", "--pause-after N", "--jitter INTERVAL",
                 "--priority N", "--catch-up-window INTERVAL"):  # fmt: skip
        assert flag in top.stdout
