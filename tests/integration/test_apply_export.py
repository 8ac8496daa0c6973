"""`pgtimers export` and calendars: an export applied back is a plan of unchanged only,
and the complete example of docs/timers-as-code.md applies."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg

from tests.conftest import Database, scalar
from tests.integration.test_apply_cli import cli, names, write

ROOT = Path(__file__).resolve().parents[2]
_EXAMPLE = re.compile(
    r"<!-- applied by tests/integration/test_apply_export.py -->\n```toml\n(.*?)^```",
    re.MULTILINE | re.DOTALL,
)

CALENDARS = """\
[[calendar]]
name = "nepse"
week = "sun-thu"
valid_from = 2026-01-01

[[calendar.weeks]]
from_day = 2026-07-01
week = "mon-fri"

[[calendar.holidays]]
day = 2026-12-25
note = "Christmas"

[[calendar.trading_days]]
day = 2026-12-26
note = "make-up day"
"""


def test_an_export_applied_back_is_unchanged_only(
    db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    conn.execute("SELECT timers.save('plain', 'every 5m', 'SELECT 1')")
    conn.execute(
        """SELECT timers.save('rich', 'daily 02:00', E'SELECT ''a\\\\b'', "q"\n  FROM pg_class\n',
             enabled => false, timezone => 'Asia/Kathmandu', catch_up => 'latest',
             start_at => '2027-01-01 00:00Z', end_at => '2028-01-01 00:00Z', max_runs => 5,
             timeout => '20 minutes', retries => 3, retry_delay => '1 minute',
             pause_after => 4, jitter => '10 seconds', priority => -5,
             catch_up_window => '2 hours', deadline => '1 hour', history => 'failures')"""
    )
    # three quotes in a row and a carriage return: written as a basic string with escapes
    quoted = "SELECT 'it''''s' AS q,\n\t'\\' AS \"b\"\r\n"
    conn.execute("SELECT timers.save('quoted', 'hourly', %s)", [quoted])
    conn.execute("SELECT timers.save('vacuum', 'sun 03:00', 'VACUUM', autonomous => true)")

    # timers saved by hand: their export applies as unchanged (a label is no change by
    # itself), and they stay saved by hand
    exported = cli(db, "export")
    assert exported.returncode == 0, exported.stderr
    assert "[[timer]]" in exported.stdout and 'name = "rich"' in exported.stdout
    assert "retry_delay" not in exported.stdout.split('name = "plain"')[1].split("[[")[0]
    path = write(tmp_path, "export.toml", exported.stdout)
    plan = json.loads(cli(db, "apply", path, "--check", "--json").stdout)["plan"]
    assert {s["action"] for s in plan} == {"unchanged"}
    assert cli(db, "apply", path).returncode == 0
    assert scalar(conn, "SELECT count(*) FROM timers.timers WHERE managed_by IS NOT NULL") == 0

    # and a locked one the files declare
    sealed = '[[timer]]\nname = "sealed"\nschedule = "hourly"\nsql = "SELECT 2"\nlocked = true\n'
    assert cli(db, "apply", write(tmp_path, "sealed.toml", sealed)).returncode == 0

    exported = cli(db, "export")
    path = write(tmp_path, "export.toml", exported.stdout)
    checked = cli(db, "apply", path, "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    lines = checked.stdout.splitlines()[:-1]
    assert sorted(lines) == [f"= unchanged {n}" for n in sorted(names(conn))]

    only = cli(db, "export", "--timer", "r?c*")
    assert only.returncode == 0 and 'name = "rich"' in only.stdout
    assert 'name = "plain"' not in only.stdout


def test_calendars_apply_and_export_back(
    db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    path = write(tmp_path, "cal.toml", CALENDARS)
    applied = cli(db, "apply", path)
    assert applied.returncode == 0, applied.stderr
    assert scalar(conn, "SELECT timers.is_trading_day('nepse', '2026-12-25')") is False
    assert scalar(conn, "SELECT timers.is_trading_day('nepse', '2026-12-26')") is True
    assert scalar(conn, "SELECT timers.is_trading_day('nepse', '2026-07-03')") is True  # a fri
    assert cli(db, "apply", path, "--check").returncode == 0

    exported = write(tmp_path, "export.toml", cli(db, "export").stdout)
    assert cli(db, "apply", exported, "--check").returncode == 0
    changed = write(tmp_path, "cal.toml", CALENDARS.replace("2026-12-25", "2026-12-24"))
    assert cli(db, "apply", changed, "--check").returncode == 1


def test_the_example_of_the_docs_applies(
    db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    doc = (ROOT / "docs" / "timers-as-code.md").read_text(encoding="utf-8")
    found = _EXAMPLE.search(doc)
    assert found, "docs/timers-as-code.md: the complete example"
    conn.execute(
        """CREATE TABLE sales (shop text, amount numeric);
           CREATE TABLE shop_totals (shop text PRIMARY KEY, amount numeric, updated timestamptz);
           CREATE TABLE reports (day date, total numeric);
           CREATE PROCEDURE refresh_shop_totals() LANGUAGE sql AS $$ SELECT 1 $$"""
    )
    write(tmp_path, "sql/nightly_report.sql", "CALL refresh_shop_totals();\n")
    path = write(tmp_path, "timers.toml", found.group(1))
    applied = cli(db, "apply", path)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.count("+ create") >= 4
    assert set(names(conn).values()) == {"shop"}
    assert cli(db, "apply", path, "--check").returncode == 0


def test_an_export_with_followers_applies_back_in_their_order(
    db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    # names that an export lists before the timers they follow
    conn.execute("SELECT timers.save('zeta', 'every 5m', 'SELECT 1')")
    conn.execute("SELECT timers.save('beta', 'after', 'SELECT 2', after => ARRAY['zeta'])")
    conn.execute("SELECT timers.save('alpha', 'after', 'SELECT 3', after => ARRAY['beta', 'zeta'])")
    exported = cli(db, "export")
    assert exported.returncode == 0, exported.stderr
    assert 'after = ["beta", "zeta"]' in exported.stdout
    path = write(tmp_path, "export.toml", exported.stdout)
    plan = json.loads(cli(db, "apply", path, "--check", "--json").stdout)["plan"]
    assert {s["action"] for s in plan} == {"unchanged"}
    # on a database without them: created, each after what it follows
    for name in ("alpha", "beta", "zeta"):
        conn.execute("SELECT timers.delete(%s)", [name])
    applied = cli(db, "apply", path)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    follows = "SELECT timers._follow_names(id) FROM timers.timers WHERE name = %s"
    assert scalar(conn, follows, ["alpha"]) == ["beta", "zeta"]
    assert scalar(conn, follows, ["beta"]) == ["zeta"]
    # a changed list is an update that says so
    changed = Path(path).read_text().replace('after = ["beta", "zeta"]', 'after = ["zeta"]')
    plan = json.loads(cli(db, "apply", write(tmp_path, "changed.toml", changed), "--json").stdout)[
        "plan"
    ]
    updated = {s["name"]: s["changes"] for s in plan if s["action"] == "update"}
    assert updated == {"alpha": {"after": {"from": ["beta", "zeta"], "to": ["zeta"]}}}
    # pruned together: the followers go first
    pruned = cli(db, "apply", write(tmp_path, "empty.toml", "managed_by = 'apply'\n"), "--prune")
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0
