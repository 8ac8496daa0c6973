"""A real webhook receiver for tests: an aiohttp server on a loopback port, in a thread of
its own, that records every POST and answers as the test says (a status, a delay)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Received:
    """One POST as it came: its headers, its exact body, and when."""

    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Records POSTs to any path; `answer(n)` gives (status, delay) for the n-th (0-based)."""

    answer: Callable[[int], tuple[int, float]] = lambda n: (200, 0.0)
    received: list[Received] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None
    _site_port: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closing: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def bodies(self) -> list[Any]:
        with self._lock:
            return [r.json for r in self.received]

    async def _handle(self, request: web.Request) -> web.Response:
        data = await request.read()
        with self._lock:
            n = len(self.received)
            self.received.append(Received(dict(request.headers), data, time.monotonic()))
        status, delay = self.answer(n)
        until = time.monotonic() + delay
        # a stop ends the wait (a handler still sleeping would hold the stop up)
        while time.monotonic() < until and not self._closing:  # noqa: ASYNC110
            await asyncio.sleep(min(0.1, until - time.monotonic()))
        return web.Response(status=status, text="ok" if status < 300 else "nope")

    def start(self) -> None:
        """Listen (on `port`, else a free one); returns once it does."""
        ready = threading.Event()
        self._closing = False

        async def serve() -> None:
            app = web.Application()
            app.router.add_post("/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
            await site.start()
            server = site._server
            assert server is not None
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
            ready.set()

        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(serve(), self._loop)
        assert ready.wait(10), "the receiver did not start"

    def stop(self) -> None:
        """Stop listening (the port stays its: start() listens on it again)."""
        if self._loop is None:
            return
        loop, runner = self._loop, self._runner
        self._closing = True
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._loop = self._runner = None
