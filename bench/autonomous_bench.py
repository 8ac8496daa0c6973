"""Autonomous timers against atomic ones: what a session of the owner's own login per run
costs. On one throwaway PostgreSQL 15 cluster (fire_path.py's), in one sitting:

    sudo .venv/bin/python bench/autonomous_bench.py            # ~2 min
    sudo .venv/bin/python bench/autonomous_bench.py --quick    # ~1 min

  atomic      N timers due at one instant, each `ANALYZE public.small_K` (a table of its
              own, 100 rows; ANALYZE runs inside a transaction, so an atomic timer runs it
              too), fired by `pgtimers run --workers W`: the runner's worker session runs it.
  autonomous  the same N timers made autonomous: each run is a new session of the owner's
              login (a non-superuser with a password in the runner's PGPASSFILE), the
              statement in autocommit, then the session closed.
  pgbench     pgbench -c 2 and -c 8 of a one-row INSERT (fire_path.py's part), and
              pgbench -C -c 2 (a new connection per transaction): server + client CPU per
              transaction, the reference of the ratios.

Per round: runs/s from the first run's start to the last run's end (timers.runs), p99
lateness of the starts, connections opened while the runs ran (log_connections lines,
by login), and server + runner CPU per run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import fire_path
import vs_pg_cron as vs
from _common import (
    Cluster,
    RunnerProc,
    cpu_sample,
    cpu_seconds,
    install_signal_cleanup,
    loadavg,
    machine,
    pct,
    say,
    server_now,
    table,
)
from psycopg import sql

OWNER = "bench_owner"
PASSWORD = "bench-owner-pw"
# seconds of lead per timer saved before the due instant
SAVE_LEAD = 0.004


def setup_owner(cl: Cluster, n: int) -> Path:
    """The owner (a timers admin that logs in with a password), its n small tables, and
    the runner's password file; returns the file."""
    owner = sql.Identifier(OWNER)
    with cl.connect(vs.PGT_DB) as c:
        c.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE pgtimers_admin").format(
                owner, sql.Literal(PASSWORD)
            )
        )
        c.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(owner))
        c.execute(sql.SQL("SET SESSION AUTHORIZATION {}").format(owner))
        for i in range(n):
            small = sql.Identifier(f"small_{i}")
            c.execute(sql.SQL("CREATE TABLE public.{} (x int, y text)").format(small))
            c.execute(
                sql.SQL(
                    "INSERT INTO public.{} SELECT g, md5(g::text) FROM generate_series(1, 100) g"
                ).format(small)
            )
    passfile = cl.root / "pgpass"
    passfile.write_text(f"*:*:*:{OWNER}:{PASSWORD}\n")
    passfile.chmod(0o600)
    return passfile


def _clear(cl: Cluster) -> None:
    with cl.connect(vs.PGT_DB) as c:
        c.execute("SELECT count(timers.delete(name)) FROM timers.timers")
        c.execute("TRUNCATE timers.runs")
        c.execute("VACUUM ANALYZE timers.timers")


def _log_size(cl: Cluster) -> int:
    return cl.log.stat().st_size


def _connections(cl: Cluster, since: int) -> dict[str, int]:
    """Connections authorized on the bench database since log offset `since`, by login."""
    with open(cl.log, "rb") as fh:
        fh.seek(since)
        text = fh.read().decode(errors="replace")
    out: dict[str, int] = {}
    for line in text.splitlines():
        if "connection authorized:" in line and f"database={vs.PGT_DB}" in line:
            user = line.split("user=", 1)[1].split()[0]
            out[user] = out.get(user, 0) + 1
    return out


def fire_round(cl: Cluster, n: int, workers: int, autonomous: bool) -> dict[str, Any]:
    """n ANALYZE timers due at one instant, atomic or autonomous, fired by one runner."""
    kind = "autonomous" if autonomous else "atomic"
    _clear(cl)
    runner = RunnerProc(
        cl.dsn(vs.PGT_DB), cl.root / f"runner-{kind}-w{workers}.log", workers=workers
    ).start()
    with cl.connect(vs.PGT_DB) as c:
        at = server_now(c).timestamp() + 3 + n * SAVE_LEAD
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1e6):06d}Z"
        timers = [
            {
                "name": f"a{i}",
                "schedule": "every 1h",
                "sql": f"ANALYZE public.small_{i}",
                "start_at": start,
                "autonomous": autonomous,
            }
            for i in range(n)
        ]
        c.execute(sql.SQL("SET SESSION AUTHORIZATION {}").format(sql.Identifier(OWNER)))
        fire_path.save_many(c, timers)
        c.execute("RESET SESSION AUTHORIZATION")
        while server_now(c).timestamp() < at - 0.2:
            time.sleep(0.05)
        offset = _log_size(cl)
        a, ra = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid)
        deadline = time.monotonic() + 60 + n / 10
        done = 0
        while time.monotonic() < deadline:
            done = int(
                c.execute("SELECT count(*) FROM timers.runs WHERE ok IS NOT NULL").fetchone()[0]
            )
            if done >= n:
                break
            time.sleep(0.02)
        b, rb = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid)
        time.sleep(0.2)  # the log lines of the last sessions
        conns = _connections(cl, offset)
        rows = c.execute(
            "SELECT ok, extract(epoch FROM started_at), took_ms, late_ms, error FROM timers.runs"
            " WHERE ok IS NOT NULL"
        ).fetchall()
    runner.stop()
    failed = [r[4] for r in rows if not r[0]]
    first = min(float(r[1]) for r in rows)
    last = max(float(r[1]) + float(r[2]) / 1000 for r in rows)
    res: dict[str, Any] = {
        "kind": kind,
        "workers": workers,
        "n": len(rows),
        "failed": len(failed),
        "first_error": failed[0] if failed else "",
        "per_s": len(rows) / (last - first) if last > first else float("nan"),
        "p99_late_ms": pct([float(r[3]) for r in rows], 99),
        "took_ms_p50": pct([float(r[2]) for r in rows], 50),
        "server_ms": cpu_seconds(a, b) * 1000 / max(done, 1),
        "runner_ms": cpu_seconds(ra, rb) * 1000 / max(done, 1),
        "connections": conns,
        "connections_per_run": sum(conns.values()) / max(done, 1),
    }
    say(
        f"{kind} n={n} workers={workers}: {res['per_s']:,.0f} runs/s, CPU"
        f" {res['server_ms'] + res['runner_ms']:.2f} ms/run (server {res['server_ms']:.2f}),"
        f" connections {conns}, {res['n']}/{n} recorded, {res['failed']} failed"
        + (f" ({res['first_error']})" if failed else "")
    )
    return res


def pgbench_connect_each(cl: Cluster, seconds: float, clients: int = 2) -> dict[str, Any]:
    """pgbench -C: fire_path's one-row INSERT with a new connection per transaction."""
    script = cl.root / "insert.sql"
    script.write_text(fire_path.PGBENCH_SQL)
    args = [str(cl.pg_bin / "pgbench"), "-n", "-C", "-c", str(clients), "-j", str(clients)]
    args += ["-T", str(int(seconds)), "-f", str(script), "-h", str(cl.sock)]
    args += ["-p", str(cl.port), "-U", cl.user, vs.PGT_DB]
    a, kids0 = cpu_sample(cl.postmaster_pid()), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    b, kids1 = cpu_sample(cl.postmaster_pid()), resource.getrusage(resource.RUSAGE_CHILDREN)
    tps = float(next(ln for ln in done.stdout.splitlines() if ln.startswith("tps")).split()[2])
    txns = tps * seconds
    client = (kids1.ru_utime + kids1.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
    out = {
        "tps": tps,
        "server_ms": cpu_seconds(a, b) * 1000 / txns,
        "client_ms": client * 1000 / txns,
    }
    say(f"pgbench -C -c {clients}: {tps:,.0f} tps, server {out['server_ms']:.3f} ms/txn")
    with cl.connect(vs.PGT_DB) as c:
        c.execute("TRUNCATE sink")
    return out


def report(res: dict[str, Any]) -> str:
    pg, pgc = res["pgbench"], res["pgbench_C"]
    ref = pg[2]["server_ms"] + pg[2]["client_ms"]
    ref_c = pgc["server_ms"] + pgc["client_ms"]
    rows: list[list[Any]] = []
    for r in res["rounds"]:
        cpu = r["server_ms"] + r["runner_ms"]
        rows.append(
            [
                f"{r['kind']}, {r['workers']} workers",
                f"{r['n']} ({r['failed']} failed)",
                f"{r['per_s']:,.0f}",
                f"{r['p99_late_ms']:,.0f}",
                f"{r['server_ms']:.2f} + {r['runner_ms']:.2f} = {cpu:.2f}",
                f"{r['connections_per_run']:.2f}",
                f"{cpu / ref:.1f}x",
                f"{cpu / ref_c:.1f}x",
            ]
        )
    for label, p in (("pgbench -c 2 INSERT", pg[2]), ("pgbench -C -c 2 INSERT", pgc)):
        rows.append(
            [
                label,
                "",
                f"{p['tps']:,.0f} tps",
                "",
                f"{p['server_ms']:.3f} + {p['client_ms']:.3f} ="
                f" {p['server_ms'] + p['client_ms']:.3f}",
                "1.00" if "-C" in label else "0",
                "",
                "",
            ]
        )
    out = [
        table(
            [
                "round",
                "runs",
                "runs/s",
                "p99 late ms",
                "CPU ms/run (server + runner)",
                "conns/run",
                "÷ pgbench",
                "÷ pgbench -C",
            ],
            rows,
        )
    ]
    by = {(r["kind"], r["workers"]): r for r in res["rounds"]}
    for w in sorted({r["workers"] for r in res["rounds"]}):
        at, au = by.get(("atomic", w)), by.get(("autonomous", w))
        if at and au:
            cpu = (au["server_ms"] + au["runner_ms"]) / (at["server_ms"] + at["runner_ms"])
            out.append(
                f"{w} workers: autonomous ÷ atomic: runs/s {au['per_s'] / at['per_s']:.2f},"
                f" CPU/run {cpu:.2f}"
            )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="2 workers only, 5 s of pgbench")
    ap.add_argument("-n", type=int, default=100, help="timers due at once (100)")
    ap.add_argument("--port", type=int, default=5499)
    ap.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    args = ap.parse_args()
    install_signal_cleanup()
    settings = vs.cluster_settings(argparse.Namespace(cron_bgw="on", cron_max_running_jobs=64))
    settings["log_connections"] = "on"
    cl = Cluster(port=args.port, settings=settings)
    cl.create()
    cl.start()
    info = vs.setup_databases(cl, argparse.Namespace(cron_bgw="on"))
    with cl.connect(vs.PGT_DB) as c:
        c.execute(fire_path.SINK)
    passfile = setup_owner(cl, args.n)
    # the runner's password file: RunnerProc hands the runner this environment
    os.environ["PGPASSFILE"] = str(passfile)
    mach = machine()
    for k, v in {**mach, **info}.items():
        say(f"{k}: {v}")
    seconds = 5 if args.quick else 10
    res: dict[str, Any] = {
        "pgbench": fire_path.part_pgbench(cl, seconds),
        "pgbench_C": pgbench_connect_each(cl, seconds),
        "rounds": [],
    }
    for workers in (2,) if args.quick else (2, 8):
        for autonomous in (False, True):
            res["rounds"].append(fire_round(cl, args.n, workers, autonomous))
    print()
    print(f"machine: {mach['cpu']}, {mach['cores']} cores; pgtimers {mach['pgtimers']}")
    print(f"load average: at start {mach['load average at start']}, at end {loadavg()}")
    print(
        f"server: {info.get('version', '?')}; fsync {info.get('fsync')}, synchronous_commit"
        f" {info.get('synchronous_commit')}, shared_buffers {info.get('shared_buffers')},"
        f" log_connections on"
    )
    print(f"{args.n} timers due at one instant, each ANALYZE of its own 100-row table")
    print(report(res))
    if args.json:
        args.json.write_text(json.dumps(res, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
