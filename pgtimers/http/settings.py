"""Settings of the HTTP API: where it listens, the token (set, or made for one run of
`pgtimers run`), anonymous loopback access, and the limits on connections that are slow
to send a request and on the requests one client may have in progress."""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

TOKEN_ENV = "PGTIMERS_HTTP_TOKEN"
MIN_TOKEN_LENGTH = 16
# Keys of the runner's config file (TOML) that belong to the HTTP API.
CONFIG_KEYS = (
    "http_token",
    "http_allow_anonymous_loopback",
    "http_header_timeout_seconds",
    "http_max_header_connections",
    "http_body_timeout_seconds",
    "http_max_requests_per_client",
)
# The settings of the limits, each the config key `http_<name>`.
LIMITS = (
    "header_timeout_seconds",
    "max_header_connections",
    "body_timeout_seconds",
    "max_requests_per_client",
)


class HttpConfigError(ValueError):
    """A bad HTTP setting; the message names the key or flag."""


@dataclass(frozen=True)
class HttpSettings:
    """How the HTTP API authenticates and limits requests."""

    # Bearer token with the rights of the server's own connection role (the runner's DSN).
    token: str | None = None
    # True when `token` was made for this run (none was set): the runner prints it once.
    token_generated: bool = False
    # No credentials needed at all: only when listening on a loopback address.
    allow_anonymous_loopback: bool = False
    # A larger request body is a 413.
    max_body_bytes: int = 1024 * 1024
    # A role's verified HTTP Basic password is trusted this long before it is checked again.
    auth_cache_seconds: float = 60.0
    # Connections per (database, role) pool.
    pool_size: int = 4
    # A connection that has not sent a whole request head this long after it opened, or
    # after its last response, is closed (slow headers, idle keep-alive).
    header_timeout_seconds: float = 10.0
    # At most this many connections may be waiting for a request head; past it the
    # oldest of them is closed.
    max_header_connections: int = 64
    # A request body must have arrived whole this long after its head; otherwise the
    # request is a 408 and its connection is closed.
    body_timeout_seconds: float = 10.0
    # Requests one client (its IP address; IPv6: its /64) may have in progress at once;
    # one more is a 429. GET /healthz is not counted.
    max_requests_per_client: int = 16

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token) < MIN_TOKEN_LENGTH:
            raise HttpConfigError(
                f"http_token must be at least {MIN_TOKEN_LENGTH} characters long "
                "(for example: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        if not self.header_timeout_seconds > 0:
            raise HttpConfigError("http_header_timeout_seconds must be more than 0")
        if self.max_header_connections < 1:
            raise HttpConfigError("http_max_header_connections must be at least 1")
        if not self.body_timeout_seconds > 0:
            raise HttpConfigError("http_body_timeout_seconds must be more than 0")
        if self.max_requests_per_client < 1:
            raise HttpConfigError("http_max_requests_per_client must be at least 1")

    @classmethod
    def from_config(
        cls,
        data: Mapping[str, Any],
        environ: Mapping[str, str] | None = None,
        allow_anonymous_loopback: bool | None = None,
    ) -> HttpSettings:
        """From the config file's keys (CONFIG_KEYS), then PGTIMERS_HTTP_TOKEN; a flag
        value for anonymous access wins over the file."""
        env = os.environ if environ is None else environ
        token = data.get("http_token")
        if token is not None and not isinstance(token, str):
            raise HttpConfigError("key 'http_token' must be a string")
        token = token or env.get(TOKEN_ENV) or None
        anonymous = data.get("http_allow_anonymous_loopback", False)
        if not isinstance(anonymous, bool):
            raise HttpConfigError("key 'http_allow_anonymous_loopback' must be true or false")
        if allow_anonymous_loopback is not None:
            anonymous = allow_anonymous_loopback
        return cls(
            token=token,
            allow_anonymous_loopback=anonymous,
            **{name: _limit(data, name, getattr(cls, name)) for name in LIMITS},
        )

    def with_run_token(self) -> HttpSettings:
        """These settings, with a random token made for this run when none is set and
        anonymous access is off, so that the one who started the runner can get in."""
        if self.token is not None or self.allow_anonymous_loopback:
            return self
        return replace(self, token=secrets.token_urlsafe(32), token_generated=True)


def _limit(data: Mapping[str, Any], name: str, default: float) -> Any:
    """Config key `http_<name>`: a number of seconds, or a whole number (as its default)."""
    key = f"http_{name}"
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HttpConfigError(f"key '{key}' must be a number")
    if isinstance(default, int) and not isinstance(value, int):
        raise HttpConfigError(f"key '{key}' must be a whole number")
    return value if isinstance(default, int) else float(value)


def parse_addr(addr: str) -> tuple[str, int]:
    """`127.0.0.1:8080`, `[::1]:8080`, `localhost:8080`, `:8080` (every interface) or
    `8080` (127.0.0.1) as (host, port)."""
    text = addr.strip()
    if text.isdigit():
        host, port_text = "127.0.0.1", text
    elif text.startswith("["):
        end = text.find("]")
        if end < 0 or not text[end + 1 :].startswith(":"):
            raise HttpConfigError(f"--http {addr!r}: use [IPv6]:PORT, like [::1]:8080")
        host, port_text = text[1:end], text[end + 2 :]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise HttpConfigError(f"--http {addr!r}: use HOST:PORT, like 127.0.0.1:8080")
        host = host or "0.0.0.0"
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise HttpConfigError(f"--http {addr!r}: the port must be a number from 0 to 65535")
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    """Whether a listening address names loopback only: `localhost` or a loopback IP."""
    name = host.strip().lower().rstrip(".")
    # Not "*.localhost": /etc/hosts may point such a name anywhere.
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False
