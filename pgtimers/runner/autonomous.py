"""Autonomous runs: a timer's SQL run as its owner, in a session of the owner's own login,
statement by statement outside any transaction block (VACUUM, CREATE INDEX CONCURRENTLY,
procedures that COMMIT). The session is made for the run and closed after it, so nothing
the SQL leaves in it reaches another run; the worker records the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgtimers.queries import beside
from pgtimers.runner.clock import REAL, Clock
from pgtimers.runner.messages import KEPT, Said, line

query = beside(__file__, "autonomous.sql")

# How long the owner's session may take to connect, and how long a cancelled statement
# may take to stop before its session is closed (its backend then ends at its next check
# of the client, client_connection_check_interval).
CONNECT_SECONDS = 10.0
CANCEL_GRACE = 5.0
# Whether the client is still there, checked by the owner's backend this often (ms): a
# runner that dies ends the run's session within about this long.
CHECK_CLIENT_MS = 1000
# How long an autonomous run waits for a connection slot for its owner's session.
SLOT_WAIT = 30.0
# The command tags whose count is rows written.
_WRITES = ("INSERT", "UPDATE", "DELETE", "MERGE", "COPY")


@dataclass(frozen=True)
class Attempt:
    """An autonomous attempt committed as started (timers._autonomous_start)."""

    run_id: int
    timer: str
    owner: str
    statements: list[str]
    due_at: str
    prev_due_at: str
    attempt: int
    timeout_ms: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Attempt:
        """The attempt as timers._autonomous_start describes it."""
        return cls(
            run_id=int(data["run_id"]),
            timer=str(data["timer"]),
            owner=str(data["owner"]),
            statements=[str(s) for s in data["statements"]],
            due_at=str(data["due_at"]),
            prev_due_at=str(data["prev_due_at"]),
            attempt=int(data["attempt"]),
            timeout_ms=int(data["timeout_ms"]),
        )


@dataclass(frozen=True)
class Outcome:
    """What an autonomous run did, for timers._autonomous_finish; messages: what its
    session was told (messages.py), of which messages_cut bytes were cut."""

    ok: bool
    error: str = ""
    sqlstate: str = ""
    rows: int = 0
    messages: str = ""
    messages_cut: int = 0

    def as_json(self) -> dict[str, Any]:
        """The outcome as timers._autonomous_finish takes it."""
        return {
            "ok": self.ok,
            "error": self.error,
            "sqlstate": self.sqlstate,
            "rows": self.rows,
            "messages": self.messages,
            "messages_cut": self.messages_cut,
        }


# A statement the run's whole time limit stopped (timers._run_error says it plainly).
TIMED_OUT = Outcome(False, "canceling statement due to statement timeout", "57014")


def owner_dsn(runner_dsn: str, owner: str, owner_dsns: Mapping[str, str]) -> str:
    """The DSN of the owner's login: the runner's DSN with the owner's user name and no
    password (libpq then finds one: the password file, a service file; or trust or peer
    where the server allows them), with what the runner's config gives for that owner
    (--owner-dsn: a host, a password, a service ...) over it. Always the runner's database:
    the timer lives there. An owner that is the runner's own login keeps the runner's
    password: it is no other role's."""
    runner = conninfo_to_dict(runner_dsn)
    params = {k: v for k, v in runner.items() if k != "password" or runner.get("user") == owner}
    params["user"] = owner
    if owner in owner_dsns:
        params.update(conninfo_to_dict(owner_dsns[owner]))
        if runner.get("dbname"):
            params["dbname"] = runner["dbname"]
    return make_conninfo("", **params)


def _not_logged_in(owner: str, exc: BaseException) -> Outcome:
    message = str(exc).strip().replace("\n", " ")
    return Outcome(
        False,
        f"the runner cannot log in as the timer's owner {owner!r}, as whom an autonomous"
        f" timer runs: {message}. Give the runner that login: its password in the runner's"
        f" password file (PGPASSFILE or ~/.pgpass), a service file, --owner-dsn"
        f" {owner}=<DSN>, or trust/peer for it in pg_hba.conf (docs/running.md,"
        f' "Autonomous timers")',
        getattr(exc, "sqlstate", None) or "28000",
    )


def no_slot(waited: float) -> str:
    """The error of a run that found no connection slot for its owner's session."""
    return (
        f"not run: no connection of the runner's budget came free for the owner's session in"
        f" {waited:g} s (an autonomous run needs one beside its worker's); raise"
        " --max-connections, or run fewer timers at once"
    )


def _rows(cur: psycopg.AsyncCursor[Any], only: bool) -> int:
    """The rows a statement wrote, by its command tag; a lone query's rows returned."""
    tag = (cur.statusmessage or "").split(" ", 1)[0]
    if tag in _WRITES or (only and tag == "SELECT"):
        return max(cur.rowcount, 0)
    return 0


@dataclass
class OwnerSessions:
    """Opens owner sessions for autonomous runs and runs them."""

    runner_dsn: str
    owner_dsns: Mapping[str, str] = field(default_factory=dict)
    # a slot of the connection budget for the owner's session, waited for until the event
    # (or a stop) comes: False then (None: no budget)
    slot: Callable[[asyncio.Event], contextlib.AbstractAsyncContextManager[bool]] | None = None
    # how long a run waits for that slot before it fails (the worker that runs it holds a
    # slot all along: waiting for ever could wait for itself)
    slot_wait: float = SLOT_WAIT
    clock: Clock = REAL

    async def run(self, attempt: Attempt, began: Callable[[int, str], Awaitable[Any]]) -> Outcome:
        """Run the attempt's statements as its owner within its time limit; began(pid,
        login) is told when the owner's session is up. Never raises for the run's faults:
        they are the outcome."""
        gave_up = asyncio.Event()
        waited = asyncio.ensure_future(self._give_up_after(gave_up))
        try:
            async with self._slot(gave_up) as got:
                waited.cancel()
                if got:
                    return await self._run(attempt, began)
        finally:
            waited.cancel()
        if gave_up.is_set():
            return Outcome(False, no_slot(self.slot_wait), "53300")
        return Outcome(False, "not run: the runner was stopping", "57P01")

    async def _give_up_after(self, gave_up: asyncio.Event) -> None:
        await self.clock.sleep(self.slot_wait)
        gave_up.set()

    @contextlib.asynccontextmanager
    async def _slot(self, gave_up: asyncio.Event) -> AsyncIterator[bool]:
        if self.slot is None:
            yield True
            return
        async with self.slot(gave_up) as got:
            yield got

    async def _run(self, attempt: Attempt, began: Callable[[int, str], Awaitable[Any]]) -> Outcome:
        deadline = self.clock.now() + attempt.timeout_ms / 1000
        try:
            conn = await psycopg.AsyncConnection.connect(
                owner_dsn(self.runner_dsn, attempt.owner, self.owner_dsns),
                autocommit=True,
                connect_timeout=int(CONNECT_SECONDS),
                application_name=f"pgtimers: {attempt.timer}"[:63],
                options=f"-c statement_timeout={attempt.timeout_ms}"
                f" -c client_connection_check_interval={CHECK_CLIENT_MS}",
            )
        except (psycopg.Error, OSError) as exc:
            return _not_logged_in(attempt.owner, exc)
        said = Said()
        conn.add_notice_handler(lambda d: _heard(said, d))
        try:
            outcome = await self._in_session(conn, attempt, began, deadline, said)
        finally:
            await _close(conn)
        return dataclasses.replace(outcome, messages=said.text, messages_cut=said.more)

    async def _in_session(
        self,
        conn: psycopg.AsyncConnection[Any],
        attempt: Attempt,
        began: Callable[[int, str], Awaitable[Any]],
        deadline: float,
        said: Said | None = None,
    ) -> Outcome:
        said = said if said is not None else Said()  # the session's notices go there (_run)
        try:
            cur = await conn.execute(query("whoami"))
            login, _role, pid = await cur.fetchone() or ("", "", 0)
            if login != attempt.owner:
                return Outcome(
                    False,
                    f"the owner's DSN logs in as {login!r}, not as the timer's owner"
                    f" {attempt.owner!r}: an autonomous timer runs as its owner only",
                    "28000",
                )
            await began(int(pid), str(login))
            await conn.execute(
                query("run_settings"),
                (attempt.timer, attempt.due_at, attempt.prev_due_at, str(attempt.attempt)),
            )
            rows = 0
            only = len(attempt.statements) == 1
            for statement in attempt.statements:
                done = await _within(conn, statement, deadline - self.clock.now(), self.clock)
                if done is None:
                    return TIMED_OUT
                rows += _rows(done, only)
            return Outcome(True, rows=rows)
        except psycopg.Error as exc:
            diag = exc.diag
            for name, text in (("DETAIL", diag.message_detail), ("HINT", diag.message_hint)):
                if text:
                    said.add(f"{name}: {text}")
            return Outcome(False, diag.message_primary or str(exc), exc.sqlstate or "")


def _heard(said: Said, diag: psycopg.errors.Diagnostic) -> None:
    """A message the owner's session was told while the run ran: kept when it is a
    NOTICE, INFO or WARNING."""
    severity = diag.severity_nonlocalized or diag.severity or ""
    if severity in KEPT:
        said.add(line(severity, diag.message_primary or "", diag.message_detail, diag.message_hint))


async def _within(
    conn: psycopg.AsyncConnection[Any], statement: str, seconds: float, clock: Clock
) -> psycopg.AsyncCursor[Any] | None:
    """Run one statement within `seconds` of `clock`; None when it had to be stopped
    (cancelled, or its session closed when a cancel was not enough)."""
    if seconds <= 0:
        return None
    # as written: without parameters psycopg reads no placeholders in it
    task = asyncio.ensure_future(conn.execute(statement))
    await clock.wait_first({task}, seconds)
    if task.done():
        return task.result()
    with contextlib.suppress(psycopg.Error):
        await conn.cancel_safe(timeout=CANCEL_GRACE)
    await clock.wait_first({task}, CANCEL_GRACE)
    if not task.done():
        task.cancel()
    with contextlib.suppress(BaseException):
        await task
    return None


async def _close(conn: psycopg.AsyncConnection[Any]) -> None:
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(conn.close(), CANCEL_GRACE)
