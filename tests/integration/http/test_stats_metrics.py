"""GET /api/stats (the Monitor: every database the caller may read, trouble first)
and GET /metrics (Prometheus text)."""

from __future__ import annotations

import re
from collections.abc import Callable

import psycopg
import pytest
from psycopg import sql

from tests.conftest import Database
from tests.integration.http.conftest import Client, Served

# A timer's results as a runner would leave them (a superuser writes them here).
FAKE_RESULTS = """
    UPDATE timers.timers SET last_ok = %(ok)s, last_error = %(error)s, runs = %(runs)s,
           failures = %(failures)s, skipped = %(skipped)s, last_late_ms = %(late)s,
           max_late_ms = %(late)s * 2, last_run_at = now()
     WHERE name = %(name)s
"""


def fake(
    conn: psycopg.Connection,
    name: str,
    *,
    ok: bool,
    error: str = "",
    runs: int = 1,
    failures: int = 0,
    skipped: int = 0,
    late: int = 0,
    failed_24h: int = 0,
) -> None:
    values = {"name": name, "ok": ok, "error": error, "runs": runs}
    conn.execute(FAKE_RESULTS, {**values, "failures": failures, "skipped": skipped, "late": late})
    for _ in range(failed_24h):
        conn.execute(
            "INSERT INTO timers.runs (timer_id, timer, kind, ok, error)"
            " SELECT id, name, 'scheduled', false, %s FROM timers.timers WHERE name = %s",
            [error, name],
        )


@pytest.fixture
def two(db: Database, db2: Database, serve: Callable[..., Served]) -> Client:
    with db.connect() as a, db2.connect() as b:
        for name in ("alpha", "beta", "gamma"):
            a.execute("SELECT timers.save(%s, 'hourly', 'SELECT 1')", [name])
        b.execute("SELECT timers.save('delta', 'hourly', 'SELECT 1')")
        b.execute("SELECT timers.save('epsilon', 'hourly', 'SELECT 1')")
        fake(a, "alpha", ok=True, runs=10, late=100)
        fake(a, "beta", ok=False, error="boom", runs=4, failures=2, failed_24h=2, late=6000)
        fake(b, "delta", ok=False, error="bang", runs=3, failures=3, failed_24h=3, skipped=2)
        fake(b, "epsilon", ok=True, runs=1, late=7000)
        # what pause_after leaves behind (timers._pause)
        b.execute(
            "UPDATE timers.timers SET enabled = false, next_due_at = NULL, paused_at = now()"
            " WHERE name = 'delta'"
        )
    return Client(serve([db.dsn, db2.dsn]).port).as_token()


def test_stats_trouble_first_across_databases(two: Client, db: Database, db2: Database) -> None:
    resp = two.get("/api/stats")
    assert resp.status == 200
    body = resp.json()
    assert list(body) == ["now_ms", "timers", "databases"]
    order = [(t["database"], t["name"]) for t in body["timers"]]
    assert order == [
        (db2.name, "delta"),  # failed last, 3 failures in 24 h
        (db.name, "beta"),  # failed last, 2 failures in 24 h
        (db2.name, "epsilon"),  # late
        (db.name, "alpha"),
        (db.name, "gamma"),
    ]
    first = body["timers"][0]
    assert first["trouble"].startswith("last run failed; 3 failed in 24 h")
    assert first["last_error"] == "bang" and first["failures_24h"] == 3
    assert body["timers"][3]["trouble"] == ""
    assert body["databases"] == [
        {"name": db.name, "readable": True, "timers": 3, "runners": 0, "error": ""},
        {"name": db2.name, "readable": True, "timers": 2, "runners": 0, "error": ""},
    ]


def test_stats_leaves_out_what_the_caller_may_not_read(
    basic: bool, db: Database, db2: Database, serve: Callable[..., Served]
) -> None:
    with db.connect() as a:
        a.execute("SELECT timers.save('mine', 'hourly', 'SELECT 1')")
        revoke = sql.SQL("REVOKE CONNECT ON DATABASE {} FROM PUBLIC")
        a.execute(revoke.format(sql.Identifier(db2.name)))
    client = Client(serve([db.dsn, db2.dsn]).port)
    body = client.as_basic("pgt_http_reader").get("/api/stats").json()
    assert [t["name"] for t in body["timers"]] == ["mine"]
    assert body["databases"][1]["readable"] is False
    assert "permission denied for database" in body["databases"][1]["error"]
    assert client.as_basic("pgt_http_reader", "wrong").get("/api/stats").status == 401
    assert client.get("/api/stats").status == 401


def _samples(text: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            found[key] = float(value)
    return found


def test_metrics(two: Client, db: Database, db2: Database) -> None:
    resp = two.get("/metrics")
    assert resp.status == 200
    assert resp.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = resp.text
    for family in (
        "pgtimers_timer_failures_total counter",
        "pgtimers_timer_late_seconds_max gauge",
        "pgtimers_timer_failures_24h gauge",
        "pgtimers_timer_last_late_seconds gauge",
        "pgtimers_timer_runs_total counter",
        "pgtimers_timer_skips_total counter",
        "pgtimers_runner_up gauge",
        "pgtimers_timer_paused gauge",
    ):
        assert f"# TYPE {family}\n" in text
    samples = _samples(text)
    assert samples["pgtimers_timer_failures_total"] == 5
    assert samples["pgtimers_timer_runs_total"] == 18
    assert samples["pgtimers_timer_skips_total"] == 2
    assert samples["pgtimers_timer_late_seconds_max"] == 14.0
    assert samples[f'pgtimers_timer_failures_24h{{database="{db2.name}",timer="delta"}}'] == 3
    assert samples[f'pgtimers_timer_failures_24h{{database="{db.name}",timer="alpha"}}'] == 0
    assert samples[f'pgtimers_timer_last_late_seconds{{database="{db.name}",timer="beta"}}'] == 6.0
    assert samples[f'pgtimers_timer_last_late_seconds{{database="{db.name}",timer="alpha"}}'] == 0.1
    assert samples[f'pgtimers_timer_paused{{database="{db2.name}",timer="delta"}}'] == 1
    assert samples[f'pgtimers_timer_paused{{database="{db2.name}",timer="epsilon"}}'] == 0
    assert samples[f'pgtimers_runner_up{{database="{db.name}"}}'] == 0
    assert samples[f'pgtimers_database_up{{database="{db2.name}"}}'] == 1
    # every sample line is name{labels} value
    for line in text.splitlines():
        assert line.startswith("#") or re.fullmatch(r"[a-z_0-9]+(\{[^}]*\})? [0-9.e+-]+", line)


def test_metrics_runner_up(api: Client, runner: object, db: Database) -> None:
    samples = _samples(api.get("/metrics").text)
    assert samples[f'pgtimers_runner_up{{database="{db.name}"}}'] == 1
    assert samples[f'pgtimers_runners{{database="{db.name}"}}'] == 1


def test_metrics_label_escaping() -> None:
    from pgtimers.http.metrics import Snapshot, render
    from pgtimers.http.stats import DatabaseRead

    row = {
        "name": 'we"ird\\x', "runs": 1, "failures": 0, "failures_24h": 0, "skipped": 0,
        "last_late_ms": 1500, "max_late_ms": 1500, "last_ok": None, "running": False,
    }  # fmt: skip
    text = render([DatabaseRead("d\nb", Snapshot([row]), 1)])
    assert 'pgtimers_timer_last_late_seconds{database="d\\nb",timer="we\\"ird\\\\x"} 1.5' in text


def test_metrics_needs_credentials(db: Database, serve: Callable[..., Served]) -> None:
    assert Client(serve([db.dsn]).port).get("/metrics").status == 401
