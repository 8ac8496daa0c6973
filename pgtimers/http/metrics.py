"""GET /metrics: Prometheus text format for every served database the caller may read.

Totals for alerts (`pgtimers_timer_failures_total`, `pgtimers_timer_late_seconds_max`,
runs and skips), per timer `pgtimers_timer_failures_24h{database,timer}` and
`pgtimers_timer_last_late_seconds{database,timer}` and `pgtimers_timer_paused{database,timer}`,
per database whether a runner serves it (`pgtimers_runner_up`) and whether it could be
read at all; the run-time histograms `pgtimers_run_duration_seconds` and
`pgtimers_run_lateness_seconds` (by database only: their series do not grow with the
timers), `pgtimers_deadline_missed_total`, `pgtimers_events_undelivered{database,state}`
and `pgtimers_timer_last_success_timestamp_seconds{database,timer}`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from aiohttp import web

from pgtimers.http.queries import query
from pgtimers.http.stats import DatabaseRead, read_all

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Snapshot:
    """What GET /metrics read of one database."""

    # timers.status rows (the columns of the metrics_timers query)
    timers: Sequence[Mapping[str, Any]]
    # the metrics_database row: histograms, events undelivered
    summary: Mapping[str, Any] | None = None


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + inner + "}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, value: float, labels: str = "") -> None:
        self.lines.append(f"{name}{labels} {_number(value)}")


def render(reads: Iterable[DatabaseRead]) -> str:
    """The exposition text of what the databases gave."""
    reads = list(reads)
    readable = [r for r in reads if r.readable]
    rows = [(r.name, row) for r in readable for row in r.value.timers]
    out = _Out()
    totals = (
        ("pgtimers_timer_runs_total", "runs", "Runs of all timers (scheduled, catch-up, run now)."),
        ("pgtimers_timer_failures_total", "failures", "Failed runs of all timers."),
        ("pgtimers_timer_skips_total", "skipped", "Due times of all timers that got no run."),
    )
    for name, column, help_text in totals:
        out.family(name, "counter", help_text)
        out.sample(name, sum(int(row[column]) for _, row in rows))
    out.family(
        "pgtimers_timer_late_seconds_max",
        "gauge",
        "The latest start after its due time of any run of any timer, in seconds.",
    )
    out.sample(
        "pgtimers_timer_late_seconds_max",
        max((int(row["max_late_ms"]) for _, row in rows), default=0) / 1000,
    )
    out.family(
        "pgtimers_timer_failures_24h", "gauge", "Failed runs of a timer in the last 24 hours."
    )
    for db, row in rows:
        out.sample(
            "pgtimers_timer_failures_24h",
            int(row["failures_24h"]),
            _labels(database=db, timer=row["name"]),
        )
    out.family(
        "pgtimers_timer_last_late_seconds",
        "gauge",
        "How late a timer's last run started after its due time, in seconds.",
    )
    for db, row in rows:
        out.sample(
            "pgtimers_timer_last_late_seconds",
            int(row["last_late_ms"]) / 1000,
            _labels(database=db, timer=row["name"]),
        )
    out.family("pgtimers_timer_last_failed", "gauge", "1 when a timer's last run failed, else 0.")
    for db, row in rows:
        out.sample(
            "pgtimers_timer_last_failed",
            1 if row["last_ok"] is False else 0,
            _labels(database=db, timer=row["name"]),
        )
    out.family(
        "pgtimers_timer_paused",
        "gauge",
        "1 when a timer turned itself off after pause_after failed due times in a row, else 0.",
    )
    for db, row in rows:
        out.sample(
            "pgtimers_timer_paused",
            1 if int(row.get("paused_ms") or 0) > 0 else 0,
            _labels(database=db, timer=row["name"]),
        )
    out.family("pgtimers_timers", "gauge", "Timers of a database (enabled or not).")
    for r in readable:
        out.sample("pgtimers_timers", len(r.value.timers), _labels(database=r.name))
    out.family(
        "pgtimers_runner_up", "gauge", "1 while at least one pgtimers runner serves the database."
    )
    for r in readable:
        if r.runners is not None:
            out.sample("pgtimers_runner_up", 1 if r.runners > 0 else 0, _labels(database=r.name))
    out.family("pgtimers_runners", "gauge", "pgtimers runners serving the database now.")
    for r in readable:
        if r.runners is not None:
            out.sample("pgtimers_runners", r.runners, _labels(database=r.name))
    out.family(
        "pgtimers_database_up",
        "gauge",
        "1 when the HTTP API could read the database's timers as this caller, else 0.",
    )
    for r in reads:
        out.sample("pgtimers_database_up", 1 if r.readable else 0, _labels(database=r.name))
    _runs(out, readable)
    return "\n".join(out.lines) + "\n"


def _histogram(
    out: _Out,
    name: str,
    help_text: str,
    per_db: list[tuple[str, Sequence[int], Sequence[int], int]],
) -> None:
    """A histogram family: per database (name, bounds in ms, counts per bucket, sum in ms),
    written as Prometheus' cumulative buckets in seconds."""
    out.family(name, "histogram", help_text)
    for db, bounds, counts, sum_ms in per_db:
        edges = [_number(b / 1000) for b in bounds] + ["+Inf"]
        total = 0
        for le, count in zip(edges, counts, strict=True):
            total += int(count)
            out.sample(f"{name}_bucket", total, _labels(database=db, le=le))
        out.sample(f"{name}_sum", sum_ms / 1000, _labels(database=db))
        out.sample(f"{name}_count", total, _labels(database=db))


def _runs(out: _Out, readable: list[DatabaseRead]) -> None:
    """The families of migration 0027's columns: histograms, deadlines, events, successes."""
    summaries = [(r.name, r.value.summary) for r in readable if r.value.summary is not None]
    rows = [(r.name, row) for r in readable for row in r.value.timers]
    _histogram(
        out,
        "pgtimers_run_duration_seconds",
        "How long runs of the database's timers took, in seconds.",
        [
            (db, s["duration_bounds_ms"], s["took_counts"], int(s["took_sum_ms"]))
            for db, s in summaries
        ],
    )
    _histogram(
        out,
        "pgtimers_run_lateness_seconds",
        "How late runs of the database's timers started after their due times, in seconds.",
        [
            (db, s["lateness_bounds_ms"], s["late_counts"], int(s["late_sum_ms"]))
            for db, s in summaries
        ],
    )
    out.family(
        "pgtimers_deadline_missed_total",
        "counter",
        "Due times of the database's timers with no successful commit within their deadline.",
    )
    for r in readable:
        missed = sum(int(row.get("deadline_missed") or 0) for row in r.value.timers)
        out.sample("pgtimers_deadline_missed_total", missed, _labels(database=r.name))
    out.family(
        "pgtimers_events_undelivered",
        "gauge",
        "Events a webhook target has not received: state pending (still retried) or"
        " undeliverable (given up after 24 hours of retries; kept until pruned with the"
        " history). An event counts once in each state some target has it in.",
    )
    for db, s in summaries:
        for state, column in (
            ("pending", "events_pending"),
            ("undeliverable", "events_undeliverable"),
        ):
            out.sample(
                "pgtimers_events_undelivered", int(s[column]), _labels(database=db, state=state)
            )
    out.family(
        "pgtimers_timer_last_success_timestamp_seconds",
        "gauge",
        "When a run of the timer last committed successfully, in Unix seconds"
        " (timers that have had one).",
    )
    for db, row in rows:
        if int(row.get("last_success_ms") or 0) > 0:
            out.sample(
                "pgtimers_timer_last_success_timestamp_seconds",
                int(row["last_success_ms"]) / 1000,
                _labels(database=db, timer=row["name"]),
            )


async def metrics(request: web.Request) -> web.Response:
    """GET /metrics: the exposition text of every database the caller may read."""

    async def read(pool: asyncpg.Pool) -> Snapshot:
        timers = [dict(r) for r in await pool.fetch(query("metrics_timers"))]
        summary = await pool.fetchrow(query("metrics_database"))
        return Snapshot(timers, dict(summary) if summary is not None else None)

    text = render(await read_all(request, read))
    return web.Response(body=text.encode("utf-8"), headers={"Content-Type": CONTENT_TYPE})
