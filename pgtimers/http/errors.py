"""Errors of the HTTP API: every one is `{"error": "..."}` with a fitting status.

A PostgreSQL error keeps its message verbatim (the SQL functions already name
what is wrong); its SQLSTATE picks the status. Bad input is never a 500.
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from collections.abc import Awaitable, Callable, Mapping

import asyncpg
from aiohttp import web

from pgtimers.runner import log

# SQLSTATE (exact) -> HTTP status, checked before the classes below.
_BY_STATE = {
    "P0002": 404,  # no such timer
    "42501": 403,  # permission denied (pgtimers_admin, table owner, locked timer)
    "55P03": 409,  # the timer is running
    "55000": 503,  # no runner serves the database, so it cannot run now
    "28000": 401,  # bad role
    "28P01": 401,  # bad password
    "3D000": 503,  # the served database is gone
    "57014": 504,  # statement timeout
    "40001": 503,  # serialization failure: try again
    "40P01": 503,  # deadlock: try again
}
# SQLSTATE class (first two characters) -> HTTP status.
_BY_CLASS = {
    "0A": 400,  # feature not supported, for this input
    "22": 400,  # data exception: bad schedule, zone, interval, NULL, ...
    "2F": 400,  # SQL routine exception
    "3F": 400,  # invalid schema name (e.g. a table name naming no schema)
    "23": 409,  # integrity constraint
    "42": 400,  # syntax error or access rule (42501 above), undefined table
    "54": 400,  # program limit: SQL too long
    "P0": 400,  # raised by a function
    "08": 503,  # connection exception
    "53": 503,  # insufficient resources
    "57": 503,  # operator intervention (shutdown)
}


class HttpError(Exception):
    """An answer other than 200; `message` becomes the body's "error"."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def status_for(sqlstate: str | None) -> int:
    """The HTTP status of a PostgreSQL error."""
    state = sqlstate or ""
    return _BY_STATE.get(state) or _BY_CLASS.get(state[:2], 500)


def from_postgres(exc: asyncpg.PostgresError) -> HttpError:
    """The HTTP error of a PostgreSQL error, its message verbatim."""
    message = getattr(exc, "message", None) or str(exc)
    return HttpError(status_for(getattr(exc, "sqlstate", None)), message)


def json_response(body: str | bytes, status: int = 200) -> web.Response:
    """A response of JSON text made elsewhere (PostgreSQL builds most of ours)."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    return web.Response(body=data, status=status, content_type="application/json")


# The console sends this header; it shows its own sign-in form instead of the browser's.
CONSOLE_HEADER = "X-Pgtimers-Console"


def error_response(err: HttpError, request: web.Request | None = None) -> web.Response:
    """The `{"error": ...}` response of an HttpError, with its headers."""
    response = json_response(json.dumps({"error": err.message}), err.status)
    response.headers.update(err.headers)
    if request is not None and request.headers.get(CONSOLE_HEADER):
        response.headers.popall("WWW-Authenticate", None)
    return response


def _from_aiohttp(exc: web.HTTPException, request: web.Request) -> HttpError:
    headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "www-authenticate")}
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        message = f"{request.method} is not allowed on {request.path}: use {allowed}"
    elif isinstance(exc, web.HTTPNotFound):
        message = f"there is no route {request.method} {request.path}"
    elif isinstance(exc, web.HTTPRequestEntityTooLarge):
        message = f"the request body is too large: at most {request.client_max_size} bytes"
    else:
        message = exc.reason
    return HttpError(exc.status, message, headers)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure into `{"error": ...}` with its status; log only real faults."""
    try:
        return await handler(request)
    except HttpError as err:
        return error_response(err, request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(_from_aiohttp(exc, request), request)
    except asyncpg.PostgresError as exc:
        mapped = from_postgres(exc)
        if mapped.status >= 500:
            log.event(
                logging.WARNING,
                "http_failed",
                method=request.method,
                path=request.path,
                sqlstate=exc.sqlstate,
                error=mapped.message,
            )
        return error_response(mapped, request)
    except (OSError, asyncpg.InterfaceError, asyncio.TimeoutError) as exc:
        log.event(
            logging.WARNING,
            "http_database_unreachable",
            method=request.method,
            path=request.path,
            error=str(exc),
        )
        return error_response(HttpError(503, f"cannot reach the database: {exc}"), request)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        # one line: the path is the caller's (decoded, it may hold line breaks) and the
        # traceback is escaped into a value, so neither can forge a line of the log
        log.event(
            logging.ERROR,
            "http_failed",
            method=request.method,
            path=request.path,
            error_type=type(exc).__name__,
            error=str(exc),
            traceback="".join(traceback.format_exception(exc)),
        )
        return error_response(HttpError(500, "internal error; see the runner's log"), request)
