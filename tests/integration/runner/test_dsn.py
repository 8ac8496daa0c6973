"""Which database `pgtimers run` serves: --dsn, then `dsn` in --config, then PGTIMERS_DSN,
then DATABASE_URL (the embedded server without any: test_resilience.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pgtimers.cli.dsn import ENVIRONMENT, given_dsns
from pgtimers.cli.exit_codes import ExitCode
from pgtimers.cli.run_config import resolve
from tests.conftest import Database
from tests.support.runner import RunnerProcess

# nothing listens there: a runner that picked it would log database_unavailable
NOWHERE = "postgresql://nobody@127.0.0.1:9/nothing?connect_timeout=1"


def test_precedence_flag_config_environment() -> None:
    env = {"PGTIMERS_DSN": "postgresql:///p", "DATABASE_URL": "postgresql:///d"}
    assert given_dsns(["postgresql:///f"], ["postgresql:///c"], env) == ["postgresql:///f"]
    assert given_dsns(None, ["postgresql:///c"], env) == ["postgresql:///c"]
    assert given_dsns(None, [], env) == ["postgresql:///p"]
    assert given_dsns(None, [], {"DATABASE_URL": "postgresql:///d"}) == ["postgresql:///d"]
    assert given_dsns(None, [], {"PGTIMERS_DSN": "", "DATABASE_URL": "postgresql:///d"}) == [
        "postgresql:///d"
    ]
    assert given_dsns(None, [], {}) == []


def test_run_config_takes_the_environment_after_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "pgtimers.toml"
    cfg.write_text('dsn = "postgresql:///c"\n')
    env = {"PGTIMERS_DSN": "postgresql:///p"}
    assert resolve(config_file=str(cfg), environ=env).dsns == ("postgresql:///c",)
    assert resolve(environ=env).dsns == ("postgresql:///p",)
    assert resolve(dsns=["postgresql:///f"], environ=env).dsns == ("postgresql:///f",)
    assert resolve(environ={}).dsns == ()


@pytest.mark.parametrize("variable", ENVIRONMENT)
def test_run_serves_the_database_of_the_environment(
    db: Database, tmp_path: Path, variable: str
) -> None:
    env = {variable: db.dsn}
    if variable == "DATABASE_URL":
        unset = ["PGTIMERS_DSN"]
    else:
        env["DATABASE_URL"] = NOWHERE  # PGTIMERS_DSN comes first
        unset = []
    runner = RunnerProcess([], tmp_path / "runner.log", env=env, unset=unset)
    try:
        runner.wait_for(f"event=serving database={db.name} ", timeout=30)
        assert "embedded PostgreSQL" not in runner.log()
        assert "event=database_unavailable" not in runner.log()
        assert runner.stop() == 0
    finally:
        runner.kill()


def test_run_now_takes_the_config_file_dsn_before_the_environment(
    db: Database, tmp_path: Path
) -> None:
    cfg = tmp_path / "pgtimers.toml"
    cfg.write_text(f'dsn = "{db.dsn}"\n')
    result = subprocess.run(
        [sys.executable, "-m", "pgtimers", "run", "nope", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PGTIMERS_DSN": NOWHERE, "PATH": "/usr/bin:/bin"},
    )
    assert (result.returncode, result.stderr) == (
        ExitCode.BAD_INPUT,
        f"pgtimers: there is no timer 'nope' in database {db.name}\n",
    )


def test_a_database_that_refuses_the_runner_is_named_by_its_dsn(
    db: Database, tmp_path: Path
) -> None:
    missing = f"{db.name}_gone"  # the login is refused: that database does not exist
    dsn = db.server.dsn_for(missing)
    runner = RunnerProcess(["--dsn", dsn], tmp_path / "runner.log")
    try:
        runner.wait_for("event=database_unavailable", timeout=30)
        line = next(x for x in runner.log().splitlines() if "event=database_unavailable" in x)
        assert f"database={missing} " in line, line
    finally:
        runner.kill()
