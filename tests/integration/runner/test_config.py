"""`pgtimers run` settings: flag > config file > PGTIMERS_WORKERS > 2, and clear errors (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pgtimers.cli.run_config import ConfigError, resolve
from pgtimers.queries import parse
from pgtimers.runner.log import line
from pgtimers.runner.queries import query


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "pgtimers.toml"
    path.write_text(text)
    return str(path)


def test_workers_precedence(tmp_path: Path) -> None:
    env = {"PGTIMERS_WORKERS": "5"}
    cfg = write(tmp_path, "workers = 7\n")
    assert resolve(workers="3", config_file=cfg, environ=env).workers == 3
    assert resolve(config_file=cfg, environ=env).workers == 7
    assert resolve(environ=env).workers == 5
    assert resolve(environ={}).workers == 2
    assert resolve(config_file=cfg, environ=env).workers_from == "config"


def test_config_file_keys(tmp_path: Path) -> None:
    cfg = write(
        tmp_path,
        'dsn = ["postgresql:///a", "postgresql:///b"]\ntimezone = "Asia/Kathmandu"\n'
        "all_databases = true\n",
    )
    got = resolve(config_file=cfg, environ={})
    assert got.dsns == ("postgresql:///a", "postgresql:///b")
    assert (got.timezone, got.all_databases) == ("Asia/Kathmandu", True)
    # a flag wins over the file
    assert resolve(dsns=["postgresql:///c"], config_file=cfg, environ={}).dsns == (
        "postgresql:///c",
    )


@pytest.mark.parametrize(
    ("kwargs", "environ", "message"),
    [
        ({"workers": "0"}, {}, "--workers: workers must be from 1 to 64, not 0"),
        ({"workers": "65"}, {}, "--workers: workers must be from 1 to 64, not 65"),
        ({"workers": "two"}, {}, "--workers: workers must be a whole number"),
        ({}, {"PGTIMERS_WORKERS": "100"}, "PGTIMERS_WORKERS: workers must be from 1 to 64"),
    ],
)
def test_bad_workers_name_their_source(
    kwargs: dict[str, str], environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        resolve(environ=environ, **kwargs)  # type: ignore[arg-type]
    assert message in str(err.value)


def test_bad_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="key 'workers': workers must be from 1 to 64"):
        resolve(config_file=write(tmp_path, "workers = 0\n"), environ={})
    with pytest.raises(ConfigError, match="unknown key 'wrokers'"):
        resolve(config_file=write(tmp_path, "wrokers = 3\n"), environ={})
    with pytest.raises(ConfigError, match="not valid TOML"):
        resolve(config_file=write(tmp_path, "workers = \n"), environ={})
    with pytest.raises(ConfigError, match="no such file"):
        resolve(config_file=str(tmp_path / "missing.toml"), environ={})


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--workers", "0"], {}, "pgtimers run: --workers: workers must be from 1 to 64, not 0"),
        ([], {"PGTIMERS_WORKERS": "x"}, "pgtimers run: PGTIMERS_WORKERS: workers must be a whole"),
    ],
)
def test_cli_exits_2_with_a_clear_error(args: list[str], env: dict[str, str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pgtimers", "run", "--dsn", "postgresql:///unused", *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert message in done.stderr


def test_log_lines_are_key_value() -> None:
    assert line("run_failed", timer="x", error='relation "t" does not exist', due=None) == (
        'event=run_failed timer=x error="relation \\"t\\" does not exist"'
    )


def test_named_queries() -> None:
    assert query("fire_many").startswith("CALL timers._fire_many($1")
    assert "SKIP LOCKED" not in query("fire_many")  # the claims live in sql/code/10_fire.sql
    assert parse("-- name: a\n-- comment\nSELECT 1\n\n-- name: b\nSELECT 2\n") == {
        "a": "SELECT 1",
        "b": "SELECT 2",
    }
    with pytest.raises(ValueError, match="defined twice"):
        parse("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n")
    with pytest.raises(KeyError, match="no query named"):
        query("nope")
