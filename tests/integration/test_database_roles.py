"""Several tenants on one cluster: each database's owner (CREATEROLE, no superuser, as on
a managed service) installs pgtimers and gives its database roles of its own
(timers.use_database_roles), grants them to its people, and nobody of another database,
nor a member of the cluster's pgtimers roles, can read or change its timers.

Roles are cluster-wide and tests run side by side on one server: every name here carries
this process's id, and all of them are dropped at the end."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import errors, sql
from psycopg.conninfo import make_conninfo

from tests.conftest import Server, scalar
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

PASSWORD = "pgt-tenant-pw"  # ignored by a server that trusts local logins


@dataclass
class Tenant:
    """A database, the role that made it and installed pgtimers, and its people."""

    server: Server
    dbname: str
    owner: str
    admin: str  # made by the owner, granted the database's admin role
    runner: str  # made by the owner, granted the database's runner role

    @property
    def roles(self) -> dict[str, str]:
        return {k: f"pgtimers_{self.dbname}_{k}" for k in ("reader", "admin", "runner")}

    def dsn(self, role: str, dbname: str | None = None) -> str:
        return make_conninfo(
            self.server.dsn, dbname=dbname or self.dbname, user=role, password=PASSWORD
        )

    def connect(self, role: str, dbname: str | None = None) -> psycopg.Connection:
        return psycopg.connect(self.dsn(role, dbname), autocommit=True)


def _id(name: str) -> sql.Identifier:
    return sql.Identifier(name)


def _make_tenant(server: Server, name: str) -> Tenant:
    t = Tenant(server, f"pgt_{name}_{os.getpid()}", f"pgt_{name}_owner_{os.getpid()}",
               f"pgt_{name}_admin_{os.getpid()}", f"pgt_{name}_runner_{os.getpid()}")  # fmt: skip
    with server.admin() as su:
        su.execute(
            sql.SQL("CREATE ROLE {} LOGIN CREATEROLE CREATEDB PASSWORD {}").format(
                _id(t.owner), sql.Literal(PASSWORD)
            )
        )
    with psycopg.connect(
        make_conninfo(server.dsn, user=t.owner, password=PASSWORD), autocommit=True
    ) as owner:
        owner.execute(sql.SQL("CREATE DATABASE {}").format(_id(t.dbname)))
    install(t)
    with t.connect(t.owner) as owner:
        made = scalar(owner, "SELECT timers.use_database_roles()")
        assert {k: made[k] for k in t.roles} == t.roles
        for role, kind in ((t.admin, "admin"), (t.runner, "runner")):
            owner.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {}").format(
                    _id(role), sql.Literal(PASSWORD), _id(t.roles[kind])
                )
            )
        owner.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(_id(t.admin)))
    return t


def install(t: Tenant) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pgtimers", "install", "--dsn", t.dsn(t.owner)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _drop(server: Server, t: Tenant) -> None:
    with server.admin() as su:
        su.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_id(t.dbname)))
        for role in (t.admin, t.runner, *t.roles.values(), t.owner):
            su.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(_id(role)))


@pytest.fixture(scope="module")
def tenants(server: Server, template: str) -> Iterator[tuple[Tenant, Tenant]]:
    """(`template`: the cluster's roles exist, made by a superuser, before any tenant.)"""
    made: list[Tenant] = []
    try:
        made.extend(_make_tenant(server, name) for name in ("ta", "tb"))
        yield made[0], made[1]
    finally:
        for t in made:
            _drop(server, t)


def test_each_owner_grants_its_own_roles_and_its_admin_saves_and_runs(
    tenants: tuple[Tenant, Tenant], tmp_path: Path
) -> None:
    a, _ = tenants
    with a.connect(a.admin) as admin:
        admin.execute("CREATE TABLE ran (who text)")
        saved = scalar(
            admin,
            "SELECT created_by FROM timers.save('a1', 'in 1s',"
            " 'INSERT INTO ran SELECT current_user')",
        )
        assert saved == a.admin
        runner = RunnerProcess(["--dsn", a.dsn(a.runner)], tmp_path / "runner.log")
        try:
            runner.wait_for("event=serving")
            wait_until(lambda: scalar(admin, "SELECT count(*) FROM ran") == 1, what="the run")
        finally:
            runner.kill()
            runner._log.close()
        assert scalar(admin, "SELECT who FROM ran") == a.admin


def test_nobody_of_another_database_reads_or_changes_them(tenants: tuple[Tenant, Tenant]) -> None:
    a, b = tenants
    with a.connect(a.admin) as admin:
        admin.execute("SELECT timers.save('mine', 'daily 03:00', 'SELECT 1')")
    # b's admin, logged in to a's database (CONNECT is PUBLIC's by default)
    with a.connect(b.admin) as other:
        for statement in (
            "SELECT * FROM timers.status",
            "SELECT timers.delete('mine')",
            "SELECT timers.save('theirs', 'daily 03:00', 'SELECT 1')",
            "SELECT * FROM timers.runs",
        ):
            with pytest.raises(
                errors.InsufficientPrivilege, match="permission denied for schema timers"
            ):
                other.execute(statement)
    with a.connect(a.admin) as admin:
        assert scalar(admin, "SELECT count(*) FROM timers.status WHERE name = 'mine'") == 1


def test_a_member_of_the_clusters_roles_has_no_rights_there(
    server: Server, tenants: tuple[Tenant, Tenant]
) -> None:
    a, _ = tenants
    cluster_admin = f"pgt_cluster_admin_{os.getpid()}"
    with server.admin() as su:
        su.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(_id(cluster_admin)))
        su.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE pgtimers_admin").format(
                _id(cluster_admin), sql.Literal(PASSWORD)
            )
        )
    try:
        with (
            a.connect(cluster_admin) as conn,
            pytest.raises(errors.InsufficientPrivilege, match="permission denied for schema"),
        ):
            conn.execute("SELECT timers.save('x', 'daily 03:00', 'SELECT 1')")
    finally:
        with server.admin() as su:
            su.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(_id(cluster_admin)))


def test_an_upgrade_keeps_the_database_roles(tenants: tuple[Tenant, Tenant]) -> None:
    """The code grants to the cluster's roles each time it is applied; a database with its
    own roles moves those rights to them again."""
    a, _ = tenants
    with a.connect(a.owner) as owner:
        owner.execute("DELETE FROM timers.installed_code")  # the next install applies it all
    install(a)
    with a.connect(a.owner) as owner:
        ours = owner.execute(
            "SELECT has_function_privilege(%s, 'timers.save_many(jsonb)', 'EXECUTE')::int,"
            "       has_schema_privilege('pgtimers_reader', 'timers', 'USAGE')::int",
            [a.roles["admin"]],
        ).fetchone()
    assert ours == (1, 0)
    with a.connect(a.admin) as admin:
        assert scalar(admin, "SELECT count(*) >= 0 FROM timers.status") is True


def test_only_the_installer_chooses_the_roles(tenants: tuple[Tenant, Tenant]) -> None:
    a, _ = tenants
    with (
        a.connect(a.admin) as admin,
        pytest.raises(
            errors.InsufficientPrivilege, match="only a superuser or the role that installed"
        ),
    ):
        admin.execute("SELECT timers.use_database_roles(false)")
    with a.connect(a.owner) as owner:
        with pytest.raises(errors.InvalidParameterValue, match="must be three roles"):
            owner.execute(
                "SELECT timers.use_database_roles(reader => 'x', admin => 'x', runner => 'y')"
            )
        audited = scalar(
            owner, "SELECT count(*) FROM timers.audit WHERE action = 'use_database_roles'"
        )
        assert audited == 1


def test_back_to_the_clusters_roles_and_again(tenants: tuple[Tenant, Tenant]) -> None:
    _, b = tenants
    with b.connect(b.owner) as owner:
        back = scalar(owner, "SELECT timers.use_database_roles(false)")
        assert back["admin"] == "pgtimers_admin" and back["rights_moved"] > 100
        assert scalar(owner, "SELECT has_schema_privilege('pgtimers_reader', 'timers', 'USAGE')")
        assert not scalar(
            owner, "SELECT has_schema_privilege(%s, 'timers', 'USAGE')", [b.roles["reader"]]
        )
        again = scalar(owner, "SELECT timers.use_database_roles()")
        assert again["admin"] == b.roles["admin"]
    with b.connect(b.admin) as admin:
        admin.execute("SELECT timers.save('b1', 'daily 03:00', 'SELECT 1')")


def test_postgresql_15_warns_that_createrole_reaches_the_roles(
    tenants: tuple[Tenant, Tenant],
) -> None:
    """Before PostgreSQL 16 a role with CREATEROLE may grant itself any role that is no
    superuser, another tenant's pgtimers roles too: the call says so there, and only there."""
    a, b = tenants
    seen: list[tuple[str | None, str, str]] = []  # (severity, message, hint), read at once
    with b.connect(b.owner) as owner:
        owner.add_notice_handler(
            lambda d: seen.append(
                (d.severity_nonlocalized, d.message_primary or "", d.message_hint or "")
            )
        )
        owner.execute("SELECT timers.use_database_roles()")
        old = owner.info.server_version < 160000
    warned = [(message, hint) for severity, message, hint in seen if severity == "WARNING"]
    if not old:
        assert warned == []
        return
    assert len(warned) == 1
    assert b.roles["admin"] in warned[0][0] and "CREATEROLE" in warned[0][0]
    assert "PostgreSQL 16 or later" in warned[0][1]
    # what it warns of: the other tenant's owner takes this database's admin role
    with a.connect(a.owner) as other:
        other.execute(sql.SQL("GRANT {} TO {}").format(_id(b.roles["admin"]), _id(a.owner)))
        other.execute(sql.SQL("REVOKE {} FROM {}").format(_id(b.roles["admin"]), _id(a.owner)))


def test_uninstall_drops_the_databases_own_roles(tenants: tuple[Tenant, Tenant]) -> None:
    _, b = tenants
    done = subprocess.run(
        [sys.executable, "-m", "pgtimers", "uninstall", "--dsn", b.dsn(b.owner), "--yes"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"dropped this database's roles {', '.join(sorted(b.roles.values()))}" in done.stdout
    with b.connect(b.owner) as owner:
        left = owner.execute(
            "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", [list(b.roles.values())]
        ).fetchall()
        assert left == []
        # the cluster's roles are another matter: other databases of this server use them
        assert scalar(owner, "SELECT count(*) FROM pg_roles WHERE rolname = 'pgtimers_admin'") == 1
