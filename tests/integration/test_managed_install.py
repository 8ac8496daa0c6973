"""pgtimers installed as on a managed service (RDS, Cloud SQL, Azure): by a role with
CREATEROLE and CREATEDB but no SUPERUSER, into a database it created. Other roles save
timers that run as themselves, a least-privilege runner runs them, the installer
unlocks; where the server's rules forbid a step, the error names the GRANT that lets it.

Roles are cluster-wide and tests run side by side on one server: every role here is
named with this process's id, and all of them are dropped at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql
from psycopg.conninfo import make_conninfo

from tests.conftest import Server, scalar
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

PASSWORD = "pgt-managed-pw"  # ignored by a server that trusts local logins


@dataclass
class Managed:
    """The database a non-superuser installed, and the roles of the tests."""

    server: Server
    dbname: str
    owner: str  # CREATEROLE CREATEDB, no SUPERUSER: installed pgtimers
    admin: str  # made by the owner, granted pgtimers_admin
    stranger: str  # made by a superuser (not by the owner), granted pgtimers_admin
    member: str  # a member of the owner, granted pgtimers_admin
    runner: str  # made by the owner, granted pgtimers_runner

    def dsn(self, role: str) -> str:
        return make_conninfo(self.server.dsn, dbname=self.dbname, user=role, password=PASSWORD)

    def connect(self, role: str) -> psycopg.Connection:
        """An autocommit connection logged in as `role` (not SET ROLE: its own login)."""
        return psycopg.connect(self.dsn(role), autocommit=True)


def _ident(name: str) -> sql.Identifier:
    return sql.Identifier(name)


def _drop_roles(su: psycopg.Connection, roles: list[str]) -> None:
    for role in roles:
        su.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(_ident(role)))


@pytest.fixture(scope="module")
def managed(server: Server) -> Iterator[Managed]:
    pid = os.getpid()
    m = Managed(
        server,
        dbname=f"pgt_managed_{pid}",
        owner=f"pgt_mi_owner_{pid}",
        admin=f"pgt_mi_admin_{pid}",
        stranger=f"pgt_mi_stranger_{pid}",
        member=f"pgt_mi_member_{pid}",
        runner=f"pgt_mi_runner_{pid}",
    )
    dependents = [m.admin, m.stranger, m.member, m.runner]
    with server.admin() as su:
        su.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_ident(m.dbname)))
        _drop_roles(su, [*dependents, m.owner])
        su.execute(
            sql.SQL("CREATE ROLE {} LOGIN CREATEROLE CREATEDB PASSWORD {}").format(
                _ident(m.owner), sql.Literal(PASSWORD)
            )
        )
    try:
        with psycopg.connect(
            make_conninfo(server.dsn, user=m.owner, password=PASSWORD), autocommit=True
        ) as owner:
            owner.execute(sql.SQL("CREATE DATABASE {}").format(_ident(m.dbname)))
        done = subprocess.run(
            [sys.executable, "-m", "pgtimers", "install", "--dsn", m.dsn(m.owner)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        with m.connect(m.owner) as owner:
            for role in (m.admin, m.runner):
                owner.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                        _ident(role), sql.Literal(PASSWORD)
                    )
                )
            owner.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(_ident(m.admin)))
        with server.admin() as su:
            for role in (m.stranger, m.member):
                su.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                        _ident(role), sql.Literal(PASSWORD)
                    )
                )
            su.execute(sql.SQL("GRANT {} TO {}").format(_ident(m.owner), _ident(m.member)))
            # pgtimers' roles are cluster-wide; on this shared server another install made
            # them, so they are granted by a superuser (a fresh cluster's installer could)
            for role in (m.owner, m.admin, m.stranger, m.member):
                su.execute(sql.SQL("GRANT pgtimers_admin TO {}").format(_ident(role)))
            su.execute(sql.SQL("GRANT pgtimers_runner TO {}").format(_ident(m.runner)))
        yield m
    finally:
        with server.admin() as su:
            su.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_ident(m.dbname)))
            _drop_roles(su, [*dependents, m.owner])


@pytest.fixture
def runner(managed: Managed, tmp_path: Path) -> Iterator[RunnerProcess]:
    """`pgtimers run` logged in as the least-privilege runner role, serving."""
    proc = RunnerProcess(["--dsn", managed.dsn(managed.runner)], tmp_path / "runner.log")
    try:
        proc.wait_for("event=serving")
        yield proc
    finally:
        proc.kill()
        proc._log.close()


def _save(conn: psycopg.Connection, name: str, schedule: str, query: str, **opts: Any) -> None:
    named = "".join(f", {k} => %({k})s" for k in opts)
    conn.execute(
        f"SELECT timers.save(%(n)s, %(s)s, %(q)s{named})",
        {"n": name, "s": schedule, "q": query, **opts},
    )


def _run_now(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    result = scalar(conn, "CALL timers.run(%s)", [name])
    assert isinstance(result, dict)
    return result


def test_the_installer_is_no_superuser(managed: Managed) -> None:
    with managed.connect(managed.owner) as owner:
        assert scalar(owner, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user") is False
        assert (
            scalar(
                owner, "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'timers'"
            )
            == managed.owner
        )


def test_an_admin_the_installer_made_saves_timers_that_run_as_itself(
    managed: Managed, runner: RunnerProcess
) -> None:
    with managed.connect(managed.admin) as admin:
        admin.execute("CREATE TABLE ran (who text, due text)")
        query = "INSERT INTO ran VALUES (current_user, current_setting('pgtimers.due_at'))"
        _save(admin, "report", "daily 03:00", query)
        result = _run_now(admin, "report")
        assert result["ok"] is True, result
        _save(admin, "soon", "in 1s", query)
        wait_until(
            lambda: scalar(admin, "SELECT runs FROM timers.status WHERE name = 'soon'") == 1,
            what="the one-shot timer to run",
        )
        assert admin.execute("SELECT who FROM ran").fetchall() == [(managed.admin,)] * 2
    assert "run_failed" not in runner.log()


def test_nothing_lent_for_the_hand_over_is_left(managed: Managed) -> None:
    with managed.connect(managed.admin) as admin:
        _save(admin, "lent", "daily 04:00", "SELECT 1")
    with managed.connect(managed.owner) as owner:
        # the owner cannot act as the admin, nor the admin create in timers_exec
        assert scalar(owner, "SELECT pg_has_role(%s, 'USAGE')", [managed.admin]) is False
        assert (
            scalar(
                owner, "SELECT has_schema_privilege(%s, 'timers_exec', 'CREATE')", [managed.admin]
            )
            is False
        )
        owned = owner.execute(
            "SELECT proowner::regrole::text, has_function_privilege(current_user, oid, 'EXECUTE')"
            "  FROM pg_proc WHERE pronamespace = 'timers_exec'::regnamespace"
            "   AND proowner = %s::regrole",
            [managed.admin],
        ).fetchall()
        assert owned == [(managed.admin, True)]


def test_a_role_the_installer_did_not_make_saves_or_is_told_the_grant(
    managed: Managed, runner: RunnerProcess
) -> None:
    """PostgreSQL 15: CREATEROLE may grant any role that is not a superuser, so it just
    works. 16 and later: only with the ADMIN option on that role, which the installer has
    on the roles it made only; the refusal names the GRANT, and after it the save works."""
    with managed.connect(managed.stranger) as stranger:
        version = int(scalar(stranger, "SHOW server_version_num"))
        try:
            _save(stranger, "stranger", "daily 05:00", "SELECT 1")
        except errors.InsufficientPrivilege as refused:
            assert version >= 160000, refused
            assert f'cannot make the executor of role "{managed.stranger}"' in str(refused)
            statement = (refused.diag.message_hint or "").split("can run: ", 1)[-1]
            assert statement == (
                f"GRANT {managed.stranger} TO {managed.owner}"
                " WITH ADMIN TRUE, INHERIT FALSE, SET FALSE;"
            )
            assert (
                scalar(stranger, "SELECT count(*) FROM timers.status WHERE name = 'stranger'") == 0
            )
            with managed.server.admin() as su:
                su.execute(
                    sql.SQL("GRANT {} TO {} WITH ADMIN TRUE, INHERIT FALSE, SET FALSE").format(
                        _ident(managed.stranger), _ident(managed.owner)
                    )
                )
            _save(stranger, "stranger", "daily 05:00", "SELECT 1")
        else:
            assert version < 160000
        assert _run_now(stranger, "stranger")["ok"] is True


def test_a_superusers_save_is_refused_naming_why(managed: Managed) -> None:
    """A non-superuser cannot give a function to a superuser: the save says so."""
    with psycopg.connect(managed.server.dsn_for(managed.dbname), autocommit=True) as su:
        with pytest.raises(errors.InsufficientPrivilege, match="is a superuser") as refused:
            _save(su, "as_super", "daily 06:00", "SELECT 1")
        assert "not a superuser" in (refused.value.diag.message_hint or "")
        # nothing changed: no timer, no executor
        assert scalar(su, "SELECT count(*) FROM timers.timers WHERE name = 'as_super'") == 0
        assert (
            scalar(
                su,
                "SELECT count(*) FROM pg_proc WHERE pronamespace = 'timers_exec'::regnamespace"
                "   AND proowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)",
            )
            == 0
        )


def test_a_member_of_the_installer_is_told_to_save_as_the_installer(managed: Managed) -> None:
    with managed.connect(managed.member) as member:
        with pytest.raises(errors.InsufficientPrivilege, match="circular membership") as refused:
            _save(member, "circle", "daily 07:00", "SELECT 1")
        hint = refused.value.diag.message_hint or ""
        assert f"SET ROLE {managed.owner}" in hint, hint
        member.execute(sql.SQL("SET ROLE {}").format(_ident(managed.owner)))
        _save(member, "circle", "daily 07:00", "SELECT 1")
        assert scalar(member, "SELECT created_by FROM timers.status WHERE name = 'circle'") == (
            managed.owner
        )


def test_the_installer_unlocks_audited(managed: Managed) -> None:
    with managed.connect(managed.admin) as admin:
        _save(admin, "vault", "daily 08:00", "SELECT 1", locked=True)
        with pytest.raises(errors.InsufficientPrivilege, match="is locked"):
            admin.execute("SELECT timers.delete('vault')")
        with pytest.raises(errors.InsufficientPrivilege, match="permission denied for function"):
            admin.execute("SELECT timers.unlock('vault')")
    with managed.connect(managed.owner) as owner:
        status = owner.execute("SELECT to_jsonb(s) FROM timers.unlock('vault') s").fetchone()
        assert status is not None and status[0]["locked"] is False
        row = owner.execute(
            "SELECT actor, session, detail FROM timers.audit"
            " WHERE action = 'unlock' AND object = 'vault'"
        ).fetchall()
        assert row == [(managed.owner, managed.owner, {"as": "owner of schema timers"})]
    with managed.connect(managed.admin) as admin:
        assert scalar(admin, "SELECT timers.delete('vault')") == {"deleted": True}


def test_the_cli_works_for_an_admin(managed: Managed) -> None:
    base = [sys.executable, "-m", "pgtimers"]
    dsn = ["--dsn", managed.dsn(managed.admin)]
    saved = subprocess.run(
        [*base, "save", "from_cli", "daily 09:00", "SELECT 1", *dsn],
        capture_output=True,
        text=True,
        check=False,
    )
    assert saved.returncode == 0, saved.stderr
    listed = subprocess.run(
        [*base, "list", "--json", *dsn], capture_output=True, text=True, check=False
    )
    assert listed.returncode == 0, listed.stderr
    assert "from_cli" in {t["name"] for t in json.loads(listed.stdout)["timers"]}
