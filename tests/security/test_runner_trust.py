"""What a runner trusts: before it calls anything in a database it checks whose code that
is. A runner that logs in as a superuser runs only code a superuser owns; another login,
code of a superuser, of itself, or of a role that can act as it. Anything else is refused
with one log line naming the owner, and nothing of the database runs.

A role with only CREATEDB can make a database with a schema `timers` of its own, and a
database's owner can set its search_path; a superuser runner (the embedded default, one
runner for many databases) that called into it would run that role's code as a superuser.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.conftest import Server
from tests.support.runner import RunnerProcess

PASSWORD = "trust-test-pw"


@dataclass
class Roles:
    server: Server
    made: list[str]
    dbs: list[str]

    def role(self, name: str, attributes: str = "") -> str:
        role = f"pgt_tr_{name}_{os.getpid()}"
        with self.server.admin() as su:
            su.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} " + attributes).format(
                    sql.Identifier(role), sql.Literal(PASSWORD)
                )
            )
        self.made.append(role)
        return role

    def dsn(self, role: str, dbname: str) -> str:
        return make_conninfo(self.server.dsn, user=role, password=PASSWORD, dbname=dbname)

    def database(self, owner: str, name: str) -> str:
        dbname = f"pgt_tr_{name}_{os.getpid()}"
        with psycopg.connect(self.dsn(owner, "postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        self.dbs.append(dbname)
        return dbname

    def is_superuser(self, role: str) -> bool:
        with self.server.admin() as su:
            row = su.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role]).fetchone()
        assert row is not None
        return bool(row[0])


@pytest.fixture
def roles(server: Server, template: str) -> Iterator[Roles]:
    r = Roles(server, [], [])
    yield r
    with server.admin() as su:
        for db in r.dbs:
            su.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db))
            )
        for role in r.made:
            su.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.fixture
def runners(tmp_path: Path) -> Iterator[list[RunnerProcess]]:
    started: list[RunnerProcess] = []
    yield started
    for proc in started:
        proc.kill()


def _start(runners: list[RunnerProcess], tmp_path: Path, dsn: str) -> RunnerProcess:
    proc = RunnerProcess(["--dsn", dsn, "--workers", "1"], tmp_path / f"r{len(runners)}.log")
    runners.append(proc)
    return proc


# What the role plants: the objects `pgtimers run` looks for, a _runner_start that makes
# the role a superuser, and (with the database's search_path putting public first) a
# to_regclass that would be found before pg_catalog's.
PLANT = """
CREATE TABLE public.trap_ran (what text);
GRANT ALL ON public.trap_ran TO PUBLIC;
CREATE SCHEMA timers;
CREATE TABLE timers.timers (id int);
CREATE FUNCTION timers._run_lost(text, bigint, timestamptz, text, jsonb) RETURNS jsonb
    LANGUAGE sql AS $$ SELECT NULL::jsonb $$;
CREATE FUNCTION timers._run_due(bigint, timestamptz, text) RETURNS jsonb
    LANGUAGE sql AS $$ SELECT NULL::jsonb $$;
CREATE FUNCTION timers._runner_start(text, text, integer, text, integer) RETURNS jsonb
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.trap_ran VALUES ('_runner_start as ' || current_user);
    EXECUTE format('ALTER ROLE %I SUPERUSER', '{me}');
    RETURN '{{}}';
END $$;
CREATE FUNCTION public.to_regclass(text) RETURNS regclass LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.trap_ran VALUES ('to_regclass as ' || current_user);
    EXECUTE format('ALTER ROLE %I SUPERUSER', '{me}');
    RETURN pg_catalog.to_regclass($1);
END $$;
"""


def test_a_superuser_runner_calls_nothing_in_a_database_a_plain_role_made(
    roles: Roles, runners: list[RunnerProcess], tmp_path: Path
) -> None:
    mallory = roles.role("mallory", "CREATEDB")
    dbname = roles.database(mallory, "own")
    with psycopg.connect(roles.dsn(mallory, dbname), autocommit=True) as m:
        m.execute(PLANT.format(me=mallory))
        m.execute(
            sql.SQL("ALTER DATABASE {} SET search_path = public, pg_catalog").format(
                sql.Identifier(dbname)
            )
        )
    proc = _start(runners, tmp_path, roles.server.dsn_for(dbname))  # a superuser's login
    proc.wait_for("event=database_untrusted", timeout=20)
    log = proc.log()
    assert f"owner={mallory}" in log
    assert "a runner that logs in as a superuser runs only code a superuser owns" in log
    assert "event=serving" not in log
    assert not roles.is_superuser(mallory)
    with psycopg.connect(roles.server.dsn_for(dbname), autocommit=True) as su:
        assert su.execute("SELECT what FROM public.trap_ran").fetchall() == []
    assert log.count("event=database_untrusted") == 1  # said once, not at every retry


def _install(dsn: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pgtimers", "install", "--dsn", dsn],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_pgtimers_a_plain_role_installed_is_run_only_by_logins_it_could_act_as(
    roles: Roles, runners: list[RunnerProcess], tmp_path: Path
) -> None:
    installer = roles.role("installer", "CREATEDB CREATEROLE")
    dbname = roles.database(installer, "managed")
    _install(roles.dsn(installer, dbname))
    with psycopg.connect(roles.dsn(installer, dbname), autocommit=True) as inst:
        # a runner login the installer made: it can act as it (ADMIN on 16+, CREATEROLE on 15)
        svc = f"pgt_tr_svc_{os.getpid()}"
        inst.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(svc), sql.Literal(PASSWORD)
            )
        )
        roles.made.insert(0, svc)
    with roles.server.admin() as su:
        su.execute(sql.SQL("GRANT pgtimers_runner TO {}").format(sql.Identifier(svc)))
        version = int(su.execute("SHOW server_version_num").fetchone()[0])  # type: ignore[index]

    superuser = _start(runners, tmp_path, roles.server.dsn_for(dbname))
    superuser.wait_for("event=database_untrusted", timeout=20)
    assert f"owner={installer}" in superuser.log()
    assert "event=serving" not in superuser.log()

    own = _start(runners, tmp_path, roles.dsn(svc, dbname))
    own.wait_for("event=serving", timeout=20)
    assert "database_untrusted" not in own.log()

    if version >= 160000:
        # a login made by someone else, which the installer cannot act as
        stranger = roles.role("stranger")
        with roles.server.admin() as su:
            su.execute(sql.SQL("GRANT pgtimers_runner TO {}").format(sql.Identifier(stranger)))
        refused = _start(runners, tmp_path, roles.dsn(stranger, dbname))
        refused.wait_for("event=database_untrusted", timeout=20)
        assert f"owner={installer}" in refused.log()
        assert "a role that can act as its login" in refused.log()
