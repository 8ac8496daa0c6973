"""The pgtimers CLI against a real database: output, exit codes, errors on stderr."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from pgtimers.cli.main import main as cli_main
from tests.conftest import Database


def cli(db: Database, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgtimers", *args, "--dsn", db.dsn],
        capture_output=True,
        text=True,
        check=False,
    )


def test_save_list_show_disable_delete(db: Database) -> None:
    saved = cli(db, "save", "shop_totals", "every 5m", "SELECT 1", "--timezone", "UTC")
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout)["schedule"] == "every 5m"

    listed = cli(db, "list")
    assert listed.returncode == 0
    header, _rule, row = listed.stdout.splitlines()
    assert header.split() == [
        "name",
        "schedule",
        "state",
        "next",
        "run",
        "last",
        "run",
        "result",
        "last",
        "error",
    ]
    # (`every 5m` falls on the clock's 5-minute marks: saved within a second of one, the
    # next run is "now")
    assert row.startswith("shop_totals") and ("in " in row or " now " in row) and " on " in row

    body = json.loads(cli(db, "list", "--json").stdout)
    assert set(body) == {"now_ms", "timers"} and body["timers"][0]["name"] == "shop_totals"

    shown = cli(db, "show", "shop_totals")
    assert shown.returncode == 0 and "next due times:" in shown.stdout
    upcoming = shown.stdout.split("next due times:")[1]
    assert len(re.findall(r"T\d\d:[0-5][05]:00\+00:00", upcoming)) == 5

    off = cli(db, "disable", "shop_totals")
    assert off.returncode == 0 and json.loads(off.stdout)["enabled"] is False
    assert " off " in cli(db, "list").stdout

    gone = cli(db, "delete", "shop_totals")
    assert gone.returncode == 0 and json.loads(gone.stdout) == {"deleted": True}
    assert "no timers yet" in cli(db, "list").stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("save", "x", "every day", "SELECT 1"), 'bad "every" schedule'),
        (("save", "bad name", "hourly", "SELECT 1"), "bad timer name"),
        (("show", "missing"), "there is no timer 'missing'"),
        (("delete", "missing"), "there is no timer 'missing'"),
        (("history", "missing"), "there is no timer 'missing'"),
        (("next", "cron 61 * * * *"), "minute"),
        (("next", "hourly", "-n", "0"), "not a whole number of 1 or more"),
        (("save", "x", "hourly", "SELECT 1", "--catch-up", "some"), "invalid choice"),
    ],
)
def test_bad_input_exits_2_with_the_error_on_stderr(
    db: Database, args: tuple[str, ...], message: str
) -> None:
    result = cli(db, *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_save_after_and_delete_cascade(db: Database) -> None:
    assert cli(db, "save", "ticks", "every 1m", "SELECT 1").returncode == 0
    assert cli(db, "save", "prices", "every 1m", "SELECT 1").returncode == 0
    saved = cli(db, "save", "candles", "after", "SELECT 1", "--after", "ticks,prices")
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout)["schedule"] == "after"
    again = cli(db, "save", "report", "after", "SELECT 1", "--after", "ticks", "--after", "candles")
    assert again.returncode == 0, again.stderr
    refused = cli(db, "delete", "ticks")
    assert refused.returncode != 0
    assert "timer 'ticks' is followed by 'candles', 'report'" in refused.stderr
    assert cli(db, "delete", "ticks", "--cascade").returncode == 0
    assert "ticks" not in cli(db, "list").stdout
    assert "report" in cli(db, "list").stdout


def test_next_previews_in_the_zone(db: Database) -> None:
    result = cli(db, "next", "sun-thu 11:00", "-n", "3", "--timezone", "Asia/Kathmandu")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert all(line.endswith("11:00:00 Asia/Kathmandu") for line in lines)
    assert all(line[:3] in {"Sun", "Mon", "Tue", "Wed", "Thu"} for line in lines)


def test_next_as_json(db: Database) -> None:
    result = cli(db, "next", "daily 09:30", "-n", "2", "--timezone", "Asia/Kathmandu", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [set(r) for r in rows] == [{"at", "local"}, {"at", "local"}]
    assert all(r["local"].endswith("09:30:00 Asia/Kathmandu") for r in rows)
    assert all(r["at"].endswith("+00:00") for r in rows)


def test_show_prints_yes_no_and_dashes(db: Database) -> None:
    assert cli(db, "save", "t", "every 5m", "SELECT 1").returncode == 0
    shown = cli(db, "show", "t").stdout
    assert re.search(r"^ +enabled: yes$", shown, re.M)
    assert re.search(r"^ +last_ok: -$", shown, re.M)
    assert "True" not in shown and "None" not in shown


def test_a_database_without_pgtimers_gets_a_hint(empty_db: Database) -> None:
    listed = cli(empty_db, "list")
    assert listed.returncode == 2 and listed.stdout == ""
    assert "hint: pgtimers is not installed in this database" in listed.stderr
    assert "pgtimers install --dsn" in listed.stderr


def test_help_lists_every_command_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    # the program itself once; each command's help in this process (13 more interpreters
    # took a minute on a loaded machine)
    result = subprocess.run(
        [sys.executable, "-m", "pgtimers", "--help"], capture_output=True, text=True, check=True
    )
    for command in (
        "install",
        "list",
        "show",
        "save",
        "enable",
        "disable",
        "delete",
        "history",
        "next",
        "calendar",
        "import-pg-cron",
        "uninstall",
    ):
        assert f"    {command}" in result.stdout
        with pytest.raises(SystemExit) as done:
            cli_main([command, "--help"])
        assert done.value.code == 0
        assert "example" in capsys.readouterr().out
