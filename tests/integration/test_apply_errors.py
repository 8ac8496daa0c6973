"""Bad input to `pgtimers apply`: exit 2, the file, the line and the timer on stderr, and
nothing changed in the database, whether the file or timers.apply found it."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests.conftest import Database, scalar
from tests.integration.test_apply_cli import cli, write

GOOD = '[[timer]]\nname = "good"\nschedule = "hourly"\nsql = "SELECT 1"\n\n'


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('[[timer]]\nname = "x"\nschedule = hourly\n', 8, "not TOML"),
        (
            '[[timer]]\nname = "x"\nschedule = "hourly"\nsql = "SELECT 1"\nretires = 3\n',
            10,
            "timer \"x\": unknown key 'retires' (did you mean 'retries'?)",
        ),
        (
            '[[timer]]\nname = "x"\nschedule = "hourly"\nsql = "SELECT 1"\nretries = "3"\n',
            10,
            "timer \"x\": retries must be an integer, not a string ('3')",
        ),
        ('[[timer]]\nname = "x"\nschedule = "hourly"\n', 6, 'timer "x": no SQL'),
        (
            '[[timer]]\nname = "x"\nschedule = "hourly"\nsql = "SELECT 1"\nsql_file = "a.sql"\n',
            6,
            'timer "x": has both sql and sql_file',
        ),
        (
            '[[timer]]\nname = "x"\nschedule = "hourly"\nsql_file = "gone.sql"\n',
            9,
            "timer \"x\": cannot read sql_file 'gone.sql'",
        ),
        (
            '[[timer]]\nname = "GOOD"\nschedule = "hourly"\nsql = "SELECT 1"\n',
            6,
            'timer "GOOD": is named twice (also at ',
        ),
        # found by timers.apply, put back on the file's line by the CLI
        (
            '[[timer]]\nname = "x"\nschedule = "every day"\nsql = "SELECT 1"\n',
            6,
            'timer "x": bad "every" schedule',
        ),
        (
            '[[timer]]\nname = "x"\nschedule = "hourly"\nsql = "SELECT 1"\ntimezone = "Mars/X"\n',
            6,
            'timer "x": ',
        ),
        (
            '[[timer]]\nname = "x"\nschedule = "hourly"\nsql = "SELECT 1"\nretries = 1000\n',
            6,
            'timer "x": ',
        ),
    ],
)
def test_bad_input_exits_2_naming_file_line_and_timer(
    db: Database, conn: psycopg.Connection, tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write(tmp_path, "t.toml", GOOD + text)
    result = cli(db, "apply", path)
    assert result.returncode == 2, result.stdout
    assert f"pgtimers: {path}:{line}: {message}" in result.stderr
    assert "nothing was changed" in result.stderr
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0


def test_a_database_without_pgtimers_gets_the_install_hint(
    empty_db: Database, tmp_path: Path
) -> None:
    path = write(tmp_path, "t.toml", GOOD)
    result = cli(empty_db, "apply", path)
    assert result.returncode == 2
    assert "run pgtimers install --dsn <this database>" in result.stderr
