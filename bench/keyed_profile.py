"""Where a keyed fire's server time goes: self and total time per fire of each function.

    .venv/bin/python bench/keyed_profile.py postgresql://postgres@localhost/postgres [-n 2000]

Needs a superuser DSN of a server on this machine (track_functions, pg_stat_reset). It
makes a scratch database `pgtimers_bench_keyed_profile`, arms N keyed timers on test clock
`year` as bench/keyed_bench.py does (365 owed times), resets the counters, starts a runner
and advances the clock over the year, then prints pg_stat_user_functions per fire. The
tracking adds its own time: read the shares, not the sum.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import keyed_bench as kb
import psycopg
from _common import RunnerProc, scratch_database, table
from psycopg import sql

from pgtimers.schema.install import install

PROFILE = """
SELECT funcname, calls, round((self_time * 1000 / %(n)s)::numeric),
       round((total_time * 1000 / %(n)s)::numeric)
  FROM pg_stat_user_functions
 ORDER BY self_time DESC
 LIMIT 30
"""


def main() -> int:
    """Arm, advance with a runner, print the profile."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("dsn", help="a superuser DSN of the server (any database)")
    ap.add_argument("-n", type=int, default=2000, help="keyed timers (2000)")
    args = ap.parse_args()
    with (
        scratch_database(args.dsn, "pgtimers_bench_keyed_profile") as dsn,
        TemporaryDirectory() as logs,
    ):
        install(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(kb.LOG_TABLE)
            conn.execute("SELECT timers.create_test_clock('year', %s)", [kb.T0])
            kb.arm_timers(conn, args.n, 1000, "acct_", "year", 9, kb.DAYS)
            conn.execute("VACUUM ANALYZE timers.keyed_timers")
            alter = "ALTER DATABASE {} SET track_functions = 'all'"
            conn.execute(sql.SQL(alter).format(sql.Identifier(conn.info.dbname)))
            time.sleep(1.2)  # the arm's counters are sent, then reset
            conn.execute("SELECT pg_stat_reset()")
            runner = RunnerProc(dsn, Path(logs) / "runner.log", None).start(wait=True)
            began = time.perf_counter()
            conn.execute("CALL timers.advance_test_clock('year', %s)", [kb.YEAR_END])
            took = time.perf_counter() - began
            runner.stop()
            time.sleep(1.5)  # the sessions' counters are sent
            rows = conn.execute(PROFILE, {"n": args.n}).fetchall()
    print(f"{args.n:,} keyed fires in {took:.2f} s: {args.n / took:,.0f}/s")
    print(table(["function", "calls", "self µs/fire", "total µs/fire"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
