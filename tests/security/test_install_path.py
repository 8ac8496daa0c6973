"""Installing and upgrading binds nothing of a schema others can write.

What PostgreSQL resolves while it creates a view, a default, a generated column, a check,
an index, a policy, a trigger's WHEN or a routine's argument defaults is stored with it:
the functions and operators found on the installing session's search path. pg_catalog has
no `numeric * integer` (the `extract(epoch FROM …) * 1000` of timers.status and of
timers.timers.fire_at): a role that could create `public.*(numeric, integer)` before an
install got its function bound into them, and it ran as the installer (a superuser) at the
next save with a jitter, or a superuser's read of timers.status.

Here a plain role (CREATE on public, as before PostgreSQL 15 or where an application grants
it) plants such functions and operators: better matches than pg_catalog's, and shadows of
exact ones for a path that puts public before pg_catalog. Each records its call and makes
its role a superuser when it runs as one. A scan of the catalog then lists every reference
from an object of timers or timers_exec to a function, operator, type or relation of
another schema than pg_catalog, timers and timers_exec; it must be empty.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest
from alembic import command
from psycopg import sql

import pgtimers.schema.install as installing
from pgtimers.schema.install import alembic_config, install, upgrade
from tests.conftest import Database
from tests.security.helpers import fresh_role

SCHEMAS = ["timers", "timers_exec"]

# Every dependency recorded for an object of pgtimers' schemas (a relation with its
# columns, a routine with its argument defaults, a type, a constraint, a view's rule, a
# default or generated column, a trigger, a policy) on an object of another schema.
OUTSIDE_BINDINGS = """
WITH ours(classid, objid) AS (
    SELECT 'pg_class'::regclass, c.oid FROM pg_class c
     WHERE c.relnamespace::regnamespace::text = ANY(%(s)s)
    UNION ALL
    SELECT 'pg_proc'::regclass, p.oid FROM pg_proc p
     WHERE p.pronamespace::regnamespace::text = ANY(%(s)s)
    UNION ALL
    SELECT 'pg_type'::regclass, t.oid FROM pg_type t
     WHERE t.typnamespace::regnamespace::text = ANY(%(s)s)
    UNION ALL
    SELECT 'pg_constraint'::regclass, k.oid FROM pg_constraint k
     WHERE k.connamespace::regnamespace::text = ANY(%(s)s)
    UNION ALL
    SELECT 'pg_rewrite'::regclass, r.oid FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
     WHERE c.relnamespace::regnamespace::text = ANY(%(s)s)
    UNION ALL
    SELECT 'pg_attrdef'::regclass, d.oid FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid
     WHERE c.relnamespace::regnamespace::text = ANY(%(s)s)
    UNION ALL
    SELECT 'pg_trigger'::regclass, g.oid FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
     WHERE c.relnamespace::regnamespace::text = ANY(%(s)s)
    UNION ALL
    SELECT 'pg_policy'::regclass, o.oid FROM pg_policy o JOIN pg_class c ON c.oid = o.polrelid
     WHERE c.relnamespace::regnamespace::text = ANY(%(s)s)
)
SELECT DISTINCT pg_describe_object(d.classid, d.objid, d.objsubid), r.type || ' ' || r.identity
  FROM pg_depend d
  JOIN ours o ON o.classid = d.classid AND o.objid = d.objid
 CROSS JOIN LATERAL pg_identify_object(d.refclassid, d.refobjid, d.refobjsubid) r
 -- objects of no schema (a language, an extension) are no one's to shadow; a schema is
 -- named by its identity
 WHERE coalesce(r.schema, CASE WHEN d.refclassid = 'pg_namespace'::regclass THEN r.identity END,
                'pg_catalog') <> ALL(%(s)s || '{pg_catalog}'::text[])
 ORDER BY 1, 2
"""

# Better matches than pg_catalog's for what pgtimers writes (its views, fire_at), then
# shadows of exact ones, which win only where public comes before pg_catalog on the path:
# (operator, left, right, result, what it returns)
PLANTED_OPERATORS = [
    ("*", "numeric", "integer", "numeric", "$1 OPERATOR(pg_catalog.*) $2::numeric"),
    ("/", "float8", "numeric", "float8", "$1 OPERATOR(pg_catalog./) $2::float8"),
    ("/", "bigint", "numeric", "numeric", "$1::numeric OPERATOR(pg_catalog./) $2"),
    ("||", "text", "integer", "text", "$1 OPERATOR(pg_catalog.||) $2::text"),
    ("||", "text", "bigint", "text", "$1 OPERATOR(pg_catalog.||) $2::text"),
    ("=", "text", "text", "boolean", "$1 OPERATOR(pg_catalog.=) $2"),
    ("~", "text", "text", "boolean", "$1 OPERATOR(pg_catalog.~) $2"),
    (">", "bigint", "integer", "boolean", "$1 OPERATOR(pg_catalog.>) $2"),
    (">=", "smallint", "integer", "boolean", "$1 OPERATOR(pg_catalog.>=) $2"),
]  # fmt: skip
# (function, arguments, result, what it returns)
PLANTED_FUNCTIONS = [
    ("to_timestamp", "numeric", "timestamptz", "pg_catalog.to_timestamp($1::float8)"),
    ("now", "", "timestamptz", "pg_catalog.now()"),
    ("clock_timestamp", "", "timestamptz", "pg_catalog.clock_timestamp()"),
    ("lower", "text", "text", "pg_catalog.lower($1)"),
    ("md5", "text", "text", "pg_catalog.md5($1)"),
    ("pg_current_xact_id", "", "xid8", "pg_catalog.pg_current_xact_id()"),
    # what SQLAlchemy asks on connecting, before any statement of the install
    ("current_schema", "", "name", "pg_catalog.current_schema()"),
]

# The installs that came before pinned paths: the session's path, with public first.
BEFORE_THE_FIX = "public, pg_catalog"


def _planted_sql(role: str) -> str:
    """The planting role's functions and operators (IMMUTABLE, so that a generated column
    or an index takes them), each recording its call in public.planted_calls."""
    out = [
        "CREATE TABLE public.planted_calls (what text, by name DEFAULT current_user)",
        "GRANT INSERT, SELECT ON public.planted_calls TO PUBLIC",
        # counts the calls of transactions rolled back too (SQLAlchemy's first queries)
        "CREATE SEQUENCE public.planted_runs",
        "GRANT USAGE ON SEQUENCE public.planted_runs TO PUBLIC",
        # a function of its own may do what the immutable ones may not
        "CREATE FUNCTION public.planted_hit(what text) RETURNS void LANGUAGE plpgsql AS $h$"
        " BEGIN PERFORM pg_catalog.nextval('public.planted_runs');"
        " INSERT INTO public.planted_calls (what) VALUES (what);"
        " IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r"
        "      WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN"
        f" EXECUTE 'ALTER ROLE {role} SUPERUSER'; END IF; END $h$",
    ]
    for i, (op, left, right, result, body) in enumerate(PLANTED_OPERATORS):
        out.append(
            f"CREATE FUNCTION public.planted_op{i}({left}, {right}) RETURNS {result}"
            f" LANGUAGE plpgsql IMMUTABLE AS $o$ BEGIN"
            f" PERFORM public.planted_hit('operator {op}({left}, {right})'); RETURN {body}; END $o$"
        )
        out.append(
            f"CREATE OPERATOR public.{op}"
            f" (FUNCTION = public.planted_op{i}, LEFTARG = {left}, RIGHTARG = {right})"
        )
    for name, args, result, body in PLANTED_FUNCTIONS:
        out.append(
            f"CREATE FUNCTION public.{name}({args}) RETURNS {result} LANGUAGE plpgsql IMMUTABLE"
            f" AS $f$ BEGIN PERFORM public.planted_hit('{name}({args})'); RETURN {body}; END $f$"
        )
    return ";\n".join(out)


@pytest.fixture
def planter(empty_db: Database) -> Iterator[str]:
    """A plain role (no superuser) whose functions and operators are in public."""
    with fresh_role(empty_db, login=False, prefix="pgt_planter") as role, empty_db.connect() as su:
        su.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        su.execute(_planted_sql(role))
        yield role


def _judge(db: Database) -> psycopg.Connection:
    """The judge's superuser connection: it looks things up in pg_catalog only."""
    return psycopg.connect(db.dsn, autocommit=True, options="-c search_path=pg_catalog")


def outside_bindings(db: Database) -> list[tuple[str, str]]:
    """(object of pgtimers, the object of another schema it references), one per pair."""
    with _judge(db) as conn:
        return [(r[0], r[1]) for r in conn.execute(OUTSIDE_BINDINGS, {"s": SCHEMAS})]


def _superuser(db: Database, role: str) -> bool:
    with _judge(db) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role]).fetchone()
        return bool(row and row[0])


def _calls(db: Database) -> tuple[int, list[tuple[str, str]]]:
    """How many times a planted function ran (in a transaction rolled back too), and the
    calls that were committed, with the role each ran as."""
    with _judge(db) as conn:
        row = conn.execute(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.planted_runs"
        ).fetchone()
        calls = conn.execute("SELECT what, by FROM public.planted_calls").fetchall()
        return (row[0] if row else -1), [(r[0], r[1]) for r in calls]


def _forget(db: Database, role: str) -> None:
    """After an install made the way it was before the fix: the role back to what it was,
    and its calls forgotten."""
    with _judge(db) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} NOSUPERUSER").format(sql.Identifier(role)))
        conn.execute("DELETE FROM public.planted_calls")
        conn.execute("SELECT setval('public.planted_runs', 1, false)")


@pytest.mark.parametrize(
    "database_path", [None, BEFORE_THE_FIX], ids=["default-path", "database-puts-public-first"]
)
def test_a_fresh_install_binds_nothing_of_public(
    empty_db: Database, planter: str, database_path: str | None
) -> None:
    """The install of a session with the default search path ("$user", public), and of
    one whose database puts public first (its owner may set that)."""
    if database_path is not None:
        with empty_db.connect() as su:
            su.execute(
                sql.SQL("ALTER DATABASE {} SET search_path = {}").format(
                    sql.Identifier(empty_db.name), sql.SQL(database_path)
                )
            )
    install(empty_db.dsn)
    assert outside_bindings(empty_db) == []
    assert _calls(empty_db) == (0, [])


def test_the_scan_reports_each_kind_of_binding(empty_db: Database, planter: str) -> None:
    """The scan can fail: objects made with public first on the path, one of each kind
    it reads, are each reported with what they use."""
    with empty_db.connect() as su:
        su.execute("CREATE SCHEMA timers")
        su.execute("SET search_path = public, pg_catalog")
        su.execute(
            "CREATE TABLE timers.t (x numeric DEFAULT 1.5 * 2,"
            " g numeric GENERATED ALWAYS AS (x * 2) STORED,"
            " y numeric CONSTRAINT y_check CHECK (y * 2 > 0))"
        )
        su.execute("CREATE INDEX t_expr ON timers.t ((x * 2))")
        su.execute("CREATE INDEX t_pred ON timers.t (x) WHERE lower(x::text) = ''")
        su.execute("CREATE VIEW timers.v AS SELECT x * 2 AS d FROM timers.t")
        su.execute("CREATE POLICY p ON timers.t USING (x * 2 > 0)")
        su.execute(
            "CREATE FUNCTION timers.f(a numeric DEFAULT 1.5 * 2) RETURNS numeric"
            " LANGUAGE sql AS 'SELECT a'"
        )
        su.execute(
            "CREATE FUNCTION timers.atomic() RETURNS text LANGUAGE sql"
            " BEGIN ATOMIC SELECT md5('x'); END"
        )
        su.execute(
            "CREATE FUNCTION timers.tg() RETURNS trigger LANGUAGE plpgsql"
            " AS 'BEGIN RETURN NEW; END'"
        )
        su.execute(
            "CREATE TRIGGER w BEFORE INSERT ON timers.t FOR EACH ROW"
            " WHEN (NEW.x * 2 > 0) EXECUTE FUNCTION timers.tg()"
        )
        su.execute("CREATE TABLE timers.u (at timestamptz DEFAULT now(), e public.planted_calls)")
    found = outside_bindings(empty_db)
    ours = {o for o, _ in found}
    assert ours >= {
        "default value for column x of table timers.t",
        "default value for column g of table timers.t",
        "constraint y_check on table timers.t",
        "index timers.t_expr",
        "index timers.t_pred",
        "rule _RETURN on view timers.v",
        "policy p on table timers.t",
        "function timers.f(numeric)",
        "function timers.atomic()",
        "trigger w on table timers.t",
        "default value for column at of table timers.u",
        "column e of table timers.u",
    }, found
    assert ("rule _RETURN on view timers.v", "operator public.*(numeric,integer)") in found
    assert ("index timers.t_pred", "function public.lower(pg_catalog.text)") in found
    assert ("column e of table timers.u", "type public.planted_calls") in found


def test_an_upgrade_binds_again_what_an_older_install_bound_to_public(
    empty_db: Database, planter: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An install made before the fix, with public before pg_catalog on the path, binds
    its tables (fire_at, defaults, checks, indexes, the policy) and its views to the
    planted objects; the upgrade builds each again, bound to pg_catalog."""
    # the versioned part as 0021 made it (0021 is the last revision before the fix)
    with monkeypatch.context() as m:
        m.setattr(installing, "PINNED_SEARCH_PATH", BEFORE_THE_FIX, raising=False)
        command.upgrade(alembic_config(empty_db.dsn), "0021")
    before = {o for o, _ in outside_bindings(empty_db)}
    assert "default value for column fire_at of table timers.timers" in before
    _forget(empty_db, planter)
    upgrade(empty_db.dsn)
    assert outside_bindings(empty_db) == []

    # the code as an older version applied it: views and argument defaults
    with monkeypatch.context() as m:
        m.setattr(installing, "PINNED_SEARCH_PATH", BEFORE_THE_FIX, raising=False)
        _code_changed(empty_db)
        upgrade(empty_db.dsn)
    before = {o for o, _ in outside_bindings(empty_db)}
    assert "rule _RETURN on view timers.status" in before
    _forget(empty_db, planter)
    _code_changed(empty_db)
    upgrade(empty_db.dsn)
    assert outside_bindings(empty_db) == []
    _save_and_read(empty_db)
    assert (_calls(empty_db), _superuser(empty_db, planter)) == ((0, []), False)


def _code_changed(db: Database) -> None:
    """As if the code applied last were another version's: the next upgrade applies it."""
    with _judge(db) as conn:
        conn.execute("UPDATE timers.installed_code SET checksum = 'older'")


def _save_and_read(db: Database) -> None:
    """A superuser saves a timer with a jitter (fire_at is computed) and reads the views."""
    with db.connect() as su:
        su.execute(
            "SELECT timers.save('jittery', 'every 1m', 'SELECT 1', jitter => interval '10 seconds')"
        )
        su.execute("SELECT * FROM timers.status").fetchall()
        su.execute("SELECT * FROM timers.trouble").fetchall()


def test_the_planted_functions_never_run_as_the_installer(empty_db: Database, planter: str) -> None:
    """After an install with the default path, a superuser's save with a jitter (fire_at is
    computed) and reads of the views run nothing planted."""
    install(empty_db.dsn)
    _save_and_read(empty_db)
    assert _calls(empty_db) == (0, [])
    assert not _superuser(empty_db, planter)
    assert outside_bindings(empty_db) == []  # the superuser's executor, made by the save


def test_uninstall_runs_nothing_planted(empty_db: Database, planter: str) -> None:
    """pgtimers uninstall reads what it drops as the installing role: max(version_num) of
    a varchar column, which pg_catalog's max(text) takes only through a cast, would run a
    planted max(varchar) on a session's own path."""
    install(empty_db.dsn)
    with empty_db.connect() as su:
        su.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(planter)))
        su.execute(
            "CREATE FUNCTION public.planted_max(varchar, varchar) RETURNS varchar"
            " LANGUAGE plpgsql AS $m$ BEGIN PERFORM public.planted_hit('max(varchar)');"
            " RETURN GREATEST($1, $2); END $m$"
        )
        su.execute(
            "CREATE AGGREGATE public.max(varchar) (SFUNC = public.planted_max, STYPE = varchar)"
        )
    uninstall = ["uninstall", "--dsn", empty_db.dsn, "--yes", "--keep-roles"]
    done = subprocess.run(
        [sys.executable, "-m", "pgtimers", *uninstall],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "dropped schema timers" in done.stdout
    assert (_calls(empty_db), _superuser(empty_db, planter)) == ((0, []), False)
