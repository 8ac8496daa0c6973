"""Settings, addresses and request bodies, without a server."""

from __future__ import annotations

import pytest

from pgtimers.http.body import SAVE_KEYS, parse_object
from pgtimers.http.errors import HttpError, status_for
from pgtimers.http.settings import HttpConfigError, HttpSettings, is_loopback, parse_addr


@pytest.mark.parametrize(
    ("addr", "found"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        ("[::1]:9000", ("::1", 9000)),
        ("localhost:80", ("localhost", 80)),
        (":8080", ("0.0.0.0", 8080)),
        ("8080", ("127.0.0.1", 8080)),
    ],
)
def test_parse_addr(addr: str, found: tuple[str, int]) -> None:
    assert parse_addr(addr) == found


@pytest.mark.parametrize("addr", ["127.0.0.1", "host:port", "[::1]8080", "1.2.3.4:70000"])
def test_bad_addr(addr: str) -> None:
    with pytest.raises(HttpConfigError, match="--http"):
        parse_addr(addr)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("0.0.0.0", False),
        ("10.0.0.1", False),
        ("example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_settings_from_config() -> None:
    token = "x" * 20
    assert HttpSettings.from_config({"http_token": token}, environ={}).token == token
    assert HttpSettings.from_config({}, environ={"PGTIMERS_HTTP_TOKEN": token}).token == token
    assert HttpSettings.from_config({}, environ={}).token is None
    settings = HttpSettings.from_config({"http_allow_anonymous_loopback": True}, environ={})
    assert settings.allow_anonymous_loopback is True
    flag = HttpSettings.from_config(
        {"http_allow_anonymous_loopback": True}, environ={}, allow_anonymous_loopback=False
    )
    assert flag.allow_anonymous_loopback is False
    with pytest.raises(HttpConfigError, match="'http_allow_anonymous_loopback' must be true"):
        HttpSettings.from_config({"http_allow_anonymous_loopback": "yes"}, environ={})
    with pytest.raises(HttpConfigError, match="'http_token' must be a string"):
        HttpSettings.from_config({"http_token": 5}, environ={})


def test_times_and_intervals_become_text() -> None:
    body = parse_object(
        b'{"name": "a", "schedule": "hourly", "sql": "SELECT 1", "start_at": 0, "timeout": 1.5}',
        SAVE_KEYS,
        empty_ok=False,
    )
    assert body["start_at"] == "1970-01-01T00:00:00+00:00"
    assert body["timeout"] == "1.5 seconds"
    with pytest.raises(HttpError, match="out of range"):
        parse_object(
            b'{"name": "a", "schedule": "h", "sql": "s", "end_at": 100000000000000000000}',
            SAVE_KEYS,
            False,
        )


@pytest.mark.parametrize(
    ("state", "status"),
    [("P0002", 404), ("42501", 403), ("55P03", 409), ("55000", 503), ("22023", 400),
     ("42601", 400), ("54000", 400), ("22007", 400), ("28P01", 401), ("XX000", 500),
     (None, 500)],
)  # fmt: skip
def test_status_for(state: str | None, status: int) -> None:
    assert status_for(state) == status
