"""What readers (pgtimers_reader) and roles without pgtimers rights can see.

Decision (issue 5 asks to decide and document; docs/security.md): a timer's SQL may
hold secrets, so a reader sees `timers.status.sql` only for timers whose owner it is
a member of; admins see every timer's SQL. `timers.audit` (which keeps the SQL of
every save and delete) is readable by admins only. Run errors stay visible to
readers (timers.status.last_error, timers.runs.error): monitoring needs them; they
may quote data, which docs/security.md says.

pg_cron's answer is row-level security on cron.job (`username = current_user`),
with cron_admin-style roles seeing everything (zalando/spilo#204's policy).
"""

from __future__ import annotations

import pytest
from psycopg import errors

from tests.conftest import Database
from tests.security.helpers import ALICE, BOB, NOBODY, READER, connect, exec_as, save

SECRET_SQL = "SELECT 'api-key: s3cr3t' AS leaked"


@pytest.fixture
def timers_db(db: Database) -> Database:
    with connect(db, ALICE) as alice:
        save(alice, "alice_t", SECRET_SQL)
        save(alice, "alice_gone", SECRET_SQL)
        alice.execute("SELECT timers.delete('alice_gone')")
        alice.execute("SELECT timers.save_calendar('cal')")
    with connect(db, BOB) as bob:
        save(bob, "bob_t", "SELECT 1")
    return db


def test_readers_see_the_sql_of_their_own_timers_only(timers_db: Database) -> None:
    with connect(timers_db, READER) as reader:
        rows: dict[str, str] = dict(
            reader.execute("SELECT name, sql FROM timers.status").fetchall()
        )
    assert rows == {"alice_t": None, "bob_t": None}
    with connect(timers_db, ALICE) as alice:
        rows = dict(alice.execute("SELECT name, sql FROM timers.status").fetchall())
    assert rows == {"alice_t": SECRET_SQL, "bob_t": "SELECT 1"}  # admins see all


def test_the_audit_and_its_sql_are_for_admins_only(timers_db: Database) -> None:
    with connect(timers_db, READER) as reader, pytest.raises(errors.InsufficientPrivilege):
        reader.execute("SELECT * FROM timers.audit")
    with connect(timers_db, ALICE) as alice:
        rows = alice.execute(
            "SELECT action, object, detail->>'sql' FROM timers.audit"
            " WHERE detail ? 'sql' ORDER BY id"
        ).fetchall()
    assert ("save", "alice_t", SECRET_SQL) in rows
    assert ("delete", "alice_gone", SECRET_SQL) in rows


def test_readers_see_run_errors_today(timers_db: Database) -> None:
    """Current behaviour: an error text (which may quote data) is visible to readers.

    The run is simulated the way the runner records it (timers._run_due)."""
    with connect(timers_db, ALICE) as alice:
        save(alice, "failing", "SELECT 1/0")
    with timers_db.connect() as su:
        row = su.execute("SELECT id FROM timers.timers WHERE name = 'failing'").fetchone()
        assert row is not None
        su.execute(
            "UPDATE timers.timers SET next_due_at = now() - interval '1 second' WHERE id = %s",
            [row[0]],
        )
        su.execute(
            "SELECT timers._run_due(t.id, t.next_due_at, 'test')"
            " FROM timers.timers t WHERE t.id = %s",
            [row[0]],
        )
    with connect(timers_db, READER) as reader:
        error = reader.execute(
            "SELECT last_error FROM timers.status WHERE name = 'failing'"
        ).fetchone()
        runs = reader.execute("SELECT error FROM timers.runs WHERE timer = 'failing'").fetchall()
    assert error is not None and "division by zero" in error[0]
    assert runs and "division by zero" in runs[0][0]


@pytest.mark.parametrize(
    "relation",
    [
        "status",
        "recent_runs",
        "trouble",
        "runs",
        "settings",
        "calendars",
        "calendar_weeks",
        "calendar_days",
        "test_clocks",
        "metrics",
        "events_undelivered",
    ],
)
def test_readers_read_the_published_relations(timers_db: Database, relation: str) -> None:
    with connect(timers_db, READER) as reader:
        reader.execute(f"SELECT count(*) FROM (SELECT * FROM timers.{relation}) r").fetchall()


@pytest.mark.parametrize("relation", ["timers", "run_requests"])
def test_readers_cannot_read_the_raw_tables(timers_db: Database, relation: str) -> None:
    with connect(timers_db, READER) as reader, pytest.raises(errors.InsufficientPrivilege):
        reader.execute(f"SELECT * FROM timers.{relation}")


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM timers.status",
        "SELECT * FROM timers.recent_runs",
        "SELECT * FROM timers.trouble",
        "SELECT * FROM timers.runs",
        "SELECT * FROM timers.audit",
        "SELECT * FROM timers.settings",
        "SELECT * FROM timers.calendars",
        "SELECT * FROM timers.test_clocks",
        "SELECT * FROM timers.runners",
        "SELECT * FROM timers.next_runs('hourly', 3)",
        "SELECT timers.is_trading_day('cal', '2027-01-04')",
        "SELECT * FROM timers.trading_days('cal', '2027-01-01', '2027-01-31')",
        "SELECT timers._status('alice_t')",
    ],
)
def test_roles_without_pgtimers_rights_see_nothing(timers_db: Database, statement: str) -> None:
    with connect(timers_db, NOBODY) as nobody, pytest.raises(errors.InsufficientPrivilege):
        nobody.execute(statement)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM timers.next_runs('mon-fri 11:00', 3)",
        "SELECT timers.is_trading_day('cal', '2027-01-04')",
        "SELECT * FROM timers.trading_days('cal', '2027-01-01', '2027-01-31')",
    ],
)
def test_readers_may_preview(timers_db: Database, statement: str) -> None:
    with connect(timers_db, READER) as reader:
        assert reader.execute(statement).fetchall()


def test_to_jsonb_of_a_status_row_is_what_a_reader_gets(timers_db: Database) -> None:
    """The HTTP body of a timer is to_jsonb(status row): whatever status shows, the API shows."""
    with connect(timers_db, READER) as reader:
        row = reader.execute(
            "SELECT to_jsonb(s) FROM timers.status s WHERE name = 'alice_t'"
        ).fetchone()
    assert row is not None
    assert row[0]["sql"] is None  # not the reader's timer
    assert row[0]["created_by"] == ALICE


def test_a_timer_cannot_read_what_its_owner_cannot(timers_db: Database) -> None:
    """A run reads with its owner's rights only: Bob's SQL cannot read a table only Alice may."""
    with connect(timers_db, ALICE) as alice:
        alice.execute("CREATE TABLE public.alice_only (secret text)")
        alice.execute("INSERT INTO public.alice_only VALUES ('x')")
    with pytest.raises(errors.InsufficientPrivilege):
        exec_as(timers_db, BOB, "SELECT * FROM public.alice_only")
    assert exec_as(timers_db, ALICE, "SELECT * FROM public.alice_only") == 1
