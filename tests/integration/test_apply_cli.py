"""`pgtimers apply` against a real database: the plan, apply, --check on a drift made by
hand, --prune beside timers saved by hand and of another label, a locked timer, and
unchanged timers left untouched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.conftest import Database, scalar


def cli(db: Database, *args: str) -> subprocess.CompletedProcess[str]:
    """`pgtimers ARGS --dsn DB`, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "pgtimers", *args, "--dsn", db.dsn],
        capture_output=True,
        text=True,
        check=False,
    )


def write(folder: Path, name: str, text: str) -> str:
    """A file in `folder`; its path as text."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def names(conn: psycopg.Connection) -> dict[str, str | None]:
    """Every timer's name and managed_by."""
    rows = conn.execute("SELECT name, managed_by FROM timers.status ORDER BY name").fetchall()
    return dict(rows)


def _touched(conn: psycopg.Connection) -> tuple[int, int]:
    """The audit rows, and the sum of the timers' updated_ms."""
    audit = scalar(conn, "SELECT count(*) FROM timers.audit")
    updated = scalar(conn, "SELECT sum(updated_ms) FROM timers.status")
    return audit, updated


FIRST = """\
[[timer]]
name = "totals"
schedule = "every 5m"
sql = "SELECT 1"

[[timer]]
name = "nightly"
schedule = "daily 02:00"
sql_file = "sql/nightly.sql"
timezone = "UTC"
"""


def test_plan_apply_check_and_prune_beside_timers_saved_by_hand(
    db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    conn.execute("SELECT timers.save('by_hand', 'hourly', 'SELECT 2')")
    write(tmp_path, "sql/nightly.sql", "SELECT 3;\n")
    first = write(tmp_path, "timers.toml", FIRST)

    checked = cli(db, "apply", first, "--check")
    assert checked.returncode == 1, checked.stderr
    assert checked.stdout.splitlines()[:2] == ["+ create totals", "+ create nightly"]
    assert names(conn) == {"by_hand": None}  # --check changed nothing

    applied = cli(db, "apply", first)
    assert applied.returncode == 0, applied.stderr
    assert "applied: 2 create, 0 update, 0 delete, 0 unchanged" in applied.stdout
    assert names(conn) == {"by_hand": None, "nightly": "apply", "totals": "apply"}
    assert scalar(conn, "SELECT sql FROM timers.status WHERE name = 'nightly'") == "SELECT 3;\n"

    # unchanged: no audit row, no new updated_ms, and --check says all is well
    before = _touched(conn)
    again = cli(db, "apply", first)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[:2] == ["= unchanged totals", "= unchanged nightly"]
    assert cli(db, "apply", first, "--check").returncode == 0
    assert _touched(conn) == before

    # a drift made by hand: --check exits 1 and names it; apply puts it back
    conn.execute("SELECT timers.save('totals', 'every 1m', 'SELECT 1')")
    drift = cli(db, "apply", first, "--check")
    assert drift.returncode == 1
    assert "~ update totals: schedule 'every 1m' -> 'every 5m'" in drift.stdout
    assert "the database differs from the files" in drift.stdout
    assert cli(db, "apply", first).returncode == 0
    assert cli(db, "apply", first, "--check").returncode == 0
    assert scalar(conn, "SELECT schedule FROM timers.status WHERE name = 'totals'") == "every 5m"

    # a timer of another label is never pruned by this one
    other = write(tmp_path, "other.toml", FIRST.split("\n\n")[0].replace("totals", "theirs"))
    assert cli(db, "apply", other, "--managed-by", "billing").returncode == 0

    # nightly leaves the file: kept without --prune, deleted with it; by_hand and theirs stay
    second = write(tmp_path, "timers.toml", FIRST.split("\n\n")[0] + "\nretries = 3\n")
    kept = cli(db, "apply", second)
    assert kept.returncode == 0, kept.stderr
    assert "~ update totals: retries 0 -> 3" in kept.stdout and "nightly" not in kept.stdout
    assert "nightly" in names(conn)
    pruned = cli(db, "apply", second, "--prune", "--check")
    assert pruned.returncode == 1 and "- delete nightly" in pruned.stdout
    assert "by_hand" not in pruned.stdout and "theirs" not in pruned.stdout
    assert cli(db, "apply", second, "--prune").returncode == 0
    assert names(conn) == {"by_hand": None, "theirs": "billing", "totals": "apply"}


def test_the_plan_as_json(db: Database, tmp_path: Path) -> None:
    path = write(tmp_path, "t.toml", FIRST.split("\n\n")[0])
    body = json.loads(cli(db, "apply", path, "--json", "--check").stdout)
    assert body["applied"] is False
    (step,) = body["plan"]
    assert (step["action"], step["name"]) == ("create", "totals")
    body = json.loads(cli(db, "apply", path, "--json").stdout)
    assert body["applied"] is True and body["plan"][0]["action"] == "create"


def test_a_locked_timer_that_would_change_stops_the_apply(
    db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    totals, nightly = FIRST.split("\n\n")
    locked = totals + "\nlocked = true\n"
    nightly = nightly.replace('sql_file = "sql/nightly.sql"', 'sql = "SELECT 3"')
    path = write(tmp_path, "t.toml", locked + "\n" + nightly)
    assert cli(db, "apply", path).returncode == 0
    assert cli(db, "apply", path, "--check").returncode == 0  # locked and unchanged: fine

    new = '[[timer]]\nname = "new"\nschedule = "hourly"\nsql = "SELECT 4"\n'
    changed = write(tmp_path, "t.toml", locked.replace("every 5m", "every 10m") + "\n" + new)
    before = _touched(conn)
    refused = cli(db, "apply", changed)
    assert refused.returncode == 2
    assert f'{changed}:1: timer "totals": ' in refused.stderr
    assert "locked" in refused.stderr and "timers.unlock('totals')" in refused.stderr
    assert "nothing was changed" in refused.stderr
    assert "new" not in names(conn) and _touched(conn) == before
