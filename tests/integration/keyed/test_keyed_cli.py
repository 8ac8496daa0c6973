"""`pgtimers keyed` against a real database: the seed's text, --json, filters, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.conftest import Database
from tests.integration.http.conftest import PASSWORD as ROLE_PASSWORD
from tests.integration.keyed.conftest import Fired, advance, arm, call, keyed
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

CLOCK = "tc_7Hq4"
NOTICE = "clk_8Tx1#US:rung:notice 30d:2027@0"
NOTICE_NEXT = "clk_8Tx1#US:rung:notice 30d:2027@1"


def cli(db: Database, *args: str, dsn: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgtimers", "keyed", *args, "--dsn", dsn or db.dsn],
        capture_output=True,
        text=True,
        check=False,
    )


def _scene(conn: psycopg.Connection) -> None:
    """Two owners on one test clock: armed, held and superseded timers (no runner needed)."""
    conn.execute("SELECT timers.create_test_clock(%s, '2028-02-01 14:00Z')", [CLOCK])
    arm(conn, "job_4Tx9:deadline:late:2027", "2028-04-14 04:00Z", "SELECT 1", test_clock=CLOCK)
    arm(
        conn,
        "job_4Tx9:deadline:at_risk:2027",
        "2028-03-27 00:30Z",
        "SELECT 2",
        late_at="2028-04-14 04:00Z",
        test_clock=CLOCK,
    )
    call(conn, "hold", "job_4Tx9:deadline:at_risk:2027", "ask_9Ts4")
    arm(conn, NOTICE, "2028-03-19 14:00Z", "SELECT 3", place=6, test_clock=CLOCK)
    call(conn, "move", NOTICE, "2028-09-16 14:00Z")


@pytest.fixture
def scene(conn: psycopg.Connection) -> None:
    _scene(conn)


@pytest.fixture
def fired_scene(
    conn: psycopg.Connection, fired: Fired, start_runner: Callable[..., RunnerProcess]
) -> None:
    """The scene, plus a task owed at the clock's start that a real runner fires."""
    _scene(conn)
    arm(conn, "job_4Tx9:task:file:2027", "2028-02-01 14:00Z", test_clock=CLOCK)
    start_runner()
    # owed at the clock's time already: the runner may fire it before the advance does
    advance(conn, "2028-02-02 14:00Z", clock=CLOCK)
    wait_until(lambda: keyed(conn, "job_4Tx9:task:file:2027")["status"] == "fired")
    assert fired() == [("job_4Tx9:task:file:2027", "2028-02-01T14:00:00Z")]


def test_text_of_one_owner_as_the_seed(db: Database, fired_scene: None) -> None:
    result = cli(db, "--on", "job_4Tx9", "--test-clock", CLOCK)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    held_note = "held since 2028-02-01 14:00Z by ask_9Ts4 · remaining 54d 10h 30m"
    assert result.stdout.splitlines() == [
        "job_4Tx9 · 1 fired · 1 held · 1 armed"
        " · next job_4Tx9:deadline:late:2027 at 2028-04-14 04:00Z",
        "status  owed               fired              place  key                             note",
        "------  -----------------  -----------------  -----  ------------------------------"
        "  " + "-" * len(held_note),
        "fired   2028-02-01 14:00Z  2028-02-01 14:00Z  5      job_4Tx9:task:file:2027",
        "armed   2028-04-14 04:00Z  —                  5      job_4Tx9:deadline:late:2027",
        "held    —                  —                  5      job_4Tx9:deadline:at_risk:2027"
        "  " + held_note,
    ]


def test_every_owner_in_key_byte_order_with_superseded_rows(db: Database, scene: None) -> None:
    result = cli(db)
    assert result.returncode == 0, result.stderr
    blocks = result.stdout.rstrip("\n").split("\n\n")
    assert len(blocks) == 2
    clk, job = (block.splitlines() for block in blocks)
    assert clk[0] == (
        f"clk_8Tx1#US · 0 fired · 0 held · 1 armed · 1 superseded · next {NOTICE_NEXT}"
        " at 2028-09-16 14:00Z"
    )
    assert clk[3].split() == [
        *("superseded", "2028-03-19", "14:00Z", "—", "6"),
        *NOTICE.split(),
        *f"superseded by {NOTICE_NEXT} (by move)".split(),
    ]
    assert clk[4].split() == ["armed", "2028-09-16", "14:00Z", "—", "6", *NOTICE_NEXT.split()]
    assert job[0].startswith("job_4Tx9 · 0 fired · 1 held · 1 armed · next ")
    assert [line.split()[0] for line in job[3:]] == ["armed", "held"]


def test_status_filters_the_table_not_the_counts(db: Database, scene: None) -> None:
    result = cli(db, "--status", "held")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("job_4Tx9 · 0 fired · 1 held · 1 armed")
    assert len(lines) == 4 and lines[3].startswith("held ")
    superseded = cli(db, "--status", "superseded", "--on", "clk_8Tx1#US").stdout.splitlines()
    assert [line.split()[0] for line in superseded[3:]] == ["superseded"]
    # a table whose rows need no note has no note column
    armed = cli(db, "--status", "armed", "--on", "job_4Tx9").stdout.splitlines()
    assert armed[1].split() == ["status", "owed", "fired", "place", "key"]


def test_json_is_the_view_rows_in_tick_order(
    db: Database, conn: psycopg.Connection, scene: None
) -> None:
    result = cli(db, "--json", "--test-clock", CLOCK)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    expected = [
        r[0] for r in conn.execute("SELECT row_to_json(k) FROM timers.list_keyed() k").fetchall()
    ]
    assert rows == expected
    assert [r["key"] for r in rows] == [
        NOTICE,
        "job_4Tx9:deadline:late:2027",
        NOTICE_NEXT,
        "job_4Tx9:deadline:at_risk:2027",
    ]
    # every column of the view, in its order: a column it gains shows by itself
    cur = conn.execute("SELECT * FROM timers.keyed LIMIT 0")
    assert cur.description is not None
    assert list(rows[0]) == [c.name for c in cur.description]
    held = json.loads(cli(db, "--json", "--status", "held").stdout)
    assert [r["key"] for r in held] == ["job_4Tx9:deadline:at_risk:2027"]
    assert held[0]["owed_at"] is None and held[0]["held_by"] == "ask_9Ts4"
    assert held[0]["sql"] == "SELECT 2"


def role_dsn(db: Database, role: str) -> str:
    """A DSN that logs in as `role` (a password, for servers that check one, like Debian's)."""
    with db.connect() as su:
        su.execute(
            sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(ROLE_PASSWORD)
            )
        )
    return make_conninfo(db.dsn, user=role, password=ROLE_PASSWORD)


def test_a_reader_sees_no_sql_of_others(db: Database, scene: None) -> None:
    reader = role_dsn(db, "pgt_reader")
    rows = json.loads(cli(db, "--json", "--on", "job_4Tx9", dsn=reader).stdout)
    assert len(rows) == 2 and all(r["sql"] is None for r in rows)
    text = cli(db, "--on", "job_4Tx9", dsn=reader)
    assert text.returncode == 0 and "job_4Tx9 · 0 fired · 1 held" in text.stdout


def test_an_owner_without_timers_says_so_and_exits_0(db: Database, scene: None) -> None:
    result = cli(db, "--on", "job_none")
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr.strip() == "no keyed timers on job_none"
    filtered = cli(db, "--on", "job_4Tx9", "--status", "fired", "--test-clock", CLOCK)
    assert (filtered.returncode, filtered.stdout) == (0, "")
    assert filtered.stderr.strip() == (
        f"no keyed timers on job_4Tx9 with status fired on test clock {CLOCK}"
    )
    empty = cli(db, "--on", "job_none", "--json")
    assert (empty.returncode, json.loads(empty.stdout), empty.stderr) == (0, [], "")


def test_no_keyed_timers_at_all(db: Database) -> None:
    result = cli(db)
    assert (result.returncode, result.stdout, result.stderr.strip()) == (0, "", "no keyed timers")


def test_bad_status_is_a_usage_error_naming_the_states(db: Database) -> None:
    result = cli(db, "--status", "pending")
    assert result.returncode == 2 and result.stdout == ""
    assert "invalid choice: 'pending'" in result.stderr
    assert "'armed', 'fired', 'superseded', 'held', 'void'" in result.stderr


def test_a_database_error_exits_2_with_the_message(db: Database) -> None:
    nobody = role_dsn(db, "pgt_nobody")
    result = cli(db, "--on", "job_4Tx9", dsn=nobody)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("pgtimers: permission denied")


def test_held_state_read_back_matches_the_view(conn: psycopg.Connection, scene: None) -> None:
    row = keyed(conn, "job_4Tx9:deadline:at_risk:2027")
    assert (row["status"], row["held_by"], str(row["remaining"])) == (
        "held",
        "ask_9Ts4",
        "54 days, 10:30:00",
    )
