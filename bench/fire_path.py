"""The fire path against the database's own speed: pgtimers, pgbench and pg_cron side by
side on one throwaway PostgreSQL 15 cluster, in one sitting, with the ratios.

    sudo .venv/bin/python bench/fire_path.py              # everything, ~12 min
    sudo .venv/bin/python bench/fire_path.py --quick      # smaller, ~5 min
    sudo .venv/bin/python bench/fire_path.py --only pgbench,fires

Parts (--only takes a comma list; default all):
  pgbench  pgbench -c 1, -c 2 and -c 8, one one-row INSERT per transaction (the same INSERT
           the timers run): tps, and server + pgbench CPU per transaction. -c 1 is the
           bound of work done one commit after another: a save's round trip and commit,
           and keyed fires on one test clock (they commit one at a time, in tick order).
  fires    K timers due at one instant (`every 1h`, start_at = that instant), each running
           that INSERT, fired by `pgtimers run --workers 2` and `--workers 8`: fires/s from
           the first INSERT to the last, CPU per fire (server + runner), p99 lateness.
  burst    1,000 jobs due at one whole minute, default workers, against pg_cron's 1,000
           `cron.schedule` jobs (bench/vs_pg_cron.py's rounds): p99 lateness.
  spread   10,000 `every 1m` timers spread over the minute, for 3 minutes: p99 lateness.
  wake     timers._next_wake() (the control session's look) with 0 to 100,000 due timers.
  save     timers.save one call at a time, and timers.save_many of 10,000 in one call.
  keyed    keyed timers fired on a test clock (bench/keyed_bench.py's advance).
  idle     10,000 timers, none due for an hour: runner + server CPU over a minute.

The cluster is vs_pg_cron.py's (pg_cron preloaded, fsync and synchronous_commit on).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
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

# seconds of lead per timer saved before its first due time (save_many takes ~1.5 ms each)
SAVE_LEAD = 0.004
PARTS = ("pgbench", "fires", "burst", "spread", "wake", "save", "keyed", "idle")
SINK = "CREATE TABLE sink (job text, due timestamptz, at timestamptz NOT NULL)"
SINK_SQL = (
    "INSERT INTO public.sink (job, due, at) VALUES (current_setting('pgtimers.timer'),"
    " current_setting('pgtimers.due_at')::timestamptz, clock_timestamp())"
)
PGBENCH_SQL = (
    "INSERT INTO public.sink (job, due, at) VALUES ('pgbench', now(), clock_timestamp());\n"
)


# ---------------------------------------------------------------------------- helpers
def clear(cl: Cluster) -> None:
    """No timers, an empty sink, and a vacuumed catalog of pgtimers."""
    with cl.connect(vs.PGT_DB) as c:
        c.execute("SELECT count(timers.delete(name)) FROM timers.timers")
        c.execute("TRUNCATE sink, timers.runs")
        c.execute("VACUUM ANALYZE timers.timers")
        c.execute("VACUUM ANALYZE sink")


def save_many(c: psycopg.Connection[Any], timers: list[dict[str, Any]], chunk: int = 5000) -> float:
    """Save the timers through timers.save_many; the seconds it took."""
    t0 = time.perf_counter()
    for i in range(0, len(timers), chunk):
        c.execute("SELECT timers.save_many(%s::jsonb)", [json.dumps(timers[i : i + chunk])])
    return time.perf_counter() - t0


def wait_sink(c: psycopg.Connection[Any], n: int, timeout: float) -> int:
    """Until the sink has n rows (or timeout); how many it has."""
    deadline = time.monotonic() + timeout
    got = 0
    while time.monotonic() < deadline:
        got = int(c.execute("SELECT count(*) FROM sink").fetchone()[0])
        if got >= n:
            break
        time.sleep(0.05)
    return got


def sink_stats(c: psycopg.Connection[Any]) -> dict[str, float]:
    """Lateness (at - due) percentiles in ms, and fires/s from the first to the last."""
    rows = c.execute(
        "SELECT extract(epoch FROM at - due) * 1000, extract(epoch FROM at) FROM sink ORDER BY at"
    ).fetchall()
    late = [float(r[0]) for r in rows]
    span = float(rows[-1][1]) - float(rows[0][1]) if len(rows) > 1 else math.nan
    return {
        "n": len(rows),
        "p50": pct(late, 50),
        "p99": pct(late, 99),
        "max": max(late) if late else math.nan,
        "per_s": (len(rows) - 1) / span if span and span > 0 else math.nan,
    }


# ---------------------------------------------------------------------------- parts
def part_pgbench(cl: Cluster, seconds: float) -> dict[str, Any]:
    script = cl.root / "insert.sql"
    script.write_text(PGBENCH_SQL)
    out: dict[str, Any] = {}
    for clients in (1, 2, 8):
        args = [str(cl.pg_bin / "pgbench"), "-n", "-c", str(clients), "-j", str(clients)]
        args += ["-T", str(int(seconds)), "-f", str(script), "-h", str(cl.sock)]
        args += ["-p", str(cl.port), "-U", cl.user, vs.PGT_DB]
        a, kids0 = cpu_sample(cl.postmaster_pid()), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(args, capture_output=True, text=True, check=True)
        b, kids1 = cpu_sample(cl.postmaster_pid()), resource.getrusage(resource.RUSAGE_CHILDREN)
        tps = float(next(ln for ln in done.stdout.splitlines() if ln.startswith("tps")).split()[2])
        txns = tps * seconds
        client = (kids1.ru_utime + kids1.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
        out[clients] = {
            "tps": tps,
            "server_ms": cpu_seconds(a, b) * 1000 / txns,
            "client_ms": client * 1000 / txns,
        }
        say(f"pgbench -c {clients}: {tps:,.0f} tps, server {out[clients]['server_ms']:.3f} ms/txn")
        with cl.connect(vs.PGT_DB) as c:
            c.execute("TRUNCATE sink")
    return out


def fire_round(cl: Cluster, n: int, workers: int | None, tag: str) -> dict[str, Any]:
    """n timers due at one instant, fired by a runner with `workers`."""
    clear(cl)
    runner = RunnerProc(cl.dsn(vs.PGT_DB), cl.root / f"runner-{tag}.log", workers=workers).start()
    with cl.connect(vs.PGT_DB) as c:
        at = server_now(c).timestamp() + 3 + n * SAVE_LEAD
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1e6):06d}Z"
        timers = [
            {"name": f"f{i}", "schedule": "every 1h", "sql": SINK_SQL, "start_at": start}
            for i in range(n)
        ]
        save_many(c, timers)
        while server_now(c).timestamp() < at - 0.2:
            time.sleep(0.05)
        a, ra = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid)
        got = wait_sink(c, n, 60 + n / 100)
        b, rb = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid)
        res: dict[str, Any] = {**sink_stats(c), "workers": workers}
        res["server_ms"] = cpu_seconds(a, b) * 1000 / max(got, 1)
        res["runner_ms"] = cpu_seconds(ra, rb) * 1000 / max(got, 1)
        res["dupes"] = int(
            c.execute("SELECT count(*) - count(DISTINCT job) FROM sink").fetchone()[0]
        )
    runner.stop()
    say(
        f"fires n={n} workers={workers or 'default'}: {res['per_s']:,.0f}/s, p99"
        f" {res['p99']:,.0f} ms, CPU {res['server_ms'] + res['runner_ms']:.2f} ms/fire"
        f" (server {res['server_ms']:.2f}), {got}/{n}, dupes {res['dupes']}"
    )
    return res


def part_fires(cl: Cluster, n: int) -> dict[str, Any]:
    return {w: fire_round(cl, n, w, f"fires-w{w}") for w in (2, 8)}


def part_burst(cl: Cluster) -> dict[str, Any]:
    clear(cl)
    cron = vs.round_pg_cron(cl, 1000)
    runner = RunnerProc(cl.dsn(vs.PGT_DB), cl.root / "runner-burst.log").start()
    pgt = vs.round_pgtimers(cl, 1000, runner)
    runner.stop()
    return {"pg_cron": cron, "pgtimers": pgt}


def part_spread(cl: Cluster, n: int, minutes: int) -> dict[str, Any]:
    clear(cl)
    runner = RunnerProc(cl.dsn(vs.PGT_DB), cl.root / "runner-spread.log").start()
    with cl.connect(vs.PGT_DB) as c:
        base = server_now(c).timestamp() + 10 + n * SAVE_LEAD
        timers = []
        for i in range(n):
            at = base + (i % n) * 60.0 / n
            start = (
                time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1e6):06d}Z"
            )
            timers.append(
                {"name": f"s{i}", "schedule": "every 1m", "sql": SINK_SQL, "start_at": start}
            )
        save_many(c, timers)
        say(f"spread: {n:,} timers over each minute, for {minutes} min (load {loadavg()})")
        a, ra = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid)
        time.sleep(max(base - server_now(c).timestamp(), 0) + minutes * 60 + 2)
        b, rb = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid)
        c.execute("DELETE FROM sink WHERE due >= to_timestamp(%s)", [base + minutes * 60])
        res = {**sink_stats(c), "expected": n * minutes}
        res["cpu_pct"] = (cpu_seconds(a, b) + cpu_seconds(ra, rb)) * 100 / (minutes * 60)
    runner.stop()
    say(
        f"  {res['n']:,}/{res['expected']:,} runs, p50 {res['p50']:.1f} ms, p99 {res['p99']:.1f} ms"
    )
    return res


def part_wake(cl: Cluster, sizes: list[int]) -> dict[str, Any]:
    clear(cl)
    script = cl.root / "wake.sql"
    script.write_text("SELECT timers._next_wake();\n")
    one = cl.root / "one.sql"
    one.write_text("SELECT 1;\n")
    out: dict[str, Any] = {"round_trip": _latency(cl, one)}
    with cl.connect(vs.PGT_DB) as c:
        made = 0
        for size in sizes:
            if size > made:
                timers = [
                    {"name": f"w{i}", "schedule": "every 1h", "sql": "SELECT 1"}
                    for i in range(made, size)
                ]
                save_many(c, timers)
                made = size
            # a bench's shortcut: make `size` timers due without waiting for them
            c.execute(
                "UPDATE timers.timers SET next_due_at = now() - interval '1 second'"
                " WHERE next_due_at > now()"
            )
            c.execute("VACUUM ANALYZE timers.timers")
            out[size] = _latency(cl, script)
            say(f"wake with {size:,} due: {out[size]:.3f} ms (round trip {out['round_trip']:.3f})")
    return out


def _latency(cl: Cluster, script: Path) -> float:
    args = [str(cl.pg_bin / "pgbench"), "-n", "-c", "1", "-T", "3", "-f", str(script)]
    args += ["-h", str(cl.sock), "-p", str(cl.port), "-U", cl.user, vs.PGT_DB]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("latency average"))
    return float(line.split("=")[1].split()[0])


def part_save(cl: Cluster, singles: int, bulk: int) -> dict[str, Any]:
    clear(cl)
    with cl.connect(vs.PGT_DB) as c:
        t0 = time.perf_counter()
        for i in range(singles):
            c.execute("SELECT timers.save(%s, 'every 5m', %s)", [f"one{i}", SINK_SQL])
        each = (time.perf_counter() - t0) * 1000 / singles
        timers = [
            {"name": f"bulk{i}", "schedule": "every 5m", "sql": SINK_SQL} for i in range(bulk)
        ]
        t1 = time.perf_counter()
        c.execute("SELECT timers.save_many(%s::jsonb)", [json.dumps(timers)])
        per_s = bulk / (time.perf_counter() - t1)
    say(f"save: {each:.2f} ms each; save_many: {per_s:,.0f} timers/s")
    return {"each_ms": each, "bulk_per_s": per_s}


def part_keyed(cl: Cluster, n: int) -> dict[str, Any]:
    import keyed_bench

    return keyed_bench.bench_advance(cl.dsn("postgres"), n, 1000, None, False, cl.root)


def part_idle(cl: Cluster, n: int, seconds: float) -> dict[str, Any]:
    clear(cl)
    with cl.connect(vs.PGT_DB) as c:
        save_many(c, [{"name": f"i{i}", "schedule": "hourly", "sql": "SELECT 1"} for i in range(n)])
        c.execute("UPDATE timers.timers SET next_due_at = now() + interval '1 hour'")
    runner = RunnerProc(cl.dsn(vs.PGT_DB), cl.root / "runner-idle.log").start()
    time.sleep(2)
    a, ra = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid)
    time.sleep(seconds)
    b, rb = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid)
    runner.stop()
    res = {
        "server_pct": cpu_seconds(a, b) * 100 / seconds,
        "runner_pct": cpu_seconds(ra, rb) * 100 / seconds,
    }
    say(
        f"idle with {n:,} timers: server {res['server_pct']:.2f} %,"
        f" runner {res['runner_pct']:.2f} %"
    )
    return res


# ---------------------------------------------------------------------------- report
def _met(ok: bool | None) -> str:
    return "-" if ok is None else ("met" if ok else "NOT met")


def report(res: dict[str, Any]) -> str:
    rows: list[list[Any]] = []
    pg, fires = res.get("pgbench"), res.get("fires")
    if pg and fires:
        for w in (2, 8):
            ratio = fires[w]["per_s"] / pg[w]["tps"]
            rows.append(
                [
                    f"fires/s, {w} workers ÷ pgbench -c {w}",
                    f"{fires[w]['per_s']:,.0f}",
                    f"{pg[w]['tps']:,.0f} tps",
                    f"{ratio:.2f}",
                    # the default 2 workers carry the target; 8 workers say how it scales
                    "≥ 0.5" if w == 2 else "",
                    _met(ratio >= 0.5) if w == 2 else "-",
                ]
            )
        for w in (2, 8):
            cpu = fires[w]["server_ms"] + fires[w]["runner_ms"]
            ref = pg[w]["server_ms"] + pg[w]["client_ms"]
            rows.append(
                [
                    f"CPU per fire, {w} workers (server + runner)",
                    f"{cpu:.2f} ms",
                    f"{ref:.3f} ms",
                    f"{cpu / ref:.1f}x",
                    "≤ 3x",
                    _met(cpu / ref <= 3),
                ]
            )
    if burst := res.get("burst"):
        p, c = burst["pgtimers"]["p99"], burst["pg_cron"]["p99"]
        rows.append(
            [
                "1,000 due at once: p99 lateness",
                f"{p:,.0f} ms",
                f"pg_cron {c:,.0f} ms",
                f"{c / p:.1f}x better",
                "≤ 400 ms",
                _met(p <= 400),
            ]
        )
    if spread := res.get("spread"):
        rows.append(
            [
                f"{spread['expected'] // 3 if spread['expected'] else 0:,} spread: p99 lateness",
                f"{spread['p99']:.1f} ms",
                "",
                "",
                "< 100 ms",
                _met(spread["p99"] < 100),
            ]
        )
    if wake := res.get("wake"):
        sizes = [k for k in wake if k != "round_trip"]
        worst = max(wake[k] for k in sizes) - wake["round_trip"]
        rows.append(
            [
                "_next_wake, " + " / ".join(f"{k:,}" for k in sizes) + " due",
                " / ".join(f"{wake[k]:.3f}" for k in sizes) + " ms",
                f"SELECT 1 {wake['round_trip']:.3f} ms",
                "",
                "≤ 0.2 ms, flat",
                _met(worst <= 0.2),
            ]
        )
    # one INSERT and its commit, one after another: the floor of a save's call and of a
    # keyed fire on a test clock (serial in tick order)
    one = pg.get(1) if pg else None
    if save := res.get("save"):
        rows.append(
            [
                "timers.save, one per call",
                f"{save['each_ms']:.2f} ms",
                f"INSERT {1000 / one['tps']:.2f} ms" if one else "",
                f"{save['each_ms'] * one['tps'] / 1000:.1f}x" if one else "",
                "≤ 0.8 ms",
                _met(save["each_ms"] <= 0.8),
            ]
        )
        rows.append(
            [
                "timers.save_many",
                f"{save['bulk_per_s']:,.0f}/s",
                "",
                "",
                "≥ 10,000/s",
                _met(save["bulk_per_s"] >= 10000),
            ]
        )
    if keyed := res.get("keyed"):
        rows.append(
            [
                "keyed fires on a test clock",
                f"{keyed['fired_per_s']:,.0f}/s",
                f"pgbench -c 1 {one['tps']:,.0f} tps" if one else "",
                f"{keyed['fired_per_s'] / one['tps']:.2f}" if one else "",
                "≥ 2,000/s",
                _met(keyed["fired_per_s"] >= 2000),
            ]
        )
    if idle := res.get("idle"):
        total = idle["server_pct"] + idle["runner_pct"]
        rows.append(
            [
                "idle, 10,000 timers: runner + server CPU",
                f"{total:.2f} % of a core",
                "",
                "",
                "< 1 %",
                _met(total < 1),
            ]
        )
    return table(["measure", "pgtimers", "same run", "ratio", "target", ""], rows)


# ---------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--only", default=",".join(PARTS), help="comma list of: " + ", ".join(PARTS))
    ap.add_argument("--quick", action="store_true", help="smaller sizes and windows")
    ap.add_argument("--port", type=int, default=5499)
    ap.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    args = ap.parse_args()
    parts = [p for p in args.only.split(",") if p]
    if unknown := set(parts) - set(PARTS):
        ap.error(f"unknown parts: {', '.join(sorted(unknown))}")
    quick = args.quick
    install_signal_cleanup()
    settings = vs.cluster_settings(argparse.Namespace(cron_bgw="on", cron_max_running_jobs=64))
    cl = Cluster(port=args.port, settings=settings)
    cl.create()
    cl.start()
    info = vs.setup_databases(cl, argparse.Namespace(cron_bgw="on"))
    with cl.connect(vs.PGT_DB) as c:
        c.execute(SINK)
    mach = machine()
    for k, v in {**mach, **info}.items():
        say(f"{k}: {v}")
    res: dict[str, Any] = {}
    runs = {
        "pgbench": lambda: part_pgbench(cl, 5 if quick else 10),
        "fires": lambda: part_fires(cl, 2000 if quick else 5000),
        "burst": lambda: part_burst(cl),
        "spread": lambda: part_spread(cl, 2000 if quick else 10000, 1 if quick else 3),
        "wake": lambda: part_wake(cl, [1, 100, 10000] if quick else [1, 100, 10000, 100000]),
        "save": lambda: part_save(cl, 300 if quick else 1000, 10000),
        "keyed": lambda: part_keyed(cl, 2000 if quick else 10000),
        "idle": lambda: part_idle(cl, 10000, 20 if quick else 60),
    }
    for part in PARTS:
        if part in parts:
            res[part] = runs[part]()
    print()
    print(f"machine: {mach['cpu']}, {mach['cores']} cores; pgtimers {mach['pgtimers']}")
    print(f"load average: at start {mach['load average at start']}, at end {loadavg()}")
    print(
        f"server: {info.get('version', '?')}; fsync {info.get('fsync')}, synchronous_commit"
        f" {info.get('synchronous_commit')}, shared_buffers {info.get('shared_buffers')}"
    )
    print(report(res))
    if args.json:
        args.json.write_text(json.dumps(res, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
