"""The runner's log lines are strict logfmt: every field is key=value, the time under ts=."""

from __future__ import annotations

import logging
import re

import pytest

from pgtimers.runner import log

# key=value pairs separated by one space; a value is bare (no space, quote, '=' or
# backslash) or a double-quoted string with \\, \" , \n and \t escapes
PAIR = r'[a-z_]+=(?:[^\s"=\\]+|"(?:[^"\\]|\\[\\"nt])*")'
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
