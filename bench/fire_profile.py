"""Where a fire's server time goes: self time per fire of each pgtimers function.

    .venv/bin/python bench/fire_profile.py postgresql://postgres@localhost/scratch

Needs a scratch database with pgtimers installed and a superuser (for track_functions
and pg_stat_reset), on this machine (the backend's CPU time is read from /proc). It saves
N timers whose SQL is a one-row INSERT and makes them all due. First they are fired as the
runner fires them, by CALL timers._fire_many (200 per call, each fire its own transaction,
tracking off): the server CPU per fire of that backend. Then they are made due again and
fired by timers._fire from one session until nothing is due (each fire its own
transaction), with track_functions = all; then pg_stat_user_functions' self and total time
per fire are printed. The tracking itself adds some time; read the shares, not the sum.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import psycopg

SAVE = """
SELECT count(*) FROM timers.save_many((
  SELECT jsonb_agg(jsonb_build_object(
           'name', 'prof_' || i, 'schedule', 'every 1h',
           'sql', 'INSERT INTO public.fire_profile_sink (v) VALUES (''x'')'))
    FROM generate_series(1, %s) AS i))
"""
PROFILE = """
SELECT schemaname || '.' || funcname, calls,
       round((self_time / %(n)s * 1000)::numeric, 1),
       round((total_time / %(n)s * 1000)::numeric, 1)
  FROM pg_stat_user_functions
 ORDER BY self_time DESC
 LIMIT 20
"""


FIRE_MANY = "CALL timers._fire_many('prof', '{}', '{}', false, 600000, 200, 60000)"


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process pid so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fire_many_cpu(conn: psycopg.Connection[Any], n: int) -> tuple[int, float, float]:
    """Fire what is due as the runner does; (fired, server CPU ms per fire, wall ms per fire)."""
    pid = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
    cpu0, began, fired = _cpu_s(pid), time.perf_counter(), 0
    while fired < n:
        row = conn.execute(FIRE_MANY).fetchone()
        done = int(row[0]["fired"]) if row and row[0] else 0
        if done == 0:
            break
        fired += done
    cpu, wall = _cpu_s(pid) - cpu0, time.perf_counter() - began
    return fired, cpu / max(fired, 1) * 1000, wall / max(fired, 1) * 1000


def main() -> None:
    """Fire N due timers from one session and print the time per function."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dsn")
    parser.add_argument("-n", type=int, default=3000, help="timers to fire (3000)")
    args = parser.parse_args()
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.fire_profile_sink (v text)")
        conn.execute(SAVE, [args.n])
        conn.execute("UPDATE timers.timers SET next_due_at = now() - interval '1 ms'")
        conn.execute("VACUUM ANALYZE timers.timers")
        fired, cpu_ms, wall_ms = _fire_many_cpu(conn, args.n)
        print(
            f"{fired} fires by _fire_many: server CPU {cpu_ms:.3f} ms each, wall {wall_ms:.3f} ms"
        )
        conn.execute("UPDATE timers.timers SET next_due_at = now() - interval '1 ms'")
        conn.execute("VACUUM ANALYZE timers.timers")
        conn.execute("SELECT pg_stat_reset()")
        conn.execute("SET track_functions = 'all'")
        began, fired = time.perf_counter(), 0
        fire = "SELECT timers._fire('prof', '{}', '{}', false, 600000)"
        while fired <= args.n:
            row = conn.execute(fire).fetchone()
            if row is None or row[0] is None:  # nothing was due
                break
            fired += 1
        took = time.perf_counter() - began
        conn.execute("SET track_functions = 'none'")
        time.sleep(2)  # a backend reports its function counters when idle for a second
        conn.execute("SELECT 1")
    time.sleep(1.5)
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        print(f"{fired} fires in {took:.2f} s: {took / max(fired, 1) * 1000:.3f} ms each")
        print(f"{'function':40} {'calls':>7} {'self µs/fire':>13} {'total µs/fire':>14}")
        for name, calls, self_us, total_us in conn.execute(PROFILE, {"n": max(fired, 1)}):
            print(f"{name:40} {calls:>7} {self_us!s:>13} {total_us!s:>14}")
        conn.execute("DROP TABLE public.fire_profile_sink")


if __name__ == "__main__":
    main()
