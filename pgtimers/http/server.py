"""The HTTP server of `pgtimers run --http ADDR`: API, metrics, OpenAPI and the console.

The runner calls `start_http(addr, databases, settings)` in its event loop and
`await server.close()` when it stops. aiohttp (asyncio, like the runner's
asyncpg) parses HTTP: keep-alive, body limits and header checks are its job;
HeadGuard closes connections that are slow to send a request head, RequestLimits
bounds a request's body time and each client's requests in progress.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from pathlib import Path
from urllib.parse import urlencode

from aiohttp import web

from pgtimers.http.apply import add_apply_routes
from pgtimers.http.backend import Backend, DatabaseSource
from pgtimers.http.backfills import add_backfill_routes
from pgtimers.http.context import ANONYMOUS, BACKEND
from pgtimers.http.errors import HttpError, error_middleware, json_response
from pgtimers.http.guard import HeadGuard
from pgtimers.http.keyed import add_keyed_routes
from pgtimers.http.limits import RequestLimits
from pgtimers.http.metrics import metrics
from pgtimers.http.openapi import document
from pgtimers.http.settings import HttpConfigError, HttpSettings, is_loopback, parse_addr
from pgtimers.http.stats import stats
from pgtimers.http.timers import add_routes

LOGGER = logging.getLogger("pgtimers.http")
CONSOLE = Path(__file__).resolve().parent / "console"
CONSOLE_FILES = {
    "index.html": "text/html",
    "console.js": "text/javascript",
    "chart.js": "text/javascript",
    "timer.js": "text/javascript",
    "keyed.js": "text/javascript",
    "export.js": "text/javascript",
    "console.css": "text/css",
}
# The console is one origin's plain files: no inline script, no other site.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
GUARD = web.AppKey("guard", HeadGuard)


def console_link(host: str, port: int, token: str) -> str:
    """`http://HOST:PORT/?token=…`; a wildcard listening address (0.0.0.0, ::) is shown
    as the loopback one, which it serves too."""
    return f"{_shown(host, port)}/?{urlencode({'token': token})}"


def _shown(host: str, port: int) -> str:
    """`http://HOST:PORT` with a wildcard address as the loopback one."""
    shown = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    shown = f"[{shown}]" if ":" in shown else shown
    return f"http://{shown}:{port}"


class HttpServer:
    """A running HTTP server; `close()` stops it and its database pools."""

    def __init__(
        self,
        runner: web.AppRunner,
        listener: asyncio.Server,
        backend: Backend,
        host: str,
        port: int,
    ) -> None:
        self._runner = runner
        self._listener = listener
        self.backend = backend
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        """Where it listens, as http://HOST:PORT."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def public_url(self) -> str:
        """Where a person opens it, as http://HOST:PORT (a wildcard address shown as the
        loopback one): the base of the links in webhook events."""
        return _shown(self.host, self.port)

    def console_url(self, token: str) -> str:
        """The console's address with `?token=`, for a person to open."""
        return console_link(self.host, self.port, token)

    async def close(self) -> None:
        """Stop listening, finish the open requests, close the database pools."""
        self._listener.close()
        await self._runner.cleanup()
        await self._listener.wait_closed()
        await self.backend.close()


async def _openapi(request: web.Request) -> web.Response:
    return web.json_response(document())


def _console_file(name: str) -> web.Response:
    path = CONSOLE / name
    return web.Response(body=path.read_bytes(), content_type=CONSOLE_FILES[name], charset="utf-8")


async def _index(request: web.Request) -> web.Response:
    return _console_file("index.html")


async def _console(request: web.Request) -> web.Response:
    name = request.match_info["file"]
    if name not in CONSOLE_FILES:
        raise HttpError(404, f"there is no route {request.method} {request.path}")
    return _console_file(name)


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for key, value in SECURITY_HEADERS.items():
        response.headers.setdefault(key, value)


async def _health(request: web.Request) -> web.Response:
    return json_response('{"ok": true}')


async def _no_icon(request: web.Request) -> web.Response:
    # browsers ask for one on every page load: no content, rather than a 404 in the log
    return web.Response(status=204)


def make_app(databases: DatabaseSource, settings: HttpSettings, anonymous: bool) -> web.Application:
    """The aiohttp application (tests may serve it on their own)."""
    guard = HeadGuard(settings.header_timeout_seconds, settings.max_header_connections)
    limits = RequestLimits(settings.body_timeout_seconds, settings.max_requests_per_client)
    app = web.Application(
        middlewares=[guard.middleware, limits.middleware, error_middleware],
        client_max_size=settings.max_body_bytes,
    )
    app[GUARD] = guard
    app[BACKEND] = Backend(databases, settings)
    app[ANONYMOUS] = anonymous
    add_routes(app)
    add_backfill_routes(app)
    add_keyed_routes(app)
    add_apply_routes(app)
    app.router.add_get("/api/stats", stats)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/api/openapi.json", _openapi)
    app.router.add_get("/healthz", _health)
    app.router.add_get("/favicon.ico", _no_icon)
    app.router.add_get("/", _index)
    app.router.add_get("/console/{file}", _console)
    app.on_response_prepare.append(_security_headers)
    return app


async def start_http(
    addr: str, databases: DatabaseSource, settings: HttpSettings | None = None
) -> HttpServer:
    """Serve the HTTP API on addr (`127.0.0.1:8080`; port 0 picks a free one).

    databases: name -> DSN, a list of DSNs (the first is the default database),
    or a function returning the DSNs served right now (for --all-databases).
    Raises HttpConfigError when anonymous access is asked for off loopback."""
    settings = settings or HttpSettings()
    host, port = parse_addr(addr)
    anonymous = settings.allow_anonymous_loopback
    if anonymous and not is_loopback(host):
        raise HttpConfigError(
            f"--http {addr}: anonymous access is allowed only on a loopback address "
            "(127.0.0.1, ::1, localhost); set a token or use HTTP Basic"
        )
    if not anonymous and settings.token is None:
        LOGGER.info("HTTP API: no token set; callers sign in with a database role (HTTP Basic)")
    app = make_app(databases, settings, anonymous)
    # lingering_time 0: a body the handler did not read (a 401, 408, 429...) is not read
    # after the answer either (aiohttp would for 10 s); the connection is closed
    runner = web.AppRunner(app, access_log=None, handle_signals=False, lingering_time=0)
    await runner.setup()
    assert runner.server is not None
    # asyncio's own listener instead of web.TCPSite, so each connection is guarded
    factory = app[GUARD].protocol_factory(runner.server)
    loop = asyncio.get_running_loop()
    try:
        listener = await loop.create_server(factory, host, port, reuse_address=True, backlog=128)
    except OSError as exc:
        await runner.cleanup()
        raise HttpConfigError(f"--http {addr}: cannot listen there: {exc.strerror}") from None
    bound = [sock.getsockname() for sock in listener.sockets]
    if anonymous and not all(ipaddress.ip_address(name[0]).is_loopback for name in bound):
        listener.close()
        await runner.cleanup()
        raise HttpConfigError(
            f"--http {addr}: anonymous access is allowed only on a loopback address, "
            f"and {host} is not one here"
        )
    return HttpServer(runner, listener, app[BACKEND], host, int(bound[0][1]))
