"""A value in the runner's log cannot forge a line or drive a terminal (security
review, issue 26, item 7e).

Timer names, errors and SQL text reach the log; a timer's owner chooses them. Every
control character (CR, ESC, NUL, DEL, C1 such as NEL and CSI), every Unicode line
or paragraph separator and the bidi controls are escaped, so each event stays one
line whatever splits lines (a terminal, `str.splitlines`, a log shipper), and the
escapes read back to the value exactly.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import unicodedata

import pytest

from pgtimers.runner import log

# Every character that some reader takes as the end of a line.
LINE_ENDS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
CONTROLS = "".join(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)])
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
HOSTILE = (
    "ok\r\nts=2027-01-01T00:00:00.000Z level=info event=forged"
    "\x1b[2J\x1b]0;title\x07\x9b31m\u2028line\u2029para\x85nel\u202eevil\x00\x7f"
)
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _read_back(quoted: str) -> str:
    """A quoted logfmt value's text, its escapes undone."""

    def undo(match: re.Match[str]) -> str:
        escape = match.group(1)
        if escape.startswith("u"):
            return chr(int(escape[1:], 16))
        return {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}[escape]

    return re.sub(r"\\(u[0-9a-f]{4}|[ntr\\\"])", undo, quoted)


@pytest.mark.parametrize("char", list(CONTROLS + LINE_ENDS + BIDI), ids=lambda c: f"U+{ord(c):04X}")
def test_every_control_and_separator_is_escaped(char: str) -> None:
    text = log.line("run_failed", timer=f"a{char}b", error=f"x{char}")
    assert len(text.splitlines()) == 1, repr(text)
    assert char not in text, repr(text)
    assert all(unicodedata.category(c) not in ("Cc", "Zl", "Zp") for c in text), repr(text)
    timer, error = QUOTED.findall(text)
    assert (_read_back(timer), _read_back(error)) == (f"a{char}b", f"x{char}")


def test_a_hostile_value_stays_on_its_line_and_reads_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log.setup()
    for handler in log.LOGGER.handlers:  # set up by an earlier test, on its captured stderr
        if getattr(handler, "_pgtimers", False) and isinstance(handler, logging.StreamHandler):
            handler.stream = sys.stderr
    log.event(logging.WARNING, "run_failed", timer=HOSTILE, error=HOSTILE, database="app")
    out = capsys.readouterr().err
    assert out.count("\n") == 1 and out.endswith("\n"), repr(out)
    assert len(out.splitlines()) == 1, repr(out)
    assert "\x1b" not in out and "\x9b" not in out and "\r" not in out, repr(out)
    assert " database=app" in out
    assert [_read_back(v) for v in QUOTED.findall(out)] == [HOSTILE, HOSTILE]


def test_a_key_cannot_forge_fields() -> None:
    text = log.line("pruned", **{"runs\nts=x level=error event=forged": 1, "ok": 2})
    assert text == "event=pruned runs_ts_x_level_error_event_forged=1 ok=2"


def test_plain_text_and_unicode_stay_bare() -> None:
    assert log.line("x", name="shop_totals", zone="Asia/Kathmandu", word="naïve✓") == (
        "event=x name=shop_totals zone=Asia/Kathmandu word=naïve✓"
    )


def test_the_http_apis_failures_are_one_escaped_line_each(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A caller chooses the path (aiohttp decodes %0d%0a into a real line break) and a
    failure's traceback has many lines: each failure is still one line of the log."""
    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    from pgtimers.http.errors import error_middleware

    async def broken(request: web.Request) -> web.StreamResponse:
        raise RuntimeError("a bug\nts=2027-01-01T00:00:00.000Z level=info event=forged")

    async def main() -> int:
        app = web.Application(middlewares=[error_middleware])
        app.router.add_get(r"/{tail:[\s\S]*}", broken)
        async with TestClient(TestServer(app)) as client:
            response = await client.get("/api/x%0d%0ats=2027-01-01T00:00:00.000Z%20event=forged")
            return response.status

    log.setup()
    assert asyncio.run(main()) == 500
    out = capsys.readouterr().err
    lines = [x for x in out.splitlines() if "event=http_failed" in x]
    assert len(lines) == 1, out
    assert len(out.splitlines()) == 1, out
    assert "error_type=RuntimeError" in lines[0] and "traceback=" in lines[0]
