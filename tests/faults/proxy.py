"""A TCP proxy the fault tests control: it forwards between the runner and a cluster, and
on `stall()` stops moving bytes in both directions without closing anything (a hung
pooler, a dead NAT entry, a cable pulled between two switches), until `heal()`; with
`stall(answers_only=True)` questions still reach the server and only its answers wait
(a slow answer: the server did its part, the way back is held)."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator

from tests.faults.cluster import free_port

CHUNK = 65536


class Proxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target`; each accepted connection is a pair
    of sockets pumped by one thread."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self._questions = threading.Event()  # runner to server moves
        self._answers = threading.Event()  # server to runner moves
        self._questions.set()
        self._answers.set()
        self._closing = threading.Event()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.2)
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()
        self.stalled_at: float | None = None

    def dsn(self, dsn: str) -> str:
        """The cluster's DSN with its port replaced by the proxy's."""
        return dsn.replace(f"port={self.target}", f"port={self.port}")

    def stall(self, answers_only: bool = False) -> None:
        """Stop moving bytes (connections stay open; new ones are accepted and hang);
        `answers_only`: only those from the server to the runner."""
        self.stalled_at = time.monotonic()
        self._answers.clear()
        if not answers_only:
            self._questions.clear()

    def heal(self) -> None:
        """Move bytes again."""
        self.stalled_at = None
        self._questions.set()
        self._answers.set()

    @contextlib.contextmanager
    def stalled(self, seconds: float) -> Iterator[None]:
        """Stalled for `seconds`, then healed (also when the block fails)."""
        self.stall()
        try:
            time.sleep(seconds)
            yield
        finally:
            self.heal()

    def connections(self) -> int:
        """How many proxied connections are open."""
        with self._lock:
            return len(self._pairs)

    def close(self) -> None:
        """Close everything."""
        self._closing.set()
        self.heal()
        self._listener.close()
        with self._lock:
            for a, b in self._pairs:
                a.close()
                b.close()
        for thread in self._threads:
            thread.join(timeout=2)

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, server))
            thread = threading.Thread(target=self._pump, args=(client, server), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        peer = {client: server, server: client}
        moving = {client: self._questions, server: self._answers}
        try:
            while not self._closing.is_set():
                # a stall: the stalled side is not read, so nothing moves from it (the
                # kernel's buffers fill)
                readable = [s for s in (client, server) if moving[s].is_set()]
                if not readable:
                    time.sleep(0.01)
                    continue
                ready, _, _ = select.select(readable, [], [], 0.1)
                for source in ready:
                    if not moving[source].is_set():
                        continue
                    data = source.recv(CHUNK)
                    if not data:
                        return
                    peer[source].sendall(data)
        except OSError:
            return
        finally:
            with self._lock:
                if (client, server) in self._pairs:
                    self._pairs.remove((client, server))
            client.close()
            server.close()
