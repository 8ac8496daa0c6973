"""timers.save's option autonomous: how it is set and seen, and what its SQL may use."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.rows import dict_row

from tests.integration.test_api import save

HINT = "autonomous => true"


def stored(conn: psycopg.Connection, name: str) -> Any:
    """The autonomous flag of timer name as stored."""
    row = conn.execute("SELECT autonomous FROM timers.timers WHERE name = %s", [name]).fetchone()
    assert row is not None
    return row[0]


def test_save_stores_autonomous_and_status_shows_it(conn: psycopg.Connection) -> None:
    assert save(conn, "plain", "every 5m", "SELECT 1")["autonomous"] is False
    status = save(conn, "vacuum_t", "every 5m", "VACUUM", autonomous=True)
    assert status["autonomous"] is True
    assert stored(conn, "vacuum_t") is True
    assert stored(conn, "plain") is False
    columns = [
        r[0]
        for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'timers.status'::regclass"
            " AND attnum > 0 ORDER BY attnum"
        )
    ]
    # added after the columns before it (a view only grows at its end)
    assert columns[columns.index("catch_up_window") + 1] == "autonomous"


def test_a_save_without_it_replaces_it_like_every_other_option(conn: psycopg.Connection) -> None:
    """A save is the whole definition: retries go back to 0 when left out, and so does this."""
    save(conn, "t", "every 5m", "SELECT 1", autonomous=True, retries=3)
    status = save(conn, "t", "every 10m", "SELECT 2")
    assert (status["autonomous"], status["retries"]) == (False, 0)
    status = save(conn, "t", "every 10m", "SELECT 2", autonomous=True)
    assert status["autonomous"] is True


def test_null_autonomous_is_refused_naming_it(conn: psycopg.Connection) -> None:
    with pytest.raises(errors.NullValueNotAllowed, match="autonomous must be true or false"):
        save(conn, "t", "every 5m", "SELECT 1", autonomous=None)
    with pytest.raises(errors.NullValueNotAllowed, match="autonomous must be true or false"):
        conn.execute(
            'SELECT timers.save_many(\'[{"name": "t", "schedule": "every 5m",'
            ' "sql": "SELECT 1", "autonomous": null}]\')'
        )
    with pytest.raises(psycopg.Error, match="bad autonomous") as info:
        conn.execute(
            'SELECT timers.save_many(\'[{"name": "t", "schedule": "every 5m",'
            ' "sql": "SELECT 1", "autonomous": "sometimes"}]\')'
        )
    assert (info.value.sqlstate or "").startswith("22")
    assert conn.execute("SELECT count(*) FROM timers.timers").fetchone() == (0,)


def test_save_many_takes_autonomous(conn: psycopg.Connection) -> None:
    conn.execute(
        "SELECT timers.save_many('["
        '{"name": "a", "schedule": "every 5m", "sql": "VACUUM", "autonomous": true},'
        '{"name": "b", "schedule": "every 5m", "sql": "SELECT 1"}]\')'
    )
    assert (stored(conn, "a"), stored(conn, "b")) == (True, False)


def test_save_many_checks_shared_sql_again_for_a_timer_that_is_not_autonomous(
    conn: psycopg.Connection,
) -> None:
    """The check of the timer before is reused only when it was the stricter one."""
    with pytest.raises(errors.InsufficientPrivilege, match=r"timer 2: .*may not use VACUUM"):
        conn.execute(
            "SELECT timers.save_many('["
            '{"name": "a", "schedule": "every 5m", "sql": "VACUUM", "autonomous": true},'
            '{"name": "b", "schedule": "every 5m", "sql": "VACUUM"}]\')'
        )


def test_autonomous_on_a_test_clock_is_refused_naming_both(conn: psycopg.Connection) -> None:
    conn.execute("SELECT timers.create_test_clock('c', '2030-01-01 00:00+00')")
    save(conn, "t", "every 5m", "SELECT 1", test_clock="c")
    with pytest.raises(errors.FeatureNotSupported) as info:
        save(conn, "t", "every 5m", "SELECT 2", test_clock="c", autonomous=True)
    text = info.value.diag.message_primary or ""
    assert "autonomous" in text and "test clock" in text and "'c'" in text
    row = conn.execute("SELECT sql, autonomous FROM timers.timers WHERE name = 't'").fetchone()
    assert row == ("SELECT 1", False)


def test_the_audit_trail_records_the_option(conn: psycopg.Connection) -> None:
    save(conn, "t", "every 5m", "VACUUM", autonomous=True)
    row = conn.execute(
        "SELECT detail->'autonomous' FROM timers.audit WHERE action = 'save' AND object = 't'"
    ).fetchone()
    assert row == (True,)


NEEDS_AUTONOMY = [
    "VACUUM",
    "VACUUM (ANALYZE) public.t",
    "CREATE INDEX CONCURRENTLY t_i ON public.t (i)",
    "DROP INDEX CONCURRENTLY t_i",
    "REINDEX TABLE CONCURRENTLY public.t",
    "REINDEX SCHEMA public",
    "CLUSTER",
    "UPDATE public.t SET i = 1; COMMIT; UPDATE public.t SET i = 2",
    "BEGIN; SELECT 1; END",
    "SELECT 1; ROLLBACK",
    "SAVEPOINT s; SELECT 1; ROLLBACK TO s; RELEASE s",
]


@pytest.mark.parametrize("text", NEEDS_AUTONOMY)
def test_what_needs_autonomy_is_refused_atomic_with_a_hint_and_saved_autonomous(
    conn: psycopg.Connection, text: str
) -> None:
    with pytest.raises(errors.InsufficientPrivilege, match="may not use") as info:
        save(conn, "t", "every 5m", text)
    assert HINT in (info.value.diag.message_hint or "")
    assert save(conn, "t", "every 5m", text, autonomous=True)["autonomous"] is True


@pytest.mark.parametrize(
    "text",
    [
        "REFRESH MATERIALIZED VIEW CONCURRENTLY public.mv",
        "CLUSTER public.t USING t_i",
        "CALL public.p()",
    ],
)
def test_what_works_in_a_transaction_is_saved_either_way(
    conn: psycopg.Connection, text: str
) -> None:
    assert save(conn, "a", "every 5m", text)["autonomous"] is False
    assert save(conn, "b", "every 5m", text, autonomous=True)["autonomous"] is True


STILL_REFUSED = [
    ("CREATE DATABASE x", "CREATE DATABASE"),
    ("DROP DATABASE x", "DROP DATABASE"),
    ("ALTER SYSTEM SET work_mem = '1MB'", "ALTER SYSTEM"),
    ("CREATE ROLE x", "CREATE ROLE"),
    ("ALTER USER x SUPERUSER", "ALTER USER"),
    ("GRANT pg_read_all_data TO x", "GRANT of a role"),
    ("SET ROLE postgres", "SET ROLE"),
    ("RESET ROLE", "RESET ROLE"),
    ("SET SESSION AUTHORIZATION postgres", "SET SESSION AUTHORIZATION"),
    ("CREATE TABLESPACE ts LOCATION '/tmp'", "CREATE TABLESPACE"),
    ("PREPARE TRANSACTION 'x'", "PREPARE TRANSACTION"),
    ("COMMIT PREPARED 'x'", "COMMIT PREPARED"),
    ("ROLLBACK PREPARED 'x'", "ROLLBACK PREPARED"),
    ("LOAD 'x'", "LOAD"),
    ("COPY public.t TO PROGRAM 'cat'", "COPY ... PROGRAM"),
    ("COPY public.t FROM '/etc/passwd'", "COPY ... a file"),
    ("DECLARE c CURSOR WITH HOLD FOR SELECT 1", "DECLARE ... WITH HOLD"),
    ("SELECT dblink_exec('dbname=x', 'SELECT 1')", "dblink_exec()"),
]


# refused for an atomic timer because the runner's session outlives the run; an autonomous
# timer's session is its owner's, made for the run and closed after it
SESSION_ONLY = [
    "PREPARE p AS SELECT 1; EXECUTE p; DEALLOCATE p",
    "DISCARD ALL",
    "RESET ALL",
    "LISTEN x; UNLISTEN x",
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
    "SET exit_on_error = on",
    "DO $$BEGIN NULL; END$$; PREPARE q AS SELECT 1",
]


@pytest.mark.parametrize("text", SESSION_ONLY)
def test_what_would_outlive_a_run_in_the_runners_session_is_saved_autonomous(
    conn: psycopg.Connection, text: str
) -> None:
    with pytest.raises(errors.InsufficientPrivilege, match="may not use"):
        save(conn, "t", "every 5m", text)
    assert save(conn, "t", "every 5m", text, autonomous=True)["autonomous"] is True


@pytest.mark.parametrize(("text", "statement"), STILL_REFUSED)
def test_autonomous_sql_still_may_not_leave_the_database_or_the_owner(
    conn: psycopg.Connection, text: str, statement: str
) -> None:
    with pytest.raises(errors.InsufficientPrivilege) as info:
        save(conn, "t", "every 5m", text, autonomous=True)
    assert f"may not use {statement}" in (info.value.diag.message_primary or "")
    # nothing here is for autonomy to fix: no hint says so
    assert HINT not in (info.value.diag.message_hint or "")
    assert conn.execute("SELECT count(*) FROM timers.timers").fetchone() == (0,)


def test_autonomous_reasons_do_not_say_a_run_is_one_transaction(conn: psycopg.Connection) -> None:
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            "SELECT statement, reason FROM timers._sql_refusal_rules(true)"
        ).fetchall()
    assert rows
    for row in rows:
        assert "a run is one transaction" not in row["reason"], row
