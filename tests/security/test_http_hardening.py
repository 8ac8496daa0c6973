"""The HTTP server against slow clients, password guessing and DNS rebinding
(security review, issue 18, item 5).

A client that sends its request head slowly, or not at all, is closed after the
header timeout, and only so many such connections stay open at once (the
oldest goes first). HTTP Basic failures are slowed down per role: after 5 in a
row a role's password is checked once per window (1, 2, 4, ... s) and a try
before that is a 429. Anonymous loopback access answers only to the exact
loopback names and port it serves, in the Host header and in an absolute-form
request target.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import time
from collections.abc import Callable

import pytest

from pgtimers.http.settings import HttpConfigError, HttpSettings, is_loopback
from tests.conftest import Database
from tests.integration.http.conftest import PASSWORD, Client, Served
from tests.integration.http.conftest import basic as basic
from tests.integration.http.conftest import basic_roles as basic_roles
from tests.integration.http.conftest import serve as serve

HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _seconds_until_closed(sock: socket.socket, limit: float, trickle: bytes = b"") -> float:
    """How long until the server closes `sock` (inf past `limit`), sending `trickle`
    every 0.2 s meanwhile, like a slowloris client."""
    start = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - start < limit:
        try:
            if not sock.recv(1024):
                return time.monotonic() - start
        except TimeoutError:
            pass
        except OSError:
            return time.monotonic() - start
        if trickle:
            try:
                sock.sendall(trickle)
            except OSError:
                return time.monotonic() - start
    return math.inf


def _is_closed(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


def _raw(port: int, request: str) -> tuple[int, str]:
    """Send one request as written (any target, any Host); its status and body."""
    with _connect(port) as sock:
        sock.sendall(request.encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


def test_slow_headers_are_cut_off_at_the_header_timeout(
    db: Database, serve: Callable[..., Served]
) -> None:
    port = serve([db.dsn], header_timeout_seconds=1.0).port
    with _connect(port) as sock:
        sock.sendall(HEAD)
        took = _seconds_until_closed(sock, limit=5, trickle=b"X-Slow: 1\r\n")
    assert 0.8 <= took <= 2.5, f"a head sent one line per 0.2 s was open for {took:.1f} s"


def test_an_idle_connection_is_closed_and_keep_alive_still_works(
    db: Database, serve: Callable[..., Served]
) -> None:
    port = serve([db.dsn], header_timeout_seconds=1.0).port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() == b'{"ok": true}'
        sock = conn.sock
        time.sleep(0.5)
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() == b'{"ok": true}'
        assert conn.sock is sock, "the second request did not reuse the connection"
        assert sock is not None
        took = _seconds_until_closed(sock, limit=5)
    finally:
        conn.close()
    assert 0.8 <= took <= 2.5, f"an idle kept-alive connection was open for {took:.1f} s"


def test_connections_waiting_for_a_head_are_bounded_oldest_first(
    db: Database, serve: Callable[..., Served]
) -> None:
    port = serve([db.dsn], header_timeout_seconds=30.0, max_header_connections=4).port
    slow = []
    try:
        for _ in range(10):
            sock = _connect(port)
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            slow.append(sock)
            time.sleep(0.05)
        deadline = time.monotonic() + 3
        while not all(_is_closed(s) for s in slow[:6]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [_is_closed(s) for s in slow] == [True] * 6 + [False] * 4
        # a client that sends its head at once is served, and pushes out the oldest
        assert Client(port).get("/healthz").status == 200
        time.sleep(0.1)
        assert [_is_closed(s) for s in slow] == [True] * 7 + [False] * 3
    finally:
        for sock in slow:
            sock.close()


def _try(client: Client, role: str, password: str) -> tuple[int, str, str | None]:
    resp = client.as_basic(role, password).get("/api/timers")
    return resp.status, resp.error if resp.status != 200 else "", resp.headers.get("retry-after")


def test_basic_guessing_is_slowed_down_per_role(
    basic: bool, db: Database, serve: Callable[..., Served]
) -> None:
    # no cache of verified passwords: each right password below is checked again
    client = Client(serve([db.dsn], auth_cache_seconds=0).port)
    admin, reader = "pgt_http_admin", "pgt_http_reader"
    assert _try(client, admin, PASSWORD)[0] == 200
    tries = [_try(client, admin, f"guess-{n}") for n in range(10)]
    assert [status for status, _, _ in tries] == [401] * 5 + [429] * 5, tries
    for _, error, retry_after in tries[5:]:
        assert error == f"too many failed sign-ins for role '{admin}': try again in 1 s"
        assert retry_after == "1"
    # another role is not held up
    assert _try(client, reader, "guess")[0] == 401
    # a password verified before for the role is not a guess, and a success starts afresh
    assert _try(client, admin, PASSWORD)[0] == 200
    assert [_try(client, admin, f"again-{n}")[0] for n in range(5)] == [401] * 5

    # not a lockout: the role's window opens again, each time twice as late
    assert [_try(client, reader, f"guess-{n}")[0] for n in range(4)] == [401] * 4
    assert _try(client, reader, "guess-4")[2] == "1"
    # a right password the server has not seen yet waits like any other try
    assert _try(client, reader, PASSWORD)[0] == 429
    time.sleep(1.1)
    assert _try(client, reader, "guess-5")[0] == 401
    status, _, retry_after = _try(client, reader, "guess-6")
    assert (status, retry_after) == (429, "2")
    time.sleep(2.1)
    assert _try(client, reader, PASSWORD)[0] == 200


@pytest.mark.parametrize(
    ("target", "host"),
    [
        ("/api/timers", "evil.localhost:{port}"),
        ("/api/timers", "evil.localhost"),
        ("/api/timers", "evil.example:{port}"),
        ("/api/timers", "localhost:{other}"),
        ("/api/timers", "127.0.0.1:{other}"),
        ("/api/timers", "localhost.:{port}"),
        ("http://evil.localhost:{port}/api/timers", "127.0.0.1:{port}"),
        ("http://evil.example/api/timers", "127.0.0.1:{port}"),
        ("http://localhost:{other}/api/timers", "localhost:{port}"),
        ("http://127.0.0.1:{port}/api/timers", "evil.example"),
    ],
)
def test_anonymous_refuses_other_host_names(
    db: Database, serve: Callable[..., Served], target: str, host: str
) -> None:
    port = serve([db.dsn], token=None, allow_anonymous_loopback=True).port
    names = {"port": port, "other": port + 1}
    request = f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    status, body = _raw(port, request.format(**names))
    assert status == 401, body
    assert "loopback host name" in json.loads(body)["error"]


@pytest.mark.parametrize(
    ("target", "host"),
    [
        ("/api/timers", "127.0.0.1:{port}"),
        ("/api/timers", "localhost:{port}"),
        ("/api/timers", "LocalHost:{port}"),
        ("/api/timers", "localhost"),
        ("/api/timers", "127.0.0.1"),
        ("/api/timers", "[::1]:{port}"),
        ("http://127.0.0.1:{port}/api/timers", "127.0.0.1:{port}"),
        ("http://localhost:{port}/api/timers", "localhost:{port}"),
    ],
)
def test_anonymous_serves_its_loopback_names(
    db: Database, serve: Callable[..., Served], target: str, host: str
) -> None:
    port = serve([db.dsn], token=None, allow_anonymous_loopback=True).port
    request = f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    status, body = _raw(port, request.format(port=port))
    assert status == 200, body
    assert "timers" in json.loads(body)


def test_anonymous_listens_only_on_exact_loopback_names(
    db: Database, serve: Callable[..., Served]
) -> None:
    assert is_loopback("localhost") and is_loopback("127.0.0.1") and is_loopback("[::1]")
    assert not is_loopback("evil.localhost")
    with pytest.raises(HttpConfigError, match="only on a loopback address"):
        serve([db.dsn], addr="evil.localhost:0", allow_anonymous_loopback=True)


def test_the_limits_are_settings() -> None:
    assert HttpSettings().header_timeout_seconds == 10.0
    assert HttpSettings().max_header_connections == 64
    keys = {"http_header_timeout_seconds": 2.5, "http_max_header_connections": 8}
    settings = HttpSettings.from_config(keys, environ={})
    assert (settings.header_timeout_seconds, settings.max_header_connections) == (2.5, 8)
    with pytest.raises(HttpConfigError, match="'http_header_timeout_seconds' must be a number"):
        HttpSettings.from_config({"http_header_timeout_seconds": "10s"}, environ={})
    with pytest.raises(HttpConfigError, match="'http_max_header_connections' must be a whole"):
        HttpSettings.from_config({"http_max_header_connections": 2.5}, environ={})
    with pytest.raises(HttpConfigError, match="more than 0"):
        HttpSettings(header_timeout_seconds=0)
    with pytest.raises(HttpConfigError, match="at least 1"):
        HttpSettings(max_header_connections=0)
