"""A network path that stops moving packets without a reset (a hung pooler, a dead NAT
entry): the runner behind it cuts its sessions off within their deadlines and says so,
the server lets go of a run caught mid-way, another runner serves the database
meanwhile, the stalled one serves again once the path heals, and every due time commits
once or is skipped with its reason."""

from __future__ import annotations

import datetime as dt
import itertools
import re
import time
from collections.abc import Callable

import psycopg

from tests.faults.cluster import Cluster
from tests.faults.conftest import audit, settle
from tests.faults.proxy import Proxy
from tests.integration.runner.conftest import LOG_SQL, save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

Start = Callable[..., RunnerProcess]

STALL = 28.0  # seconds the path moves nothing
CONTROL_BOUND = 15.0  # docs/running.md: a stalled control session is cut off by then
# a fire's round trip: its time limit (`own` has 4 s) + the 15 s margin + a look
WORKER_BOUND = 4 + 15 + 2.0
# `own` runs 2 s every 3 s; caught mid-run, its row is free again when the server ends
# the stalled transaction (15 s idle in it): the gap between two of its runs stays under
# this, where a runner holding it for the whole stall makes it longer than STALL
OWN_GAP = 2 + 15 + 3 + 3.0


def _stamps(log: str, pattern: str) -> list[dt.datetime]:
    """The ts= of each log line that matches `pattern`."""
    return [
        dt.datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))
        for m in re.finditer(rf"^ts=(\S+) .*{pattern}.*$", log, re.MULTILINE)
    ]


def _fired(dsn: str, timer: str | None = None) -> list[dt.datetime]:
    """When each run of `timer` (of every timer: None) wrote its row, in order."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT at FROM fired WHERE %(t)s::text IS NULL OR timer = %(t)s ORDER BY at",
            {"t": timer},
        ).fetchall()
    return [r[0] for r in rows]


def _sleeping(dsn: str) -> bool:
    """Whether a run of `own` (the one timer that sleeps) is under way."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'"
            " AND application_name LIKE 'pgtimers%'"
        ).fetchone()
    return bool(row and row[0])


def test_a_stalled_path_is_cut_off_and_the_database_stays_served(
    cluster: Cluster, proxy: Proxy, runners: Start
) -> None:
    dsn = cluster.dsn("app")
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(2):
            save(conn, f"tick{i}", "every 1s", LOG_SQL)
        # a time limit of its own: its run is a transaction the runner holds open
        save(conn, "own", "every 3s", LOG_SQL + "; SELECT pg_sleep(2)", timeout="4s")
    behind = runners("--dsn", proxy.dsn(dsn))
    behind.wait_for("event=serving", timeout=30)
    # the stall comes while the runner behind the proxy runs `own`
    wait_until(lambda: len(_fired(dsn, "own")) >= 2, timeout=20, what="runs of own")
    wait_until(lambda: _sleeping(dsn), timeout=10, what="a run of own under way")
    served_before = behind.log().count("event=serving")
    stalled_at = dt.datetime.now(dt.timezone.utc)
    proxy.stall()
    try:
        direct = runners("--dsn", dsn)  # another runner serves the database meanwhile
        direct.wait_for("event=serving", timeout=30)
        time.sleep(STALL - (dt.datetime.now(dt.timezone.utc) - stalled_at).total_seconds())
        ticks = [t for t in _fired(dsn, "tick0") if t > stalled_at]
        assert len(ticks) >= STALL - 8, ticks
    finally:
        proxy.heal()
    log = behind.log()
    control = _stamps(log, "event=connection_stalled.*session=control")
    assert control, f"the stalled control session was never cut off:\n{log}"
    noticed = (control[0] - stalled_at).total_seconds()
    assert noticed <= CONTROL_BOUND, noticed
    for stamp in _stamps(log, r"event=connection_stalled.*session=worker"):
        assert (stamp - stalled_at).total_seconds() <= WORKER_BOUND, log
    # healed: the stalled runner serves again
    wait_until(lambda: behind.log().count("event=serving") > served_before, timeout=20)
    time.sleep(2)
    settle(dsn)
    for runner in (behind, direct):
        assert runner.stop() == 0
    own = _fired(dsn, "own")
    gap = max((b - a).total_seconds() for a, b in itertools.pairwise(own))
    verdict = audit(dsn)
    print(
        verdict.line(f"a path stalled {STALL:.0f} s under one of 2 runners")
        + f"; control cut off after {noticed:.1f} s; own's longest gap {gap:.1f} s"
    )
    verdict.assert_exact()
    assert gap <= OWN_GAP, own
