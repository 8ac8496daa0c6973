"""Who is calling: a bearer token, HTTP Basic with a database role, or nobody
(only on a loopback address, when explicitly allowed). Also the two browser
guards: a cross-site POST is refused (Origin), and anonymous access needs a
loopback Host header (so DNS rebinding cannot reach it)."""

from __future__ import annotations

import base64
import binascii
import hmac
from urllib.parse import urlsplit

from aiohttp import web

from pgtimers.http_backend import Caller
from pgtimers.http_errors import HttpError
from pgtimers.http_settings import HttpSettings, is_loopback

CHALLENGE = {"WWW-Authenticate": 'Basic realm="pgtimers", charset="UTF-8"'}


def _unauthorized(message: str) -> HttpError:
    return HttpError(401, message, CHALLENGE)


def _basic(value: str) -> Caller:
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _unauthorized("bad Basic credentials: use base64 of role:password") from None
    role, sep, password = decoded.partition(":")
    if not sep or not role:
        raise _unauthorized("bad Basic credentials: use base64 of role:password")
    if "\x00" in decoded:
        raise _unauthorized("bad Basic credentials: a NUL character")
    return Caller("basic", role, password)


def _host_name(host_header: str) -> str:
    host = host_header.strip()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def authenticate(request: web.Request, settings: HttpSettings, anonymous_ok: bool) -> Caller:
    """The caller of a request, or a 401 saying what is missing or wrong."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() == "bearer":
            token = value.strip()
            if settings.token and hmac.compare_digest(token.encode(), settings.token.encode()):
                return Caller("token")
            raise _unauthorized("bad token")
        if scheme.lower() == "basic":
            return _basic(value)
        raise _unauthorized("use Authorization: Bearer <token> or Basic <role:password>")
    if anonymous_ok:
        if not is_loopback(_host_name(request.host)):
            raise _unauthorized(
                f"anonymous access answers only to a loopback host name, not {request.host!r}"
            )
        return Caller("anonymous")
    raise _unauthorized(
        "authentication required: HTTP Basic with a database role and its password, "
        "or Authorization: Bearer <token>"
    )


def refuse_cross_site(request: web.Request) -> None:
    """A browser's POST from another site (its Origin is not this server) is a 403."""
    origin = request.headers.get("Origin")
    if origin is None:
        return
    parts = urlsplit(origin)
    if parts.scheme in ("http", "https") and parts.netloc.lower() == request.host.lower():
        return
    raise HttpError(403, f"cross-site request refused: Origin {origin} is not this server")
