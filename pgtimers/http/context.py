"""What every route takes from the application: its Backend, whether anonymous access is
on, who the caller is, and the pool that runs the caller's queries."""

from __future__ import annotations

import asyncpg
from aiohttp import web

from pgtimers.http.auth import authenticate, refuse_cross_site
from pgtimers.http.backend import Backend, Caller

BACKEND = web.AppKey("backend", Backend)
ANONYMOUS = web.AppKey("anonymous", bool)


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
