"""Keyed timers: arming many, and firing them on a test clock advanced over a year.

    .venv/bin/python bench/keyed_bench.py [--dsn DSN] [--arm 100000] [--batch 1000]
                                          [--advance 10000] [--workers N] [--redeliver]
    .venv/bin/python bench/keyed_bench.py --arm 10000 --advance 1000     # quick, ~1 min

Without --dsn (or PGTIMERS_BENCH_DSN) it starts an embedded PostgreSQL (the pip wheel) in
a temporary directory and removes it afterwards. With a DSN it creates and drops scratch
databases `pgtimers_bench_keyed_*` on that server. Each part has its own database.

(a) Arming. --arm N keyed timers through `timers.arm`, --batch calls per transaction (one
    `SELECT count(timers.arm(...)) FROM generate_series(...)` each), on a test clock that
    is never advanced. One SQL text for all, as an application arms many timers with few
    texts. Rows/s overall, and the time of the first, median and last batch (does it
    slow down as the table grows?). --batch takes a comma list: each size gets a fresh
    database.

(b) Advancing. --advance N keyed timers on test clock `year` (2029-01-01), owed at 09:00
    on day `g % 365` (so 365 distinct owed times once N >= 365, ~27 per day at 10,000;
    --stops S spreads them over S owed times evenly over the year instead),
    kinds task/deadline/money/schedule mixed on every day (no `rung`: of owed rungs of one
    family only the latest fires), places 1-8, 97 owners. Each timer's SQL inserts a row
    (key, owed time, transaction id, clock_timestamp()) into a log table without a unique
    constraint. A `pgtimers run --dsn ...` subprocess serves the database; then one
    `CALL timers.advance_test_clock('year', '2030-01-02')` is timed: fired/s is the
    procedure's `fired` over its wall time. CPU is the server's process tree plus the
    runner's, from /proc (a server on this machine only).

    Afterwards it checks: every timer `fired` with attempt 1 and ok; exactly one log row
    per key and none missing; the log's commit order is tick order (owed_at, place, key
    bytes); each timer's `commit` is the transaction its SQL wrote in; the advance
    reported N fired (and N replayed with --redeliver, every timer then woken twice).
    Any failed check makes the exit code 1.

    Where the time goes: the gap between two fires of one stop (same owed time), and the
    hand-off between stops (the last fire of one owed time to the first of the next: the
    advance procedure noticing the stop is done, its next step, the NOTIFY and the
    runner's wake-up), from the log rows' clock_timestamp().
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from _common import (
    RunnerProc,
    cpu_sample,
    cpu_seconds,
    embedded_server,
    install_signal_cleanup,
    loadavg,
    machine,
    pct,
    postmaster_of,
    say,
    scratch_database,
    table,
)

from pgtimers.schema.install import install

T0 = "2029-01-01 00:00+00"
YEAR_END = "2030-01-02 00:00+00"
DAYS = 365

LOG_TABLE = """
CREATE TABLE public.bench_fired (
    id  bigserial PRIMARY KEY,
    key text NOT NULL,
    due text NOT NULL,
    xid text NOT NULL,
    at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
GRANT ALL ON public.bench_fired, public.bench_fired_id_seq TO PUBLIC
"""
LOG_SQL = (
    "INSERT INTO public.bench_fired (key, due, xid) VALUES (current_setting('pgtimers.timer'),"
    " current_setting('pgtimers.due_at'), pg_current_xact_id()::text)"
)

# One batch of timers.arm calls: timer number g in [$first, $last]. Kinds are mixed on every
# day (365 and 4 are coprime), places 1..8, 97 owners; the occurrence is g, so keys differ.
ARM_BATCH = """
SELECT count(timers.arm(
           %(prefix)s::text || (g %% 97) || ':' || k.kind || ':' || k.name || ':' || g,
           %(t0)s::timestamptz + (g %% %(stops)s) * %(step)s::interval
           + %(hour)s * interval '1 hour',
           %(sql)s::text, place => (1 + (g * 5) %% 8)::integer, test_clock => %(clock)s::text))
  FROM generate_series(%(first)s::bigint, %(last)s::bigint) g,
       LATERAL (SELECT (ARRAY['task', 'deadline', 'money', 'schedule'])[1 + g %% 4] AS kind,
                       (ARRAY['step', 'at_risk', 'line ' || g %% 7, 'daily'])[1 + g %% 4] AS name) k
"""

CHECKS = """
WITH k AS (SELECT * FROM timers.keyed_timers WHERE test_clock = 'year'),
     l AS (SELECT key, xid, row_number() OVER (ORDER BY id) AS n FROM public.bench_fired),
     t AS (SELECT key, row_number() OVER (ORDER BY owed_at, place, key) AS n FROM k)
SELECT (SELECT count(*) FROM k) AS timers,
       (SELECT count(*) FROM k WHERE status = 'fired' AND attempt = 1 AND ok) AS fired_once_ok,
       (SELECT count(*) FROM k WHERE wakes <> %(wakes)s) AS wrong_wakes,
       (SELECT count(*) FROM l) AS log_rows,
       (SELECT count(DISTINCT key) FROM l) AS log_keys,
       (SELECT count(*) FROM k WHERE NOT EXISTS (SELECT 1 FROM l WHERE l.key = k.key)) AS missing,
       (SELECT count(*) FROM l JOIN t USING (key) WHERE l.n <> t.n) AS out_of_order,
       (SELECT count(*) FROM l JOIN k USING (key) WHERE k.commit::text <> l.xid) AS other_commit,
       (SELECT count(DISTINCT commit) FROM k) AS commits
"""

GAPS = """
WITH f AS (SELECT due, at, lag(due) OVER (ORDER BY id) AS prev_due,
                  extract(epoch FROM at - lag(at) OVER (ORDER BY id)) * 1000 AS ms
             FROM public.bench_fired)
SELECT coalesce(array_agg(ms) FILTER (WHERE due = prev_due), '{}') AS within,
       coalesce(array_agg(ms) FILTER (WHERE due <> prev_due), '{}') AS between
  FROM f
"""


def arm_timers(
    conn: psycopg.Connection[Any],
    n: int,
    batch: int,
    prefix: str,
    clock: str,
    hour: int,
    stops: int = DAYS,
) -> list[float]:
    """Arm n keyed timers, `batch` per transaction, on `stops` owed times spread evenly
    over the year from T0 + hour (365: one a day); the seconds of each batch."""
    times = []
    for first in range(0, n, batch):
        last = min(first + batch, n) - 1
        t0 = time.perf_counter()
        row = conn.execute(
            ARM_BATCH,
            {
                "prefix": prefix,
                "t0": T0,
                "stops": stops,
                "step": f"{DAYS * 86400 // stops} seconds",
                "hour": hour,
                "sql": LOG_SQL,
                "clock": clock,
                "first": first,
                "last": last,
            },
        ).fetchone()
        times.append(time.perf_counter() - t0)
        assert row is not None and row[0] == last - first + 1, row
    return times


def bench_arm(server_dsn: str, n: int, batch: int) -> dict[str, Any]:
    """(a): arm n timers in transactions of `batch` in a fresh database."""
    with scratch_database(server_dsn, "pgtimers_bench_keyed_arm") as dsn:
        install(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(LOG_TABLE)
            conn.execute("SELECT timers.create_test_clock('arm', %s)", [T0])
            say(f"arm: {n:,} timers, {batch:,} per transaction (load average {loadavg()})")
            times = arm_timers(conn, n, batch, "arm_", "arm", 9)
            mb = conn.execute(
                "SELECT pg_total_relation_size('timers.keyed_timers') / 1048576.0"
            ).fetchone()
    total = sum(times)
    res = {
        "n": n,
        "batch": batch,
        "seconds": total,
        "rate": n / total,
        "first_ms": times[0] * 1000,
        "p50_ms": pct(times, 50) * 1000,
        "last_ms": times[-1] * 1000,
        "table_mb": float(mb[0]) if mb else 0.0,
    }
    say(
        f"  {n:,} armed in {total:.1f} s: {res['rate']:,.0f}/s (batch first"
        f" {res['first_ms']:.0f} ms, p50 {res['p50_ms']:.0f}, last {res['last_ms']:.0f})"
    )
    return res


def bench_advance(
    server_dsn: str,
    n: int,
    batch: int,
    workers: int | None,
    redeliver: bool,
    logdir: Path,
    stops: int = DAYS,
) -> dict[str, Any]:
    """(b): n timers over a year on test clock `year`, fired by a runner during one advance."""
    res: dict[str, Any] = {"n": n, "workers": workers, "redeliver": redeliver}
    with scratch_database(server_dsn, "pgtimers_bench_keyed_advance") as dsn:
        install(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(LOG_TABLE)
            conn.execute("SELECT timers.create_test_clock('year', %s)", [T0])
            times = arm_timers(conn, n, batch, "acct_", "year", 9, stops)
            res["arm_rate"] = n / sum(times)
            stops = conn.execute(
                "SELECT count(DISTINCT owed_at) FROM timers.keyed_timers WHERE test_clock = 'year'"
            ).fetchone()
            res["stops"] = int(stops[0]) if stops else 0
            conn.execute("VACUUM ANALYZE timers.keyed_timers")
            say(
                f"advance: {n:,} timers armed ({res['arm_rate']:,.0f}/s) on {res['stops']:,}"
                f" owed times; starting a runner"
            )
            runner = RunnerProc(dsn, logdir / "runner-keyed.log", workers).start(wait=True)
            postmaster = postmaster_of(conn)
            say(f"  advancing test clock 'year' {T0} -> {YEAR_END} (load average {loadavg()})")
            cpu0 = cpu_sample(postmaster) if postmaster else None
            run0 = cpu_sample(runner.pid)
            t0 = time.perf_counter()
            row = conn.execute(
                "CALL timers.advance_test_clock('year', %s, redeliver => %s)", [YEAR_END, redeliver]
            ).fetchone()
            res["seconds"] = time.perf_counter() - t0
            run1 = cpu_sample(runner.pid)
            cpu1 = cpu_sample(postmaster) if postmaster else None
            runner.stop()
            assert row is not None
            result = row[0]
            res["result"] = result
            res["fired_per_s"] = int(result["fired"]) / res["seconds"]
            res["runner_cpu_s"] = cpu_seconds(run0, run1)
            res["server_cpu_s"] = cpu_seconds(cpu0, cpu1) if cpu0 and cpu1 else None
            with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
                checks = cur.execute(CHECKS, {"wakes": 2 if redeliver else 1}).fetchone()
                gaps = cur.execute(GAPS).fetchone()
            assert checks is not None and gaps is not None
            res["checks"] = {k: int(v) for k, v in checks.items()}
            res["within_ms"] = [float(x) for x in gaps["within"]]
            res["between_ms"] = [float(x) for x in gaps["between"]]
            res["run_errors"] = runner.log_tail(10**6).count("event=run_error")
    c = res["checks"]
    problems = []
    if int(result["fired"]) != n:
        problems.append(f"the advance reported {result['fired']} fired, not {n}")
    if redeliver and int(result["replayed"]) != n:
        problems.append(f"the advance reported {result['replayed']} replayed, not {n}")
    if c["fired_once_ok"] != n:
        problems.append(f"{n - c['fired_once_ok']} timers not fired once with ok")
    if c["wrong_wakes"]:
        problems.append(f"{c['wrong_wakes']} timers with the wrong number of wakes")
    if c["log_rows"] != n or c["log_keys"] != n or c["missing"]:
        problems.append(
            f"log: {c['log_rows']} rows, {c['log_keys']} keys, {c['missing']} missing (want {n})"
        )
    if c["out_of_order"]:
        problems.append(f"{c['out_of_order']} fires out of tick order")
    if c["other_commit"]:
        problems.append(f"{c['other_commit']} timers whose commit is not their SQL's transaction")
    res["problems"] = problems
    cpu = (res["server_cpu_s"] or 0.0) + res["runner_cpu_s"]
    say(
        f"  fired {result['fired']:,} in {res['seconds']:.1f} s: {res['fired_per_s']:,.0f}/s;"
        f" CPU {cpu:.1f} s ({cpu / max(n, 1) * 1000:.2f} ms per fire);"
        f" {c['commits']:,} commits; checks: {'; '.join(problems) or 'all passed'}"
    )
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dsn", default=os.environ.get("PGTIMERS_BENCH_DSN"))
    ap.add_argument("--arm", type=int, default=100_000, help="timers to arm in (a); 0: skip (a)")
    ap.add_argument("--batch", default="1000", help="timers.arm calls per transaction (a list)")
    ap.add_argument("--advance", type=int, default=10_000, help="timers in (b); 0: skip (b)")
    ap.add_argument(
        "--stops", type=int, default=DAYS, help="distinct owed times in (b) (365: one a day)"
    )
    ap.add_argument("--workers", type=int, default=None, help="the runner's --workers")
    ap.add_argument("--redeliver", action="store_true", help="advance with redeliver => true")
    ap.add_argument("--json", type=Path, default=None, help="write the raw results here")
    args = ap.parse_args()
    install_signal_cleanup()
    batches = [int(b) for b in args.batch.split(",")]
    print("settings:")
    for k, v in {
        "server": "--dsn" if args.dsn else "embedded PostgreSQL (temporary)",
        "arm": f"{args.arm:,} timers, batches of {', '.join(f'{b:,}' for b in batches)}",
        "advance": f"{args.advance:,} timers on {args.stops:,} owed times over {DAYS} days,"
        f" test clock {T0} -> {YEAR_END}",
        "runner": f"pgtimers run --workers {args.workers or 'default'}",
        "redeliver": str(args.redeliver),
    }.items():
        print(f"{k:>22}: {v}")
    print("machine:")
    for k, v in machine().items():
        print(f"{k:>22}: {v}")
    out: dict[str, Any] = {"arm": [], "advance": None}
    logdir = Path(tempfile.mkdtemp(prefix="pgtimers-bench-keyed-"))
    source = contextlib.nullcontext(args.dsn) if args.dsn else embedded_server()
    with source as server_dsn:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            row = conn.execute("SELECT current_setting('server_version')").fetchone()
            print(f"{'PostgreSQL':>22}: {row[0] if row else '?'}")
        if args.arm > 0:
            for b in batches:
                out["arm"].append(bench_arm(server_dsn, args.arm, b))
        if args.advance > 0:
            out["advance"] = bench_advance(
                server_dsn,
                args.advance,
                batches[0],
                args.workers,
                args.redeliver,
                logdir,
                args.stops,
            )
    print()
    if out["arm"]:
        print(
            table(
                ["armed", "per transaction", "rows/s", "batch first / p50 / last ms", "table MB"],
                [
                    [
                        f"{r['n']:,}",
                        f"{r['batch']:,}",
                        f"{r['rate']:,.0f}",
                        f"{r['first_ms']:.0f} / {r['p50_ms']:.0f} / {r['last_ms']:.0f}",
                        f"{r['table_mb']:.0f}",
                    ]
                    for r in out["arm"]
                ],
                title="(a) timers.arm",
            )
        )
        print()
    a = out["advance"]
    if a:
        cpu = (a["server_cpu_s"] or 0.0) + a["runner_cpu_s"]
        w, b = a["within_ms"], a["between_ms"]
        print(
            table(
                [
                    "timers",
                    "owed times",
                    "advance s",
                    "fired/s",
                    "commits",
                    "CPU ms per fire (server + runner)",
                    "gap in a stop p50 / p90 ms",
                    "between stops p50 / p90 ms",
                    "checks",
                ],
                [
                    [
                        f"{a['n']:,}",
                        a["stops"],
                        f"{a['seconds']:.1f}",
                        f"{a['fired_per_s']:,.0f}",
                        f"{a['checks']['commits']:,}",
                        f"{cpu / max(a['n'], 1) * 1000:.2f}"
                        f" ({(a['server_cpu_s'] or 0.0) / max(a['n'], 1) * 1000:.2f}"
                        f" + {a['runner_cpu_s'] / max(a['n'], 1) * 1000:.2f})",
                        f"{pct(w, 50):.1f} / {pct(w, 90):.1f}",
                        f"{pct(b, 50):.1f} / {pct(b, 90):.1f}",
                        "; ".join(a["problems"]) or "all passed",
                    ]
                ],
                title="(b) advance_test_clock over a year"
                + (" with redeliver" if a["redeliver"] else ""),
            )
        )
        if a["run_errors"]:
            print(f"runner log: {a['run_errors']} run_error lines")
        print(f"load average at the end: {loadavg()}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    if a and a["problems"]:
        print(f"the runner's log: {logdir / 'runner-keyed.log'}")
        return 1
    shutil.rmtree(logdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
