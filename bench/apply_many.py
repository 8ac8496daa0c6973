"""Timers as code at scale: `pgtimers apply` of one file of N timers (default 1,000).

    .venv/bin/python bench/apply_many.py [--dsn DSN] [-n 1000]

Without --dsn (or PGTIMERS_BENCH_DSN) it starts an embedded PostgreSQL (the pip wheel) in
a temporary directory and removes it afterwards; with one it creates and drops the scratch
database `pgtimers_bench_apply` on that server.

It times the whole command (`python -m pgtimers apply FILE`: reading and checking the file,
the dry run, the plan printed, the apply) for: the first apply (N creates), the same file
again (N unchanged: the dry run only), `--check` of it, and a file where every timer's
schedule changed (N updates). Each of the N timers has its own schedule, zone and options.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import embedded_server, install_pgtimers, machine, say, scratch_database, table

ZONES = ["UTC", "Asia/Kathmandu", "America/New_York", "Europe/Berlin"]


def timers_file(n: int, minutes: int) -> str:
    """N timers, every one different, as a TOML file."""
    return "\n".join(
        f'[[timer]]\nname = "bench_{i:05d}"\nschedule = "every {minutes + i % 7}m"\n'
        f'timezone = "{ZONES[i % len(ZONES)]}"\nretries = {i % 4}\n'
        f'sql = "INSERT INTO bench_log VALUES ({i})"\n'
        for i in range(n)
    )


def timed_apply(dsn: str, path: Path, *extra: str) -> tuple[float, int, str]:
    """The wall time, exit code and last line of `pgtimers apply PATH`."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pgtimers", "apply", str(path), *extra, "--dsn", dsn],
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"apply failed: {done.stderr}")
    return took, done.returncode, done.stdout.strip().splitlines()[-1]


def main() -> int:
    """Run the bench and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PGTIMERS_BENCH_DSN"))
    parser.add_argument("-n", type=int, default=1000)
    args = parser.parse_args()
    say("machine:", machine())
    source = contextlib.nullcontext(args.dsn) if args.dsn else embedded_server()
    with source as server, scratch_database(server, "pgtimers_bench_apply") as dsn:
        install_pgtimers(dsn)
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_log (i integer)")
        with tempfile.TemporaryDirectory() as tmp:
            first, second = Path(tmp, "first.toml"), Path(tmp, "second.toml")
            first.write_text(timers_file(args.n, 5), encoding="utf-8")
            second.write_text(timers_file(args.n, 6), encoding="utf-8")
            rows = []
            for label, path, extra in [
                (f"{args.n} created", first, ()),
                (f"{args.n} unchanged", first, ()),
                (f"{args.n} unchanged, --check", first, ("--check",)),
                (f"{args.n} updated", second, ()),
            ]:
                took, code, last = timed_apply(dsn, path, *extra)
                rows.append([label, f"{took:.2f} s", code, last])
            print(table(["apply of", "wall time", "exit", "said"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
