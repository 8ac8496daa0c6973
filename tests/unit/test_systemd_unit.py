"""The one systemd unit (contrib/pgtimers.service) and its environment file: no secret in
the unit, a user that exists and a role that can log in, the notify/watchdog/stop settings
the runner relies on, the docs pointing to it (any full copy in docs/ equal to it byte for
byte), and, where systemd-analyze exists, `verify` clean and `security` exposure <= 3.0."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pgtimers.cli.dsn import ENVIRONMENT as DSN_ENVIRONMENT
from pgtimers.cli.main import build_parser
from pgtimers.cli.run_config import WORKERS_ENV
from pgtimers.http.settings import TOKEN_ENV

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "contrib" / "pgtimers.service"
ENV_EXAMPLE = ROOT / "contrib" / "pgtimers.env.example"
RUNNING = ROOT / "docs" / "running.md"
ENV_FILE = "/etc/pgtimers/pgtimers.env"
EXEC = "/opt/pgtimers/.venv/bin/pgtimers"
MAX_EXPOSURE = 3.0
# What the runner reads from its environment, plus the unit's own PGTIMERS_RUN_ARGS and
# the PostgreSQL client variables the environment file may set.
KNOWN_VARIABLES = {*DSN_ENVIRONMENT, TOKEN_ENV, WORKERS_ENV, "PGTIMERS_RUN_ARGS"} | {
    "PGPASSWORD",
    "PGPASSFILE",
    "PGSSLROOTCERT",
}


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> values (systemd allows a key more than once), comments dropped."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"line {number} is outside a section: {raw!r}"
        assert "=" in line, f"line {number} is not KEY=value: {raw!r}"
        key, value = line.split("=", 1)
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def service() -> dict[str, list[str]]:
    """The [Service] section of the unit."""
    return parse_unit(UNIT.read_text(encoding="utf-8"))["Service"]


def one(key: str) -> str:
    """The single value of a [Service] key."""
    values = service().get(key, [])
    assert len(values) == 1, f"{key}= is set {len(values)} times in {UNIT.name}"
    return values[0]


def env_example() -> dict[str, str]:
    """The active NAME=value lines of the environment file example."""
    pairs: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = line.split("=", 1)
            pairs[name] = value
    return pairs


def commented_env_example() -> dict[str, str]:
    """The commented-out `#NAME=value` settings of the example (no space after '#')."""
    found = re.findall(r"^#([A-Z][A-Z0-9_]*)=(.*)$", ENV_EXAMPLE.read_text(), re.M)
    return dict(found)


def test_the_unit_holds_no_dsn_or_password() -> None:
    settings = [f"{k}={v}" for k, values in service().items() for v in values]
    secret = [s for s in settings if re.search(r"pass|://|dsn=|host=", s, re.I)]
    assert secret == [], "a secret in the unit, which anybody may read"
    assert "Environment" not in service()
    exec_start = one("ExecStart")
    assert "--dsn" not in exec_start and "PGTIMERS_DSN" not in exec_start  # ps shows argv
    assert one("EnvironmentFile") == ENV_FILE  # no leading '-': without it, no start


def test_exec_start_runs_the_runner_with_the_options_of_the_environment_file() -> None:
    words = one("ExecStart").split()
    assert words[:2] == [EXEC, "run"]
    # unbraced: systemd splits the value at spaces, and an unset one adds no argument
    assert words[2:] == ["$PGTIMERS_RUN_ARGS"]


def test_the_runner_settings_the_lifecycle_relies_on() -> None:
    assert one("Type") == "notify"
    assert one("NotifyAccess") == "main"
    assert one("WatchdogSec") == "60s"
    assert one("KillSignal") == "SIGTERM"
    assert one("TimeoutStopSec") == "11min"
    assert one("Restart") == "on-failure"


def test_the_service_user_is_created_by_a_documented_command() -> None:
    user = one("User")
    assert user != "root"
    assert f"useradd --system --no-create-home --shell /usr/sbin/nologin {user}" in (
        RUNNING.read_text(encoding="utf-8")
    )
    assert one("Group") == user  # useradd makes the user's own group


def test_the_documented_role_can_log_in_and_is_the_one_of_the_dsn() -> None:
    docs = RUNNING.read_text(encoding="utf-8")
    created = re.findall(r"CREATE ROLE (\w+) LOGIN PASSWORD '…' IN ROLE pgtimers_runner;", docs)
    assert created, "docs/running.md does not create the runner's login role"
    dsn = env_example()["PGTIMERS_DSN"]
    assert dsn.startswith(f"postgresql://{created[0]}@")  # and no ':password@'
    assert f"GRANT CONNECT ON DATABASE app TO {created[0]};" in docs


def test_the_environment_file_names_only_variables_that_are_read() -> None:
    names = set(env_example()) | set(commented_env_example())
    assert "PGTIMERS_DSN" in env_example()
    assert names <= KNOWN_VARIABLES, names - KNOWN_VARIABLES


def test_the_http_option_of_the_environment_file_is_an_option_of_pgtimers_run() -> None:
    args = shlex.split(commented_env_example()["PGTIMERS_RUN_ARGS"])
    assert args == ["--http", "127.0.0.1:8089"]
    assert build_parser().parse_args(["run", *args]).http == "127.0.0.1:8089"


def test_the_docs_install_the_unit_and_copy_it_nowhere() -> None:
    docs = RUNNING.read_text(encoding="utf-8")
    assert "install -m 644 contrib/pgtimers.service /etc/systemd/system/" in docs
    assert f"install -m 600 contrib/pgtimers.env.example {ENV_FILE}" in docs
    unit = UNIT.read_text(encoding="utf-8")
    for page in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        for block in re.findall(r"^```[^\n]*\n(.*?)^```", page.read_text(), re.S | re.M):
            if "[Unit]" in block and "[Service]" in block:
                assert block == unit, f"{page.name} shows a unit that is not {UNIT.name}"


def _analyze(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("systemd-analyze")
    if binary is None:
        pytest.skip("systemd-analyze is not installed")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, check=False)


def test_systemd_analyze_verify_finds_nothing_to_say(tmp_path: Path) -> None:
    # verify wants ExecStart's program to exist: point it at one that does
    unit = tmp_path / "pgtimers.service"
    unit.write_text(UNIT.read_text(encoding="utf-8").replace(EXEC, sys.executable))
    result = _analyze("verify", str(unit))
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_systemd_analyze_security_rates_it_at_most_3(tmp_path: Path) -> None:
    unit = tmp_path / "pgtimers.service"
    shutil.copyfile(UNIT, unit)
    result = _analyze("security", "--offline=true", "--no-pager", str(unit))
    found = re.search(r"Overall exposure level for pgtimers\.service: (\d+\.\d+)", result.stdout)
    assert found, result.stdout + result.stderr
    assert float(found.group(1)) <= MAX_EXPOSURE, result.stdout
