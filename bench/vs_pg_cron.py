"""pgtimers and pg_cron side by side on one PostgreSQL 15 server, plus pgtimers at scale.

    sudo .venv/bin/python bench/vs_pg_cron.py                 # everything, ~25 min
    sudo .venv/bin/python bench/vs_pg_cron.py --quick         # a smoke run, ~8 min
    sudo .venv/bin/python bench/vs_pg_cron.py --only punctuality,overhead

It creates a throwaway PostgreSQL 15 cluster in a temporary directory (initdb + pg_ctl,
run as the `postgres` OS user when started as root), listening on 127.0.0.1:5499 and a
unix socket in that directory, with pg_cron preloaded; and removes it at the end. Needs
Debian's postgresql-15 and postgresql-15-cron (`apt-get install -y postgresql-15-cron`).

Parts (--only takes a comma list; default all):
  punctuality  N = 200 and 1,000 jobs due at the same minute, each inserting
               clock_timestamp(): lateness p50/p90/p99/max against the due minute, rows
               missing. pg_cron: cron.schedule(name, 'M H * * *', 'INSERT …');
               pgtimers: timers.save(name, 'cron M H * * *', 'INSERT …') run by
               `pgtimers run` with its default workers and again with --workers 8.
  throughput   from the same rounds: jobs per second from the first insert to the last.
  downtime     an every-minute job; (a) only the pgtimers runner stopped for 3 minutes
               (pg_cron cannot be stopped without its server), (b) the whole server
               stopped for 3 minutes (both); what each did with the missed due times.
               pgtimers with catch_up skip / latest / all.
  overhead     server CPU (all postgres processes, plus the runner for pgtimers) over
               60 s while 1,000 jobs are scheduled and none is due; and an idle baseline.
  scale        pgtimers with 1k, 10k, 100k, 1M armed timers (bench/scale.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg
from _common import (
    Cluster,
    RunnerProc,
    cpu_sample,
    cpu_seconds,
    install_pgtimers,
    install_signal_cleanup,
    loadavg,
    machine,
    next_minute,
    pct,
    rss_kb,
    say,
    server_now,
    sleep_until,
    table,
)

PARTS = ("punctuality", "throughput", "downtime", "overhead", "scale")
CRON_DB = "bench_cron"
PGT_DB = "bench_pgt"


# ---------------------------------------------------------------------------
# setup
# ---------------------------------------------------------------------------
def cluster_settings(args: argparse.Namespace) -> dict[str, str]:
    return {
        "shared_preload_libraries": "'pg_cron'",
        "cron.database_name": f"'{CRON_DB}'",
        "cron.use_background_workers": args.cron_bgw,
        "cron.max_running_jobs": str(args.cron_max_running_jobs),
        # pg_cron's launcher + its job workers + the server's own (logical launcher, parallel)
        "max_worker_processes": str(args.cron_max_running_jobs + 16),
        "max_connections": "200",
        "shared_buffers": "'1GB'",
        "max_wal_size": "'4GB'",
    }


def setup_databases(cl: Cluster, args: argparse.Namespace) -> dict[str, str]:
    with cl.connect() as c:
        c.execute(f"CREATE DATABASE {CRON_DB}")
        c.execute(f"CREATE DATABASE {PGT_DB}")
    with cl.connect(CRON_DB) as c:
        c.execute("CREATE EXTENSION pg_cron")
        c.execute("CREATE TABLE punct (job text, at timestamptz NOT NULL)")
        c.execute("CREATE TABLE dt (job text, at timestamptz NOT NULL DEFAULT clock_timestamp())")
        if args.cron_bgw == "off":
            pass
        info = dict(
            c.execute(
                "SELECT name, current_setting(name) FROM pg_settings WHERE name IN ("
                "'cron.use_background_workers','cron.max_running_jobs','max_worker_processes',"
                "'max_connections','cron.log_run','cron.log_statement','cron.host',"
                "'shared_buffers','synchronous_commit','fsync','max_wal_size','server_version')"
            ).fetchall()
        )
        info["pg_cron"] = c.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'"
        ).fetchone()[0]
        info["version"] = c.execute("SELECT version()").fetchone()[0]
        row = c.execute(
            "SELECT max_val FROM pg_settings WHERE name = 'cron.max_running_jobs'"
        ).fetchone()
        info["cron.max_running_jobs max"] = row[0] if row else "?"
    rev = install_pgtimers(cl.dsn(PGT_DB))
    info["pgtimers schema revision"] = rev
    with cl.connect(PGT_DB) as c:
        c.execute("CREATE TABLE punct (job text, at timestamptz NOT NULL)")
        c.execute(
            "CREATE TABLE dt (job text, due timestamptz,"
            " at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )
    return info


# ---------------------------------------------------------------------------
# punctuality and throughput
# ---------------------------------------------------------------------------
def insert_sql(job: str) -> str:
    return f"INSERT INTO public.punct (job, at) VALUES ('{job}', clock_timestamp())"


def wait_rows(conn: psycopg.Connection[Any], n: int, due: dt.datetime, max_wait: float) -> None:
    """Until n rows are in punct, or nothing new came for 20 s, or max_wait after due."""
    sleep_until(conn, due)
    last, last_change = -1, time.monotonic()
    deadline = time.monotonic() + max_wait
    while time.monotonic() < deadline:
        got = conn.execute("SELECT count(*) FROM punct").fetchone()[0]
        if got >= n:
            return
        if got != last:
            last, last_change = got, time.monotonic()
        elif time.monotonic() - last_change > 20 and got > 0:
            return
        time.sleep(0.25)


def lateness(conn: psycopg.Connection[Any], n: int, due: dt.datetime) -> dict[str, Any]:
    rows = conn.execute(
        "SELECT job, extract(epoch FROM at - %s) * 1000 FROM punct ORDER BY at", [due]
    ).fetchall()
    late = [float(r[1]) for r in rows]
    jobs = {r[0] for r in rows}
    span = (late[-1] - late[0]) / 1000 if len(late) >= 2 else math.nan
    return {
        "n": n,
        "got": len(rows),
        "distinct": len(jobs),
        "missing": n - len(jobs),
        "dupes": len(rows) - len(jobs),
        "p50": pct(late, 50),
        "p90": pct(late, 90),
        "p99": pct(late, 99),
        "max": max(late) if late else math.nan,
        "min": min(late) if late else math.nan,
        "span_s": span,
        "jobs_per_s": (len(rows) - 1) / span if span and span > 0 else math.nan,
        "makespan_s": max(late) / 1000 if late else math.nan,
    }


def lead_for(n: int) -> float:
    return 15 + n * 0.02


def round_pg_cron(cl: Cluster, n: int) -> dict[str, Any]:
    with cl.connect(CRON_DB) as c:
        c.execute("TRUNCATE punct")
        c.execute("DELETE FROM cron.job WHERE jobname LIKE 'p\\_%'")
        c.execute("TRUNCATE cron.job_run_details")
        due = next_minute(server_now(c), lead_for(n))
        sched = f"{due.minute} {due.hour} * * *"
        t0 = time.perf_counter()
        c.execute(
            "SELECT count(cron.schedule(format('p_%%s', g), %s,"
            " format('INSERT INTO public.punct (job, at) VALUES (%%L, clock_timestamp())',"
            " 'j' || g)))"
            " FROM generate_series(1, %s) g",
            [sched, n],
        )
        sched_s = time.perf_counter() - t0
        say(
            f"pg_cron N={n}: {n} jobs '{sched}' scheduled in {sched_s:.2f} s, due"
            f" {due:%H:%M:%S}Z (load {loadavg()})"
        )
        a = cpu_sample(cl.postmaster_pid())
        wait_rows(c, n, due, 60 + n * 0.15)
        time.sleep(1)
        b = cpu_sample(cl.postmaster_pid())
        res = lateness(c, n, due)
        res["cpu_ms_per_job"] = cpu_seconds(a, b) * 1000 / max(res["got"], 1)
        res["save_s"] = sched_s
        res["status"] = dict(
            c.execute(
                "SELECT status, count(*) FROM cron.job_run_details GROUP BY status"
            ).fetchall()
        )
        c.execute("DELETE FROM cron.job WHERE jobname LIKE 'p\\_%'")
    say(
        f"  got {res['got']}/{n}, p50 {res['p50']:.0f} ms, p99 {res['p99']:.0f} ms, max"
        f" {res['max']:.0f} ms, {res['jobs_per_s']:.0f} jobs/s,"
        f" {res['cpu_ms_per_job']:.1f} CPU ms/job, job_run_details {res['status']}"
    )
    return res


def round_pgtimers(cl: Cluster, n: int, runner: RunnerProc) -> dict[str, Any]:
    with cl.connect(PGT_DB) as c:
        c.execute("TRUNCATE punct")
        due = next_minute(server_now(c), lead_for(n))
        sched = f"cron {due.minute} {due.hour} * * *"
        t0 = time.perf_counter()
        c.execute(
            "SELECT count(timers.save(format('p_%%s', g), %s,"
            " format('INSERT INTO public.punct (job, at) VALUES (%%L, clock_timestamp())',"
            " 'j' || g)))"
            " FROM generate_series(1, %s) g",
            [sched, n],
        )
        saved_s = time.perf_counter() - t0
        say(
            f"pgtimers N={n} workers={runner.workers or 'default'}: {n} timers '{sched}'"
            f" saved in {saved_s:.1f} s, due {due:%H:%M:%S}Z (load {loadavg()})"
        )
        a, ra = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid)
        wait_rows(c, n, due, 60 + n * 0.15)
        time.sleep(1)
        b, rb = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid)
        res = lateness(c, n, due)
        got = max(res["got"], 1)
        res["server_cpu_ms_per_job"] = cpu_seconds(a, b) * 1000 / got
        res["runner_cpu_ms_per_job"] = cpu_seconds(ra, rb) * 1000 / got
        res["cpu_ms_per_job"] = res["server_cpu_ms_per_job"] + res["runner_cpu_ms_per_job"]
        res["save_s"] = saved_s
        res["runner_rss_mb"] = rss_kb(runner.pid)[0] / 1024
        row = c.execute(
            "SELECT coalesce(sum(skipped), 0), coalesce(sum(failures), 0),"
            " coalesce(max(max_late_ms), 0)"
            " FROM timers.timers WHERE name LIKE 'p\\_%'"
        ).fetchone()
        res["skipped"], res["failures"], res["own_max_late_ms"] = row
        c.execute("SELECT count(timers.delete(name)) FROM timers.timers WHERE name LIKE 'p\\_%'")
    say(
        f"  got {res['got']}/{n}, p50 {res['p50']:.0f} ms, p99 {res['p99']:.0f} ms, max"
        f" {res['max']:.0f} ms, {res['jobs_per_s']:.0f} jobs/s,"
        f" {res['cpu_ms_per_job']:.1f} CPU ms/job, skipped {res['skipped']},"
        f" failures {res['failures']}, runner RSS {res['runner_rss_mb']:.0f} MB"
    )
    return res


def part_punctuality(cl: Cluster, ns: list[int], worker_modes: list[int | None]) -> dict[str, Any]:
    out: dict[str, Any] = {"pg_cron": {}, "pgtimers": {}}
    for n in ns:
        out["pg_cron"][n] = round_pg_cron(cl, n)
    for w in worker_modes:
        key = "default" if w is None else f"w{w}"
        runner = RunnerProc(cl.dsn(PGT_DB), cl.root / f"runner-punct-{key}.log", workers=w).start()
        rss0 = rss_kb(runner.pid)[0] / 1024
        out["pgtimers"][key] = {}
        for n in ns:
            out["pgtimers"][key][n] = round_pgtimers(cl, n, runner)
        out["pgtimers"][key]["rss_start_mb"] = rss0
        out["pgtimers"][key]["rss_end_mb"] = rss_kb(runner.pid)[0] / 1024
        runner.stop()
        out["pgtimers"][key]["log_errors"] = _log_errors(runner)
    return out


def _log_errors(runner: RunnerProc) -> int:
    text = runner.log.read_text(errors="replace") if runner.log.exists() else ""
    return sum(
        1 for line in text.splitlines() if "event=run_failed" in line or "event=run_error" in line
    )


# ---------------------------------------------------------------------------
# downtime
# ---------------------------------------------------------------------------
DT_MODES = ("skip", "latest", "all")


def part_downtime(cl: Cluster, down_s: float, observe_s: float) -> dict[str, Any]:
    with cl.connect(CRON_DB) as c:
        c.execute("TRUNCATE dt")
        c.execute(
            "SELECT cron.schedule('dt_cron', '* * * * *',"
            " $$INSERT INTO public.dt (job) VALUES ('pg_cron')$$)"
        )
    with cl.connect(PGT_DB) as c:
        c.execute("TRUNCATE dt")
        for mode in DT_MODES:
            c.execute(
                "SELECT timers.save(%s, 'every 1m', %s, catch_up => %s)",
                [
                    f"dt_{mode}",
                    "INSERT INTO public.dt (job, due) VALUES"
                    f" ('{mode}', current_setting('pgtimers.due_at')::timestamptz)",
                    mode,
                ],
            )
    runner = RunnerProc(cl.dsn(PGT_DB), cl.root / "runner-downtime.log").start()
    with cl.connect(CRON_DB) as c:
        m0 = next_minute(server_now(c), 5)
        say(f"downtime: every-minute jobs set; both run at {m0:%H:%M}Z, then the runner stops")
        sleep_until(c, m0 + dt.timedelta(seconds=5))
    out: dict[str, Any] = {}

    # (a) only the pgtimers runner is down
    before = _pgt_counters(cl)
    t_stop = _now(cl)
    runner.stop()
    say(f"(a) runner stopped at {t_stop:%H:%M:%S}Z for {down_s:.0f} s (pg_cron stays up)")
    time.sleep(max(0.0, down_s - (_now(cl) - t_stop).total_seconds()))
    runner.start()
    t_up = _now(cl)
    say(f"    runner serving again at {t_up:%H:%M:%S}Z; watching {observe_s:.0f} s")
    time.sleep(observe_s)
    t_end = _now(cl)
    out["runner"] = {
        "pgtimers": _pgt_outcome(cl, t_stop, t_up, t_end, before),
        "pg_cron": _cron_outcome(cl, t_stop, t_up, t_end),
        "window": [t_stop, t_up, t_end],
    }

    # (b) the whole server is down (the runner stays up and reconnects by itself)
    before = _pgt_counters(cl)
    t_stop = _now(cl)
    cl.stop("fast")
    say(f"(b) server stopped at {t_stop:%H:%M:%S}Z for {down_s:.0f} s (the runner stays up)")
    time.sleep(down_s)
    cl.start()
    t_up = _now(cl)
    say(f"    server up again at {t_up:%H:%M:%S}Z; watching {observe_s:.0f} s")
    time.sleep(observe_s)
    t_end = _now(cl)
    out["server"] = {
        "pgtimers": _pgt_outcome(cl, t_stop, t_up, t_end, before),
        "pg_cron": _cron_outcome(cl, t_stop, t_up, t_end),
        "window": [t_stop, t_up, t_end],
    }
    runner.stop()
    out["runner_reconnect"] = _reconnect_note(runner)
    with cl.connect(CRON_DB) as c:
        c.execute("DELETE FROM cron.job WHERE jobname = 'dt_cron'")
    with cl.connect(PGT_DB) as c:
        c.execute("SELECT count(timers.delete(name)) FROM timers.timers WHERE name LIKE 'dt\\_%'")
    for k in ("runner", "server"):
        say(f"downtime ({k}): {json.dumps(_jsonable(out[k]), default=str)}")
    return out


def _now(cl: Cluster) -> dt.datetime:
    with cl.connect() as c:
        return server_now(c)


def _pgt_counters(cl: Cluster) -> dict[str, tuple[int, int]]:
    with cl.connect(PGT_DB) as c:
        return {
            r[0]: (int(r[1]), int(r[2]))
            for r in c.execute(
                "SELECT name, skipped, runs FROM timers.timers WHERE name LIKE 'dt\\_%'"
            ).fetchall()
        }


def _minutes_between(a: dt.datetime, b: dt.datetime) -> list[dt.datetime]:
    """Whole minutes m with a < m <= b."""
    m = a.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    out = []
    while m <= b:
        out.append(m)
        m += dt.timedelta(minutes=1)
    return out


def _pgt_outcome(
    cl: Cluster, t_stop: dt.datetime, t_up: dt.datetime, t_end: dt.datetime, before: Any
) -> dict[str, Any]:
    after = _pgt_counters(cl)
    missed = _minutes_between(t_stop, t_up)
    res: dict[str, Any] = {"missed": len(missed)}
    with cl.connect(PGT_DB) as c:
        for mode in DT_MODES:
            rows = c.execute(
                "SELECT due, at FROM dt WHERE job = %s AND at > %s AND at <= %s ORDER BY at",
                [mode, t_stop, t_end],
            ).fetchall()
            ran_missed = [(d, a) for d, a in rows if d in missed]
            regular = [(d, a) for d, a in rows if d not in missed]
            b, a = before.get(f"dt_{mode}", (0, 0)), after.get(f"dt_{mode}", (0, 0))
            res[mode] = {
                "ran_missed": len(ran_missed),
                "ran_missed_at_s_after_up": [
                    round((a_ - t_up).total_seconds(), 1) for _, a_ in ran_missed
                ],
                "ran_missed_dues": [d.strftime("%H:%M") for d, _ in ran_missed],
                "skipped_recorded": a[0] - b[0],
                "regular_after": [d.strftime("%H:%M") for d, _ in regular],
                "first_regular_late_ms": (
                    round((regular[0][1] - regular[0][0]).total_seconds() * 1000)
                    if regular
                    else None
                ),
            }
    return res


def _cron_outcome(
    cl: Cluster, t_stop: dt.datetime, t_up: dt.datetime, t_end: dt.datetime
) -> dict[str, Any]:
    missed = _minutes_between(t_stop, t_up)
    with cl.connect(CRON_DB) as c:
        rows = [
            r[0]
            for r in c.execute(
                "SELECT at FROM dt WHERE at > %s AND at <= %s ORDER BY at", [t_stop, t_end]
            ).fetchall()
        ]
        details = c.execute(
            "SELECT status, count(*) FROM cron.job_run_details d JOIN cron.job j USING (jobid)"
            " WHERE j.jobname = 'dt_cron' AND d.start_time > %s GROUP BY status",
            [t_stop],
        ).fetchall()
    during = [a for a in rows if a <= t_up]
    after = [a for a in rows if a > t_up]
    # pg_cron has no due time of its own in the row: a run more than 5 s after a whole
    # minute, right after the restart, would be a late run of a missed minute
    late = [a for a in after if a.second >= 5 and a - t_up < dt.timedelta(seconds=59)]
    return {
        "missed": len(missed),
        "ran_while_down": len(during),
        "late_runs_after_up": len(late),
        "runs_after_up": [a.strftime("%H:%M:%S.%f")[:-3] for a in after],
        "first_after_up_s": round((after[0] - t_up).total_seconds(), 1) if after else None,
        "job_run_details": dict(details),
    }


def _reconnect_note(runner: RunnerProc) -> str:
    text = runner.log.read_text(errors="replace") if runner.log.exists() else ""
    n = sum(1 for line in text.splitlines() if "event=database_unavailable" in line)
    return f"{n} database_unavailable lines while the server was down"


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items() if k != "window"}
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return x


# ---------------------------------------------------------------------------
# overhead
# ---------------------------------------------------------------------------
def part_overhead(cl: Cluster, n: int, seconds: float, baseline_s: float) -> dict[str, Any]:
    out: dict[str, Any] = {"seconds": seconds}
    settle = 5.0
    with cl.connect(CRON_DB) as c:
        hour = (server_now(c).hour + 12) % 24
    # baseline: pg_cron launcher idle with no jobs, no runner
    time.sleep(settle)
    a = cpu_sample(cl.postmaster_pid())
    time.sleep(baseline_s)
    b = cpu_sample(cl.postmaster_pid())
    out["baseline_cpu_s_per_min"] = cpu_seconds(a, b) * 60 / (b.at - a.at)
    say(f"overhead baseline: {out['baseline_cpu_s_per_min']:.3f} CPU s/min (load {loadavg()})")

    with cl.connect(CRON_DB) as c:
        c.execute(
            "SELECT count(cron.schedule(format('o_%%s', g), %s,"
            " 'INSERT INTO public.punct (job, at) VALUES (''never'', clock_timestamp())'))"
            " FROM generate_series(1, %s) g",
            [f"{0} {hour} * * *", n],
        )
    time.sleep(settle)
    a = cpu_sample(cl.postmaster_pid())
    time.sleep(seconds)
    b = cpu_sample(cl.postmaster_pid())
    out["pg_cron_cpu_s_per_min"] = cpu_seconds(a, b) * 60 / (b.at - a.at)
    with cl.connect(CRON_DB) as c:
        c.execute("DELETE FROM cron.job WHERE jobname LIKE 'o\\_%'")
    say(f"overhead pg_cron ({n} jobs): {out['pg_cron_cpu_s_per_min']:.3f} CPU s/min")

    with cl.connect(PGT_DB) as c:
        c.execute(
            "SELECT count(timers.save(format('o_%%s', g), %s,"
            " 'INSERT INTO public.punct (job, at) VALUES (''never'', clock_timestamp())'))"
            " FROM generate_series(1, %s) g",
            [f"cron 0 {hour} * * *", n],
        )
    runner = RunnerProc(cl.dsn(PGT_DB), cl.root / "runner-overhead.log").start()
    time.sleep(settle)
    a = cpu_sample(cl.postmaster_pid())
    ra = cpu_sample(runner.pid)
    time.sleep(seconds)
    b = cpu_sample(cl.postmaster_pid())
    rb = cpu_sample(runner.pid)
    out["pgtimers_server_cpu_s_per_min"] = cpu_seconds(a, b) * 60 / (b.at - a.at)
    out["pgtimers_runner_cpu_s_per_min"] = cpu_seconds(ra, rb) * 60 / (rb.at - ra.at)
    out["pgtimers_cpu_s_per_min"] = (
        out["pgtimers_server_cpu_s_per_min"] + out["pgtimers_runner_cpu_s_per_min"]
    )
    out["runner_rss_mb"] = rss_kb(runner.pid)[0] / 1024
    runner.stop()
    with cl.connect(PGT_DB) as c:
        c.execute("SELECT count(timers.delete(name)) FROM timers.timers WHERE name LIKE 'o\\_%'")
    say(
        f"overhead pgtimers ({n} timers): server {out['pgtimers_server_cpu_s_per_min']:.3f}"
        f" + runner {out['pgtimers_runner_cpu_s_per_min']:.3f} CPU s/min"
    )
    return out


# ---------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------
def _f(v: Any, d: int = 0) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:,.{d}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _ratio(pgt: Any, cron: Any) -> str:
    try:
        if pgt is None or cron is None or math.isnan(pgt) or math.isnan(cron) or cron == 0:
            return "-"
    except TypeError:
        return "-"
    r = pgt / cron
    return f"{r:.2f}" if r < 10 else f"{r:.0f}"


def _above(v: float) -> str:
    return f"{v:.3f}" if v > 0.02 else f"{v:.3f} (≈ idle)"


def report(res: dict[str, Any]) -> str:
    headers = [
        "measure",
        "pg_cron",
        "pgtimers (default: 2 workers + burst)",
        "pgtimers --workers 8",
        "pgtimers/pg_cron (default)",
        "pgtimers/pg_cron (w8)",
        "better",
    ]
    rows: list[list[str]] = []
    p = res.get("punctuality")
    if p:
        for n, cron in p["pg_cron"].items():
            d = p["pgtimers"].get("default", {}).get(n, {})
            w = p["pgtimers"].get("w8", {}).get(n, {})
            for key, label in (
                ("min", "first"),
                ("p50", "p50"),
                ("p90", "p90"),
                ("p99", "p99"),
                ("max", "max"),
            ):
                best = min(
                    (
                        x
                        for x in (
                            ("pg_cron", cron.get(key)),
                            ("pgtimers", d.get(key)),
                            ("pgtimers w8", w.get(key)),
                        )
                        if x[1] is not None and not math.isnan(x[1])
                    ),
                    key=lambda x: x[1],
                    default=("-", 0),
                )[0]
                rows.append(
                    [
                        f"N={n:,} lateness {label} ms",
                        _f(cron.get(key)),
                        _f(d.get(key)),
                        _f(w.get(key)),
                        _ratio(d.get(key), cron.get(key)),
                        _ratio(w.get(key), cron.get(key)),
                        f"lower: {best}",
                    ]
                )
            rows.append(
                [
                    f"N={n:,} rows missing (dupes)",
                    f"{cron['missing']} ({cron['dupes']})",
                    f"{d.get('missing', '-')} ({d.get('dupes', '-')})",
                    f"{w.get('missing', '-')} ({w.get('dupes', '-')})",
                    "",
                    "",
                    "",
                ]
            )
        if "throughput" in res.get("parts", ()):
            for n, cron in p["pg_cron"].items():
                d = p["pgtimers"].get("default", {}).get(n, {})
                w = p["pgtimers"].get("w8", {}).get(n, {})
                best = max(
                    (
                        x
                        for x in (
                            ("pg_cron", cron.get("jobs_per_s")),
                            ("pgtimers", d.get("jobs_per_s")),
                            ("pgtimers w8", w.get("jobs_per_s")),
                        )
                        if x[1] is not None and not math.isnan(x[1])
                    ),
                    key=lambda x: x[1],
                    default=("-", 0),
                )[0]
                rows.append(
                    [
                        f"N={n:,} throughput jobs/s (first→last insert)",
                        _f(cron.get("jobs_per_s")),
                        _f(d.get("jobs_per_s")),
                        _f(w.get("jobs_per_s")),
                        _ratio(d.get("jobs_per_s"), cron.get("jobs_per_s")),
                        _ratio(w.get("jobs_per_s"), cron.get("jobs_per_s")),
                        f"higher: {best}",
                    ]
                )
                cpu = [x.get("cpu_ms_per_job") for x in (cron, d, w)]
                if cpu[0] is not None:
                    rows.append(
                        [
                            f"N={n:,} CPU ms per job (server + runner)",
                            _f(cpu[0], 1),
                            _f(cpu[1], 1)
                            + (
                                f" ({_f(d.get('server_cpu_ms_per_job'), 1)}"
                                f" + {_f(d.get('runner_cpu_ms_per_job'), 1)})"
                                if d
                                else ""
                            ),
                            _f(cpu[2], 1),
                            _ratio(cpu[1], cpu[0]),
                            _ratio(cpu[2], cpu[0]),
                            "lower",
                        ]
                    )
                rows.append(
                    [
                        f"N={n:,} create the jobs (cron.schedule / timers.save), s",
                        _f(cron.get("save_s"), 2),
                        _f(d.get("save_s"), 2),
                        _f(w.get("save_s"), 2),
                        _ratio(d.get("save_s"), cron.get("save_s")),
                        _ratio(w.get("save_s"), cron.get("save_s")),
                        "lower",
                    ]
                )
                rows.append(
                    [
                        f"N={n:,} all done after due, s",
                        _f(cron.get("makespan_s"), 2),
                        _f(d.get("makespan_s"), 2),
                        _f(w.get("makespan_s"), 2),
                        _ratio(d.get("makespan_s"), cron.get("makespan_s")),
                        _ratio(w.get("makespan_s"), cron.get("makespan_s")),
                        "lower",
                    ]
                )
    dtm = res.get("downtime")
    if dtm:
        for k, label in (("runner", "scheduler only"), ("server", "whole server")):
            o = dtm[k]
            c = o["pg_cron"]
            g = o["pgtimers"]
            cron_txt = (
                "cannot be stopped alone; ran every minute"
                f" ({len(c['runs_after_up'])} runs after, {c['ran_while_down']} during)"
                if k == "runner"
                else f"ran {c['late_runs_after_up']} of {c['missed']} missed; none recorded;"
                f" next run {c['first_after_up_s']} s after restart"
            )
            pg_txt = "; ".join(
                f"{m}: ran {g[m]['ran_missed']} of {g['missed']},"
                f" {g[m]['skipped_recorded']} recorded skipped"
                for m in DT_MODES
            )
            rows.append(
                [
                    f"downtime 3 min, {label}: missed every-minute due times",
                    cron_txt,
                    pg_txt,
                    "",
                    "",
                    "",
                    "",
                ]
            )
    ov = res.get("overhead")
    if ov:
        base = ov["baseline_cpu_s_per_min"]
        rows.append(
            [
                f"overhead: CPU s per minute, 1,000 jobs, none due (idle server: {base:.3f})",
                _f(ov["pg_cron_cpu_s_per_min"], 3),
                f"{ov['pgtimers_cpu_s_per_min']:.3f}"
                f" (server {ov['pgtimers_server_cpu_s_per_min']:.3f}"
                f" + runner {ov['pgtimers_runner_cpu_s_per_min']:.3f})",
                "",
                _ratio(ov["pgtimers_cpu_s_per_min"], ov["pg_cron_cpu_s_per_min"]),
                "",
                "lower: "
                + (
                    "pg_cron"
                    if ov["pg_cron_cpu_s_per_min"] < ov["pgtimers_cpu_s_per_min"]
                    else "pgtimers"
                ),
            ]
        )
        rows.append(
            [
                "overhead above idle server, CPU s per minute",
                _above(ov["pg_cron_cpu_s_per_min"] - base),
                _above(ov["pgtimers_cpu_s_per_min"] - base),
                "",
                "",
                "",
                "CPU is counted in 10 ms ticks: ±0.02 s/min is noise",
            ]
        )
    return table(headers, rows) if rows else ""


@dataclass(frozen=True)
class Plan:
    """How big and how long each part is: --quick is a smoke run."""

    ns: list[int]
    modes: list[int | None]
    down_s: float
    observe_s: float
    ov_s: float
    base_s: float
    sizes: list[int]
    samples: int
    serve: float


def _parse_args() -> tuple[argparse.Namespace, list[str]]:
    """The command line, and the parts it asks for."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", default=",".join(PARTS), help="comma list of: " + ", ".join(PARTS))
    ap.add_argument("--quick", action="store_true", help="small N, short windows: a smoke run")
    ap.add_argument("--port", type=int, default=5499)
    ap.add_argument(
        "--cron-bgw",
        choices=("on", "off"),
        default="on",
        help="cron.use_background_workers (default on)",
    )
    ap.add_argument("--cron-max-running-jobs", type=int, default=64)
    ap.add_argument("--sizes", default=None, help="scale sizes (default 1000,10000,100000,1000000)")
    ap.add_argument("--down-seconds", type=float, default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    args = ap.parse_args()
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad:
        ap.error(f"unknown part(s) {bad}; choose from {PARTS}")
    return args, parts


def _plan(args: argparse.Namespace) -> Plan:
    """The sizes and windows of the run, from --quick, --down-seconds and --sizes."""
    if args.quick:
        plan = Plan([50], [None, 8], 60.0, 65.0, 15.0, 10.0, [1000, 10000], 50, 5.0)
    else:
        plan = Plan(
            [200, 1000],
            [None, 8],
            180.0,
            65.0,
            60.0,
            30.0,
            [1000, 10000, 100000, 1000000],
            200,
            15.0,
        )
    if args.down_seconds:
        plan = replace(plan, down_s=args.down_seconds)
    if args.sizes:
        plan = replace(plan, sizes=[int(s) for s in args.sizes.split(",")])
    return plan


def _cluster(args: argparse.Namespace) -> Cluster:
    """The throwaway PostgreSQL 15 cluster with pg_cron, created and started."""
    cl = Cluster(port=args.port, settings=cluster_settings(args))
    if args.cron_bgw == "off":
        # libpq mode: pg_cron connects to this server through its unix socket, trust auth
        cl.settings["cron.host"] = f"'{cl.sock}'"
    if not (cl.pg_bin.parent / "lib" / "pg_cron.so").exists():
        raise SystemExit(
            "pg_cron for PostgreSQL 15 is missing: apt-get install -y postgresql-15-cron"
        )
    cl.create()
    cl.start()
    return cl


def _print_setup(
    args: argparse.Namespace, cl: Cluster, mach: dict[str, Any], info: dict[str, Any]
) -> None:
    print("machine:")
    for k, v in mach.items():
        print(f"  {k:>24}: {v}")
    print("server:")
    for k in sorted(info):
        print(f"  {k:>24}: {info[k]}")
    print(f"  {'cluster':>24}: {cl.data} (port {cl.port}, socket {cl.sock}; removed at the end)")
    print(
        "  settings: pg_cron runs jobs in background workers (cron.use_background_workers="
        f"{args.cron_bgw}), up to cron.max_running_jobs={args.cron_max_running_jobs} at once;"
        f" max_worker_processes={args.cron_max_running_jobs + 16}; pgtimers runner default"
        " workers (2 + 1 burst) and --workers 8 (+1 burst)",
        flush=True,
    )


def _run_parts(cl: Cluster, parts: list[str], plan: Plan, res: dict[str, Any]) -> None:
    """Each asked-for part, its results into `res`."""
    if "punctuality" in parts or "throughput" in parts:
        res["punctuality"] = part_punctuality(cl, plan.ns, plan.modes)
    if "downtime" in parts:
        res["downtime"] = part_downtime(cl, plan.down_s, plan.observe_s)
    if "overhead" in parts:
        res["overhead"] = part_overhead(cl, 1000, plan.ov_s, plan.base_s)
    if "scale" in parts:
        from scale import run_scale

        res["scale"] = run_scale(cl, plan.sizes, plan.samples, plan.serve)


def _print_results(res: dict[str, Any], mach: dict[str, Any]) -> None:
    print()
    print(
        f"pgtimers vs pg_cron — {mach['date']}, {mach['cpu']}, {mach['cores']} cores,"
        f" {mach['memory']}; PostgreSQL {res['server'].get('server_version')}, pg_cron"
        f" {res['server'].get('pg_cron')}, pgtimers {mach['pgtimers']}"
    )
    print(
        f"load average at start {mach['load average at start']}, at end {res['load_end']};"
        f" took {res['minutes']:.1f} min"
    )
    print(
        "lateness = the job's clock_timestamp() minus its due minute; ratio < 1: pgtimers"
        " is lower (better for lateness and CPU; worse for throughput)"
    )
    print(report(res))
    if "downtime" in res:
        print()
        print("downtime details:")
        for k in ("runner", "server"):
            print(f"  {k}: {json.dumps(_jsonable(res['downtime'][k]), default=str)}")
        print(f"  runner: {res['downtime']['runner_reconnect']}")
    if "punctuality" in res:
        for key, v in res["punctuality"]["pgtimers"].items():
            print(
                f"  pgtimers runner {key}: RSS {v['rss_start_mb']:.0f} MB at start,"
                f" {v['rss_end_mb']:.0f} MB after the rounds;"
                f" {v['log_errors']} failed/error log lines"
            )
    if "scale" in res:
        print()
        print("scale (pgtimers only):")
        print("\n".join("  " + line for line in res["scale"]["fill"]))
        print(res["scale"]["table"])


def main() -> int:
    args, parts = _parse_args()
    plan = _plan(args)
    install_signal_cleanup()
    t_start = time.monotonic()
    mach = machine()
    cl = _cluster(args)
    res: dict[str, Any] = {"parts": parts}
    try:
        info = setup_databases(cl, args)
        _print_setup(args, cl, mach, info)
        res["machine"], res["server"] = mach, info
        _run_parts(cl, parts, plan, res)
    finally:
        res["load_end"] = loadavg()
        res["minutes"] = (time.monotonic() - t_start) / 60
        cl.destroy()
    _print_results(res, mach)
    if args.json:
        args.json.write_text(json.dumps(_jsonable(res), default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
