"""[[notify]] sections of `pgtimers run --config`: what they mean, and a bad one is a clear
error at start naming the file and the key (exit 2), with nothing started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pgtimers.cli.run_config import ConfigError, resolve
from pgtimers.runner.notify_config import NotifyTarget


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "pgtimers.toml"
    path.write_text(text)
    return str(path)


def test_sections_and_their_defaults(tmp_path: Path) -> None:
    cfg = write(
        tmp_path,
        '[[notify]]\nurl = "https://hooks.slack.com/services/T0/B0/XyZ"\nformat = "slack"\n'
        'events = ["failed", "paused"]\ntimers = "nightly_*"\nsecret = "k"\n'
        '[[notify]]\nurl = "http://127.0.0.1:9000/hook"\n',
    )
    slack, plain = resolve(config_file=cfg, environ={}).notify
    url = "https://hooks.slack.com/services/T0/B0/XyZ"
    assert slack == NotifyTarget(url, ("failed", "paused"), "nightly_*", "k", "slack")
    assert plain == NotifyTarget("http://127.0.0.1:9000/hook")  # every event, every timer, json
    # the target's name shows the host, never the URL's path (a Slack URL's secret)
    assert slack.name.startswith("https://hooks.slack.com ") and "XyZ" not in slack.name
    # stable for the section; another filter is another target; the secret and format are not
    assert slack.name == NotifyTarget(slack.url, ("failed", "paused"), "nightly_*").name
    assert slack.name != NotifyTarget(slack.url, ("failed",), "nightly_*").name


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('url = "ftp://x.example/h"', "key 'url' must be an http:// or https:// URL"),
        ('url = "http:///nohost"', "key 'url' must be an http:// or https:// URL with a host"),
        ('url = "http://x.example:99999/"', "key 'url': 'http://x.example:99999/' is not a URL"),
        ("url = 5", "key 'url' must be a string"),
        ('format = "json"', "key 'url' is missing"),
        (
            'url = "http://x.example/"\nevents = ["failed", "faild2", "pausd"]',
            "key 'events': unknown event 'faild2' (did you mean 'failed'?)",
        ),
        ('url = "http://x.example/"\nevents = "failed"', "key 'events' must be a list"),
        (
            'url = "http://x.example/"\nformat = "slak"',
            "key 'format' must be \"json\" or \"slack\", not 'slak' (did you mean 'slack'?)",
        ),
        ('url = "http://x.example/"\ntimers = ""', "key 'timers' must be a timer name"),
        ('url = "http://x.example/"\nsecret = ""', "key 'secret' must be a non-empty string"),
        ('url = "http://x.example/"\nsecrett = "x"', "key 'secrett' (did you mean 'secret'?)"),
    ],
)
def test_a_bad_section_names_the_file_and_key(tmp_path: Path, section: str, message: str) -> None:
    cfg = write(tmp_path, f'[[notify]]\nurl = "http://ok.example/"\n[[notify]]\n{section}\n')
    with pytest.raises(ConfigError) as err:
        resolve(config_file=cfg, environ={})
    assert f"--config {cfg}: [[notify]] #2: " in str(err.value)
    assert message in str(err.value)


def test_notify_must_be_sections(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"key 'notify' must be \[\[notify\]\] sections"):
        resolve(config_file=write(tmp_path, 'notify = "http://x.example/"\n'), environ={})


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('url = "htp://x.example/"', "[[notify]] #1: key 'url' must be an http:// or https://"),
        ('url = "http://x.example/"\nevents = ["faled"]', "unknown event 'faled' (did you mean"),
        ('url = "http://x.example/"\nformat = "xml"', 'key \'format\' must be "json" or "slack"'),
    ],
)
def test_the_runner_exits_2_at_start(tmp_path: Path, section: str, message: str) -> None:
    cfg = write(tmp_path, f'dsn = "postgresql://nobody@127.0.0.1:1/none"\n[[notify]]\n{section}\n')
    done = subprocess.run(
        [sys.executable, "-m", "pgtimers", "run", "--config", cfg],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"pgtimers run: --config {cfg}: " in done.stderr and message in done.stderr
    assert "event=starting" not in done.stderr  # nothing started
