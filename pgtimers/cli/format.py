"""Human-readable output for the CLI: relative times and plain text tables."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

# what the keyed timers' tables show for a time that is not set (as the seed does)
NONE = "—"
_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))


def relative(ms: int, now_ms: int) -> str:
    """`in 3 min`, `12 s ago`, or `-` for 0 (never / not planned)."""
    if not ms:
        return "-"
    delta = (ms - now_ms) / 1000
    size = abs(delta)
    if size < 1:
        return "now"
    unit, seconds = next(u for u in _UNITS if size >= u[1])
    text = f"{int(size // seconds)} {unit}"
    return f"in {text}" if delta > 0 else f"{text} ago"


def plain(value: object) -> str:
    """A value as a person reads it: yes/no for true/false, `-` for none."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def timestamp(ms: int) -> str:
    """Unix milliseconds as UTC ISO 8601, or `-` for 0."""
    if not ms:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat(timespec="seconds")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], width: int = 60) -> str:
    """A left-aligned text table; cells longer than `width` are cut with an ellipsis."""

    def cell(value: object) -> str:
        text = "" if value is None else str(value).replace("\n", " ")
        return text if len(text) <= width else text[: width - 1] + "…"

    cells = [[cell(h) for h in headers], *[[cell(v) for v in row] for row in rows]]
    sizes = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(s) for c, s in zip(r, sizes, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * s for s in sizes))
    return "\n".join(lines)


def utc_minute(value: dt.datetime | None) -> str:
    """A time in UTC as `2028-02-01 14:00Z` (seconds only when not 0), or `—` for none."""
    if value is None:
        return NONE
    when = value.astimezone(dt.timezone.utc)
    text = when.strftime(
        "%Y-%m-%d %H:%M:%S" if when.second or when.microsecond else "%Y-%m-%d %H:%M"
    )
    return text + "Z"


def span(value: dt.timedelta | None) -> str:
    """A length of time as `54d 10h 30m` (seconds only when not 0), or `—` for none."""
    if value is None:
        return NONE
    total = int(abs(value).total_seconds())
    parts = [
        f"{amount}{unit}"
        for amount, unit in (
            (total // 86400, "d"),
            (total % 86400 // 3600, "h"),
            (total % 3600 // 60, "m"),
            (total % 60, "s"),
        )
        if amount
    ]
    return ("-" if value < dt.timedelta(0) else "") + (" ".join(parts) or "0m")


def result_word(last_ok: bool | None) -> str:
    """The result column: ok, FAILED, or - before the first run."""
    if last_ok is None:
        return "-"
    return "ok" if last_ok else "FAILED"
