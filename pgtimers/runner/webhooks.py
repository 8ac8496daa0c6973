"""What a webhook POST carries: the body of an event (format json or slack), its
signature header, and the link to the timer's console page."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

SIGNATURE_HEADER = "X-Pgtimers-Signature"
# A Slack message shows this much of an error; the json body keeps it whole.
SLACK_ERROR_CHARS = 500

_SLACK = {
    "failed": (":x:", "failed"),
    "skipped": (":fast_forward:", "skipped a due time"),
    "retry_given_up": (":octagonal_sign:", "gave up retrying"),
    "paused": (":double_vertical_bar:", "was paused after failing again and again"),
    "backfill_done": (":white_check_mark:", "finished a backfill"),
    "deadline_missed": (":alarm_clock:", "missed its deadline"),
    "recovered": (":large_green_circle:", "recovered"),
}
# the event's own fields, which its detail never replaces
_CORE = (
    "delivery_id",
    "event_id",
    "database",
    "event",
    "timer",
    "due_at",
    "attempt",
    "error",
    "sqlstate",
    "messages",
    "at",
    "url",
)


def iso(at: dt.datetime | None) -> str | None:
    """A time as ISO 8601 in UTC with a Z (as timers._iso writes it)."""
    if at is None:
        return None
    text = at.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat()
    return (text.rstrip("0").rstrip(".") if "." in text else text) + "Z"


def timer_link(console: str | None, database: str, timer: str) -> str | None:
    """The console page of a timer (console: the HTTP server's address, None without
    --http)."""
    if not console:
        return None
    return f"{console.rstrip('/')}/#/timer/{quote(timer, safe='')}?db={quote(database, safe='')}"


def event_fields(row: Mapping[str, Any], database: str, url: str | None) -> dict[str, Any]:
    """The json body of a claimed delivery (a row of timers._deliveries_claim): the event's
    detail fields, then its own fields, the delivery_id and the console link."""
    detail = row["detail"] if isinstance(row["detail"], dict) else {}
    fields: dict[str, Any] = {k: v for k, v in detail.items() if k not in _CORE}
    fields.update(
        delivery_id=str(row["delivery_id"]),
        event_id=row["event_id"],
        database=database,
        event=row["event"],
        timer=row["timer"],
        due_at=iso(row["due_at"]),
        attempt=row["attempt"],
        error=row["error"],
        sqlstate=row["sqlstate"],
        messages=row["messages"],
        at=iso(row["at"]),
        url=url,
    )
    return fields


def slack_text(fields: Mapping[str, Any]) -> str:
    """One Slack/Mattermost message of an event: what happened to which timer, when it
    was due, the attempt, the error and the link."""
    icon, what = _SLACK.get(str(fields["event"]), (":bell:", str(fields["event"])))
    facts = [f"database {fields['database']}"]
    due = fields.get("due_at")
    if due:
        facts.append("due " + _readable(str(due)))
    attempt = fields.get("attempt")
    if isinstance(attempt, int) and attempt > 1:
        facts.append(f"attempt {attempt}")
    text = f"{icon} *{_escape(str(fields['timer']))}* {what} ({', '.join(facts)})"
    error = str(fields.get("error") or "")
    if error:
        if len(error) > SLACK_ERROR_CHARS:
            error = error[:SLACK_ERROR_CHARS] + " …"
        text += ": " + _escape(error)
    if fields.get("url"):
        text += f" <{fields['url']}|open in the console>"
    return text


def body(fields: Mapping[str, Any], format: str) -> bytes:
    """The exact bytes POSTed (and signed)."""
    if format == "slack":
        payload: Mapping[str, Any] = {
            "text": slack_text(fields),
            "delivery_id": fields["delivery_id"],
        }
    else:
        payload = fields
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def signature(secret: str, data: bytes) -> str:
    """The X-Pgtimers-Signature value: sha256=<hex HMAC-SHA256 of the body>."""
    return "sha256=" + hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


def _readable(iso_time: str) -> str:
    """2026-12-06T16:00:00Z as 2026-12-06 16:00 UTC (seconds when it has some)."""
    day, _, clock = iso_time.rstrip("Z").partition("T")
    clock = clock[:5] if clock[5:8] in ("", ":00") and "." not in clock else clock
    return f"{day} {clock} UTC"


def _escape(text: str) -> str:
    # Slack's mrkdwn: these three are control characters; the rest shows as it is
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
