"""The HTTP server against slow request bodies (security review, issue 26, item 6).

Any database login could hold request bodies open without limit and so take
every descriptor of the server. Now a body must arrive within the body timeout
of its head (else 408, connection closed); one client (peer address) may have
only so many requests in progress (one more is a 429 with Retry-After; GET
/healthz is not counted); and a caller with bad or no credentials gets its 401
before the body is read, and no `100 Continue`, and its connection is closed
rather than drained.

The slow clients connect from 127.0.0.2, the well-behaved ones from 127.0.0.1:
two clients as far as the server can tell.
"""

from __future__ import annotations

import base64
import json
import selectors
import socket
import time
from collections.abc import Callable

import pytest

from pgtimers.http.limits import client_of
from pgtimers.http.settings import HttpConfigError, HttpSettings
from tests.conftest import Database
from tests.integration.http.conftest import TOKEN, Client, Served
from tests.integration.http.conftest import basic as basic
from tests.integration.http.conftest import basic_roles as basic_roles
from tests.integration.http.conftest import serve as serve

SLOW_CLIENT = "127.0.0.2"
BODY = json.dumps({"name": "slow", "schedule": "daily 02:00", "sql": "SELECT 1"}).encode()


def _open(port: int, source: str = SLOW_CLIENT) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))


def _head(authorization: str | None, length: int, expect: bool = False) -> bytes:
    lines = [
        "POST /api/timers HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        f"Content-Length: {length}",
    ]
    if authorization is not None:
        lines.append(f"Authorization: {authorization}")
    if expect:
        lines.append("Expect: 100-continue")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _basic(role: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{role}:{password}".encode()).decode()


def _until_closed(sock: socket.socket, limit: float) -> tuple[bytes, float]:
    """What the server sent until it closed `sock`, and when it did (inf: still open
    after `limit` seconds)."""
    start = time.monotonic()
    data = b""
    sock.settimeout(0.1)
    while time.monotonic() - start < limit:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return data, time.monotonic() - start
        if not chunk:
            return data, time.monotonic() - start
        data += chunk
    return data, float("inf")


def _all_until_closed(socks: list[socket.socket], limit: float) -> list[tuple[bytes, float]]:
    """_until_closed of each of `socks` at once, timed from now."""
    start = time.monotonic()
    data = dict.fromkeys(socks, b"")
    closed: dict[socket.socket, float] = {}
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, sock)
        while len(closed) < len(socks) and time.monotonic() - start < limit:
            for key, _ in selector.select(0.1):
                ready: socket.socket = key.data
                try:
                    chunk = ready.recv(65536)
                except OSError:
                    chunk = b""
                if chunk:
                    data[ready] += chunk
                else:
                    closed[ready] = time.monotonic() - start
                    selector.unregister(ready)
    return [(data[sock], closed.get(sock, float("inf"))) for sock in socks]


def _status(data: bytes) -> int:
    assert data.startswith(b"HTTP/1.1 "), data[:80]
    return int(data.split()[1])


def _header(data: bytes, name: str) -> str | None:
    head = data.partition(b"\r\n\r\n")[0].decode()
    for row in head.split("\r\n")[1:]:
        key, _, value = row.partition(":")
        if key.strip().lower() == name.lower():
            return value.strip()
    return None


def test_slow_bodies_get_a_408_and_one_client_cannot_hold_more(
    basic: bool, db: Database, serve: Callable[..., Served]
) -> None:
    # a login without any pgtimers rights is enough to reach a body
    login = _basic("pgt_http_nobody", "s3cret-pw")
    port = serve([db.dsn], body_timeout_seconds=1.0, max_requests_per_client=4).port
    # the login is checked once before, so that the slow ones below are not slowed down
    assert Client(port).as_basic("pgt_http_nobody").get("/api/timers").status in (200, 403)
    slow = []
    try:
        for _ in range(10):
            sock = _open(port)
            sock.sendall(_head(login, 1000) + b'{"name": ')
            slow.append(sock)
        # another client is served meanwhile, and /healthz answers anyone
        assert Client(port).get("/healthz").status == 200
        assert Client(port).as_token().get("/api/timers").status == 200
        with _open(port) as probe:
            probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert _status(_until_closed(probe, 5)[0]) == 200
        answers = _all_until_closed(slow, 5)
    finally:
        for sock in slow:
            sock.close()
    statuses = sorted(_status(data) if data else 0 for data, _ in answers)
    assert statuses == [408] * 4 + [429] * 6, answers
    for data, took in answers:
        assert took < 5, f"the server did not close a slow body's connection: {data!r}"
        if _status(data) == 429:
            assert _header(data, "Retry-After") == "1"
            assert "too many requests in progress from 127.0.0.2" in data.decode()
        else:
            assert "did not arrive within 1 s" in data.decode()


def test_a_client_past_its_cap_gets_a_429_until_a_request_ends(
    db: Database, serve: Callable[..., Served]
) -> None:
    port = serve([db.dsn], body_timeout_seconds=30.0, max_requests_per_client=2).port
    token = f"Bearer {TOKEN}"
    held = [_open(port), _open(port)]
    try:
        for sock in held:
            sock.sendall(_head(token, 1000) + b"{")
        time.sleep(0.3)
        with _open(port) as third:
            third.sendall(
                b"GET /api/timers HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + f"Authorization: {token}\r\n\r\n".encode()
            )
            data, _ = _until_closed(third, 5)
        assert _status(data) == 429, data
        assert _header(data, "Retry-After") == "1"
        # another client is not held up
        assert Client(port).as_token().get("/api/timers").status == 200
        # a request that ends frees its slot
        held.pop().close()
        time.sleep(0.3)
        with _open(port) as fourth:
            fourth.sendall(
                b"GET /api/timers HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                + f"Authorization: {token}\r\n\r\n".encode()
            )
            data, _ = _until_closed(fourth, 5)
        assert _status(data) == 200, data
    finally:
        for sock in held:
            sock.close()


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token-0123456789", "Basic !!!", "Digest x"],
)
@pytest.mark.parametrize("expect", [False, True])
def test_bad_credentials_are_a_401_before_the_body(
    db: Database, serve: Callable[..., Served], authorization: str | None, expect: bool
) -> None:
    port = serve([db.dsn]).port
    with _open(port) as sock:
        # a megabyte announced, nothing sent: the answer cannot wait for it
        sock.sendall(_head(authorization, 1_000_000, expect))
        data, took = _until_closed(sock, 5)
    assert _status(data) == 401, data
    assert b"100 Continue" not in data
    assert took < 5, "the server kept reading the body of a refused request"


def test_a_wrong_password_is_a_401_before_the_body(
    basic: bool, db: Database, serve: Callable[..., Served]
) -> None:
    port = serve([db.dsn]).port
    with _open(port) as sock:
        sock.sendall(_head(_basic("pgt_http_admin", "wrong"), 1_000_000, expect=True))
        data, took = _until_closed(sock, 5)
    assert _status(data) == 401, data
    assert b"100 Continue" not in data
    assert took < 5, "the server kept reading the body of a refused request"


def test_expect_100_continue_is_answered_after_authentication(
    db: Database, serve: Callable[..., Served]
) -> None:
    port = serve([db.dsn]).port
    with _open(port, "127.0.0.1") as sock:
        sock.sendall(_head(f"Bearer {TOKEN}", len(BODY), expect=True))
        sock.settimeout(5)
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(BODY)
        data = sock.recv(65536)
    assert _status(data) == 200, data
    assert json.loads(data.partition(b"\r\n\r\n")[2])["name"] == "slow"


def test_the_body_limits_are_settings() -> None:
    assert HttpSettings().body_timeout_seconds == 10.0
    assert HttpSettings().max_requests_per_client == 16
    keys = {"http_body_timeout_seconds": 2, "http_max_requests_per_client": 3}
    settings = HttpSettings.from_config(keys, environ={})
    assert (settings.body_timeout_seconds, settings.max_requests_per_client) == (2.0, 3)
    with pytest.raises(HttpConfigError, match="'http_body_timeout_seconds' must be a number"):
        HttpSettings.from_config({"http_body_timeout_seconds": "10s"}, environ={})
    with pytest.raises(HttpConfigError, match="'http_max_requests_per_client' must be a whole"):
        HttpSettings.from_config({"http_max_requests_per_client": 2.5}, environ={})
    with pytest.raises(HttpConfigError, match="more than 0"):
        HttpSettings(body_timeout_seconds=0)
    with pytest.raises(HttpConfigError, match="at least 1"):
        HttpSettings(max_requests_per_client=0)


def test_a_client_is_an_address_or_an_ipv6_64() -> None:
    assert client_of("192.0.2.7") == "192.0.2.7"
    assert client_of("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_of("2001:db8:1:2:aaaa::1") == client_of("2001:db8:1:2:bbbb::9")
    assert client_of("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert client_of("2001:db8:1:3::1") != client_of("2001:db8:1:2::1")
    assert client_of("fe80::1%eth0") == "fe80::/64"
