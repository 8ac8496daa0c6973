"""The Alertmanager rules of docs/operations.md: `promtool check rules` accepts them, and
`promtool test rules` shows the alerts of the new metrics fire on the series they name.

Skipped where promtool is not installed, except under CI=true, where it fails: .ci/run
installs promtool, so a CI without it would pass without checking anything."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"

# Series minute by minute (promtool's clock starts at 0) and the alerts they must raise.
UNIT_TESTS = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'pgtimers_deadline_missed_total{database="app"}'
        values: '0 0 0 1 1 1 1'
      - series: 'pgtimers_deadline_missed_total{database="quiet"}'
        values: '2 2 2 2 2 2 2'
      - series: 'pgtimers_events_undelivered{database="app",state="pending"}'
        values: '1+0x40'
      - series: 'pgtimers_events_undelivered{database="app",state="undeliverable"}'
        values: '0 0 0 0 3 3 3'
      - series: 'pgtimers_events_undelivered{database="quiet",state="pending"}'
        values: '0+0x40'
    alert_rule_test:
      - eval_time: 5m
        alertname: PgtimersDeadlineMissed
        exp_alerts:
          - exp_labels: {severity: critical, database: app}
      - eval_time: 5m
        alertname: PgtimersWebhookGaveUp
        exp_alerts:
          - exp_labels: {severity: warning, database: app, state: undeliverable}
      - eval_time: 20m
        alertname: PgtimersWebhookBehind
        exp_alerts: []
      - eval_time: 35m
        alertname: PgtimersWebhookBehind
        exp_alerts:
          - exp_labels: {severity: warning, database: app, state: pending}
  - interval: 1h
    input_series:
      # succeeded at 01:00 (3600 s), then never again
      - series: 'pgtimers_timer_last_success_timestamp_seconds{database="app",
          timer="nightly_rollup"}'
        values: '3600+0x40'
      - series: 'pgtimers_timer_last_success_timestamp_seconds{database="app",timer="hourly"}'
        values: '3600+0x40'
    alert_rule_test:
      - eval_time: 26h
        alertname: PgtimersNoSuccess
        exp_alerts: []
      - eval_time: 28h
        alertname: PgtimersNoSuccess
        exp_alerts:
          - exp_labels: {severity: warning, database: app, timer: nightly_rollup}
  - interval: 1m
    input_series:
      # 60 runs a minute, every one between 10 and 30 s late (app); all on time (quiet)
      - series: 'pgtimers_run_lateness_seconds_bucket{database="app",le="10"}'
        values: '0+0x60'
      - series: 'pgtimers_run_lateness_seconds_bucket{database="app",le="30"}'
        values: '0+60x60'
      - series: 'pgtimers_run_lateness_seconds_bucket{database="app",le="+Inf"}'
        values: '0+60x60'
      - series: 'pgtimers_run_lateness_seconds_bucket{database="quiet",le="10"}'
        values: '0+60x60'
      - series: 'pgtimers_run_lateness_seconds_bucket{database="quiet",le="30"}'
        values: '0+60x60'
      - series: 'pgtimers_run_lateness_seconds_bucket{database="quiet",le="+Inf"}'
        values: '0+60x60'
      - series: 'pgtimers_runner_up{database="app"}'
        values: '1 1 0 0 0 0 0 0'
      - series: 'up{job="pgtimers",instance="runner:8080"}'
        values: '1 0 0 0 0 0 0 0'
    alert_rule_test:
      - eval_time: 40m
        alertname: PgtimersLatenessP99
        exp_alerts:
          - exp_labels: {severity: warning, database: app}
      - eval_time: 5m
        alertname: PgtimersNoRunner
        exp_alerts:
          - exp_labels: {severity: critical, database: app}
      - eval_time: 5m
        alertname: PgtimersMetricsDown
        exp_alerts:
          - exp_labels: {severity: critical, job: pgtimers, instance: "runner:8080"}
"""


def _rules_block() -> str:
    """The ```yaml block of the Alerts section of docs/operations.md."""
    text = OPERATIONS.read_text()
    section = text.split("\n## Alerts\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```yaml\n(.*?)^```$", section, flags=re.S | re.M)
    assert len(blocks) == 1, "the Alerts section should have exactly one yaml block"
    return str(blocks[0])


def _without_annotations(rules: str) -> str:
    """The rules less their annotations, which `promtool test rules` would want word for
    word (their templates are checked by `promtool check rules`)."""
    return re.sub(r"^( +)annotations:\n(?:\1 .*\n)*", "", rules, flags=re.M)


@pytest.fixture
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is missing: .ci/run installs it from Debian's prometheus")
        pytest.skip("promtool is not installed (Debian: the prometheus package has it)")
    return found


def _promtool(promtool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_rules_pass_promtool_check(promtool: str, tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(_rules_block())
    done = _promtool(promtool, "check", "rules", "rules.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 10 rules found" in done.stdout


def test_the_rules_use_the_run_metrics() -> None:
    block = _rules_block()
    for name in (
        "pgtimers_deadline_missed_total",
        "pgtimers_timer_last_success_timestamp_seconds",
        "pgtimers_run_lateness_seconds_bucket",
        "pgtimers_events_undelivered",
        "pgtimers_runner_up",
    ):
        assert name in block


def test_the_alerts_fire_on_their_series(promtool: str, tmp_path: Path) -> None:
    rules = _without_annotations(_rules_block())
    assert "annotations" not in rules and rules.count("- alert:") == 10
    (tmp_path / "rules.yml").write_text(rules)
    (tmp_path / "tests.yml").write_text(UNIT_TESTS)
    done = _promtool(promtool, "test", "rules", "tests.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
