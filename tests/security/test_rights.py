"""Who may change what: readers and roles without pgtimers rights change nothing.

Every call below is made by pgt_reader (a pgtimers_reader) and by pgt_nobody (no
pgtimers role at all) and must fail with SQLSTATE 42501, leave every table of
schema timers and every executor as it was, and write no audit row.

Modelled on pg_cron's history, where the checks lived in a few entry points and
everything around them was reachable: "Direct writes to cron.job are equivalent to
code execution as any user" (GreengageDB/greengage#569, on pg_cron), pg_cron's
`alter_job` being executable by PUBLIC (citusdata/pg_cron#154, "Revoke execute on
alter_job from public by default"), and `cron.schedule_in_database` letting a user
pick another role (citusdata/pg_cron#120, #390). Here the public functions, the
internal SECURITY DEFINER bodies behind them, the runner's internals, the
procedures and the executors are all tried directly.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Database
from tests.security.helpers import (
    ALICE,
    NOBODY,
    READER,
    audit_count,
    connect,
    executor_of,
    fingerprint,
    save,
)

NON_ADMINS = [READER, NOBODY]

_ACTOR = "'pgt_alice'"
_SAVE_ARGS = "jsonb_build_object('name', 't9', 'schedule', 'daily 02:00', 'sql', 'SELECT 1')"

# (id, statement). {executor} is replaced by pgt_alice's executor.
CALLS: list[tuple[str, str]] = [
    # the public surface
    ("save", "SELECT timers.save('t1', 'daily 02:00', 'SELECT 1')"),
    ("save-replace", "SELECT timers.save('t0', 'hourly', 'SELECT 2')"),
    ("enable-off", "SELECT timers.enable('t0', false)"),
    ("enable-on", "SELECT timers.enable('t0')"),
    ("delete", "SELECT timers.delete('t0')"),
    ("set_timezone", "SELECT timers.set_timezone('Europe/Paris')"),
    ("run", "CALL timers.run('t0')"),
    ("unlock", "SELECT timers.unlock('t0')"),
    ("save_calendar-new", "SELECT timers.save_calendar('cal2')"),
    ("save_calendar-change", "SELECT timers.save_calendar('cal', 'sun-thu')"),
    ("set_calendar_week", "SELECT timers.set_calendar_week('cal', '2027-01-01', 'sun-thu')"),
    ("add_holiday", "SELECT timers.add_holiday('cal', '2027-01-05')"),
    ("add_trading_day", "SELECT timers.add_trading_day('cal', '2027-01-09')"),
    ("remove_day", "SELECT timers.remove_day('cal', '2027-01-04')"),
    ("drop_calendar", "SELECT timers.drop_calendar('cal')"),
    ("create_test_clock", "SELECT timers.create_test_clock('clk2', now())"),
    ("advance_test_clock", "CALL timers.advance_test_clock('clk', '2030-01-01')"),
    ("delete_test_clock", "SELECT timers.delete_test_clock('clk')"),
    # the SECURITY DEFINER bodies behind them, called directly
    ("_save-self", f"SELECT timers._save(current_user, {_SAVE_ARGS})"),
    ("_save-admin", f"SELECT timers._save({_ACTOR}, {_SAVE_ARGS})"),
    ("_set_enabled", f"SELECT timers._set_enabled({_ACTOR}, 't0', false)"),
    ("_delete", f"SELECT timers._delete({_ACTOR}, 't0')"),
    ("_set_timezone", f"SELECT timers._set_timezone({_ACTOR}, 'Asia/Tokyo')"),
    ("_run_ask", f"SELECT timers._run_ask({_ACTOR}, 't0')"),
    ("_create_test_clock", f"SELECT timers._create_test_clock({_ACTOR}, 'clk3', now())"),
    ("_clock_step", f"SELECT timers._clock_step({_ACTOR}, 'clk', '2030-01-01', true)"),
    ("_clock_redeliver", "SELECT timers._clock_redeliver('clk', '2027-01-01')"),
    ("_delete_test_clock", f"SELECT timers._delete_test_clock({_ACTOR}, 'clk')"),
    ("_save_calendar", f"SELECT timers._save_calendar({_ACTOR}, 'cal3', 'mon-fri', NULL, NULL)"),
    (
        "_set_calendar_week",
        f"SELECT timers._set_calendar_week({_ACTOR}, 'cal', '2027-01-01', 'sun-thu')",
    ),
    (
        "_set_calendar_day",
        f"SELECT timers._set_calendar_day({_ACTOR}, 'cal', '2027-01-05', false, '')",
    ),
    ("_remove_day", f"SELECT timers._remove_day({_ACTOR}, 'cal', '2027-01-04')"),
    ("_drop_calendar", f"SELECT timers._drop_calendar({_ACTOR}, 'cal')"),
    ("_ensure_executor", "SELECT timers._ensure_executor(current_user)"),
    # the runner's internals and the executors
    ("_exec_as", "SELECT timers._exec_as('pgt_alice', 'SELECT 1')"),
    ("executor", "SELECT {executor}('SELECT 1')"),
    ("_run_due", "SELECT timers._run_due(1, now(), 'x')"),
    ("_run_request", "SELECT timers._run_request(1, 'x')"),
    ("_apply_gaps", "SELECT timers._apply_gaps('x', 'x', now())"),
    ("_runner_start", "SELECT timers._runner_start('x', 'x', 1, 'x', 1)"),
    ("_runner_park", "SELECT timers._runner_park('x', now() + interval '1 minute')"),
    (
        "_server_clock_jumped",
        "SELECT timers._server_clock_jumped(now() - interval '1 day', now(), 'x')",
    ),
    ("_prune", "SELECT timers._prune()"),
]


_RUNNER_ONLY = {
    "_exec_as",
    "_run_due",
    "_run_request",
    "_apply_gaps",
    "_runner_start",
    "_runner_park",
    "_server_clock_jumped",
    "_prune",
}


def _setup(db: Database) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")
        alice.execute("SELECT timers.save_calendar('cal')")
        alice.execute("SELECT timers.add_holiday('cal', '2027-01-04')")
        alice.execute("SELECT timers.create_test_clock('clk', '2027-01-01')")
        save(alice, "on_clock", "SELECT 1", schedule="daily 09:00", test_clock="clk")


GROUPS = {
    "public": [c for c in CALLS if not c[0].startswith("_") and c[0] != "executor"],
    "internal": [c for c in CALLS if c[0].startswith("_") and c[0] not in _RUNNER_ONLY],
    "runner": [c for c in CALLS if c[0] in _RUNNER_ONLY or c[0] == "executor"],
}


@pytest.mark.parametrize("group", list(GROUPS))
@pytest.mark.parametrize("role", NON_ADMINS)
def test_non_admins_change_nothing(db: Database, role: str, group: str) -> None:
    """Each call of the group, one after the other: 42501 each, nothing changed, no audit."""
    _setup(db)
    executor = executor_of(db, ALICE)
    before = fingerprint(db)
    audits = audit_count(db)
    wrong = []
    with connect(db, role) as conn:
        for name, call in GROUPS[group]:
            try:
                conn.execute(call.replace("{executor}", executor))
            except errors.InsufficientPrivilege as exc:
                if "permission denied" not in str(exc) and "needs the role" not in str(exc):
                    wrong.append(f"{name}: 42501 for another reason: {exc}")
                continue
            except psycopg.Error as exc:
                wrong.append(f"{name}: {exc.sqlstate} {exc.diag.message_primary}")
                continue
            wrong.append(f"{name}: accepted")
    assert wrong == [], "\n".join(wrong)
    assert fingerprint(db) == before
    assert audit_count(db) == audits


def test_admin_can_make_the_same_calls(db: Database) -> None:
    """The refusals above are about rights: the same public calls work for an admin."""
    _setup(db)
    with connect(db, ALICE) as alice:
        for name, call in CALLS:
            if name.startswith("_") or name in {"executor", "run", "unlock"}:
                continue
            alice.execute(call)
        # unlock is for superusers only: not even granted to admins.
        with pytest.raises(errors.InsufficientPrivilege, match="permission denied for function"):
            alice.execute("SELECT timers.unlock('t0')")


@pytest.mark.parametrize(
    "role", [ALICE, READER, NOBODY, "pgtimers_admin", "pgtimers_reader", "pgtimers_runner"]
)
@pytest.mark.parametrize("schema", ["timers", "timers_exec"])
def test_nobody_but_the_installer_may_create_in_the_schemas(
    db: Database, role: str, schema: str
) -> None:
    with db.connect() as su:
        row = su.execute("SELECT has_schema_privilege(%s, %s, 'CREATE')", [role, schema]).fetchone()
        assert row == (False,)
        acl = su.execute(
            "SELECT coalesce(bool_or(a.grantee = 0), false) FROM pg_namespace n,"
            " aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a WHERE n.nspname = %s",
            [schema],
        ).fetchone()
        assert acl == (False,), f"PUBLIC has a privilege on schema {schema}"


@pytest.mark.parametrize(
    ("role", "schema", "usage"),
    [
        (NOBODY, "timers", False),
        (NOBODY, "timers_exec", False),
        (READER, "timers", True),
        (READER, "timers_exec", False),
        (ALICE, "timers_exec", False),
        ("pgtimers_admin", "timers_exec", False),
    ],
)
def test_schema_usage(db: Database, role: str, schema: str, usage: bool) -> None:
    """Only the runner reaches the executors by name; a role without pgtimers rights, nothing."""
    with db.connect() as su:
        row = su.execute("SELECT has_schema_privilege(%s, %s, 'USAGE')", [role, schema]).fetchone()
        assert row == (usage,)


def test_no_security_definer_function_is_executable_by_public_or_readers(db: Database) -> None:
    with connect(db, ALICE) as alice:
        save(alice, "t0", "SELECT 1")  # makes an executor too
    with db.connect() as su:
        rows = su.execute(
            "SELECT p.oid::regprocedure::text,"
            "       coalesce(bool_or(a.grantee = 0), false),"
            "       has_function_privilege('pgtimers_reader', p.oid, 'EXECUTE'),"
            "       has_function_privilege('pgt_nobody', p.oid, 'EXECUTE')"
            "  FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a"
            " WHERE p.prosecdef"
            "   AND p.pronamespace IN ('timers'::regnamespace, 'timers_exec'::regnamespace)"
            " GROUP BY p.oid"
        ).fetchall()
    assert rows, "no SECURITY DEFINER function found: the catalog query is wrong"
    offenders = [r for r in rows if r[1] or r[2] or r[3]]
    assert offenders == []


def test_procedures_are_not_executable_by_public(db: Database) -> None:
    with db.connect() as su:
        rows = su.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p"
            "  JOIN LATERAL aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a ON true"
            " WHERE p.prokind = 'p' AND p.pronamespace = 'timers'::regnamespace"
            "   AND (a.grantee = 0 OR has_function_privilege('pgtimers_reader', p.oid, 'EXECUTE'))"
        ).fetchall()
    assert rows == []


@pytest.mark.parametrize("role", [READER, NOBODY])
def test_non_admins_cannot_call_the_procedures_even_inside_a_transaction(
    db: Database, role: str
) -> None:
    """The privilege check comes before anything else (also before the transaction-block check)."""
    _setup(db)
    with connect(db, role) as conn:
        for call in (
            "CALL timers.run('t0')",
            "CALL timers.advance_test_clock('clk', '2030-01-01')",
        ):
            with pytest.raises(errors.InsufficientPrivilege), conn.transaction():
                conn.execute(call)
