"""What a run said: the NOTICE, INFO and WARNING messages its SQL raised, which reach the
session that runs it and never PL/pgSQL. A worker's connection sorts them to the runs
that raised them, by the notice timers._execute says before each run's SQL, and writes
them to the runs' rows after their commit (timers._run_messages); an autonomous run's
owner session keeps its own. About 8 KB of them are kept (the server cuts them exactly,
timers._messages_cut): the rest is only counted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# What the server keeps of a run's messages, in bytes (timers._messages_cut).
LIMIT = 8192
# The severities a run's messages are kept of: DEBUG and LOG are the server log's.
KEPT = ("NOTICE", "INFO", "WARNING")
# timers._execute's notice that a run starts: its detail is "<timer id> <started_at>".
RUN = "pgtimers: run"
RUN_SQLSTATE = "PGT01"


def line(severity: str, message: str, detail: str | None = None, hint: str | None = None) -> str:
    """One message as kept: 'NOTICE: text', and its DETAIL and HINT lines, if any."""
    lines = [f"{severity}: {message}"]
    if detail:
        lines.append(f"DETAIL: {detail}")
    if hint:
        lines.append(f"HINT: {hint}")
    return "\n".join(lines)


@dataclass
class Said:
    """The lines one run said, in order: about LIMIT bytes of them kept, the bytes of
    the rest counted (more)."""

    lines: list[str] = field(default_factory=list)
    size: int = 0
    more: int = 0

    def add(self, text: str) -> None:
        """One more line (or lines, of one message)."""
        n = len(text.encode()) + (1 if self.lines or self.more else 0)
        if self.size < LIMIT:
            self.lines.append(text)
            self.size += n
        else:
            self.more += n

    @property
    def text(self) -> str:
        """The lines kept, one a line."""
        return "\n".join(self.lines)


def severity_of(message: Any) -> str:
    """A server message's severity, not translated (lc_messages may be another language)."""
    return str(getattr(message, "severity_en", None) or getattr(message, "severity", "") or "")


class RunNotices:
    """A worker connection's notices, sorted to the runs that raised them.

    After the runner's own word that a fire starts (its claim's notice, which carries the
    connection's secret mark, or a statement that runs one thing), the first notice
    'pgtimers: run' names the run (its timer and started_at: its timers.runs row); the
    NOTICE, INFO and WARNING messages after it are that run's, until the next fire. A
    notice of that text that the run's own SQL raises is only one of its messages."""

    def __init__(self) -> None:
        self._expect = False
        self._current: tuple[int, str] | None = None
        self._said: dict[tuple[int, str], Said] = {}

    def expect(self) -> None:
        """A fire starts: the next 'pgtimers: run' notice names its run."""
        self._expect = True
        self._current = None

    def notice(self, message: Any) -> None:
        """A notice the connection got (an asyncpg log message)."""
        text = str(getattr(message, "message", "") or "")
        if self._expect and message.sqlstate == RUN_SQLSTATE and text == RUN:
            self._expect = False
            self._current = _run_key(getattr(message, "detail", None))
            return
        severity = severity_of(message)
        if self._current is None or severity not in KEPT:
            return
        detail, hint = getattr(message, "detail", None), getattr(message, "hint", None)
        self._said.setdefault(self._current, Said()).add(line(severity, text, detail, hint))

    def take(self) -> list[dict[str, Any]]:
        """What the runs said since the last take, for timers._run_messages; then forget
        it (and what the fire in flight was)."""
        said = [
            {"timer_id": key[0], "started_at": key[1], "messages": s.text, "more": s.more}
            for key, s in self._said.items()
        ]
        self._said = {}
        self._expect = False
        self._current = None
        return said


def _run_key(detail: str | None) -> tuple[int, str] | None:
    """The run a 'pgtimers: run' notice names: (timer id, started_at as the server said it)."""
    timer, _, started = (detail or "").partition(" ")
    if not timer.isdigit() or not started:
        return None
    return int(timer), started
