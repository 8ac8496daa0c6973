"""One worker: a connection that fires one thing at a time, a run-now request, a due timer
or a keyed timer, each in its own transaction, a batch of them in one round trip
(timers._fire_many: claim, the SQL, bookkeeping and commit, again); a timer with a time
limit of its own takes a second step. Each fire says what it claimed before it runs
(a notice), so a run that ends the session is known and recorded (lost.py)."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Iterator
from typing import Any

import asyncpg

from pgtimers.runner import log
from pgtimers.runner.answers import (
    RUN_TIMEOUT_MS,
    Answer,
    AutonomousStart,
    MachineryFailed,
    Outcome,
    OwnTimeout,
    Ran,
    Unrun,
    parse_answer,
    parse_batch,
    parse_run_result,
)
from pgtimers.runner.autonomous import CONNECT_SECONDS, Attempt, OwnerSessions
from pgtimers.runner.budget import IDLE_CLOSE
from pgtimers.runner.clock import REAL, Clock
from pgtimers.runner.connect import close, connect
from pgtimers.runner.held import Held
from pgtimers.runner.lost import Claim, Lost, LostRuns, claim_from_notice
from pgtimers.runner.messages import RunNotices
from pgtimers.runner.queries import query
from pgtimers.runner.session import MARGIN, QUICK, Session
from pgtimers.runner.trouble import Trouble, is_operational

# A timer whose run raised (not a failed SQL, which is recorded: an error of the
# run machinery itself) is left alone this long, so it cannot make a hot loop.
QUARANTINE_SECONDS = 30.0

# After a fire of a keyed timer, the worker asks for keyed timers only for this long: the
# rest of a clock's owed keyed timers fire back to back without the claims that found
# nothing a moment ago. Then it makes a full round again, so that a run-now request or a
# due timer waits at most this long (plus one fire) behind a long row of keyed fires.
KEYED_STREAK_SECONDS = 0.1

# One round trip fires up to this many, each in its own transaction (timers._fire_many),
# for at most this long: a burst costs one round trip per batch, not per fire, and a run's
# time limit (the CALL's statement_timeout, counted from its start) stays within this of
# its own.
BATCH_MAX = 200
BATCH_MS = 50


class Worker:
    """Fires one thing at a time on its own connection."""

    def __init__(
        self,
        dsn: str,
        database: str,
        runner_id: str,
        name: str,
        lost: LostRuns | None = None,
        trouble: Trouble | None = None,
        held: Held | None = None,
        owners: OwnerSessions | None = None,
        clock: Clock = REAL,
    ) -> None:
        self.dsn = dsn
        self.clock = clock
        self.database = database
        self.runner_id = runner_id
        self.name = name
        self.conn: Session | None = None
        self._quarantine: dict[int, float] = {}
        self._quarantine_keyed: dict[int, float] = {}
        # until when (clock) this worker asks for keyed timers only
        self._keyed_until = 0.0
        self.lost = lost if lost is not None else LostRuns(clock.now)
        self.trouble = trouble if trouble is not None else Trouble(lambda: self.database, clock.now)
        self.held = held if held is not None else Held(lambda: self.database, clock.now)
        self.owners = owners if owners is not None else OwnerSessions(dsn)
        self.pid: int | None = None  # its session's server pid (blocked.py)
        self.busy_since: float | None = None  # (clock) its round trip in flight
        # the connection's secret for its claims' notices, and its own session settings,
        # which each fire's transaction puts back (timers._session_reset)
        self._mark = ""
        self._session: tuple[list[str], list[str]] = ([], [])
        self._claimed: Claim | None = None  # what the round trip in flight said it runs
        self._said = RunNotices()  # what its runs said (messages.py)
        # the round trip in flight must be answered by then (clock), else its
        # connection is cut off (session.py): the watchdog's measure of this worker
        self.answer_by: float | None = None
        self._troubled = False  # the round trip in flight met the server's trouble
        self.has_slot = False  # it holds a slot of the connection budget
        self.slot_since = 0.0  # since when (clock)
        self._used_at = 0.0  # when its connection last fired (clock)

    def idle_left(self) -> float | None:
        """Seconds until the worker's open connection has been idle for IDLE_CLOSE (it then
        closes); None without one."""
        if self.conn is None:
            return None
        if self.conn.is_closed():
            return 0.0  # lost while idle: its slot goes back at once
        return max(0.0, IDLE_CLOSE - (self.clock.now() - self._used_at))

    async def open(self) -> None:
        """Connect, unless the worker's connection is open; then record the runs whose
        session was lost before (lost.py)."""
        if self.conn is None or self.conn.is_closed():
            conn = await connect(self.dsn, f"pgtimers runner {self.name}", self.name, self.database)
            self._mark = secrets.token_hex(16)
            names, values = await conn.fetchrow(query("session_settings")) or ([], [])
            self._session = (list(names or []), list(values or []))
            conn.add_log_listener(self._on_notice)
            self.pid = conn.get_server_pid()
            self.conn = conn
        await self._record_lost(self.conn)

    def _on_notice(self, _conn: Any, message: Any) -> None:
        claim = claim_from_notice(message.message, message.detail, self._mark)
        if claim is not None:
            self._claimed = claim
            self._said.expect()
            return
        self._said.notice(message)

    async def _record_lost(self, conn: Session) -> None:
        """Record the runs whose session was lost as failed attempts (timers._run_lost):
        each is logged as its run's result is."""
        lost = self.lost.take()
        for i, one in enumerate(lost):
            try:
                result = await conn.fetchval(
                    query("run_lost"),
                    one.claim.kind,
                    one.claim.id,
                    one.claim.due_at,
                    self.runner_id,
                    one.outcome(),
                )
            except BaseException:
                self.lost.give_back(lost[i:])
                raise
            recorded = parse_run_result(result)
            if recorded is not None:
                log.run_result(self.database, recorded)  # its run_failed line names why
            else:
                self._say_unrecorded(one)

    async def close(self) -> None:
        """Close the worker's connection, if any."""
        conn, self.conn = self.conn, None
        if conn is not None:
            await close(conn)

    def _quarantined(self, keyed: bool) -> list[int]:
        now = self.clock.now()
        if keyed:
            self._quarantine_keyed = {k: v for k, v in self._quarantine_keyed.items() if v > now}
            return list(self._quarantine_keyed)
        self._quarantine = {k: v for k, v in self._quarantine.items() if v > now}
        return list(self._quarantine)

    async def run_one(self) -> list[Outcome] | None:
        """Fire due timers, run-now requests and keyed timers, a batch in one round trip;
        None when nothing was due, else what the fires it is told of did (Unrun for one
        whose machinery raised). Runs that went well are only counted.

        Raises asyncpg/OSError when the connection fails (the transaction in flight is
        then rolled back by the server: its due time stays for the next claim)."""
        await self.open()
        assert self.conn is not None
        keyed_only = self.clock.now() < self._keyed_until
        self._troubled = False
        self.busy_since = self.clock.now()
        try:
            results = await self._fire(self.conn, keyed_only)
            if keyed_only and results is None:
                self._keyed_until = 0.0  # none left (or the fire raised): a full round next
                results = await self._fire(self.conn, False)
        except Exception as exc:
            self._note_lost(exc)
            raise
        finally:
            self._claimed = None
            self.answer_by = self.busy_since = None
        self._used_at = self.clock.now()
        if not self._troubled:
            self.trouble.worked()
        return results

    def _note_lost(self, exc: Exception) -> None:
        """The round trip failed: when its session is gone while a claimed run was in
        flight, note that run (recorded at the next connection, or run again)."""
        claimed, conn = self._claimed, self.conn
        gone = conn is None or conn.is_closed() or is_connection_error(exc)
        if claimed is None or not gone:
            return
        losses = self.lost.note(claimed, exc)
        if losses is not None:
            log.event(
                logging.WARNING,
                "run_lost",
                database=self.database,
                worker=self.name,
                claimed=claimed.label(),
                due=claimed.due_at,
                losses=losses,
                error=str(exc) or type(exc).__name__,
                note="its session ended from outside; the due time runs again",
            )

    def _say_unrecorded(self, lost: Lost) -> None:
        log.event(
            logging.INFO,
            "run_lost",
            database=self.database,
            worker=self.name,
            claimed=lost.claim.label(),
            due=lost.claim.due_at,
            error=lost.error,
            note="not recorded: it committed, or another session runs it",
        )

    async def _fire(self, conn: Session, keyed_only: bool) -> list[Outcome] | None:
        self._said.take()  # what a round trip that failed heard is not known to be kept
        with self._deadline(conn, RUN_TIMEOUT_MS):
            raw = await conn.fetchval(
                query("fire_many"),
                self.runner_id,
                self._quarantined(keyed=False) + self.held.skip(),
                self._quarantined(keyed=True),
                keyed_only,
                RUN_TIMEOUT_MS,
                BATCH_MAX,
                BATCH_MS,
                self._mark,
                *self._session,
                self.held.late_note(self.trouble.late_note()),
            )
        batch = parse_batch(raw)
        if not batch.fired:
            return None
        # one after another, in the batch's order: each may take a step of its own
        results = [await self._settle(conn, answer, keyed_only) for answer in batch.answers]
        await self._keep_said(conn)
        return results

    async def _settle(self, conn: Session, answer: Answer, keyed_only: bool) -> Outcome:
        """What one fire of a batch did, after the steps it left to the runner: its own
        time limit, an autonomous attempt; a failure of its machinery said (Unrun)."""
        if isinstance(answer, OwnTimeout):
            answer = await self._with_own_timeout(conn, answer)
        if isinstance(answer, AutonomousStart):
            answer = await self._autonomous(conn, answer)
        if isinstance(answer, MachineryFailed):
            self._machinery_failed(answer)
            return Unrun("raised")
        if not isinstance(answer, Ran):
            return Unrun("taken") if not isinstance(answer, Unrun) else answer
        if answer.yielded:
            self.held.yielded(answer.result)  # waited too long for a lock: others go first
        elif answer.result.get("ran_after_yield"):
            self.held.ran(int(answer.result["timer_id"]))
        if answer.keyed and not keyed_only:
            self._keyed_until = self.clock.now() + KEYED_STREAK_SECONDS
        return answer

    async def _keep_said(self, conn: Session) -> None:
        """Write what the runs of the round trip said to their rows, now that they have
        committed (timers._run_messages). A failure loses only those messages."""
        said = self._said.take()
        if not said:
            return
        try:
            with conn.deadline_of(QUICK):
                await conn.fetchval(query("run_messages"), said)
        except asyncpg.PostgresError as exc:
            if is_connection_error(exc):
                raise
            log.event(
                logging.WARNING,
                "run_messages_lost",
                database=self.database,
                worker=self.name,
                runs=len(said),
                sqlstate=exc.sqlstate,
                error=str(exc),
            )

    async def _autonomous(self, conn: Session, started: AutonomousStart) -> Answer:
        """An autonomous attempt, committed as started: run it as its owner, on a session of
        the owner's login, then record its outcome on this worker's session (idle
        meanwhile: no transaction of it holds back CREATE INDEX CONCURRENTLY)."""
        attempt = Attempt.from_json(started.attempt)

        async def began(pid: int, login: str) -> None:
            with conn.deadline_of(QUICK):
                await conn.fetchval(query("autonomous_began"), attempt.run_id, pid, login)

        # the watchdog waits for the run's own limit, its connecting and its cancel
        self.answer_by = self.clock.now() + attempt.timeout_ms / 1000 + CONNECT_SECONDS + 2 * MARGIN
        outcome = await self.owners.run(attempt, began)
        try:
            return await self._finish(conn, attempt.run_id, outcome.as_json())
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            # the worker's session went while the run ran: the outcome goes on a new one
            # (else the attempt is recorded as interrupted by the next look)
            await self.open()
            assert self.conn is not None
            return await self._finish(self.conn, attempt.run_id, outcome.as_json())

    async def _finish(self, conn: Session, run_id: int, outcome: dict[str, Any]) -> Answer:
        with self._deadline(conn, RUN_TIMEOUT_MS):
            recorded = await conn.fetchval(
                query("autonomous_finish"), run_id, outcome, self.runner_id
            )
        return parse_answer(recorded)

    @contextlib.contextmanager
    def _deadline(self, conn: Session, limit_ms: int) -> Iterator[None]:
        """A round trip that runs under a time limit of limit_ms: answered within it and
        MARGIN, else the connection is cut off (session.py)."""
        seconds = limit_ms / 1000 + MARGIN
        self.answer_by = self.clock.now() + seconds
        with conn.deadline_of(seconds):
            yield

    async def _with_own_timeout(self, conn: Session, claim: OwnTimeout) -> Answer:
        """The second step of a timer whose time limit is its own: run it in a transaction
        that has that limit."""
        try:
            with self._deadline(conn, claim.timeout_ms):
                return await self._run_claimed(conn, claim, claim.kind, claim.id)
        except asyncpg.PostgresError as exc:
            if is_connection_error(exc):
                raise
            # a backfill's failure quarantines its timer (claim's timer_id), as _fire's does
            return MachineryFailed(claim.kind, claim.quarantined, exc.sqlstate, str(exc))

    async def _run_claimed(self, conn: Session, claim: OwnTimeout, kind: str, ident: int) -> Answer:
        """_with_own_timeout's transaction: the limit, the run, the session put back."""
        async with conn.transaction():
            await conn.fetchval(query("set_timeout"), str(claim.timeout_ms))
            self._said.expect()
            if kind == "request":
                result = await conn.fetchval(query("run_request"), ident, self.runner_id)
            elif kind == "backfill":
                result = await conn.fetchval(query("run_backfill"), ident, self.runner_id)
            else:
                result = await conn.fetchval(query("run_due"), ident, claim.due_at, self.runner_id)
            await conn.execute(query("session_reset"), *self._session)
            return parse_answer(result)

    def _machinery_failed(self, failure: MachineryFailed) -> None:
        kind, ident = failure.kind, failure.id
        if is_operational(failure.sqlstate):
            # the server's trouble (a full disk, say), not the timer's: no quarantine
            self._troubled = True
            self.trouble.hit(str(failure.sqlstate), str(failure.error))
            return
        if kind != "request":
            quarantine = self._quarantine_keyed if kind == "keyed" else self._quarantine
            quarantine[ident] = self.clock.now() + QUARANTINE_SECONDS
        log.event(
            logging.ERROR,
            "run_error",
            database=self.database,
            worker=self.name,
            claimed=f"{kind}:{ident}",
            sqlstate=failure.sqlstate,
            error=failure.error,
            retry_in=None if kind == "request" else f"{QUARANTINE_SECONDS:g}s",
        )


# A connection that is gone or unusable: closed, a protocol state asyncpg cannot go on
# from (InternalClientError: "cannot switch to state ..."; a server of the wrong kind for
# target_session_attrs), its prepared statement dropped, or the socket's error.
_CONNECTION_ERRORS = (
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.InvalidSQLStatementNameError,
    OSError,
)


def is_connection_error(exc: BaseException) -> bool:
    """Whether an error means a connection is gone or unusable, so that the session must
    be made again; not a run's error. An error the server sent as FATAL or PANIC ended
    the session, whatever its class (exit_on_error makes any error FATAL)."""
    sqlstate = getattr(exc, "sqlstate", "") or ""
    severity = getattr(exc, "severity_en", None) or getattr(exc, "severity", None)
    return (
        isinstance(exc, _CONNECTION_ERRORS)
        or sqlstate.startswith(("08", "57P"))
        or severity in ("FATAL", "PANIC")
    )
