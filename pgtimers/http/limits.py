"""Limits on a request once its head is in (HeadGuard covers the time before).

A body must have arrived whole within the body timeout of its head, whoever reads
it and whenever: past that, reading it raises a 408. One client may have only so
many requests in progress at once (from its head until its response is written);
one more is a 429 with Retry-After, answered before anything is read or checked.
A client is its IP address, an IPv6 one its /64 (what one host can pick from).
GET /healthz is not counted: it awaits nothing, so it cannot hold a slot, and a
health probe from a busy client's address (a proxy) should still get its answer.

A body a handler did not read is not read afterwards: the server's
`lingering_time` is 0 (server.py), so the connection is closed after the answer.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web

from pgtimers.http.errors import HttpError, error_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
UNCOUNTED = frozenset({"/healthz"})
# How long a refused client should wait: slots free as requests end, at the latest
# at the body timeout, but nothing says when; a second is a polite retry.
RETRY_AFTER_SECONDS = 1


def client_of(remote: str | None) -> str:
    """The client a peer address counts as: the address, an IPv6 one's /64."""
    remote = remote or ""
    try:
        address = ipaddress.ip_address(remote.split("%", 1)[0])
    except ValueError:
        return remote
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class RequestLimits:
    """Requests in progress per client, and the body deadline of each request."""

    def __init__(self, body_timeout: float, per_client: int) -> None:
        self.body_timeout = body_timeout
        self.per_client = per_client
        self._active: dict[str, int] = {}

    def in_progress(self, client: str) -> int:
        """How many requests of `client` are in progress now."""
        return self._active.get(client, 0)

    def _end(self, client: str) -> None:
        left = self._active.get(client, 0) - 1
        if left > 0:
            self._active[client] = left
        else:
            self._active.pop(client, None)

    def _expire_body(self, request: web.Request) -> None:
        if not request.content.is_eof():
            request.content.set_exception(
                HttpError(
                    408,
                    f"the request body did not arrive within {self.body_timeout:g} s "
                    "of the request's head",
                )
            )

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Refuse a client past its cap; give the body its deadline; close a connection
        whose body was not read whole."""
        if request.path in UNCOUNTED:
            return await handler(request)
        client = client_of(request.remote)
        if self.in_progress(client) >= self.per_client:
            refused = error_response(
                HttpError(
                    429,
                    f"too many requests in progress from {client}: at most "
                    f"{self.per_client} at once",
                    {"Retry-After": str(RETRY_AFTER_SECONDS)},
                ),
                request,
            )
            refused.force_close()
            return refused
        task = asyncio.current_task()
        assert task is not None, "aiohttp runs each request in a task of its own"
        self._active[client] = self.in_progress(client) + 1
        # aiohttp writes the response in the same task: the slot is held until then
        task.add_done_callback(lambda _: self._end(client))
        deadline = None
        if not request.content.is_eof():
            loop = asyncio.get_running_loop()
            deadline = loop.call_later(self.body_timeout, self._expire_body, request)
        try:
            response = await handler(request)
        finally:
            if deadline is not None:
                deadline.cancel()
        if not request.content.is_eof():
            response.force_close()
        return response
