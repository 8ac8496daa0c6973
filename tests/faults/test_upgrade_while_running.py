"""`pgtimers install` of this tree over the previous release's schema while runners of
the previous release fire every second, then the runners restarted with this tree
(docs/upgrading.md's order): every due time commits once or is skipped with its reason,
and the old runners keep firing through the install."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from pgtimers.schema.install import current_revision, upgrade
from tests import previous_release
from tests.conftest import scalar
from tests.faults.cluster import Cluster
from tests.faults.conftest import audit, settle
from tests.integration.runner.conftest import LOG_SQL, LOG_TABLE, RunnerProcess, save, wait_until

Start = Callable[..., RunnerProcess]
# What a runner says when something failed under it (a routine gone: database_unavailable,
# database_task_failed, worker_failed, run_error ...): any warning or error but the skips
# of the start, before any runner served (none since the install: checked apart).


@pytest.fixture
def release(tmp_path: Path) -> Path:
    """The previous release's files (skips without git history)."""
    return previous_release.checkout(previous_release.previous_release(), tmp_path / "old")


@pytest.fixture
def old_cluster(major: int, release: Path) -> Iterator[Cluster]:
    """A cluster of this test's own with database `app`, the previous release's schema
    installed by the previous release's code, and the `fired` table."""
    made = Cluster(major).init()
    try:
        made.start()
        with made.admin() as admin:
            admin.execute("CREATE DATABASE app")
        previous_release.install(release, made.dsn("app"))
        with psycopg.connect(made.dsn("app"), autocommit=True) as conn:
            conn.execute(LOG_TABLE)
        yield made
    finally:
        made.cleanup()


def _fired(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return int(scalar(conn, "SELECT count(*) FROM fired"))


def _more_fires(dsn: str, than: int, what: str) -> None:
    wait_until(lambda: _fired(dsn) >= than + 12, timeout=30, what=what)


def _trouble(log: str) -> list[str]:
    return [
        line
        for line in log.splitlines()
        if ("level=warning" in line or "level=error" in line) and "event=run_skipped" not in line
    ]


def _previous_release_defect(line: str) -> bool:
    """The previous release's runner reads the null id of a claim that raised (its schema's
    answer while the install holds claims back) with int() and loses that worker, which it
    starts again: its own defect, which this release's schema (id 0) and runner (a null read
    as 0) fix (f57e2fe). It shows on a loaded machine, with the code of either release."""
    return (
        "event=worker_failed" in line
        and "error_type=TypeError" in line
        and "not 'NoneType'" in line
    )


def test_install_while_previous_runners_fire_every_second(
    old_cluster: Cluster, release: Path, runners: Start, tmp_path: Path
) -> None:
    dsn = old_cluster.dsn("app")
    before = current_revision(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(4):
            save(conn, f"all{i}", "every 1s", LOG_SQL + "; SELECT pg_sleep(0.2)", catch_up="all")
        for i in range(2):
            save(conn, f"skip{i}", "every 1s", LOG_SQL + "; SELECT pg_sleep(0.2)")
    old = [
        previous_release.OldRunner(release, ["--dsn", dsn], tmp_path / f"old{i}.log")
        for i in range(2)
    ]
    try:
        for proc in old:
            proc.wait_for("event=serving", timeout=30)
        _more_fires(dsn, 0, "the old runners firing")

        # the install, with runs in flight
        with psycopg.connect(dsn, autocommit=True) as conn:
            install_at = scalar(conn, "SELECT now()")
        began = time.monotonic()
        installed = upgrade(dsn)
        took = time.monotonic() - began
        assert installed.code is not None, installed.summary()  # the code was applied
        _more_fires(dsn, _fired(dsn), "the old runners firing on the new schema")

        # then the runners, one at a time: a new one starts, the old ones stop
        new = runners("--dsn", dsn)
        new.wait_for("event=serving", timeout=30)
        for proc in old:
            assert proc.stop() == 0, proc.log()
        _more_fires(dsn, _fired(dsn), "the new runner firing")
        time.sleep(1)
        settle(dsn)
        assert new.stop() == 0, new.log()
    finally:
        for proc in old:
            proc.kill()
    verdict = audit(dsn)
    print(
        verdict.line(
            f"install {before} -> {installed.revision} ({installed.summary()}, {took:.2f} s)"
            " under 2 runners of the previous release, then a runner of this tree"
        )
    )
    for i, proc in enumerate(old):
        print(f"old runner {i}, its whole log:\n{proc.log()}")
    verdict.assert_exact()
    with psycopg.connect(dsn, autocommit=True) as conn:
        # the skips are of the start, before any runner served: none since the install
        assert not scalar(
            conn,
            "SELECT count(*) FROM timers.runs WHERE kind = 'skipped' AND due_at >= %s",
            [install_at],
        )
    assert verdict.skipping <= {"skip0", "skip1"}  # catch_up = all runs every due time
    for proc in old:
        trouble = [line for line in _trouble(proc.log()) if not _previous_release_defect(line)]
        assert trouble == [], proc.log()
    assert "event=schema_outdated" not in new.log() and _trouble(new.log()) == [], new.log()
