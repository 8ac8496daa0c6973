"""The runner's log lines are strict logfmt: every field is key=value, the time under ts=."""

from __future__ import annotations

import logging
import re
import sys

import pytest

from pgtimers.runner import log

# key=value pairs separated by one space; a value is bare (no space, quote, '=' or
# backslash) or a double-quoted string with \\, \" , \n, \t, \r and \uXXXX escapes
PAIR = r'[a-z_]+=(?:[^\s"=\\]+|"(?:[^"\\]|\\[\\"ntr]|\\u[0-9a-f]{4})*")'
LOGFMT = re.compile(rf"^{PAIR}(?: {PAIR})*$")


def test_a_line_is_strict_logfmt_with_ts_first(capsys: pytest.CaptureFixture[str]) -> None:
    log.setup()
    log.event(
        logging.WARNING,
        "run_failed",
        timer="x",
        database="app",
        error='relation "sales" does not exist\nsecond line = here',
        empty="",
    )
    err = capsys.readouterr().err.splitlines()[-1]
    assert LOGFMT.match(err), err
    assert re.match(
        r"^ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=warning event=run_failed ", err
    )
    assert 'error="relation \\"sales\\" does not exist\\nsecond line = here"' in err
    assert 'empty=""' in err


def test_a_failed_attempt_says_its_retry_and_a_pause_has_its_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log.setup()
    for handler in log.LOGGER.handlers:  # set up by an earlier test, on its captured stderr
        if getattr(handler, "_pgtimers", False) and isinstance(handler, logging.StreamHandler):
            handler.stream = sys.stderr
    log.run_result(
        "app",
        {"timer": "t", "kind": "retry", "due_at": "2027-01-04T10:00:00Z", "ok": False,
         "attempt": 2, "error": "boom", "retry_at": "2027-01-04T10:03:00Z"},
    )  # fmt: skip
    log.run_result(
        "app",
        {"timer": "t", "kind": "retry", "due_at": "2027-01-04T10:00:00Z", "ok": False,
         "attempt": 3, "error": "boom", "gave_up": "retries exhausted", "paused": True},
    )  # fmt: skip
    lines = [ln.split(" ", 2)[2] for ln in capsys.readouterr().err.splitlines()[-3:]]
    assert all(LOGFMT.match(f"ts=x level=y {ln}") for ln in lines), lines
    assert lines[0] == (
        "event=run_failed timer=t database=app kind=retry due=2027-01-04T10:00:00Z attempt=2"
        " error=boom retry_at=2027-01-04T10:03:00Z"
    )
    assert 'attempt=3 error=boom gave_up="retries exhausted"' in lines[1]
    assert lines[2].startswith("event=timer_paused timer=t database=app")
