"""Connections that are slow to send a request head (slowloris) are closed.

aiohttp reads a request head for as long as the client takes. HeadGuard keeps
every connection that is waiting for a head (just opened, or idle after a
response) in order of when it started waiting; each is closed when its wait
passes the header timeout, and past `limit` waiting connections the oldest is
closed. A connection stops waiting when its request reaches the application
(`middleware`) and waits again once the response has been written.

It sits between asyncio and aiohttp as a protocol that passes every call on
(`protocol_factory`), so it needs nothing private of aiohttp.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HeadGuard:
    """Which connections wait for a request head, since when; closes the late ones."""

    def __init__(self, timeout: float, limit: int) -> None:
        self.timeout = timeout
        self.limit = limit
        # oldest wait first; the timer closes the connection at its deadline
        self._waiting: OrderedDict[web.RequestHandler, asyncio.TimerHandle] = OrderedDict()

    @property
    def waiting(self) -> int:
        """How many connections are waiting for a request head now."""
        return len(self._waiting)

    def protocol_factory(self, server: web.Server) -> Callable[[], asyncio.Protocol]:
        """A protocol factory for `loop.create_server` that serves `server`, guarded."""
        return lambda: _Guarded(self, server())

    def wait(self, conn: web.RequestHandler) -> None:
        """`conn` starts waiting for a request head now."""
        self.stop(conn)
        loop = asyncio.get_running_loop()
        self._waiting[conn] = loop.call_later(self.timeout, self._expire, conn)
        # Close the oldest, not refuse the newest: a client that holds `limit` slow
        # connections would otherwise shut everyone out; this way a slow connection
        # lasts only until `limit` newer ones come, and a client that sends its head
        # at once (every real one) is through before its turn.
        while len(self._waiting) > self.limit:
            oldest, timer = self._waiting.popitem(last=False)
            timer.cancel()
            oldest.force_close()

    def stop(self, conn: web.RequestHandler) -> None:
        """`conn` has a request, or is gone."""
        timer = self._waiting.pop(conn, None)
        if timer is not None:
            timer.cancel()

    def _expire(self, conn: web.RequestHandler) -> None:
        if self._waiting.pop(conn, None) is not None:
            conn.force_close()

    def _responded(self, conn: web.RequestHandler) -> None:
        if conn.connected:
            self.wait(conn)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Stop the connection's wait for this request; it waits again after the response."""
        conn = request.protocol
        if conn in self._waiting:
            self.stop(conn)
            # aiohttp runs the handler and writes the response in one task per request
            task = asyncio.current_task()
            if task is not None:
                task.add_done_callback(lambda _: self._responded(conn))
        return await handler(request)


class _Guarded(asyncio.Protocol):
    """aiohttp's protocol of one connection, its waits told to the guard."""

    def __init__(self, guard: HeadGuard, inner: web.RequestHandler) -> None:
        self._guard = guard
        self._inner = inner

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._inner.connection_made(transport)
        self._guard.wait(self._inner)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> None:
        # aiohttp's answer is None: the transport closes itself, as without the guard
        self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard.stop(self._inner)
        self._inner.connection_lost(exc)
