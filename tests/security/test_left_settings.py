"""What a timer's SQL leaves in the session cannot steer the code that runs after it.

PostgreSQL documents that a plain SET inside a function overrides the function's
own SET clause and persists after it returns. A timer's SQL runs inside its
owner's executor, called from pgtimers' own functions (one of them SECURITY
DEFINER, owned by the role that installed pgtimers, often a superuser); if the SQL
left `search_path = pg_temp, pg_catalog` (or an earlier writable schema) behind,
an unqualified name in the code after it would find the owner's objects and run
them with the rights of that code: a temporary view named pg_cursors calling a
function that makes its owner a superuser, or an operator `||` in `public`.

Each case is played end to end by a real runner, as an attacker would: a role
that is only LOGIN + pgtimers_admin saves (or arms) the SQL and runs it. The run
must succeed (SET search_path is allowed in a timer's SQL), and the attacker's
function must never run as anyone but the attacker.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import psycopg
import pytest
from psycopg import sql as pgsql

from tests.conftest import Database
from tests.integration.http.conftest import PASSWORD
from tests.integration.http.conftest import basic_roles as basic_roles
from tests.security.helpers import Runner, connect, fresh_role
from tests.support.wait import wait_until

# pwn() records who called it; as anyone but the attacker it also tries to make the
# attacker a superuser (the exploit of the report). It returns false so the
# post-run check it hides behind sees "no holdable cursor".
PWN = """
CREATE FUNCTION {schema}.pwn() RETURNS boolean LANGUAGE plpgsql AS $b$
BEGIN
    IF current_user <> '{who}' THEN
        INSERT INTO public.pwned (who) VALUES (current_user);
        EXECUTE 'ALTER ROLE {who} SUPERUSER';
    END IF;
    RETURN false;
END $b$;
"""

EXPLOITS = {
    # the report's exploit: shadow pg_catalog.pg_cursors with a temporary view
    "temp_view": PWN.replace("{schema}", "pg_temp")
    + """
CREATE TEMP VIEW pg_cursors AS SELECT pg_temp.pwn() AS is_holdable;
CREATE TEMP VIEW pg_prepared_statements AS
    SELECT 'x'::text AS name, now() AS prepare_time, 'x'::text AS statement,
           pg_temp.pwn() AS from_sql;
SET search_path = pg_temp, pg_catalog;
SELECT 1
""",
    # the same with a view in a schema the attacker can write to, put first
    "public_view": PWN.replace("{schema}", "public")
    + """
CREATE OR REPLACE VIEW public.pg_cursors AS SELECT public.pwn() AS is_holdable;
SET search_path = public, pg_catalog;
SELECT 1
""",
    # operators that match the bookkeeping's own exactly (jsonb ->> text, timestamptz -)
    "public_operator": PWN.replace("{schema}", "public")
    + """
CREATE FUNCTION public.field(j jsonb, k text) RETURNS text LANGUAGE sql AS
    $c$ SELECT CASE WHEN public.pwn() THEN NULL
               ELSE pg_catalog.jsonb_object_field_text(j, k) END $c$;
CREATE OPERATOR public.->> (leftarg = jsonb, rightarg = text, function = public.field);
CREATE FUNCTION public.since(a timestamptz, b timestamptz) RETURNS interval LANGUAGE sql AS
    $c$ SELECT CASE WHEN public.pwn() THEN NULL ELSE pg_catalog.timestamptz_mi(a, b) END $c$;
CREATE OPERATOR public.- (leftarg = timestamptz, rightarg = timestamptz, function = public.since);
SET search_path = public, pg_catalog;
SELECT 1
""",
}


@pytest.fixture
def mallory(db: Database) -> Iterator[str]:
    """LOGIN + pgtimers_admin only (no CREATEROLE, no CREATE on a schema but public)."""
    with db.connect() as su:
        su.execute("CREATE TABLE public.pwned (who name, at timestamptz DEFAULT clock_timestamp())")
        su.execute("GRANT INSERT ON public.pwned TO PUBLIC")
    with fresh_role(db, "pgtimers_admin", prefix="pgt_mallory") as name:
        yield name


def _sql(exploit: str, who: str) -> str:
    return EXPLOITS[exploit].replace("{who}", who)


def _assert_not_escalated(db: Database, who: str) -> None:
    with db.connect() as su:
        row = su.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [who]).fetchone()
        assert row is not None and row[0] is False, f"{who} became a superuser"
        callers = [r[0] for r in su.execute("SELECT who FROM public.pwned")]
        assert callers == [], f"the attacker's function ran as {callers}"


@pytest.fixture
def runner(db: Database, tmp_path: Path) -> Iterator[Runner]:
    proc = Runner(db, tmp_path / "runner.log")
    try:
        yield proc
    finally:
        proc.terminate()


@pytest.mark.parametrize("exploit", sorted(EXPLOITS))
def test_run_now_of_a_shadowing_timer(
    db: Database, mallory: str, runner: Runner, exploit: str
) -> None:
    with connect(db, mallory) as m:
        m.execute("SELECT timers.save('m_tmp', 'daily 02:00', %s)", [_sql(exploit, mallory)])
        row = m.execute("CALL timers.run('m_tmp')").fetchone()
    _assert_not_escalated(db, mallory)
    assert row is not None
    result = row[0]
    assert result["finished"] is True
    assert result["ok"] is True, result


@pytest.mark.parametrize("exploit", ["temp_view", "public_operator"])
def test_scheduled_run_of_a_shadowing_timer(
    db: Database, mallory: str, runner: Runner, exploit: str
) -> None:
    with connect(db, mallory) as m:
        m.execute("SELECT timers.save('m_tmp', 'in 1s', %s)", [_sql(exploit, mallory)])

    def ran() -> bool:
        with db.connect() as su:
            row = su.execute("SELECT runs FROM timers.status WHERE name = 'm_tmp'").fetchone()
            return bool(row and row[0] >= 1)

    assert wait_until(ran, timeout=15)
    _assert_not_escalated(db, mallory)
    with db.connect() as su:
        row = su.execute("SELECT last_ok, last_error FROM timers.status").fetchone()
    assert row == (True, "")
    _assert_not_escalated(db, mallory)


@pytest.mark.parametrize("exploit", ["temp_view", "public_operator"])
def test_keyed_fire_of_a_shadowing_timer(
    db: Database, mallory: str, runner: Runner, exploit: str
) -> None:
    with connect(db, mallory) as m:
        m.execute("SELECT timers.arm('m:task:pwn:1', now(), %s)", [_sql(exploit, mallory)])

    def fired() -> bool:
        with db.connect() as su:
            row = su.execute(
                "SELECT status FROM timers.keyed_timers WHERE key = 'm:task:pwn:1'"
            ).fetchone()
            return bool(row and row[0] == "fired")

    assert wait_until(fired, timeout=15)
    _assert_not_escalated(db, mallory)
    with db.connect() as su:
        row = su.execute(
            "SELECT ok, error FROM timers.keyed_timers WHERE key = 'm:task:pwn:1'"
        ).fetchone()
    assert row == (True, "")
    _assert_not_escalated(db, mallory)


def test_settings_a_run_leaves_are_undone(db: Database, mallory: str, runner: Runner) -> None:
    """Settings that change what later code computes are back as they were after the SQL:
    the run's bookkeeping (times, history row) is right, and the next run sees defaults."""
    with db.connect() as su:
        su.execute("CREATE TABLE public.seen (tz text, ds text, sp text, tne text)")
        su.execute("GRANT INSERT ON public.seen TO PUBLIC")
    left = (
        "SET TimeZone = 'Pacific/Kiritimati'; SET DateStyle = 'SQL, DMY';"
        " SET IntervalStyle = 'sql_standard'; SET transform_null_equals = on;"
        " SET LOCAL extra_float_digits = -15; SET search_path = pg_temp, public;"
        " SET standard_conforming_strings = off; SELECT 1"
    )
    look = (
        "INSERT INTO public.seen SELECT current_setting('TimeZone'), current_setting('DateStyle'),"
        " current_setting('search_path'), current_setting('transform_null_equals')"
    )
    with connect(db, mallory) as m:
        m.execute("SELECT timers.save('leaves', 'daily 02:00', %s)", [left])
        m.execute("SELECT timers.save('looks', 'daily 02:00', %s)", [look])
        first = m.execute("CALL timers.run('leaves')").fetchone()
        second = m.execute("CALL timers.run('looks')").fetchone()
    assert first is not None and first[0]["ok"] is True, first
    assert second is not None and second[0]["ok"] is True, second
    with db.connect() as su:
        seen = su.execute("SELECT tz, ds, sp, tne FROM public.seen").fetchone()
        server = su.execute(
            "SELECT reset_val FROM pg_settings WHERE name IN ('TimeZone', 'DateStyle')"
            " ORDER BY name"
        ).fetchall()
        runs = su.execute(
            "SELECT count(*), bool_and(ok), bool_and(started_at > now() - interval '1 minute')"
            " FROM timers.runs WHERE timer IN ('leaves', 'looks')"
        ).fetchone()
    assert seen is not None
    assert (seen[1], seen[0]) == (server[0][0], server[1][0])
    assert "pg_temp, public" not in seen[2]
    assert seen[3] == "off"
    assert runs == (2, True, True)


def test_a_run_may_not_leave_its_transaction_read_only(
    db: Database, mallory: str, runner: Runner
) -> None:
    """A setting that cannot be put back (transaction_read_only) fails the run, which
    rolls the SQL back; the next runs of other timers are unaffected."""
    with connect(db, mallory) as m:
        m.execute(
            "SELECT timers.save('ro', 'daily 02:00', 'SET transaction_read_only = on; SELECT 1')"
        )
        m.execute("SELECT timers.save('ok', 'daily 02:00', 'SELECT 1')")
        ro = m.execute("CALL timers.run('ro')").fetchone()
        ok = m.execute("CALL timers.run('ok')").fetchone()
    assert ro is not None and ro[0]["ok"] is False
    assert "transaction_read_only" in ro[0]["error"]
    assert ok is not None and ok[0]["ok"] is True


def test_http_run_of_a_shadowing_timer(
    db: Database,
    basic_roles: bool,
    tmp_path: Path,
) -> None:
    """The report's HTTP variant: POST /api/timers and POST /api/timers/<name>/run with
    HTTP Basic as a role that is LOGIN + pgtimers_admin only."""
    import base64
    import json
    import urllib.request

    if not basic_roles:
        pytest.skip("the test server does not check passwords (trust): HTTP Basic is refused")
    who = "pgt_http_admin"
    with db.connect() as su:
        su.execute("CREATE TABLE public.pwned (who name, at timestamptz DEFAULT clock_timestamp())")
        su.execute("GRANT INSERT ON public.pwned TO PUBLIC")
    proc = Runner(db, tmp_path / "runner.log", extra=["--http", "127.0.0.1:0"])
    try:
        proc.wait_for("event=http_serving")
        url = proc.http_url()
        auth = base64.b64encode(f"{who}:{PASSWORD}".encode()).decode()

        def post(path: str, body: Mapping[str, object] | None) -> dict[str, object]:
            req = urllib.request.Request(
                url + path,
                data=json.dumps(body or {}).encode(),
                headers={"Authorization": f"Basic {auth}", "Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(req, timeout=30) as resp:
                data: dict[str, object] = json.loads(resp.read())
                return data

        body = {"name": "m_http", "schedule": "daily 02:00", "sql": _sql("temp_view", who)}
        post("/api/timers", body)
        result = post("/api/timers/m_http/run", None)
        _assert_not_escalated(db, who)
        assert result.get("ok") is True, result
    finally:
        proc.terminate()
        with db.server.admin() as su:
            su.execute(pgsql.SQL("ALTER ROLE {} NOSUPERUSER").format(pgsql.Identifier(who)))


def test_the_superuser_cannot_be_fooled_either(db: Database, mallory: str) -> None:
    """The executor's SET clause is overridden by the SQL, never the other way round:
    the owner's own later statements in the run see its settings (nothing else does)."""
    with connect(db, mallory) as m:
        m.execute(
            "SELECT timers.save('own', 'daily 02:00',"
            " 'SET search_path = pg_temp, public; CREATE TEMP TABLE t (x int);"
            " INSERT INTO t VALUES (1); SELECT * FROM t')"
        )
    with db.connect() as su, su.transaction():
        su.execute("SELECT set_config('pgtimers.timer', 'own', true)")
        row = su.execute(
            "SELECT timers._exec_as(%s, (SELECT sql FROM timers.timers WHERE name = 'own'))",
            [mallory],
        ).fetchone()
        path = su.execute("SELECT current_setting('search_path')").fetchone()
    assert row is not None and row[0] == 1
    assert path is not None and "pg_temp, public" not in path[0]
    _assert_not_escalated(db, mallory)
    with pytest.raises(psycopg.Error), db.connect() as su:
        su.execute("SELECT * FROM pg_temp.t")
