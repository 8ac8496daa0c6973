"""timers.keep_data_for and timers.drop_old_partitions on real range-partitioned tables."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest

from tests.conftest import Database

PARTITIONED = """
    CREATE TABLE events (at timestamptz NOT NULL, note text) PARTITION BY RANGE (at);
    CREATE TABLE events_old1 PARTITION OF events
        FOR VALUES FROM (now() - interval '3 years') TO (now() - interval '2 years');
    CREATE TABLE events_old2 PARTITION OF events
        FOR VALUES FROM (now() - interval '2 years') TO (now() - interval '400 days');
    CREATE TABLE events_recent PARTITION OF events
        FOR VALUES FROM (now() - interval '400 days') TO (now() + interval '1 day');
    CREATE TABLE events_future PARTITION OF events
        FOR VALUES FROM (now() + interval '1 day') TO (MAXVALUE);
    INSERT INTO events VALUES (now() - interval '30 months', 'a'),
        (now() - interval '500 days', 'b'), (now() - interval '10 days', 'c');
"""


@pytest.fixture
def alice(db: Database) -> Iterator[psycopg.Connection]:
    with db.connect(role="pgt_alice") as c:
        c.execute(PARTITIONED)
        yield c


def test_keep_data_for_saves_a_monthly_timer(alice: psycopg.Connection) -> None:
    row = alice.execute("SELECT to_jsonb(timers.keep_data_for('events', '1 year'))").fetchone()
    assert row is not None
    status = row[0]
    assert status["name"] == "keep_events"
    assert status["schedule"] == "monthly 1 02:00"
    assert status["created_by"] == "pgt_alice"
    assert status["sql"] == "SELECT * FROM timers.drop_old_partitions('public.events', '1 year')"


def test_the_timer_sql_drops_whole_old_partitions_only(alice: psycopg.Connection) -> None:
    sql = alice.execute(
        "SELECT (timers.keep_data_for('events', '1 year', 'daily 03:00')).sql"
    ).fetchone()
    assert sql is not None
    dropped = [r[0] for r in alice.execute(sql[0]).fetchall()]
    assert dropped == ["public.events_old1", "public.events_old2"]
    left = alice.execute(
        "SELECT inhrelid::regclass::text FROM pg_inherits"
        " WHERE inhparent = 'events'::regclass ORDER BY 1"
    ).fetchall()
    assert [r[0] for r in left] == ["events_future", "events_recent"]
    assert alice.execute("SELECT note FROM events").fetchall() == [("c",)]
    assert alice.execute("SELECT to_regclass('events_old1')").fetchone() == (None,)
    # nothing older is left: a second run drops nothing
    assert alice.execute(sql[0]).fetchall() == []


def test_date_and_timestamp_keys(alice: psycopg.Connection) -> None:
    alice.execute(
        """
        CREATE TABLE days (d date NOT NULL) PARTITION BY RANGE (d);
        CREATE TABLE days_2001 PARTITION OF days FOR VALUES FROM ('2001-01-01') TO ('2002-01-01');
        CREATE TABLE days_now PARTITION OF days FOR VALUES FROM ('2002-01-01') TO ('2999-01-01');
        CREATE TABLE local (t timestamp NOT NULL) PARTITION BY RANGE (t);
        CREATE TABLE local_old PARTITION OF local
            FOR VALUES FROM ('2001-01-01') TO ('2001-02-01 00:00');
        CREATE TABLE local_default PARTITION OF local DEFAULT;
        """
    )
    assert alice.execute(
        "SELECT * FROM timers.drop_old_partitions('days', '6 months')"
    ).fetchall() == [("public.days_2001",)]
    assert alice.execute(
        "SELECT * FROM timers.drop_old_partitions('local', '6 months')"
    ).fetchall() == [("public.local_old",)]


@pytest.mark.parametrize(
    ("setup", "table", "message"),
    [
        ("CREATE TABLE plain (at timestamptz)", "plain", "table public.plain is not partitioned"),
        (
            "CREATE TABLE bylist (k text) PARTITION BY LIST (k)",
            "bylist",
            "table public.bylist is partitioned by list, not by range",
        ),
        (
            "CREATE TABLE byint (k int) PARTITION BY RANGE (k)",
            "byint",
            "a column of type integer",
        ),
        (
            "CREATE TABLE bytwo (a date, b date) PARTITION BY RANGE (a, b)",
            "bytwo",
            "keep data for needs a key of one date, timestamp or timestamptz column",
        ),
    ],
)
def test_refuses_tables_it_cannot_keep(
    alice: psycopg.Connection, setup: str, table: str, message: str
) -> None:
    alice.execute(setup)
    with pytest.raises(psycopg.errors.WrongObjectType) as err:
        alice.execute("SELECT timers.keep_data_for(%s, '1 year')", [table])
    assert message in str(err.value)
    assert alice.execute("SELECT count(*) FROM timers.status").fetchone() == (0,)


@pytest.mark.parametrize("keep", ["0 days", "-1 year", "12 hours"])
def test_refuses_a_bad_keep(alice: psycopg.Connection, keep: str) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        alice.execute("SELECT timers.keep_data_for('events', %s)", [keep])
    assert "keep data for at least 1 day" in str(err.value)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        alice.execute("SELECT timers.drop_old_partitions('events', %s)", [keep])


def test_bad_schedule_is_the_save_error(alice: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        alice.execute("SELECT timers.keep_data_for('events', '1 year', 'every day')")
    assert "use a schedule like" in str(err.value)


def test_needs_the_tables_owner_and_admin(db: Database, alice: psycopg.Connection) -> None:
    with (
        db.connect(role="pgt_bob") as bob,
        pytest.raises(psycopg.errors.InsufficientPrivilege) as err,
    ):
        bob.execute("SELECT timers.keep_data_for('events', '1 year')")
    assert 'its owner "pgt_alice"' in str(err.value)
    with (
        db.connect(role="pgt_reader") as reader,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        reader.execute("SELECT timers.keep_data_for('events', '1 year')")


def test_other_schema_names_the_timer_with_it(
    alice: psycopg.Connection, conn: psycopg.Connection
) -> None:
    conn.execute('CREATE SCHEMA "Sales Data" AUTHORIZATION pgt_alice')
    alice.execute('CREATE TABLE "Sales Data"."Orders 2" (at date) PARTITION BY RANGE (at)')
    row = alice.execute(
        """SELECT to_jsonb(timers.keep_data_for('"Sales Data"."Orders 2"', '2 years'))"""
    ).fetchone()
    assert row is not None
    assert row[0]["name"] == "keep_Sales_Data_Orders_2"
    assert json.dumps(row[0]["sql"]) == json.dumps(
        """SELECT * FROM timers.drop_old_partitions('"Sales Data"."Orders 2"', '2 years')"""
    )
    assert alice.execute(row[0]["sql"]).fetchall() == []
