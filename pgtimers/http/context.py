"""What every route takes from the application: its Backend, whether anonymous access is
on, who the caller is, the pool that runs the caller's queries, and a POST's body, read
only once the caller is known."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import asyncpg
from aiohttp import web

from pgtimers.http.auth import authenticate, refuse_cross_site
from pgtimers.http.backend import Backend, Caller

BACKEND = web.AppKey("backend", Backend)
ANONYMOUS = web.AppKey("anonymous", bool)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def backend_and_caller(request: web.Request) -> tuple[Backend, Caller]:
    """The application's Backend and the request's caller (a 401 when there is none)."""
    backend = request.app[BACKEND]
    return backend, authenticate(request, backend.settings, request.app[ANONYMOUS])


async def caller_pool(request: web.Request) -> asyncpg.Pool:
    """The pool of `?db=` (or the default database) as the request's caller."""
    backend, caller = backend_and_caller(request)
    _, dsn = backend.resolve(request.query.get("db"))
    return await backend.pool(dsn, caller)


async def post_pool(request: web.Request) -> asyncpg.Pool:
    """caller_pool for a POST, which a browser may not send from another site."""
    refuse_cross_site(request)
    return await caller_pool(request)


async def post_body(request: web.Request) -> tuple[asyncpg.Pool, bytes]:
    """post_pool, then the body: a caller with bad or no credentials is a 401 before a
    byte of it is read, and `Expect: 100-continue` is answered only then."""
    pool = await post_pool(request)
    expects = request.headers.get("Expect", "").lower() == "100-continue"
    if expects and not request.content.is_eof():
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0
    return pool, await request.read()


async def continue_after_auth(request: web.Request) -> None:
    """A POST's Expect handler: no `100 Continue` before the caller is known (post_body
    sends it); an Expect other than 100-continue is a 417, as aiohttp's own."""
    expect = request.headers.get("Expect", "")
    if request.version >= (1, 1) and expect.lower() != "100-continue":
        raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect}")


def add_post(app: web.Application, path: str, handler: Handler) -> None:
    """A POST route whose `Expect: 100-continue` waits for authentication."""
    app.router.add_post(path, handler, expect_handler=continue_after_auth)
