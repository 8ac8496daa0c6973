"""Fault tests: real runners on a cluster of the test's own, faults injected from outside,
and an audit of every due time (committed once, or skipped with its reason)."""

from __future__ import annotations

import datetime as dt
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from pgtimers.schema.install import install
from tests.conftest import Server, scalar
from tests.faults.cluster import Cluster
from tests.faults.proxy import Proxy
from tests.integration.runner.conftest import LOG_TABLE
from tests.support.runner import RunnerProcess


@pytest.fixture(scope="session")
def major(server: Server) -> int:
    """The major version of the test server: the fault clusters run the same."""
    with server.admin() as conn:
        return int(scalar(conn, "SHOW server_version_num")) // 10000


@pytest.fixture
def cluster(major: int) -> Iterator[Cluster]:
    """A cluster of this test's own with database `app`, pgtimers installed, and the
    `fired` table the timers write their due time to."""
    made = Cluster(major).init()
    try:
        made.start()
        prepare(made)
        yield made
    finally:
        made.cleanup()


def prepare(cluster: Cluster) -> None:
    """Database app with pgtimers and the `fired` table."""
    with cluster.admin() as admin:
        admin.execute("CREATE DATABASE app")
    install(cluster.dsn("app"))
    with psycopg.connect(cluster.dsn("app"), autocommit=True) as conn:
        conn.execute(LOG_TABLE)


@pytest.fixture
def proxy(cluster: Cluster) -> Iterator[Proxy]:
    """A TCP proxy to the cluster (proxy.py) that the test can stall; closed at the end."""
    made = Proxy(cluster.port)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def runners(tmp_path: Path) -> Iterator[Callable[..., RunnerProcess]]:
    """Start `pgtimers run` processes (args as given); all are killed at the end."""
    started: list[RunnerProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> RunnerProcess:
        runner = RunnerProcess(list(args), tmp_path / f"runner{len(started)}.log", env)
        started.append(runner)
        return runner

    yield start
    for runner in started:
        runner.kill()
        runner._log.close()


def serving_again(runner: RunnerProcess, since: int, timeout: float = 30) -> float:
    """Seconds until the runner's log has more `event=serving` lines than `since`."""
    began = time.monotonic()
    while runner.log().count("event=serving") <= since:
        if time.monotonic() - began > timeout:
            raise AssertionError(f"not serving again within {timeout} s:\n{runner.log()}")
        time.sleep(0.01)
    return time.monotonic() - began


@dataclass
class Verdict:
    """What became of every due time of `every Ns` timers up to their next due time."""

    due: int = 0
    run: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    runs_recorded: int = 0
    skipping: set[str] = field(default_factory=set)  # the timers that skipped any
    # due times not committed whose final attempt is recorded as failed, by error: not
    # lost (a row and an event say so), but not exact either unless a test allows it
    failed: Counter[str] = field(default_factory=Counter)

    def line(self, fault: str, back: list[float] | None = None) -> str:
        """One line for the closing note."""
        skipped = dict(self.skipped) or 0
        text = (
            f"{fault}: due {self.due}, run {self.run}, skipped {skipped},"
            f" lost {len(self.lost)}, duplicates {len(self.duplicates)}"
        )
        if self.failed:
            text += f", failed {sum(self.failed.values())} ({dict(self.failed)})"
        if back:
            text += f", back to serving {', '.join(f'{b:.2f}' for b in back)} s"
        return text

    def assert_exact(self, failed_only: str | None = None) -> None:
        """Every due time committed once or skipped with a reason; each run recorded. A due
        time recorded as failed passes only when its error starts with `failed_only`."""
        assert self.duplicates == [], f"committed twice: {self.duplicates[:5]}"
        assert self.lost == [], f"lost: {self.lost[:5]}"
        unexpected = [e for e in self.failed if not (failed_only and e.startswith(failed_only))]
        assert unexpected == [], f"failed: {unexpected[:5]}"
        assert self.run == self.runs_recorded, "a run's SQL and its record differ"
        assert self.due > 0


def audit(dsn: str) -> Verdict:
    """Every due time of each `every Ns` timer from its first one up to its next due
    time: committed (the `fired` table, which has no unique key), skipped (timers.runs
    kind skipped, with its reason), or lost."""
    verdict = Verdict()
    with psycopg.connect(dsn, autocommit=True) as conn:
        timers = conn.execute(
            "SELECT name, next_due_at, substring(schedule FROM '^every (\\d+)s$')::int"
            " FROM timers.timers WHERE schedule ~ '^every \\d+s$'"
        ).fetchall()
        for name, next_due, seconds in timers:
            fired = [
                dt.datetime.fromisoformat(r[0].replace("Z", "+00:00"))
                for r in conn.execute("SELECT due FROM fired WHERE timer = %s", [name])
            ]
            skips = conn.execute(
                "SELECT due_at, reason FROM timers.runs WHERE timer = %s AND kind = 'skipped'",
                [name],
            ).fetchall()
            failed = conn.execute(
                "SELECT due_at, error FROM timers.runs WHERE timer = %s AND kind <> 'skipped'"
                " AND NOT ok AND retry_at IS NULL",
                [name],
            ).fetchall()
            verdict.runs_recorded += int(
                scalar(
                    conn,
                    "SELECT count(*) FROM timers.runs WHERE timer = %s AND kind <> 'skipped'"
                    " AND ok",
                    [name],
                )
            )
            _judge(verdict, name, fired, skips, failed, next_due, dt.timedelta(seconds=seconds))
    return verdict


def _judge(
    verdict: Verdict,
    name: str,
    fired: list[dt.datetime],
    skips: list[tuple[dt.datetime, str]],
    failed: list[tuple[dt.datetime, str]],
    next_due: dt.datetime,
    step: dt.timedelta,
) -> None:
    counted = Counter(fired)
    verdict.duplicates += [f"{name}@{d:%H:%M:%S}" for d, n in counted.items() if n > 1]
    skipped = {d: _reason(r) for d, r in skips}
    failures = dict(failed)
    known = set(counted) | set(skipped)
    if not known:
        return
    at = min(known)
    while at < next_due:
        verdict.due += 1
        if at in counted:
            verdict.run += 1
        elif at in skipped:
            verdict.skipped[skipped[at]] += 1
            verdict.skipping.add(name)
        elif at in failures:
            verdict.failed[failures[at]] += 1
        else:
            verdict.lost.append(f"{name}@{at:%H:%M:%S}")
        at += step
    verdict.run += sum(1 for d in counted if d >= next_due)  # none expected


def _reason(text: str) -> str:
    """The kind of a skip reason ("late", "downtime", ...): its first words."""
    return re.split(r"[:(]", text, maxsplit=1)[0].strip() or "?"


def settle(dsn: str, timeout: float = 20) -> None:
    """Until no timer is behind: every due time so far has been dealt with."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while scalar(
            conn,
            "SELECT count(*) FROM timers.timers WHERE next_due_at < now() - interval '1.5 seconds'",
        ):
            if time.monotonic() > deadline:
                raise AssertionError("the timers did not catch up")
            time.sleep(0.1)
