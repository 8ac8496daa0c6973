"""Who may do what: readers read, admins change, nobody makes a timer run as someone else."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Database

SAVE = "SELECT timers.save('t1', 'daily 02:00', 'SELECT 1')"


def test_admin_saves_and_owns_the_timer(db: Database) -> None:
    with db.connect("pgt_alice") as alice:
        alice.execute(SAVE)
    with db.connect() as su:
        row = su.execute("SELECT owner FROM timers.timers").fetchone()
        assert row == ("pgt_alice",)
        assert su.execute("SELECT actor, session FROM timers.audit").fetchone() == (
            "pgt_alice",
            "pgt_alice",
        )


@pytest.mark.parametrize("role", ["pgt_reader", "pgt_nobody"])
@pytest.mark.parametrize(
    "statement",
    [
        SAVE,
        "SELECT timers.enable('t0', false)",
        "SELECT timers.delete('t0')",
        "SELECT timers.set_timezone('UTC')",
    ],
)
def test_non_admins_cannot_change_timers(db: Database, role: str, statement: str) -> None:
    with db.connect("pgt_alice") as alice:
        alice.execute("SELECT timers.save('t0', 'daily 02:00', 'SELECT 1')")
    with db.connect(role) as conn, pytest.raises(errors.InsufficientPrivilege):
        conn.execute(statement)
    with db.connect() as su:
        assert su.execute("SELECT name, enabled FROM timers.timers").fetchall() == [("t0", True)]


def test_reader_reads_status_nobody_does_not(db: Database) -> None:
    with db.connect("pgt_alice") as alice:
        alice.execute(SAVE)
    with db.connect("pgt_reader") as reader:
        assert reader.execute("SELECT name FROM timers.status").fetchall() == [("t1",)]
        with pytest.raises(errors.InsufficientPrivilege):
            reader.execute("SELECT * FROM timers.timers")
    with db.connect("pgt_nobody") as nobody, pytest.raises(errors.InsufficientPrivilege):
        nobody.execute("SELECT * FROM timers.status")


def test_nobody_can_save_a_timer_that_runs_as_someone_else(db: Database) -> None:
    with db.connect("pgt_alice") as alice:
        # The internal function takes an owner, but refuses one the session cannot act as.
        with pytest.raises(errors.InsufficientPrivilege, match="cannot save a timer that runs as"):
            alice.execute(
                "SELECT timers._save('postgres', jsonb_build_object('name', 'evil',"
                " 'schedule', 'hourly', 'sql', 'SELECT 1'))"
            )
        with pytest.raises(errors.InsufficientPrivilege, match="cannot save a timer that runs as"):
            alice.execute(
                "SELECT timers._save('pgt_bob', jsonb_build_object('name', 'evil',"
                " 'schedule', 'hourly', 'sql', 'SELECT 1'))"
            )
        # Direct writes to the tables are not allowed at all.
        with pytest.raises(errors.InsufficientPrivilege):
            alice.execute("UPDATE timers.timers SET owner = 'postgres'")
        with pytest.raises(errors.InsufficientPrivilege):
            alice.execute(
                "INSERT INTO timers.audit (actor, session, action, object) "
                "VALUES ('x', 'x', 'x', 'x')"
            )
        # Executors are out of reach by name.
        with pytest.raises(errors.InsufficientPrivilege):
            alice.execute("SELECT timers._exec_as('postgres', 'SELECT 1')")
    with db.connect() as su:
        assert su.execute("SELECT count(*) FROM timers.timers").fetchone() == (0,)


def test_owner_is_the_role_in_effect_not_the_login_role(db: Database) -> None:
    with db.connect() as su:
        su.execute("GRANT pgt_bob TO pgt_alice")
    try:
        with db.connect("pgt_alice") as alice:
            alice.execute("SET ROLE pgt_bob")
            alice.execute(SAVE)
        with db.connect() as su:
            assert su.execute("SELECT owner FROM timers.timers").fetchone() == ("pgt_bob",)
    finally:
        with db.connect() as su:
            su.execute("REVOKE pgt_bob FROM pgt_alice")


def test_replacing_a_timer_makes_the_saver_its_owner(db: Database) -> None:
    with db.connect("pgt_alice") as alice:
        alice.execute(SAVE)
    with db.connect("pgt_bob") as bob:
        bob.execute(SAVE)
    with db.connect() as su:
        assert su.execute("SELECT owner FROM timers.timers").fetchone() == ("pgt_bob",)


def test_executor_belongs_to_the_owner_in_an_unreachable_schema(db: Database) -> None:
    with db.connect("pgt_alice") as alice:
        alice.execute(SAVE)
        row = alice.execute("SELECT 'as_' || oid FROM pg_roles WHERE rolname = 'pgt_alice'")
        name = row.fetchone()
        assert name is not None
        # The owner owns its executor but cannot name it to alter or replace it.
        with pytest.raises(errors.InsufficientPrivilege, match="schema timers_exec"):
            alice.execute(f"ALTER FUNCTION timers_exec.{name[0]}(text) SECURITY INVOKER")
    with db.connect() as su:
        found = su.execute(
            "SELECT pg_get_userbyid(p.proowner), p.prosecdef FROM pg_proc p"
            " WHERE p.pronamespace = 'timers_exec'::regnamespace"
        ).fetchall()
        assert found == [("pgt_alice", True)]


def test_timer_sql_cannot_leave_its_owner(db: Database) -> None:
    with db.connect("pgt_alice") as alice:
        alice.execute(SAVE)
    with db.connect() as su:
        assert su.execute("SELECT timers._exec_as('pgt_alice', 'SELECT current_user')").fetchone()
        for escape in (
            "RESET ROLE",
            "SET ROLE postgres",
            "SET SESSION AUTHORIZATION postgres",
            "DO $$ BEGIN EXECUTE 'RESET ROLE'; END $$",
        ):
            with pytest.raises(errors.InsufficientPrivilege, match="security-definer"):
                su.execute("SELECT timers._exec_as('pgt_alice', %s)", [escape])
        with pytest.raises(
            psycopg.Error,
            match=r"transaction commands is not implemented|invalid transaction termination",
        ):
            su.execute("SELECT timers._exec_as('pgt_alice', 'COMMIT')")
        with pytest.raises(errors.InsufficientPrivilege):
            su.execute("SELECT timers._exec_as('pgt_alice', 'CREATE TABLE pg_catalog.x (a int)')")
