"""The databases the HTTP API serves, and a connection pool per (database, caller role).

The token and anonymous callers use the server's own DSN (the runner's role).
An HTTP Basic caller is checked by PostgreSQL itself: we open a connection as
that role with that password. A server that does not check passwords for the
role (pg_hba `trust`) is detected with a wrong password and refused, since the
password would then prove nothing. Password guessing is slowed down per role
(throttle.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg

from pgtimers.http.errors import HttpError
from pgtimers.http.settings import HttpSettings
from pgtimers.http.throttle import BasicThrottle
from pgtimers.runner.connect import connect_kwargs, database_name

# name -> DSN, a list of DSNs, or a function giving the DSNs served right now
DatabaseSource = Mapping[str, str] | Sequence[str] | Callable[[], Iterable[str]]

APPLICATION_NAME = "pgtimers http"
# run-now waits up to 60 s inside PostgreSQL; anything else is quick
SERVER_SETTINGS = {"application_name": APPLICATION_NAME, "statement_timeout": "90s"}
TRUST_PROBE_SECONDS = 300.0
FAILED_LOGIN_SECONDS = 5.0
MAX_ROLE_POOLS = 64
_SALT = secrets.token_bytes(16)


@dataclass(frozen=True)
class Caller:
    """Who is calling: the token, a database role (HTTP Basic), or anonymous loopback."""

    kind: Literal["token", "basic", "anonymous"]
    role: str = ""
    password: str = field(default="", repr=False)

    @property
    def label(self) -> str:
        """How the caller shows in messages: its role, or `token` / `anonymous`."""
        return self.role if self.kind == "basic" else self.kind


@dataclass
class _RolePool:
    pool: asyncpg.Pool
    secret: bytes
    verified_until: float


def _secret(password: str) -> bytes:
    return hashlib.sha256(_SALT + password.encode("utf-8")).digest()


class Backend:
    """Served databases by name, and the pools to reach them as each caller."""

    def __init__(self, source: DatabaseSource, settings: HttpSettings) -> None:
        self._source = source
        self.settings = settings
        self._own: dict[str, asyncpg.Pool] = {}
        self._roles: dict[tuple[str, str], _RolePool] = {}
        self._failed: dict[tuple[str, str, bytes], float] = {}
        self._trust: dict[tuple[str, str], float] = {}
        self._throttle = BasicThrottle()
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._names: dict[str, str] = {}
        self._closing: set[asyncio.Future[None]] = set()

    def databases(self) -> dict[str, str]:
        """name -> DSN of every database served now, the default one first."""
        source = self._source
        if isinstance(source, Mapping):
            return dict(source)
        dsns = list(source()) if callable(source) else list(source)
        found: dict[str, str] = {}
        for dsn in dsns:
            if dsn not in self._names:
                self._names[dsn] = database_name(dsn)
            found.setdefault(self._names[dsn], dsn)
        return found

    def resolve(self, name: str | None) -> tuple[str, str]:
        """(name, DSN) of `?db=name`, or of the default database without it."""
        served = self.databases()
        if name is None:
            if not served:
                raise HttpError(503, "no database is served yet")
            return next(iter(served.items()))
        if name not in served:
            raise HttpError(404, f"there is no database '{name}' served here")
        return name, served[name]

    async def pool(self, dsn: str, caller: Caller) -> asyncpg.Pool:
        """A pool that connects to `dsn` as the caller's role."""
        if caller.kind != "basic":
            pool = self._own.get(dsn)
            if pool is None:
                async with self._locks.setdefault((dsn, ""), asyncio.Lock()):
                    pool = self._own.get(dsn)
                    if pool is None:
                        pool = self._own[dsn] = await self._new_pool(connect_kwargs(dsn))
            return pool
        return await self._role_pool(dsn, caller.role, caller.password)

    async def _new_pool(self, kwargs: dict[str, Any]) -> asyncpg.Pool:
        kwargs = dict(kwargs)
        kwargs.setdefault("timeout", 10.0)
        return await asyncpg.create_pool(
            min_size=0,
            max_size=self.settings.pool_size,
            max_inactive_connection_lifetime=60.0,
            server_settings=SERVER_SETTINGS,
            **kwargs,
        )

    def _role_kwargs(self, dsn: str, role: str, password: str) -> dict[str, Any]:
        kwargs = connect_kwargs(dsn)
        kwargs.pop("passfile", None)
        kwargs.update(user=role, password=password)
        kwargs.setdefault("timeout", 10.0)
        return kwargs

    async def _role_pool(self, dsn: str, role: str, password: str) -> asyncpg.Pool:
        key = (dsn, role)
        secret = _secret(password)
        now = time.monotonic()
        entry = self._roles.get(key)
        if entry and entry.secret == secret and entry.verified_until > now:
            return entry.pool
        if self._failed.get((dsn, role, secret), 0.0) > now:
            raise _refused(role)
        # a password verified before for this role is not a guess
        if not (entry and entry.secret == secret):
            self._throttle.admit(role)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            entry = self._roles.get(key)
            if entry and entry.secret == secret and entry.verified_until > time.monotonic():
                # verified meanwhile by a request ahead of this one
                self._throttle.succeeded(role)
                return entry.pool
            kwargs = self._role_kwargs(dsn, role, password)
            try:
                await self._verify(dsn, role, secret, kwargs)
            except HttpError:
                # the password no longer works, so it no longer counts as verified before
                stale = self._roles.get(key)
                if stale and stale.secret == secret:
                    self._close_later(self._roles.pop(key).pool)
                raise
            except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
                self._throttle.forgive(role)
                raise
            self._throttle.succeeded(role)
            await self._check_passwords_are_checked(dsn, role, kwargs)
            until = time.monotonic() + self.settings.auth_cache_seconds
            if entry and entry.secret == secret:
                entry.verified_until = until
                return entry.pool
            if entry:
                self._close_later(entry.pool)
            self._evict()
            pool = await self._new_pool(kwargs)
            self._roles[key] = _RolePool(pool, secret, until)
            return pool

    async def _verify(self, dsn: str, role: str, secret: bytes, kwargs: dict[str, Any]) -> None:
        try:
            conn = await asyncpg.connect(server_settings=SERVER_SETTINGS, **kwargs)
        except (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError):
            self._failed[(dsn, role, secret)] = time.monotonic() + FAILED_LOGIN_SECONDS
            if len(self._failed) > 1024:
                self._failed.clear()
            raise _refused(role) from None
        await conn.close()

    async def _check_passwords_are_checked(
        self, dsn: str, role: str, kwargs: dict[str, Any]
    ) -> None:
        """Refuse HTTP Basic for a role whose password the server does not check."""
        key = (dsn, role)
        if self._trust.get(key, 0.0) > time.monotonic():
            return
        wrong = dict(kwargs, password="wrong-" + secrets.token_urlsafe(24))
        try:
            conn = await asyncpg.connect(server_settings=SERVER_SETTINGS, **wrong)
        except (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError):
            self._trust[key] = time.monotonic() + TRUST_PROBE_SECONDS
            return
        await conn.close()
        raise HttpError(
            401,
            f"the database server does not check passwords for role '{role}' "
            f"(pg_hba.conf trust), so HTTP Basic cannot prove who is calling; "
            "make pg_hba.conf ask for a password (scram-sha-256), or use the token",
        )

    def _evict(self) -> None:
        while len(self._roles) >= MAX_ROLE_POOLS:
            oldest = min(self._roles, key=lambda k: self._roles[k].verified_until)
            self._close_later(self._roles.pop(oldest).pool)

    def _close_later(self, pool: asyncpg.Pool) -> None:
        task = asyncio.ensure_future(_close_pool(pool))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Close every pool, the server's own and the callers'."""
        pools = list(self._own.values()) + [e.pool for e in self._roles.values()]
        self._own.clear()
        self._roles.clear()
        await asyncio.gather(*(_close_pool(p) for p in pools), return_exceptions=True)


def _refused(role: str) -> HttpError:
    return HttpError(
        401,
        f"the database refused role '{role}' with this password",
        {"WWW-Authenticate": 'Basic realm="pgtimers", charset="UTF-8"'},
    )


async def _close_pool(pool: asyncpg.Pool) -> None:
    try:
        await asyncio.wait_for(pool.close(), 10)
    except (asyncio.TimeoutError, OSError, asyncpg.InterfaceError):
        pool.terminate()
