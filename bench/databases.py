"""The connection budget: one runner serving 10, 50 and 100 databases (`--all-databases`),
5 timers in each, with its default budget and with a small one: the connections it holds
idle and busy, how late the timers run, and what it logs when the budget is short.

    sudo .venv/bin/python bench/databases.py                     # 10, 50, 100; ~16 min
    sudo .venv/bin/python bench/databases.py --quick             # 30 s windows; ~10 min
    sudo .venv/bin/python bench/databases.py --sizes 10 --budgets default
    sudo .venv/bin/python bench/databases.py --commit HEAD       # the committed tree

For each size N (ascending; the databases of a smaller size are kept and more are added),
N databases `bench_db_NNN` with pgtimers installed (pgtimers.schema.install.install) and a
table `sink`. Then, for each budget (`default`: no flag; a number: `--max-connections`),
one `pgtimers run --all-databases` process (its own log) and these phases:

  start    spawn to the `event=serving` line of all N databases.
  idle     the 5 timers of each database are `every 1h`, first due in an hour: the
           connections it holds when nothing is due (--idle seconds).
  busy     the timers become `every 2s` (--every), each with its own phase: timer j of
           database i first due at T0 + (j*N + i) / (5N) * 2 s, so the 5N timers are
           spread evenly over the period. The window starts 5 s + 50 ms per database
           after the save (--settle): a database whose control session is parked sees
           the new timers when it comes back (within PGTIMERS_PARK_LOOK, 30 s), so its
           first due times in the window can be late by up to that. Each run inserts
           current_setting('pgtimers.timer'), pgtimers.due_at and clock_timestamp() into
           `sink`: lateness is clock_timestamp - due. The window is the due times in
           [T0, T0 + --window),
           60 s (30 s with --quick); afterwards the bench waits up to --grace seconds
           (30) for the late ones before it counts. The runner's and the server's CPU,
           and the connections opened to the bench's databases (pg_stat_database.sessions),
           are measured over the window. With the default catch_up (skip) a due time
           whose successor came before a run could start is skipped and recorded as such
           in timers.runs (--catch-up all runs each one).
  after    every timer turned off, then, once a worker connection has been idle long
           enough to close (30 s, pgtimers.runner.budget.IDLE_CLOSE), the connections
           again (5 s).

All along, pg_stat_activity is sampled every 0.2 s: the runner's connections are those
whose application_name starts with `pgtimers` (a worker running a timer is named
`pgtimers: <timer>` while its transaction lasts). `control` is `pgtimers runner
control`, one per served database while it is not parked; `budgeted` is the rest
(workers, the session probes and discovery). The budget caps both together. Each run is
checked: every expected due time ran once or was recorded as skipped (lost: neither;
duplicates; rows at a due time the schedule does not have), no database ran nothing,
connections never above the budget, p99 lateness under 1 s; and the runner's log is read
for `event=connection_budget` (the limit it derived; the summary while there is pressure)
and `event=connections_refused`.

The cluster is a throwaway PostgreSQL 15 (bench/_common.Cluster) on --port (5498) with
max_connections = 200: room for a budget of 100 and more, and the bench's own sessions.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import _common
import psycopg
from _common import (
    REPO,
    Cluster,
    RunnerProc,
    cpu_sample,
    cpu_seconds,
    install_signal_cleanup,
    loadavg,
    machine,
    pct,
    say,
    table,
)

DB_PREFIX = "bench_db_"
TIMERS_PER_DB = 5
SAMPLE_EVERY = 0.2
IDLE_CLOSE = 30.0  # pgtimers.runner.budget.IDLE_CLOSE: an idle worker connection closes
CONTROL = "pgtimers runner control"
SINK = "CREATE TABLE public.sink (timer text NOT NULL, due timestamptz NOT NULL, at timestamptz)"
SINK_SQL = (
    "INSERT INTO public.sink (timer, due, at) VALUES (current_setting('pgtimers.timer'),"
    " current_setting('pgtimers.due_at')::timestamptz, clock_timestamp())"
)
SETTINGS = {
    "max_connections": "200",
    "shared_buffers": "'256MB'",
    "max_wal_size": "'4GB'",
}
# the runner's environment: its defaults, not whatever the shell set
RUNNER_ENV_DROP = (
    "PGTIMERS_WORKERS",
    "PGTIMERS_MAX_CONNECTIONS",
    "PGTIMERS_IDLE_CLOSE",
    "PGTIMERS_DISCOVER_EVERY",
    "PGTIMERS_GIVE_UP_AFTER",
    "PGTIMERS_DSN",
    "DATABASE_URL",
)


# ---------------------------------------------------------------------------- the runner
class AllDatabasesRunner(RunnerProc):
    """`python -m pgtimers run --dsn BASE --all-databases [--max-connections M]`."""

    def __init__(self, dsn: str, log: Path, budget: int | None, pythonpath: str | None) -> None:
        super().__init__(dsn, log)
        self.budget = budget
        self.pythonpath = pythonpath

    def start(self, wait: bool = False, timeout: float = 120.0) -> AllDatabasesRunner:
        args = [sys.executable, "-m", "pgtimers", "run", "--dsn", self.dsn, "--all-databases"]
        if self.budget is not None:
            args += ["--max-connections", str(self.budget)]
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        env = {k: v for k, v in os.environ.items() if k not in RUNNER_ENV_DROP}
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        self.started_at = time.monotonic()
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                args, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        _common._RUNNERS.add(self)  # killed at exit, also on Ctrl-C
        if wait:
            self.wait_serving(timeout)
        return self

    def wait_all_serving(self, n: int, timeout: float) -> float:
        """Seconds from spawn to the `event=serving` line of n distinct databases."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            served = set(re.findall(r"event=serving database=(\S+)", self.text()))
            if len(served) >= n:
                self.serving_s = time.monotonic() - self.started_at
                return self.serving_s
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"runner exited early; see {self.log}:\n{self.log_tail()}")
            time.sleep(0.1)
        raise RuntimeError(f"runner not serving {n} databases after {timeout}s; see {self.log}")

    def text(self) -> str:
        with open(self.log, "rb") as fh:
            fh.seek(self._offset)
            return fh.read().decode(errors="replace")


# ---------------------------------------------------------------------------- sampling
class Sampler(threading.Thread):
    """pg_stat_activity every SAMPLE_EVERY s: (time, control, budgeted) of the runner's
    connections."""

    def __init__(self, cl: Cluster) -> None:
        super().__init__(daemon=True)
        self.cl = cl
        self.samples: list[tuple[float, int, int]] = []
        self.stop = threading.Event()
        self.errors = 0

    def run(self) -> None:
        conn = self.cl.connect("postgres", application_name="bench sampler")
        try:
            while not self.stop.is_set():
                t0 = time.time()
                try:
                    row = conn.execute(
                        "SELECT count(*) FILTER (WHERE application_name = %s),"
                        " count(*) FILTER (WHERE application_name <> %s)"
                        " FROM pg_stat_activity WHERE application_name LIKE 'pgtimers%%'",
                        [CONTROL, CONTROL],
                    ).fetchone()
                    assert row is not None
                    self.samples.append((t0, int(row[0]), int(row[1])))
                except psycopg.Error:
                    self.errors += 1
                self.stop.wait(max(0.0, SAMPLE_EVERY - (time.time() - t0)))
        finally:
            conn.close()

    def between(self, lo: float, hi: float) -> dict[str, float]:
        got = [(c, b) for t, c, b in self.samples if lo <= t < hi]
        if not got:
            return {"n": 0}
        total = [c + b for c, b in got]
        budgeted = [b for _, b in got]
        return {
            "n": len(got),
            "control_max": max(c for c, _ in got),
            "control_min": min(c for c, _ in got),
            "budgeted_max": max(budgeted),
            "budgeted_mean": sum(budgeted) / len(budgeted),
            "total_max": max(total),
            "total_mean": sum(total) / len(total),
        }

    def above(self, lo: float, hi: float, budget: int) -> int:
        return sum(1 for t, c, b in self.samples if lo <= t < hi and c + b > budget)


# ---------------------------------------------------------------------------- databases
def db_name(i: int) -> str:
    return f"{DB_PREFIX}{i:03d}"


def make_databases(cl: Cluster, have: int, upto: int) -> float:
    """Databases have..upto-1, each with pgtimers installed and a sink; seconds taken."""
    from pgtimers.schema.install import install

    t0 = time.perf_counter()
    for i in range(have, upto):
        with cl.connect("postgres") as c:
            c.execute(f"CREATE DATABASE {db_name(i)}")
        install(cl.dsn(db_name(i)))
        with cl.connect(db_name(i)) as c:
            c.execute(SINK)
    return time.perf_counter() - t0


def save_timers(
    cl: Cluster,
    n: int,
    schedule: str,
    starts: dict[tuple[int, int], str],
    catch_up: str | None = None,
) -> None:
    """The 5 timers of each of n databases (t1..t5), saved with one save_many per database,
    turned on, an empty sink."""
    for i in range(n):
        timers = [
            {
                "name": f"t{j + 1}",
                "schedule": schedule,
                "sql": SINK_SQL,
                "start_at": starts[(i, j)],
                "enabled": True,
                **({"catch_up": catch_up} if catch_up else {}),
            }
            for j in range(TIMERS_PER_DB)
        ]
        with cl.connect(db_name(i)) as c:
            c.execute("TRUNCATE public.sink")
            c.execute("SELECT timers.save_many(%s::jsonb)", [json.dumps(timers)])


def turn_off(cl: Cluster, n: int) -> None:
    for i in range(n):
        with cl.connect(db_name(i)) as c:
            c.execute("SELECT count(timers.enable(t.name, false)) FROM timers.timers t")


def iso(at: dt.datetime) -> str:
    return at.astimezone(dt.timezone.utc).isoformat(timespec="microseconds")


def server_time(cl: Cluster) -> dt.datetime:
    with cl.connect("postgres") as c:
        row = c.execute("SELECT clock_timestamp()").fetchone()
        assert row is not None
        return row[0]


def expected_dues(
    starts: dict[tuple[int, int], dt.datetime], period: float, hi: dt.datetime
) -> dict[int, set[tuple[str, int]]]:
    """Per database: the (timer, due in µs since the epoch) the window should run."""
    out: dict[int, set[tuple[str, int]]] = {}
    step = round(period * 1_000_000)
    end = _us(hi)
    for (i, j), first in starts.items():
        at = _us(first)
        while at < end:
            out.setdefault(i, set()).add((f"t{j + 1}", at))
            at += step
    return out


def _us(at: dt.datetime) -> int:
    return round(at.timestamp() * 1_000_000)


# the due times of the window that pgtimers skipped (catch_up 'skip', the default: a due
# time whose successor had come before a run could start), from its run history
SKIPPED = (
    "SELECT timer, (extract(epoch FROM due_at) * 1000000)::bigint FROM timers.runs"
    " WHERE kind = 'skipped' AND due_at >= %s AND due_at < %s"
)


def count_window(cl: Cluster, i: int, lo: dt.datetime, hi: dt.datetime) -> int:
    """Due times of the window that ran or were skipped, in database i."""
    with cl.connect(db_name(i)) as c:
        row = c.execute(
            "SELECT (SELECT count(*) FROM public.sink WHERE due >= %s AND due < %s)"
            f" + (SELECT count(*) FROM ({SKIPPED}) s)",
            [lo, hi, lo, hi],
        ).fetchone()
        assert row is not None
        return int(row[0])


def sessions(cl: Cluster) -> int:
    """Sessions opened so far in the bench's databases (pg_stat_database.sessions)."""
    with cl.connect("postgres") as c:
        row = c.execute(
            "SELECT coalesce(sum(sessions), 0) FROM pg_stat_database WHERE datname LIKE %s",
            [DB_PREFIX + "%"],
        ).fetchone()
        assert row is not None
        return int(row[0])


def wait_complete(
    cl: Cluster, want: dict[int, int], lo: dt.datetime, hi: dt.datetime, grace: float
) -> float:
    """Until every database has its expected rows (or grace seconds after the window
    ended); seconds waited."""
    t0 = time.monotonic()
    pending = dict(want)
    while pending and time.monotonic() - t0 < grace:
        for i in list(pending):
            if count_window(cl, i, lo, hi) >= pending[i]:
                del pending[i]
        if pending:
            time.sleep(0.5)
    return time.monotonic() - t0


Runs = dict[int, list[tuple[str, int, float]]]
Skips = dict[int, list[tuple[str, int]]]


def collect(cl: Cluster, n: int, lo: dt.datetime, hi: dt.datetime) -> tuple[Runs, Skips]:
    """Per database: (timer, due µs, lateness ms) of the runs due in [lo, hi), and the
    (timer, due µs) pgtimers skipped."""
    runs: Runs = {}
    skips: Skips = {}
    for i in range(n):
        with cl.connect(db_name(i)) as c:
            rows = c.execute(
                "SELECT timer, (extract(epoch FROM due) * 1000000)::bigint,"
                " extract(epoch FROM at - due) * 1000 FROM public.sink"
                " WHERE due >= %s AND due < %s",
                [lo, hi],
            ).fetchall()
            skipped = c.execute(SKIPPED, [lo, hi]).fetchall()
        runs[i] = [(str(r[0]), int(r[1]), float(r[2])) for r in rows]
        skips[i] = [(str(r[0]), int(r[1])) for r in skipped]
    return runs, skips


# ---------------------------------------------------------------------------- the log
def read_log(text: str) -> dict[str, Any]:
    """What the runner said about its budget."""
    lines = text.splitlines()
    budget = [ln for ln in lines if "event=connection_budget " in ln]
    derived = [ln for ln in budget if "limit_from=" in ln]
    pressure = [ln for ln in budget if "waiting=" in ln]
    refused = [ln for ln in lines if "event=connections_refused " in ln]
    other = Counter(
        m.group(2)
        for ln in lines
        if (m := re.search(r"level=(warning|error) event=(\S+)", ln))
        and m.group(2) not in ("connection_budget", "connections_refused")
    )
    limit = None
    if derived and (m := re.search(r" limit=(\d+)", derived[0])):
        limit = int(m.group(1))
    return {
        "limit": limit,
        "derived": derived[:1],
        "pressure": pressure,
        "refused": refused,
        "other_warnings": dict(other),
    }


# ---------------------------------------------------------------------------- one run
def one_run(
    cl: Cluster,
    n: int,
    budget: int | None,
    args: argparse.Namespace,
    sampler: Sampler,
    pythonpath: str | None,
) -> dict[str, Any]:
    tag = f"{n}-{budget or 'default'}"
    res: dict[str, Any] = {"databases": n, "budget_flag": budget, "load_start": loadavg()}
    # idle: every 1h, first due in an hour
    later = server_time(cl) + dt.timedelta(hours=1)
    save_timers(
        cl, n, "every 1h", {(i, j): iso(later) for i in range(n) for j in range(TIMERS_PER_DB)}
    )
    runner = AllDatabasesRunner(
        cl.dsn("postgres"), (args.logs or cl.root) / f"runner-{tag}.log", budget, pythonpath
    ).start()
    res["start_s"] = runner.wait_all_serving(n, timeout=120 + 3 * n)
    say(f"[{tag}] runner serving {n} databases after {res['start_s']:.1f} s (load {loadavg()})")
    time.sleep(2)
    t0 = time.time()
    time.sleep(args.idle)
    res["idle"] = sampler.between(t0, time.time())
    say(f"[{tag}] idle: {_conns(res['idle'])}")

    # busy: every P seconds, each timer its own phase
    period = args.every
    settle = args.settle if args.settle is not None else 5 + 0.05 * n
    lo = server_time(cl).replace(microsecond=0) + dt.timedelta(seconds=settle)
    hi = lo + dt.timedelta(seconds=args.window)
    firsts = {
        (i, j): lo + dt.timedelta(seconds=round((j * n + i) * period / (TIMERS_PER_DB * n), 3))
        for i in range(n)
        for j in range(TIMERS_PER_DB)
    }
    save_timers(cl, n, f"every {period:g}s", {k: iso(v) for k, v in firsts.items()}, args.catch_up)
    want = expected_dues(firsts, period, hi)
    wait = lo.timestamp() - time.time()
    if wait < 0:
        say(f"[{tag}] WARNING: saving the timers took {-wait:.1f} s past the window's start")
    time.sleep(max(0.0, wait))
    a, ra, sa = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid), sessions(cl)
    time.sleep(max(0.0, hi.timestamp() - time.time()))
    b, rb, sb = cpu_sample(cl.postmaster_pid()), cpu_sample(runner.pid), sessions(cl)
    secs = b.at - a.at
    res["sessions_per_s"] = (sb - sa) / secs
    res["busy"] = sampler.between(lo.timestamp(), hi.timestamp())
    res["runner_cpu_pct"] = cpu_seconds(ra, rb) * 100 / secs
    res["server_cpu_pct"] = cpu_seconds(a, b) * 100 / secs
    res["load_busy_end"] = loadavg()
    say(
        f"[{tag}] busy {args.window:g} s: {_conns(res['busy'])}; CPU runner"
        f" {res['runner_cpu_pct']:.0f} %, server {res['server_cpu_pct']:.0f} % of a core;"
        f" {res['sessions_per_s']:.1f} connections opened a second"
    )
    res["grace_s"] = wait_complete(cl, {i: len(s) for i, s in want.items()}, lo, hi, args.grace)
    got, skipped = collect(cl, n, lo, hi)
    res.update(check(want, got, skipped))
    say(
        f"[{tag}] runs {res['runs']:,} / {res['expected']:,} expected, skipped"
        f" {res['skipped']}, lost {res['lost']}, duplicates {res['duplicates']}, lateness p50"
        f" {res['p50']:,.0f} / p99 {res['p99']:,.0f} / max {res['max']:,.0f} ms,"
        f" databases that ran nothing {len(res['ran_nothing'])}"
    )

    # after: all off, wait for the idle worker connections to close
    turn_off(cl, n)
    time.sleep(IDLE_CLOSE + 3)
    t1 = time.time()
    time.sleep(5)
    res["after"] = sampler.between(t1, time.time())
    say(f"[{tag}] after, all off for {IDLE_CLOSE + 3:.0f} s: {_conns(res['after'])}")
    runner.stop()
    res["log"] = read_log(runner.text())
    res["budget"] = res["log"]["limit"] if budget is None else budget
    res["above_budget"] = (
        sampler.above(t0, t1 + 5, res["budget"]) if res["budget"] is not None else None
    )
    res["load_end"] = loadavg()
    return res


def check(want: dict[int, set[tuple[str, int]]], got: Runs, skips: Skips) -> dict[str, Any]:
    """Every expected due time ran once or was skipped (and recorded as such)."""
    late: list[float] = []
    runs = expected = skipped = lost = both = duplicates = unexpected = 0
    ran_nothing: list[str] = []
    worst_db = (math.nan, "")
    for i, rows in got.items():
        expect = want.get(i, set())
        expected += len(expect)
        keys = Counter((t, d) for t, d, _ in rows)
        runs += len(rows)
        duplicates += sum(c - 1 for c in keys.values())
        unexpected += sum(1 for k in keys if k not in expect)
        skip = set(skips.get(i, []))
        skipped += sum(1 for k in expect if k in skip and k not in keys)
        lost += sum(1 for k in expect if k not in keys and k not in skip)
        both += sum(1 for k in skip if k in keys)
        if not rows:
            ran_nothing.append(db_name(i))
            continue
        mine = [x for _, _, x in rows]
        late.extend(mine)
        p99 = pct(mine, 99)
        if math.isnan(worst_db[0]) or p99 > worst_db[0]:
            worst_db = (p99, db_name(i))
    return {
        "runs": runs,
        "expected": expected,
        "skipped": skipped,
        "lost": lost,
        "ran_and_skipped": both,
        "duplicates": duplicates,
        "unexpected": unexpected,
        "ran_nothing": ran_nothing,
        "p50": pct(late, 50),
        "p99": pct(late, 99),
        "max": max(late) if late else math.nan,
        "late_over_1s": sum(1 for x in late if x > 1000),
        "worst_db_p99": worst_db[0],
        "worst_db": worst_db[1],
    }


def _conns(s: dict[str, float]) -> str:
    if not s.get("n"):
        return "no samples"
    return (
        f"total max {s['total_max']:.0f} mean {s['total_mean']:.1f} (control"
        f" {s['control_min']:.0f}-{s['control_max']:.0f}, budgeted max {s['budgeted_max']:.0f}"
        f" mean {s['budgeted_mean']:.1f}), {s['n']} samples"
    )


# ---------------------------------------------------------------------------- report
def report(results: list[dict[str, Any]]) -> tuple[str, list[str]]:
    rows: list[list[Any]] = []
    notes: list[str] = []
    for r in results:
        n, m = r["databases"], r["budget"]
        label = f"{m} ({'flag' if r['budget_flag'] else 'default'})"
        idle, busy, after = r["idle"], r["busy"], r["after"]
        log = r["log"]
        rows.append(
            [
                n,
                label,
                f"{r['start_s']:.1f}",
                f"{idle.get('total_max', '-')} ({idle.get('budgeted_max', '-')})",
                f"{busy['total_max']} / {busy['total_mean']:.1f}",
                f"{busy['budgeted_max']} / {busy['budgeted_mean']:.1f}",
                f"{after.get('total_max', '-')} ({after.get('budgeted_max', '-')})",
                f"{r['p50']:,.0f} / {r['p99']:,.0f} / {r['max']:,.0f}",
                f"{r['worst_db_p99']:,.0f}",
                len(r["ran_nothing"]),
                f"{r['runs']:,} / {r['expected']:,}",
                f"{r['skipped']} / {r['lost']} / {r['duplicates']}",
                f"{r['runner_cpu_pct']:.0f} / {r['server_cpu_pct']:.0f}",
                f"{r['sessions_per_s']:.1f}",
                f"{len(log['pressure'])} / {len(log['refused'])}",
            ]
        )
        tag = f"{n} databases, budget {label}"
        if r["ran_nothing"]:
            notes.append(
                f"{tag}: {len(r['ran_nothing'])} database(s) RAN NOTHING in the window: "
                + ", ".join(r["ran_nothing"][:10])
            )
        if not math.isnan(r["p99"]) and r["p99"] > 1000:
            notes.append(
                f"{tag}: lateness p99 {r['p99']:,.0f} ms is ABOVE 1 s"
                f" ({r['late_over_1s']:,} of {r['runs']:,} runs over 1 s; worst database"
                f" {r['worst_db']} p99 {r['worst_db_p99']:,.0f} ms)"
            )
        if r["skipped"]:
            notes.append(
                f"{tag}: {r['skipped']:,} of {r['expected']:,} due times SKIPPED by pgtimers"
                " (catch_up skip: the next due time had come before a run could start),"
                " recorded in timers.runs; lateness counts only the runs"
            )
        if r["lost"] or r["duplicates"] or r["unexpected"] or r["ran_and_skipped"]:
            notes.append(
                f"{tag}: {r['lost']} due times LOST (neither run within {r['grace_s']:.0f} s"
                f" of the window's end nor recorded as skipped), {r['duplicates']} duplicates,"
                f" {r['unexpected']} runs at due times the schedule does not have,"
                f" {r['ran_and_skipped']} both run and recorded as skipped"
            )
        if r["above_budget"]:
            notes.append(
                f"{tag}: connections ABOVE the budget in {r['above_budget']} samples"
                f" (max {max(busy['total_max'], idle.get('total_max', 0))})"
            )
        if log["pressure"]:
            notes.append(
                f"{tag}: {len(log['pressure'])} connection_budget line(s); the first: "
                + log["pressure"][0].split(" ", 1)[1]
            )
        elif not math.isnan(r["p99"]) and r["p99"] > 1000:
            notes.append(f"{tag}: timers were late but the runner logged NO connection_budget")
        if log["refused"]:
            notes.append(f"{tag}: {len(log['refused'])} connections_refused line(s)")
        if log["other_warnings"]:
            notes.append(f"{tag}: other warnings/errors in the log: {log['other_warnings']}")
    headers = [
        "databases",
        "budget",
        "start s",
        "idle: conns (budgeted)",
        "busy: conns max / mean",
        "busy: budgeted max / mean",
        "after busy: conns (budgeted)",
        "lateness p50 / p99 / max ms",
        "worst db p99 ms",
        "dbs ran nothing",
        "runs / expected",
        "skipped / lost / dupes",
        "CPU % runner / server",
        "conns opened /s",
        "budget lines / refused",
    ]
    return table(headers, rows), notes


# ---------------------------------------------------------------------------- main
def export_commit(rev: str, dest: Path) -> str:
    """`git archive rev` into dest (the package, its SQL and migrations); the short hash."""
    short = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", rev],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dest.mkdir(parents=True)
    archive = subprocess.Popen(
        ["git", "-C", str(REPO), "archive", rev, "pgtimers", "sql", "migrations"],
        stdout=subprocess.PIPE,
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {rev} failed")
    return short


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="10,50,100", help="databases, comma list")
    ap.add_argument(
        "--budgets", default="default,5", help="comma list: default (no flag) or a number"
    )
    ap.add_argument("--every", type=float, default=2.0, help="the timers' period, seconds")
    ap.add_argument("--window", type=float, default=None, help="busy seconds (60; quick 30)")
    ap.add_argument("--idle", type=float, default=None, help="idle seconds (10; quick 5)")
    ap.add_argument(
        "--catch-up",
        choices=("skip", "latest", "all"),
        default=None,
        help="the timers' catch_up (default: pgtimers' own, skip)",
    )
    ap.add_argument("--grace", type=float, default=30.0, help="wait for late runs, seconds")
    ap.add_argument(
        "--settle",
        type=float,
        default=None,
        help="seconds from saving the busy timers to the window (5 + 0.05 per database);"
        " above PGTIMERS_PARK_LOOK (30), parked databases have seen them before it",
    )
    ap.add_argument("--quick", action="store_true", help="30 s busy windows, 5 s idle")
    ap.add_argument("--port", type=int, default=5498)
    ap.add_argument(
        "--commit",
        default=None,
        help="run pgtimers (the runner and the SQL) as of this git commit, exported with git"
        " archive, instead of the working tree",
    )
    ap.add_argument(
        "--logs", type=Path, default=None, help="keep the runners' logs in this directory"
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    args = ap.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",") if s})
    budgets = [None if b == "default" else int(b) for b in args.budgets.split(",") if b]
    args.window = args.window or (30.0 if args.quick else 60.0)
    args.idle = args.idle or (5.0 if args.quick else 10.0)
    if max(sizes) > 999:
        ap.error("at most 999 databases")

    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    install_signal_cleanup()
    cl = Cluster(port=args.port, settings=dict(SETTINGS))
    pythonpath = None
    rev = None
    if args.commit:
        tree = cl.root / "tree"
        rev = export_commit(args.commit, tree)
        sys.path.insert(0, str(tree))
        pythonpath = str(tree)
    cl.create()
    cl.start()
    mach = machine()
    if rev is not None:
        import pgtimers

        mach["pgtimers"] = f"{pgtimers.__version__} (git {rev}, exported, not the working tree)"
    with cl.connect("postgres") as c:
        server = {
            str(r[0]): str(r[1])
            for r in c.execute(
                "SELECT name, current_setting(name) FROM pg_settings WHERE name IN"
                " ('server_version', 'max_connections', 'superuser_reserved_connections',"
                " 'shared_buffers', 'fsync', 'synchronous_commit')"
            ).fetchall()
        }
    for k, v in {**mach, **server}.items():
        say(f"{k}: {v}")
    say(
        f"sizes {sizes}, budgets {[b or 'default' for b in budgets]}, timers every"
        f" {args.every:g} s, {TIMERS_PER_DB} per database, catch_up"
        f" {args.catch_up or 'default'}, window {args.window:g} s"
    )

    sampler = Sampler(cl)
    sampler.start()
    results: list[dict[str, Any]] = []
    have = 0
    for n in sizes:
        took = make_databases(cl, have, n)
        say(f"{n - have} databases created and installed in {took:.1f} s (load {loadavg()})")
        have = n
        results.extend(one_run(cl, n, b, args, sampler, pythonpath) for b in budgets)
    sampler.stop.set()
    sampler.join(5)

    text, notes = report(results)
    print()
    print(f"machine: {mach['cpu']}, {mach['cores']} cores; pgtimers {mach['pgtimers']}")
    print(f"load average: at start {mach['load average at start']}, at end {loadavg()}")
    print(
        f"server: PostgreSQL {server.get('server_version')}, max_connections"
        f" {server.get('max_connections')} (superuser_reserved_connections"
        f" {server.get('superuser_reserved_connections')}), fsync {server.get('fsync')},"
        f" synchronous_commit {server.get('synchronous_commit')}"
    )
    print(
        f"timers: {TIMERS_PER_DB} per database, every {args.every:g} s, phases spread,"
        f" catch_up {args.catch_up or 'default (skip)'};"
        f" window {args.window:g} s; conns = the runner's connections in pg_stat_activity"
        f" (sampled every {SAMPLE_EVERY:g} s), budgeted = all but the control sessions"
    )
    print(text)
    print()
    for note in notes or ["nothing to report: every check passed"]:
        print("-", note)
    if sampler.errors:
        print(f"- the sampler missed {sampler.errors} samples")
    if args.json:
        args.json.write_text(json.dumps(results, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
