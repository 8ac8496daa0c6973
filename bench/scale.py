"""pgtimers at 1k, 10k, 100k and 1M armed timers: the cost of the runner's claim of the due
set (timers._claim_due), of timers.save, of the runner's once-a-second look, the runner's
start and its memory.

    .venv/bin/python bench/scale.py [--sizes 1000,10000,100000,1000000] [--samples 200]

Standalone it makes its own throwaway PostgreSQL 15 cluster (as bench/vs_pg_cron.py
does); bench/vs_pg_cron.py calls run_scale() on its cluster for `--only scale`.

How the timers are made: up to --save-limit (10,000) through timers.save, one call per
timer (its rate is printed). Beyond that the rows timers.save would write are inserted
with one INSERT … SELECT per 100,000 (the same schedule text, parsed spec, owner and next
due time, computed by the product's own timers._parse_schedule/_next_due), because a
million timers.save calls take too long for a bench (the printed rate says how long).
The bulk rows have no audit rows (timers.save writes one per call). All bulk timers are
`daily HH:MM` at minutes spread over the day except the next 90 minutes, so none is due
while the bench runs; 10 probe timers (`every 5s`) are the due set.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path
from typing import Any

import psycopg
from _common import (
    Cluster,
    RunnerProc,
    fmt_ms,
    install_pgtimers,
    install_signal_cleanup,
    loadavg,
    machine,
    pct,
    rss_kb,
    say,
    table,
)

PROBES = 10
SPREAD_FROM = 90  # minutes from now: the first minute of day a bulk timer may use
SPREAD = 1440 - SPREAD_FROM - 10  # minutes of the day used (none due for ~90 minutes)

# the runner's own claim of a due timer: the routine timers._fire calls (by priority, then
# fire time, then the longest since it ran; one index entry each step)
CLAIM_DUE = "SELECT id, due_at, timeout FROM timers._claim_due(%s::bigint[])"

# the scan timers._apply_gaps does when a runner starts with no other runner live
APPLY_GAPS_SCAN = """
SELECT x.id FROM timers.timers x
 WHERE x.next_due_at IS NOT NULL AND x.enabled AND NOT x.expired
   AND x.next_due_at <= timers._now(x.test_clock)
 ORDER BY x.id
"""


def _minute_expr(g: str) -> str:
    """SQL: the minute of day (0..1439) of bulk timer number g, from the session's start."""
    return (
        f"((extract(hour FROM now() AT TIME ZONE 'UTC')::int * 60"
        f" + extract(minute FROM now() AT TIME ZONE 'UTC')::int"
        f" + {SPREAD_FROM} + ({g}::bigint * 7919) % {SPREAD}) % 1440)::int"
    )


def _daily(m: str) -> str:
    return f"format('daily %s:%s', lpad(({m} / 60)::text, 2, '0'), lpad(({m} % 60)::text, 2, '0'))"


def save_bulk(conn: psycopg.Connection[Any], first: int, last: int, chunk: int = 1000) -> float:
    """timers.save for bulk_<first..last>; returns seconds."""
    t0 = time.perf_counter()
    for a in range(first, last + 1, chunk):
        b = min(a + chunk - 1, last)
        conn.execute(
            f"SELECT count(timers.save('bulk_' || g, {_daily(_minute_expr('g'))}, 'SELECT 1'))"
            f" FROM generate_series({int(a)}, {int(b)}) g"
        )
    return time.perf_counter() - t0


def insert_bulk(
    conn: psycopg.Connection[Any], first: int, last: int, chunk: int = 100_000
) -> float:
    """The rows timers.save would write for bulk_<first..last>, by INSERT … SELECT."""
    t0 = time.perf_counter()
    for a in range(first, last + 1, chunk):
        b = min(a + chunk - 1, last)
        conn.execute(
            f"""
            WITH m AS (
                SELECT DISTINCT {_minute_expr("g")} AS m
                  FROM generate_series({int(a)}, {int(b)}) g),
            s AS MATERIALIZED (
                SELECT m.m, p.spec, p.spec->>'schedule' AS schedule,
                       timers._next_due(p.spec, now(), 'UTC') AS next_due_at
                  FROM m, LATERAL (
                      SELECT timers._parse_schedule({_daily("m.m")}, 'UTC', now()) AS spec) p),
            e AS MATERIALIZED (SELECT timers._ensure_executor(current_user) AS fn)
            INSERT INTO timers.timers (name, schedule, spec, sql, owner, executor, zone,
                                       next_due_at)
            SELECT 'bulk_' || g, s.schedule, s.spec, 'SELECT 1', current_user,
                   e.fn, 'UTC', s.next_due_at
              FROM generate_series({int(a)}, {int(b)}) g CROSS JOIN e
              JOIN s ON s.m = {_minute_expr("g")}
            """
        )
    return time.perf_counter() - t0


def _time_calls(fn: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _explain_ms(
    conn: psycopg.Connection[Any], sql: str, n: int, params: Any = None
) -> tuple[float, int]:
    """Median server-side execution ms of EXPLAIN ANALYZE (in a rolled-back transaction),
    and the shared buffers it touched."""
    times = []
    bufs = 0
    for _ in range(n):
        with conn.transaction(force_rollback=True):
            row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params).fetchone()
        assert row is not None
        plan = row[0][0]
        times.append(float(plan["Execution Time"]))
        bufs = int(plan["Plan"].get("Shared Hit Blocks", 0)) + int(
            plan["Plan"].get("Shared Read Blocks", 0)
        )
    return statistics.median(times), bufs


def measure(
    cl: Cluster, dsn: str, size: int, samples: int, serve_seconds: float, log: Path
) -> dict[str, Any]:
    res: dict[str, Any] = {"size": size}
    with psycopg.connect(dsn, autocommit=True) as conn:
        armed = conn.execute(
            "SELECT count(*) FROM timers.timers WHERE next_due_at IS NOT NULL"
        ).fetchone()[0]
        res["armed"] = armed
        res["table_mb"] = conn.execute(
            "SELECT pg_total_relation_size('timers.timers') / 1048576.0"
        ).fetchone()[0]
        conn.execute(
            "UPDATE timers.timers SET next_due_at = now() - interval '30 seconds'"
            " WHERE name LIKE 'probe\\_%'"
        )
        res["due"] = conn.execute(
            "SELECT count(*) FROM timers.timers WHERE name LIKE 'probe\\_%' AND fire_at <= now()"
        ).fetchone()[0]
        claim = CLAIM_DUE

        def claim_once() -> None:
            with conn.transaction(force_rollback=True):
                conn.execute(claim, [[]], prepare=True).fetchall()

        for _ in range(10):
            claim_once()
        res["claim_ms"] = _time_calls(claim_once, samples)
        res["claim_server_ms"], res["claim_buffers"] = _explain_ms(conn, claim, 20, [[]])

        for _ in range(5):
            conn.execute("SELECT * FROM timers._next_wake()", prepare=True).fetchall()
        res["wake_ms"] = _time_calls(
            lambda: conn.execute("SELECT * FROM timers._next_wake()", prepare=True).fetchall(),
            samples,
        )
        res["gaps_scan_ms"], _ = _explain_ms(conn, APPLY_GAPS_SCAN, 3)
        res["rtt_ms"] = _time_calls(
            lambda: conn.execute("SELECT 1", prepare=True).fetchall(), samples
        )

        # timers.save of a new timer at this size, each its own transaction
        names = [f"save_{size}_{i}" for i in range(samples)]
        minute = conn.execute(f"SELECT {_daily(_minute_expr('0'))}").fetchone()[0]
        res["save_ms"] = []
        for name in names:
            t0 = time.perf_counter()
            conn.execute("SELECT (timers.save(%s, %s, 'SELECT 1')).name", [name, minute])
            res["save_ms"].append((time.perf_counter() - t0) * 1000)

    # the runner serving this database
    runner = RunnerProc(dsn, log).start(wait=True)
    res["runner_start_s"] = runner.serving_s
    t_end = time.monotonic() + serve_seconds
    rss = []
    while time.monotonic() < t_end:
        rss.append(rss_kb(runner.pid)[0])
        time.sleep(0.25)
    rss_now, hwm = rss_kb(runner.pid)
    runner.stop()
    res["runner_rss_mb"] = (max(rss) if rss else rss_now) / 1024
    res["runner_hwm_mb"] = hwm / 1024
    with psycopg.connect(dsn, autocommit=True) as conn:
        res["probe_runs"] = conn.execute(
            "SELECT count(*) FROM timers.runs WHERE timer LIKE 'probe\\_%%' AND kind <> 'skipped'"
            " AND started_at > now() - make_interval(secs => %s)",
            [serve_seconds + 5],
        ).fetchone()[0]
    return res


def run_scale(
    cl: Cluster,
    sizes: list[int],
    samples: int = 200,
    serve_seconds: float = 15.0,
    save_limit: int = 10_000,
) -> dict[str, Any]:
    """Build up to each size in turn and measure; returns rows and the printed table."""
    with cl.connect() as admin:
        admin.execute("DROP DATABASE IF EXISTS bench_scale WITH (FORCE)")
        admin.execute("CREATE DATABASE bench_scale")
    dsn = cl.dsn("bench_scale")
    install_pgtimers(dsn)
    log = cl.root / "runner-scale.log"
    results = []
    fill_notes = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"SELECT count(timers.save('probe_' || g, 'every 5s', 'SELECT 1')) "
            f"FROM generate_series(1, {PROBES}) g"
        )
    made = 0  # bulk timers so far
    for size in sorted(sizes):
        with psycopg.connect(dsn, autocommit=True) as conn:
            have = conn.execute("SELECT count(*) FROM timers.timers").fetchone()[0]
            need = size - have
            if need > 0:
                first, last = made + 1, made + need
                if size <= save_limit:
                    secs = save_bulk(conn, first, last)
                    rate = need / secs
                    fill_notes.append(
                        f"{size:>9,}: {need:,} timers.save calls in {secs:.1f} s"
                        f" ({rate:,.0f}/s; 1M would take ~{1e6 / rate / 60:.0f} min)"
                    )
                else:
                    secs = insert_bulk(conn, first, last)
                    fill_notes.append(
                        f"{size:>9,}: {need:,} rows by INSERT … SELECT in {secs:.1f} s"
                        f" ({need / secs:,.0f}/s)"
                    )
                made = last
                say(fill_notes[-1])
                t0 = time.perf_counter()
                conn.execute("VACUUM ANALYZE timers.timers")
                say(f"  VACUUM ANALYZE timers.timers: {time.perf_counter() - t0:.1f} s")
        say(f"scale {size:,}: measuring (load average {loadavg()})")
        r = measure(cl, dsn, size, samples, serve_seconds, log)
        results.append(r)
        say(
            f"  armed {r['armed']:,}, due {r['due']}, claim p50 {pct(r['claim_ms'], 50):.3f} ms,"
            f" save p50 {pct(r['save_ms'], 50):.2f} ms,"
            f" runner start {r['runner_start_s']:.2f} s, RSS {r['runner_rss_mb']:.0f} MB"
        )
    return {"results": results, "fill": fill_notes, "table": scale_table(results)}


def scale_table(results: list[dict[str, Any]]) -> str:
    headers = [
        "armed timers",
        "table MB",
        "claim (timers._claim_due, the runner's) p50 / p99 ms",
        "claim server-side ms (buffers)",
        "_next_wake p50 ms",
        "timers.save p50 / p99 ms",
        "runner start s (apply_gaps scan ms)",
        "runner RSS MB",
        "SELECT 1 p50 ms",
    ]
    rows = [
        [
            f"{r['armed']:,}",
            f"{r['table_mb']:.0f}",
            f"{pct(r['claim_ms'], 50):.3f} / {pct(r['claim_ms'], 99):.3f}",
            f"{r['claim_server_ms']:.3f} ({r['claim_buffers']})",
            f"{pct(r['wake_ms'], 50):.3f}",
            f"{pct(r['save_ms'], 50):.2f} / {pct(r['save_ms'], 99):.2f}",
            f"{r['runner_start_s']:.2f} ({fmt_ms(r['gaps_scan_ms'], 1)})",
            f"{r['runner_rss_mb']:.0f}",
            f"{pct(r['rtt_ms'], 50):.3f}",
        ]
        for r in results
    ]
    out = table(headers, rows)
    if len(results) >= 2:
        lo, hi = results[0], results[-1]
        lines = []
        for key, label in (
            ("claim_ms", "timers._claim_due (client)"),
            ("save_ms", "timers.save"),
            ("wake_ms", "_next_wake"),
        ):
            a, b = pct(lo[key], 50), pct(hi[key], 50)
            lines.append(f"{label}: {b / a:.2f}")
        lines.append(f"claim server-side: {hi['claim_server_ms'] / lo['claim_server_ms']:.2f}")
        verdict = (
            "FLAT (under 2)"
            if pct(hi["claim_ms"], 50) / pct(lo["claim_ms"], 50) < 2
            else "NOT FLAT (2 or more)"
        )
        out += (
            f"\n\nratio {hi['armed']:,} / {lo['armed']:,} (p50): "
            + "; ".join(lines)
            + f"\nclaim: {verdict}"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--serve-seconds", type=float, default=15.0)
    ap.add_argument("--port", type=int, default=5499)
    args = ap.parse_args()
    install_signal_cleanup()
    for k, v in machine().items():
        print(f"{k:>22}: {v}")
    cl = Cluster(
        port=args.port,
        settings={"shared_buffers": "'1GB'", "max_wal_size": "'4GB'", "max_connections": "200"},
    )
    cl.create()
    cl.start()
    try:
        out = run_scale(
            cl, [int(s) for s in args.sizes.split(",")], args.samples, args.serve_seconds
        )
        print("\n".join(out["fill"]))
        print(out["table"])
    finally:
        cl.destroy()
    _ = math


if __name__ == "__main__":
    main()
