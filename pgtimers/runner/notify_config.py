"""The `[[notify]]` sections of `pgtimers run --config`: where the runner delivers the
events of the outbox (timers.events) as webhooks, and which ones.

Each section is a webhook target. Its name (the `target` column of timers.deliveries)
is the URL's scheme and host (never its path or query, which often hold a secret, as a
Slack webhook's does) and a hash of the URL and the filters (`events`, `timers`): the
same section keeps its name across restarts and runners, and a changed URL or filter is
a new target, which starts with the events of the last hour. `secret` and `format` are
not in it: changing them delivers nothing twice."""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# The events of the outbox (timers.events), each of which a section may ask for.
EVENTS = (
    "failed",
    "skipped",
    "retry_given_up",
    "paused",
    "backfill_done",
    "deadline_missed",
    "recovered",
)
FORMATS = ("json", "slack")
KEYS = ("url", "events", "timers", "secret", "format")
MAX_PATTERN = 200


class NotifyConfigError(ValueError):
    """A bad [[notify]] section; the message names the file, the section and the key."""


@dataclass(frozen=True)
class NotifyTarget:
    """One [[notify]] section: where to POST which events, and how."""

    url: str
    events: tuple[str, ...] | None = None  # None: every event
    timers: str = "*"  # a glob on timer names: * any characters, ? one
    secret: str | None = None
    format: str = "json"

    @property
    def name(self) -> str:
        """The target's name in timers.notify_cursors and timers.deliveries."""
        parts = urlsplit(self.url)
        filters = json.dumps(
            [self.url, sorted(self.events) if self.events is not None else None, self.timers]
        )
        digest = hashlib.sha256(filters.encode()).hexdigest()[:12]
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]} {digest}"


def parse_sections(value: Any, file: str) -> tuple[NotifyTarget, ...]:
    """The `notify` key of a loaded config file ([[notify]] tables) as targets, or
    NotifyConfigError naming the file, the section and the key."""
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise NotifyConfigError(
            f"--config {file}: key 'notify' must be [[notify]] sections (tables with url,"
            " events, timers, secret, format)"
        )
    targets = tuple(
        _section(v, f"--config {file}: [[notify]] #{n}") for n, v in enumerate(value, 1)
    )
    names = [t.name for t in targets]
    for n, name in enumerate(names, 1):
        if names.index(name) != n - 1:
            raise NotifyConfigError(
                f"--config {file}: [[notify]] #{n} is the same target as #{names.index(name) + 1}"
                " (the same url, events and timers): merge them"
            )
    return targets


def _section(data: dict[str, Any], where: str) -> NotifyTarget:
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise NotifyConfigError(
            f"{where}: unknown key {unknown[0]!r}{_nearest(unknown[0], KEYS)};"
            f" the keys are {', '.join(KEYS)}"
        )
    if "url" not in data:
        raise NotifyConfigError(f"{where}: key 'url' is missing: where to POST the events")
    return NotifyTarget(
        url=_url(data["url"], where),
        events=_events(data["events"], where) if "events" in data else None,
        timers=_timers(data.get("timers", "*"), where),
        secret=_secret(data["secret"], where) if "secret" in data else None,
        format=_format(data.get("format", "json"), where),
    )


def _url(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise NotifyConfigError(f"{where}: key 'url' must be a string, not {value!r}")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise NotifyConfigError(f"{where}: key 'url': {value!r} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NotifyConfigError(
            f"{where}: key 'url' must be an http:// or https:// URL with a host, not {value!r}"
        )
    if any(c.isspace() for c in value) or port == 0:
        raise NotifyConfigError(f"{where}: key 'url': {value!r} is not a valid URL")
    return value


def _events(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise NotifyConfigError(
            f"{where}: key 'events' must be a list of event names ({', '.join(EVENTS)});"
            " leave it out for every event"
        )
    for name in value:
        if name not in EVENTS:
            raise NotifyConfigError(
                f"{where}: key 'events': unknown event {name!r}{_nearest(name, EVENTS)};"
                f" the events are {', '.join(EVENTS)}"
            )
    return tuple(dict.fromkeys(value))


def _timers(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_PATTERN:
        raise NotifyConfigError(
            f"{where}: key 'timers' must be a timer name or a pattern like \"nightly_*\""
            f" (* any characters, ? one), not {value!r}"
        )
    return value


def _secret(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise NotifyConfigError(f"{where}: key 'secret' must be a non-empty string")
    return value


def _format(value: Any, where: str) -> str:
    if value not in FORMATS:
        raise NotifyConfigError(
            f'{where}: key \'format\' must be "json" or "slack", not {value!r}'
            f"{_nearest(str(value), FORMATS)}"
        )
    return str(value)


def _nearest(word: str, choices: tuple[str, ...]) -> str:
    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    return f" (did you mean {found[0]!r}?)" if found else ""
