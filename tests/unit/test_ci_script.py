"""CI's script: it runs the README's test command as written, after the checks that fail
in seconds, and the test run has a per-test time limit."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
MARKER = "# The line below is exactly the README's test command."


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text()
    after = text[text.index("Pass the tests") :]
    found = re.search(r"```sh\n(.*)\n```", after)
    assert found, "no ```sh block after 'Pass the tests' in README.md"
    return found.group(1)


def _ci_lines() -> list[str]:
    return (ROOT / ".ci" / "run").read_text().splitlines()


def test_ci_runs_the_readme_test_command_as_written() -> None:
    lines = _ci_lines()
    assert lines.count(MARKER) == 1
    assert lines[lines.index(MARKER) + 1] == _readme_test_command()


def test_lint_types_and_import_contracts_come_before_any_suite() -> None:
    lines = [ln for ln in _ci_lines() if not ln.lstrip().startswith("#")]
    first_suite = min(i for i, ln in enumerate(lines) if "bin/pytest" in ln)
    for check in ("ruff check", "ruff format --check", "bin/mypy", "bin/lint-imports"):
        at = [i for i, ln in enumerate(lines) if check in ln]
        assert at and at[0] < first_suite, f"{check} is not run before the first suite"


def test_every_test_has_a_time_limit_and_the_slowest_are_printed() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    options = pyproject["tool"]["pytest"]["ini_options"]
    assert 0 < int(options["timeout"]) <= 600
    assert "--durations=" in options["addopts"]
    assert any(
        d.startswith("pytest-timeout")
        for d in pyproject["project"]["optional-dependencies"]["test"]
    )
