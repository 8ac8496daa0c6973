"""pg_cron's jobs that need to run outside a transaction block (VACUUM, CREATE INDEX
CONCURRENTLY, CALL of a procedure, ...) are imported as autonomous timers, and say so."""

from __future__ import annotations

import psycopg
import pytest

from tests.integration.test_pg_cron_import import add_job, cron, imported  # noqa: F401

AUTONOMOUS = [
    ("VACUUM (ANALYZE) public.events", "VACUUM"),
    ("CALL public.nightly()", "CALL"),
    (
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS e_i ON public.events (i)",
        "CREATE INDEX CONCURRENTLY",
    ),
    ("REINDEX INDEX CONCURRENTLY public.e_i", "REINDEX CONCURRENTLY"),
    ("CLUSTER public.events", "CLUSTER"),
    (
        "/* nightly */ REFRESH MATERIALIZED VIEW\n CONCURRENTLY public.mv",
        "REFRESH MATERIALIZED VIEW CONCURRENTLY",
    ),
    ("SELECT 1; COMMIT", "COMMIT"),
]


@pytest.mark.parametrize(("command", "statement"), AUTONOMOUS)
def test_a_job_that_needs_it_becomes_an_autonomous_timer(
    cron: psycopg.Connection,  # noqa: F811
    command: str,
    statement: str,
) -> None:
    add_job(cron, 1, "0 3 * * *", command, jobname="job")
    rows = imported(cron, dry_run=True)
    assert rows[1]["action"] == "would import"
    assert rows[1]["reason"].startswith("autonomous: runs outside a transaction, as its owner")
    assert f"it uses {statement};" in rows[1]["reason"]
    rows = imported(cron, dry_run=False)
    assert rows[1]["action"] == "imported"
    row = cron.execute("SELECT sql, autonomous FROM timers.timers WHERE name = 'job'").fetchone()
    assert row == (command, True)
    again = imported(cron, dry_run=False)
    assert again[1]["action"] == "already imported"


def test_other_jobs_stay_atomic(cron: psycopg.Connection) -> None:  # noqa: F811
    add_job(cron, 1, "0 3 * * *", "SELECT 1", jobname="plain")
    add_job(cron, 2, "0 3 * * *", "REFRESH MATERIALIZED VIEW public.mv", jobname="refresh")
    add_job(cron, 3, "0 3 * * *", "ANALYZE public.events", jobname="analyze")
    rows = imported(cron, dry_run=False)
    assert all(r["action"] == "imported" and r["reason"] is None for r in rows.values()), rows
    flags = cron.execute("SELECT bool_or(autonomous) FROM timers.timers").fetchone()
    assert flags == (False,)


def test_an_atomic_timer_of_the_same_definition_is_not_taken_as_imported(
    cron: psycopg.Connection,  # noqa: F811
) -> None:
    cron.execute(
        "SELECT timers.save('job', 'cron 0 3 * * *', 'CALL public.nightly()', timezone => 'UTC')"
    )
    add_job(cron, 1, "0 3 * * *", "CALL public.nightly()", jobname="job")
    rows = imported(cron, dry_run=False)
    assert rows[1]["action"] == "cannot import"
    assert "already exists" in rows[1]["reason"]
