"""`pgtimers uninstall`: the schemas go with every timer and executor, the refusals change
nothing, and the cluster-wide roles go only when no other database uses pgtimers.

The roles are shared by every test on the test server, so there they are only ever kept
(--keep-roles, or another database that has pgtimers: the session's template); dropping
them is tested on a cluster of the test's own."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgtimers.cli.main import main
from pgtimers.schema.install import current_revision, install
from pgtimers.schema.uninstall import ROLES, OtherDatabase, plan, roles_verdict
from tests.conftest import HEAD_REVISION, Database, Server, scalar
from tests.faults.cluster import Cluster
from tests.integration.runner.conftest import start_runner  # noqa: F401 (a fixture)
from tests.support.runner import RunnerProcess

StartRunner = Callable[..., RunnerProcess]


def _schemas(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT nspname::text FROM pg_namespace WHERE nspname IN ('timers', 'timers_exec')"
        " ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


def _roles(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT rolname::text FROM pg_roles WHERE rolname = ANY(%s) ORDER BY 1", [list(ROLES)]
    ).fetchall()
    return [r[0] for r in rows]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgtimers", "uninstall", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def _save_as(db: Database, role: str, name: str) -> None:
    with db.connect(role) as c:
        c.execute("SELECT timers.save(%s, 'every 1h', 'SELECT 1')", [name])


def test_uninstall_drops_the_schemas_timers_and_executors_and_says_so(
    db: Database, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    _save_as(db, "pgt_alice", "a")
    _save_as(db, "pgt_bob", "b")
    assert main(["uninstall", "--dsn", db.dsn, "--yes", "--keep-roles"]) == 0
    out = capsys.readouterr().out
    assert f"dropped schema timers (2 timer(s) with their history, revision {HEAD_REVISION})" in out
    assert "dropped schema timers_exec (2 executor(s), owned by pgt_alice, pgt_bob)" in out
    assert "kept roles pgtimers_admin, pgtimers_reader, pgtimers_runner: --keep-roles" in out
    assert _schemas(conn) == []
    assert _roles(conn) == sorted(ROLES)
    # the executors' owners are the timers' roles, not ours: they went with the schema
    assert scalar(conn, "SELECT count(*) FROM pg_proc WHERE proname LIKE 'as\\_%'") == 0
    # a second run finds nothing; an install afterwards starts afresh
    assert main(["uninstall", "--dsn", db.dsn, "--yes", "--keep-roles"]) == 0
    assert "nothing to drop" in capsys.readouterr().out
    install(db.dsn)
    assert current_revision(db.dsn) == HEAD_REVISION
    assert scalar(conn, "SELECT count(*) FROM timers.timers") == 0


def test_without_yes_and_no_terminal_it_refuses_and_changes_nothing(
    db: Database, conn: psycopg.Connection
) -> None:
    done = _cli("--dsn", db.dsn, "--keep-roles")
    assert done.returncode == 2
    assert "stdin is not a terminal: pass --yes" in done.stderr
    assert "drop schema timers" in done.stdout  # it showed what it would drop
    assert _schemas(conn) == ["timers", "timers_exec"]


def test_a_live_runner_stops_it_unless_forced(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,  # noqa: F811 (the fixture imported above)
) -> None:
    start_runner()
    done = _cli("--dsn", db.dsn, "--yes", "--keep-roles")
    assert done.returncode == 2, done.stdout
    assert f"1 runner(s) serve database {db.name} now: stop them first (or pass --force)" in (
        done.stderr
    )
    assert _schemas(conn) == ["timers", "timers_exec"]
    done = _cli("--dsn", db.dsn, "--yes", "--keep-roles", "--force")
    assert done.returncode == 0, done.stderr
    assert _schemas(conn) == []


def test_objects_of_other_schemas_that_depend_on_pgtimers_are_named_and_kept(
    db: Database, conn: psycopg.Connection
) -> None:
    conn.execute("CREATE VIEW public.timer_names AS SELECT name FROM timers.status")
    conn.execute("CREATE TABLE public.jobs (id int, timer bigint REFERENCES timers.timers (id))")
    done = _cli("--dsn", db.dsn, "--yes", "--keep-roles")
    assert done.returncode == 2
    assert "view public.timer_names" in done.stderr
    assert "table constraint jobs_timer_fkey on public.jobs" in done.stderr
    assert "or pass --cascade to drop them too" in done.stderr
    assert _schemas(conn) == ["timers", "timers_exec"]
    assert scalar(conn, "SELECT to_regclass('public.timer_names')::text") == "timer_names"

    done = _cli("--dsn", db.dsn, "--yes", "--keep-roles", "--cascade")
    assert done.returncode == 0, done.stderr
    assert "dropped view public.timer_names" in done.stdout
    assert _schemas(conn) == []
    assert scalar(conn, "SELECT to_regclass('public.timer_names')") is None
    # the table stays; only its foreign key to timers.timers went
    assert scalar(conn, "SELECT count(*) FROM pg_constraint WHERE conname = 'jobs_timer_fkey'") == 0
    assert scalar(conn, "SELECT to_regclass('public.jobs')::text") == "jobs"


def test_a_role_that_does_not_own_the_schemas_is_told_who_does(db: Database) -> None:
    with db.connect("pgt_alice") as c:
        refused = plan(c, db.dsn, keep_roles=True).refusals(force=False, cascade=False)
        owner = scalar(
            c, "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'timers'"
        )
    assert f"role pgt_alice may not drop schema timers: it is owned by {owner}" in refused[0]
    assert len(refused) == 2  # timers and timers_exec


def test_the_roles_stay_while_another_database_has_pgtimers(
    db: Database, conn: psycopg.Connection, template: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.connect(autocommit=False) as c:
        planned = plan(c, db.dsn)
    found = {o.name: o for o in planned.others}
    # The session's template has pgtimers: what guards the shared roles here.
    assert found[template].uses_pgtimers is True
    assert found["template0"].uses_pgtimers is False
    assert not planned.verdict.drop
    assert main(["uninstall", "--dsn", db.dsn, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "kept roles pgtimers_admin, pgtimers_reader, pgtimers_runner:" in out
    assert "other databases still have pgtimers:" in out
    assert _schemas(conn) == []
    assert _roles(conn) == sorted(ROLES)


def test_a_database_that_cannot_be_checked_keeps_the_roles(
    db: Database, server: Server, empty_db: Database
) -> None:
    with server.admin() as admin:
        admin.execute(
            sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(
                sql.Identifier(empty_db.name)
            )
        )
    # empty_db: no pgtimers, no rights of its roles, connections refused: it is no user
    stranger = make_conninfo(db.dsn, user="pgt_no_such_role", password="wrong")
    with db.connect(autocommit=False) as c:
        planned = plan(c, stranger)
    found = {o.name: o for o in planned.others}
    assert found[empty_db.name].uses_pgtimers is False
    assert found["postgres"].uses_pgtimers is None
    assert "cannot connect" in found["postgres"].why
    assert not planned.verdict.drop
    assert any(
        r.startswith("could not be checked: cannot connect") for r in planned.verdict.reasons
    )


@pytest.mark.parametrize(
    ("others", "keep", "drop"),
    [
        ([], False, True),
        ([OtherDatabase("a", False, "no pgtimers")], False, True),
        ([OtherDatabase("a", False, "no pgtimers")], True, False),
        ([OtherDatabase("a", False, ""), OtherDatabase("b", True, "has it")], False, False),
        ([OtherDatabase("a", None, "cannot connect (x)")], False, False),
    ],
)
def test_the_roles_verdict(others: list[OtherDatabase], keep: bool, drop: bool) -> None:
    verdict = roles_verdict(list(ROLES), others, keep)
    assert verdict.drop is drop
    assert bool(verdict.reasons) is not drop
    assert roles_verdict([], others, keep).drop is False


# --- a cluster of the test's own: the roles really go, dropped by a non-superuser ---


@pytest.fixture
def own_cluster(server: Server) -> Iterator[Cluster]:
    with server.admin() as conn:
        major = int(scalar(conn, "SHOW server_version_num")) // 10000
    made = Cluster(major).init()
    try:
        made.start()
        yield made
    finally:
        made.cleanup()


def _as(cluster: Cluster, dbname: str, user: str) -> str:
    return make_conninfo(cluster.dsn(dbname), user=user)


def _run(cluster: Cluster, dbname: str, user: str, *args: str) -> Any:
    return _cli("--dsn", _as(cluster, dbname, user), "--yes", *args)


def test_on_its_own_cluster_the_last_uninstall_drops_the_roles(own_cluster: Cluster) -> None:
    with own_cluster.admin() as admin:
        # a managed database's owner: CREATEROLE, no superuser
        admin.execute("CREATE ROLE app_owner LOGIN CREATEROLE")
        admin.execute("CREATE DATABASE app OWNER app_owner")
        admin.execute("CREATE DATABASE other")
    with psycopg.connect(_as(own_cluster, "app", "app_owner"), autocommit=True) as c:
        # made by the owner, as on a managed service (on 16+ that gives it ADMIN on alice)
        c.execute("CREATE ROLE alice LOGIN")
    install(_as(own_cluster, "app", "app_owner"))
    install(own_cluster.dsn("other"))
    with psycopg.connect(_as(own_cluster, "app", "app_owner"), autocommit=True) as c:
        c.execute("GRANT pgtimers_admin TO alice")
    with psycopg.connect(_as(own_cluster, "app", "alice"), autocommit=True) as c:
        c.execute("SELECT timers.save('a', 'every 1h', 'SELECT 1')")

    done = _run(own_cluster, "other", "postgres")
    assert done.returncode == 0, done.stderr
    assert "kept roles pgtimers_admin, pgtimers_reader, pgtimers_runner:" in done.stdout
    assert "other databases still have pgtimers: app" in done.stdout

    # alice's executor is hers, not app_owner's: the schema's owner drops it all the same
    done = _run(own_cluster, "app", "app_owner")
    assert done.returncode == 0, done.stderr
    assert "drop roles pgtimers_admin, pgtimers_reader, pgtimers_runner" in done.stdout
    assert "(roles losing membership: alice" in done.stdout, done.stdout
    assert "dropped schema timers_exec (1 executor(s), owned by alice)" in done.stdout
    assert "dropped roles pgtimers_admin, pgtimers_reader, pgtimers_runner" in done.stdout
    with own_cluster.admin() as admin:
        assert _roles(admin) == []
        assert scalar(admin, "SELECT count(*) FROM pg_roles WHERE rolname = 'alice'") == 1
    with psycopg.connect(own_cluster.dsn("app")) as c:
        assert _schemas(c) == []

    # and pgtimers installs again from nothing
    install(_as(own_cluster, "app", "app_owner"))
    with own_cluster.admin() as admin:
        assert _roles(admin) == sorted(ROLES)
