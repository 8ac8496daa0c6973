"""GET /metrics, the families of issue 30: the run-time histograms by database, deadlines
missed, each timer's last success, and events a webhook target has not received.

Most tests write the timers' columns as a run would leave them (a superuser's UPDATE);
the last one has a real runner run a timer."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import psycopg
import pytest

from pgtimers.http.queries import query
from tests.conftest import Database, scalar
from tests.integration.http.conftest import Client, Served
from tests.support.runner import RunnerProcess

DURATION_LE = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10",
               "60", "300", "+Inf"]  # fmt: skip
LATENESS_LE = ["0.01", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "300",
               "3600", "+Inf"]  # fmt: skip
FAMILIES = {
    "pgtimers_run_duration_seconds": "histogram",
    "pgtimers_run_lateness_seconds": "histogram",
    "pgtimers_deadline_missed_total": "counter",
    "pgtimers_timer_last_success_timestamp_seconds": "gauge",
    "pgtimers_events_undelivered": "gauge",
}
# what the runner's recording leaves in a timer's row (migration 0027's columns)
RESULTS = """
    UPDATE timers.timers SET took_counts = %(took)s, took_sum_ms = %(took_sum)s,
           late_counts = %(late)s, late_sum_ms = %(late_sum)s,
           deadline_missed = %(missed)s, last_success_at = %(success)s
     WHERE name = %(name)s
"""


def recorded(
    conn: psycopg.Connection,
    name: str,
    *,
    took: dict[int, int] | None = None,
    late: dict[int, int] | None = None,
    took_sum: int = 0,
    late_sum: int = 0,
    missed: int = 0,
    success: str | None = None,
) -> None:
    """Sets a timer's histograms (bucket index from 0: count), deadlines missed and success."""

    def counts(spread: dict[int, int] | None) -> list[int]:
        return [(spread or {}).get(i, 0) for i in range(14)]

    conn.execute(
        RESULTS,
        {
            "name": name, "took": counts(took), "late": counts(late), "took_sum": took_sum,
            "late_sum": late_sum, "missed": missed, "success": success,
        },
    )  # fmt: skip


def samples(text: str) -> dict[str, float]:
    """{'name{labels}': value} of every sample line."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            found[key] = float(value)
    return found


def histogram(found: dict[str, float], name: str, database: str) -> dict[str, float]:
    """{le: cumulative count} of one database's histogram, in the order of the text."""
    pattern = re.compile(rf'{name}_bucket\{{database="{re.escape(database)}",le="([^"]+)"\}}')
    return {m.group(1): v for k, v in found.items() if (m := pattern.fullmatch(k))}


@pytest.fixture
def two(db: Database, db2: Database, serve: Callable[..., Served]) -> Client:
    with db.connect() as a, db2.connect() as b:
        for name in ("alpha", "beta", "never"):
            a.execute("SELECT timers.save(%s, 'hourly', 'SELECT 1')", [name])
        b.execute("SELECT timers.save('delta', 'hourly', 'SELECT 1')")
        # alpha: 1 run of <= 5 ms, 2 of <= 25 ms, 3 over 5 min; beta: 4 of <= 10 ms
        recorded(a, "alpha", took={0: 1, 2: 2, 13: 3}, took_sum=1_000_045,
                 late={0: 5, 9: 1}, late_sum=20_012, missed=2,
                 success="2026-01-02 03:04:05.5+00")  # fmt: skip
        recorded(a, "beta", took={1: 4}, took_sum=36, late={13: 4}, late_sum=40_000_000,
                 missed=3, success="2026-02-01 00:00:00+00")  # fmt: skip
        recorded(b, "delta", missed=7)
    return Client(serve([db.dsn, db2.dsn]).port).as_token()


def test_each_family_has_help_and_type(two: Client) -> None:
    text = two.get("/metrics").text
    for name, kind in FAMILIES.items():
        assert re.search(rf"^# HELP {name} \S.*\n# TYPE {name} {kind}$", text, re.M), name
    for line in text.splitlines():
        assert line.startswith("#") or re.fullmatch(r"[a-z_0-9]+(\{[^}]*\})? [0-9.e+-]+", line)


def test_duration_histogram_sums_the_timers_of_a_database(
    two: Client, db: Database, db2: Database
) -> None:
    found = samples(two.get("/metrics").text)
    name = "pgtimers_run_duration_seconds"
    buckets = histogram(found, name, db.name)
    assert list(buckets) == DURATION_LE
    # per bucket 1, 4, 2, 0 ... 0, 3: cumulative
    assert list(buckets.values()) == [1, 5, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 10]
    assert found[f'{name}_count{{database="{db.name}"}}'] == 10
    assert found[f'{name}_sum{{database="{db.name}"}}'] == 1000.081
    # a database whose timers never ran: every series there, all 0
    assert list(histogram(found, name, db2.name).values()) == [0] * 14
    assert found[f'{name}_count{{database="{db2.name}"}}'] == 0
    assert found[f'{name}_sum{{database="{db2.name}"}}'] == 0


def test_lateness_histogram(two: Client, db: Database) -> None:
    found = samples(two.get("/metrics").text)
    name = "pgtimers_run_lateness_seconds"
    buckets = histogram(found, name, db.name)
    assert list(buckets) == LATENESS_LE
    assert list(buckets.values()) == [5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 10]
    assert found[f'{name}_count{{database="{db.name}"}}'] == 10
    assert found[f'{name}_sum{{database="{db.name}"}}'] == 40_020.012


def test_histograms_are_cumulative_and_end_at_their_count(
    two: Client, db: Database, db2: Database
) -> None:
    found = samples(two.get("/metrics").text)
    for name in ("pgtimers_run_duration_seconds", "pgtimers_run_lateness_seconds"):
        for database in (db.name, db2.name):
            counts = list(histogram(found, name, database).values())
            assert counts == sorted(counts), (name, database)
            assert counts[-1] == found[f'{name}_count{{database="{database}"}}']
            bounds = [float(le) for le in list(histogram(found, name, database))[:-1]]
            assert bounds == sorted(bounds) and len(set(bounds)) == 13


def test_the_bounds_are_the_sql_ones(two: Client, conn: psycopg.Connection) -> None:
    ms = scalar(conn, "SELECT timers._duration_buckets()")
    assert [float(le) for le in DURATION_LE[:-1]] == [b / 1000 for b in ms]
    ms = scalar(conn, "SELECT timers._lateness_buckets()")
    assert [float(le) for le in LATENESS_LE[:-1]] == [b / 1000 for b in ms]


def test_deadline_missed_total_by_database(two: Client, db: Database, db2: Database) -> None:
    found = samples(two.get("/metrics").text)
    assert found[f'pgtimers_deadline_missed_total{{database="{db.name}"}}'] == 5
    assert found[f'pgtimers_deadline_missed_total{{database="{db2.name}"}}'] == 7


def test_last_success_only_of_timers_that_had_one(two: Client, db: Database) -> None:
    found = samples(two.get("/metrics").text)
    name = "pgtimers_timer_last_success_timestamp_seconds"
    assert found[f'{name}{{database="{db.name}",timer="alpha"}}'] == 1767323045.5
    assert found[f'{name}{{database="{db.name}",timer="beta"}}'] == 1769904000
    assert [k for k in found if k.startswith(name)] == [
        f'{name}{{database="{db.name}",timer="alpha"}}',
        f'{name}{{database="{db.name}",timer="beta"}}',
    ]


def test_events_undelivered_by_state(two: Client, db: Database, db2: Database) -> None:
    with db.connect() as conn:
        ids = [
            scalar(conn, "INSERT INTO timers.events (event, timer) VALUES ('failed', 'alpha')"
                         " RETURNING id")
            for _ in range(4)
        ]  # fmt: skip
        # (event, target, delivered, given up): 1 waits for two targets, 2 was delivered,
        # 3 was given up, 4 waits for one target and was given up by the other
        for event, target, delivered, given_up in (
            (0, "a", False, False), (0, "b", False, False), (1, "a", True, False),
            (2, "a", False, True), (3, "a", False, False), (3, "b", False, True),
        ):  # fmt: skip
            conn.execute(
                "INSERT INTO timers.event_deliveries (event_id, target, delivery_id,"
                " delivered_at, given_up_at) VALUES (%s, %s, gen_random_uuid(),"
                " CASE WHEN %s THEN now() END, CASE WHEN %s THEN now() END)",
                [ids[event], target, delivered, given_up],
            )
    found = samples(two.get("/metrics").text)
    name = "pgtimers_events_undelivered"
    assert found[f'{name}{{database="{db.name}",state="pending"}}'] == 2
    assert found[f'{name}{{database="{db.name}",state="undeliverable"}}'] == 2
    assert found[f'{name}{{database="{db2.name}",state="pending"}}'] == 0
    assert found[f'{name}{{database="{db2.name}",state="undeliverable"}}'] == 0


def test_the_reader_role_reads_them(two: Client, db: Database) -> None:
    with db.connect("pgtimers_reader") as reader:
        # not the tables: the views of sql/code/23_metrics.sql
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("SELECT last_success_at FROM timers.timers")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("SELECT count(*) FROM timers.event_deliveries")
        rows = reader.execute(
            "SELECT name, took_counts, took_sum_ms, late_sum_ms FROM timers.metrics ORDER BY name"
        ).fetchall()
        assert rows == [
            ("alpha", [1, 0, 2] + [0] * 10 + [3], 1_000_045, 20_012),
            ("beta", [0, 4] + [0] * 12, 36, 40_000_000),
            ("never", [0] * 14, 0, 0),
        ]
        undelivered = reader.execute("SELECT * FROM timers.events_undelivered").fetchall()
        assert undelivered == [("pending", 0), ("undeliverable", 0)]
        # the query GET /metrics runs, as the reader
        summary = reader.execute(query("metrics_database")).fetchone()
        assert summary is not None and summary[1] == [1, 4, 2] + [0] * 10 + [3]


def test_a_reader_over_http_sees_them(
    basic: bool, two: Client, db: Database, db2: Database
) -> None:
    found = samples(Client(two.port).as_basic("pgt_http_reader").get("/metrics").text)
    assert found[f'pgtimers_deadline_missed_total{{database="{db.name}"}}'] == 5
    assert found[f'pgtimers_run_duration_seconds_count{{database="{db.name}"}}'] == 10


def test_a_real_run_counts(api: Client, runner: RunnerProcess, db: Database) -> None:
    """A runner's runs show in the histograms and the last success, end to end."""
    before = time.time()
    saved = api.post(
        "/api/timers", {"name": "tick", "schedule": "every 1s", "sql": "SELECT pg_sleep(0.03)"}
    )
    assert saved.status == 200, saved.text
    name = "pgtimers_run_duration_seconds"
    deadline = time.monotonic() + 20
    while True:
        found = samples(api.get("/metrics").text)
        if found[f'{name}_count{{database="{db.name}"}}'] >= 2:
            break
        assert time.monotonic() < deadline, "no run counted in 20 s"
        time.sleep(0.2)
    buckets = histogram(found, name, db.name)
    # 30 ms of sleep: never in the buckets up to 25 ms
    assert buckets["0.025"] == 0 and buckets["+Inf"] >= 2
    assert found[f'{name}_sum{{database="{db.name}"}}'] >= 0.03 * buckets["+Inf"]
    assert found[f'pgtimers_run_lateness_seconds_count{{database="{db.name}"}}'] >= 2
    success = found[
        f'pgtimers_timer_last_success_timestamp_seconds{{database="{db.name}",timer="tick"}}'
    ]
    assert before - 1 <= success <= time.time() + 1
