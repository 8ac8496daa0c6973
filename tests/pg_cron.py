"""The real pg_cron, for the tests of importing from it: a throwaway cluster of the tests'
own (tests/faults/cluster.py) that loads pg_cron (it must be in shared_preload_libraries),
with the extension and pgtimers in its database `postgres` (cron.database_name), pgtimers
in a database `app` too, and the test roles. It needs a PostgreSQL whose pg_cron files are
installed (Debian: postgresql-NN-cron); where there is none, the tests that use it skip
and say so."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgtimers.schema.install import install
from tests.faults.cluster import Cluster

ROLES = {"pgt_alice": "pgtimers_admin", "pgt_bob": "pgtimers_admin", "pgt_nobody": None}


def pg_cron_bin() -> Path | None:
    """The binaries of the newest PostgreSQL here with pg_cron's library and control file."""
    for bin_dir in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if not (bin_dir / "initdb").exists() or not (bin_dir / "pg_config").exists():
            continue
        dirs = subprocess.run(
            [str(bin_dir / "pg_config"), "--pkglibdir", "--sharedir"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if len(dirs) == 2 and all(
            p.exists()
            for p in (Path(dirs[0]) / "pg_cron.so", Path(dirs[1]) / "extension/pg_cron.control")
        ):
            return bin_dir
    return None


class PgCron:
    """The cluster with pg_cron, reached as its superuser `postgres` or as a test role."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def dsn(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return make_conninfo(self.cluster.dsn(dbname), user=user)

    def connect(self, dbname: str = "postgres", user: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(self.dsn(dbname, user), autocommit=True)

    def reset(self) -> None:
        """No jobs and no timers; cron.job pg_cron's own again (a test may have changed it)."""
        with self.connect() as su:
            su.execute(
                """DO $$ BEGIN
                       IF NOT EXISTS (SELECT 1 FROM pg_depend
                                       WHERE objid = 'cron.job'::regclass AND deptype = 'e') THEN
                           ALTER EXTENSION pg_cron ADD TABLE cron.job;
                       END IF;
                   END $$"""
            )
            su.execute("ALTER TABLE cron.job OWNER TO postgres")
            su.execute("DELETE FROM cron.job")
        for dbname in ("postgres", "app"):
            with self.connect(dbname) as su:
                su.execute("SELECT timers.delete(name) FROM timers.status")


@pytest.fixture(scope="session")
def pg_cron_server() -> Iterator[PgCron]:
    """The cluster with pg_cron, made once for the session."""
    bin_dir = pg_cron_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL with pg_cron installed here (Debian: postgresql-NN-cron)")
    made = Cluster(int(bin_dir.parent.name))
    made.bin = bin_dir
    try:
        made.init()
        with (made.pgdata / "postgresql.conf").open("a") as conf:
            conf.write("shared_preload_libraries = 'pg_cron'\ncron.database_name = 'postgres'\n")
        made.start()
        with made.admin() as su:
            su.execute("CREATE EXTENSION pg_cron")
            su.execute("CREATE DATABASE app")
        install(made.dsn("postgres"))
        install(made.dsn("app"))
        with made.admin() as su:
            for role, member_of in ROLES.items():
                su.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
                if member_of:
                    su.execute(
                        sql.SQL("GRANT {} TO {}").format(
                            sql.Identifier(member_of), sql.Identifier(role)
                        )
                    )
            # as a DBA lets roles schedule jobs of their own
            su.execute("GRANT USAGE ON SCHEMA cron TO pgt_alice, pgt_bob")
        yield PgCron(made)
    finally:
        with contextlib.suppress(Exception):
            made.cleanup()


@pytest.fixture
def pg_cron(pg_cron_server: PgCron) -> PgCron:
    """The cluster with pg_cron, with no jobs and no timers."""
    pg_cron_server.reset()
    return pg_cron_server
