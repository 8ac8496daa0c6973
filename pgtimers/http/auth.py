"""Who is calling: a bearer token, HTTP Basic with a database role, or nobody
(only on a loopback address, when explicitly allowed). Also the two browser
guards: a cross-site POST is refused (Origin), and anonymous access answers
only to the exact loopback names it serves, in the Host header and in an
absolute-form request target (so DNS rebinding cannot reach it)."""

from __future__ import annotations

import base64
import binascii
import hmac
from urllib.parse import urlsplit

from aiohttp import web

from pgtimers.http.backend import Caller
from pgtimers.http.errors import HttpError
from pgtimers.http.settings import HttpSettings

CHALLENGE = {"WWW-Authenticate": 'Basic realm="pgtimers", charset="UTF-8"'}
# IP literals cannot be rebound, and `localhost` resolves on this machine; any other
# name (`evil.localhost` too) may resolve wherever its owner likes.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


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


def _served_names(request: web.Request) -> set[str]:
    """`localhost`, `127.0.0.1`, `[::1]` and the address the request came to, each
    bare or with the port it came to."""
    transport = request.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    if not isinstance(sockname, tuple):
        return set()
    address, port = str(sockname[0]), int(sockname[1])
    names = {*LOOPBACK_NAMES, f"[{address}]" if ":" in address else address}
    return names | {f"{name}:{port}" for name in names}


def _claimed_names(request: web.Request) -> list[str]:
    """The Host header, and the authority of an absolute-form target (`GET http://x/`)."""
    claimed = [request.headers.get("Host", "")]
    target = request.raw_path
    if not target.startswith("/"):
        claimed.append(urlsplit(target).netloc if "://" in target else target)
    return claimed


def _refuse_foreign_host(request: web.Request) -> None:
    served = _served_names(request)
    for name in _claimed_names(request):
        # no Host header at all (HTTP/1.0) names nothing; aiohttp needs one in HTTP/1.1
        if name and name.lower() not in served:
            raise _unauthorized(
                "anonymous access answers only to a loopback host name it serves "
                f"(localhost, 127.0.0.1 or [::1], with its port or none), not {name!r}"
            )


def authenticate(request: web.Request, settings: HttpSettings, anonymous_ok: bool) -> Caller:
    """The caller of a request, or a 401 saying what is missing or wrong."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() == "bearer":
            token = value.strip()
            if settings.token and hmac.compare_digest(token.encode(), settings.token.encode()):
                return Caller("token")
            if settings.token_generated:
                raise _unauthorized(
                    "bad token: pgtimers run makes a new one each time it starts; "
                    "open the console link it printed last"
                )
            raise _unauthorized("bad token")
        if scheme.lower() == "basic":
            return _basic(value)
        raise _unauthorized("use Authorization: Bearer <token> or Basic <role:password>")
    if anonymous_ok:
        _refuse_foreign_host(request)
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
