"""Webhooks ([[notify]]): the runner POSTs the outbox's events to a real local receiver,
at least once, signed, with a delivery_id that stays the same, and retries with backoff."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.conftest import Database
from tests.integration.runner.conftest import save
from tests.integration.runner.receiver import Receiver
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

StartRunner = Callable[..., RunnerProcess]
# quick rounds and a short lease, so that the tests wait seconds, not minutes
FAST = {"PGTIMERS_DELIVERY_POLL": "1", "PGTIMERS_DELIVERY_LEASE": "12"}


Answer = Callable[[int], tuple[int, float]]


@pytest.fixture
def answering() -> Iterator[Callable[[Answer], Receiver]]:
    """Start a receiver that answers the n-th POST (from 0) with answer(n): (status, delay)."""
    started: list[Receiver] = []

    def start(answer: Answer) -> Receiver:
        receiver = Receiver(answer)
        receiver.start()
        started.append(receiver)
        return receiver

    yield start
    for receiver in started:
        receiver.stop()


@pytest.fixture
def receiver(answering: Callable[[Answer], Receiver]) -> Receiver:
    return answering(lambda n: (200, 0.0))


def write_config(tmp_path: Path, db: Database, *sections: dict[str, Any]) -> str:
    """A runner config serving the test database with these [[notify]] sections."""
    lines = [f"dsn = {json.dumps(db.dsn)}"]
    for section in sections:
        lines.append("[[notify]]")
        lines.extend(f"{k} = {json.dumps(v)}" for k, v in section.items())
    path = tmp_path / "pgtimers.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def add_event(conn: psycopg.Connection, event: str = "failed", timer: str = "t", **kw: Any) -> int:
    """An event in the outbox, as timers._event writes it, and its NOTIFY."""
    row = conn.execute(
        "INSERT INTO timers.events (event, timer, due_at, attempt, error, sqlstate, detail)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
        [
            event,
            timer,
            kw.get("due_at"),
            kw.get("attempt", 1),
            kw.get("error", "boom"),
            kw.get("sqlstate", "P0001"),
            json.dumps(kw.get("detail", {})),
        ],
    ).fetchone()
    assert row is not None
    conn.execute("NOTIFY pgtimers_events")
    return int(row[0])


def deliveries(conn: psycopg.Connection) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM timers.deliveries ORDER BY event_id, target").fetchall()


def attempted(conn: psycopg.Connection, times: int) -> Callable[[], bool]:
    def check() -> bool:
        rows = deliveries(conn)
        return bool(rows) and rows[0]["attempts"] >= times

    return check


def delivered(conn: psycopg.Connection, count: int) -> Callable[[], bool]:
    def check() -> bool:
        rows = deliveries(conn)
        return len(rows) >= count and all(r["state"] == "delivered" for r in rows)

    return check


def test_a_failed_run_is_delivered_signed(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    cfg = write_config(tmp_path, db, {"url": receiver.url, "secret": "s3cret"})
    start_runner("--config", cfg, env=FAST)
    save(conn, "boom", "every 1h", "SELECT 1/0")
    conn.execute("UPDATE timers.timers SET next_due_at = now() WHERE name = 'boom'")
    conn.execute("NOTIFY pgtimers")
    wait_until(delivered(conn, 1), 20, "the failed event delivered")
    [got] = receiver.received
    assert got.headers["Content-Type"] == "application/json"
    expected = hmac.new(b"s3cret", got.body, hashlib.sha256).hexdigest()
    assert got.headers["X-Pgtimers-Signature"] == f"sha256={expected}"
    body = got.json
    [row] = deliveries(conn)
    assert body["delivery_id"] == str(row["delivery_id"])
    assert (body["event"], body["timer"], body["database"]) == ("failed", "boom", db.name)
    assert body["error"] == "division by zero" and body["sqlstate"] == "22012"
    assert body["event_id"] == row["event_id"] and body["attempt"] == 1
    assert body["due_at"].endswith("Z") and body["at"].endswith("Z")
    assert body["url"] is None  # no --http: no console to link to
    assert (row["state"], row["attempts"], row["last_status"]) == ("delivered", 1, 200)


def test_slack_format_reads_well_and_links_the_console(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    cfg = write_config(tmp_path, db, {"url": receiver.url, "format": "slack"})
    start_runner("--config", cfg, "--http", "127.0.0.1:0", "--http-anonymous", env=FAST)
    add_event(
        conn, "failed", "nightly_totals", due_at="2026-12-06 16:00Z", attempt=2, error="a <b> & c"
    )
    wait_until(delivered(conn, 1), 20, "the slack message")
    body = receiver.received[0].json
    text = body["text"]
    assert text.startswith(
        f":x: *nightly_totals* failed (database {db.name}, due 2026-12-06 16:00 UTC, attempt 2):"
        " a &lt;b&gt; &amp; c <http://127.0.0.1:"
    ), text
    assert f"/#/timer/nightly_totals?db={db.name}|open in the console>" in text
    assert body["delivery_id"] == str(deliveries(conn)[0]["delivery_id"])
    assert "X-Pgtimers-Signature" not in receiver.received[0].headers  # no secret


def test_events_and_timers_filters(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,
    tmp_path: Path,
) -> None:
    everything, failures, nightly = (Receiver() for _ in range(3))
    for r in (everything, failures, nightly):
        r.start()
    try:
        cfg = write_config(
            tmp_path,
            db,
            {"url": everything.url},
            {"url": failures.url, "events": ["failed", "retry_given_up"]},
            {"url": nightly.url, "timers": "nightly_*"},
        )
        start_runner("--config", cfg, env=FAST)
        sent = [
            ("failed", "nightly_a"),
            ("paused", "nightly_b"),
            ("retry_given_up", "hourly"),
            ("skipped", "nightlyx"),
            ("recovered", "nightly_c"),
        ]
        for event, timer in sent:
            add_event(conn, event, timer)
        wait_until(delivered(conn, 5 + 2 + 3), 20, "every delivery")

        def seen(r: Receiver) -> list[tuple[str, str]]:
            return sorted((b["event"], b["timer"]) for b in r.bodies())

        assert seen(everything) == sorted(sent)
        assert seen(failures) == [("failed", "nightly_a"), ("retry_given_up", "hourly")]
        assert seen(nightly) == [
            ("failed", "nightly_a"),
            ("paused", "nightly_b"),
            ("recovered", "nightly_c"),
        ]
    finally:
        for r in (everything, failures, nightly):
            r.stop()


def test_a_receiver_down_then_up_gets_it_once_back(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    cfg = write_config(tmp_path, db, {"url": receiver.url})
    receiver.stop()
    runner = start_runner("--config", cfg, env=FAST)
    add_event(conn, "failed", "t")

    def failures() -> list[str]:
        return [ln for ln in runner.log().splitlines() if "event=delivery_failed" in ln]

    lines = wait_until(lambda: len(failures()) >= 2 and failures(), 20, "two failed attempts")
    assert "kind=failed" in lines[0] and "retry_at=" in lines[0]
    row = deliveries(conn)[0]
    assert row["state"] == "retrying" and row["last_status"] is None
    assert "Connect" in row["last_error"], row["last_error"]
    receiver.start()  # the same port
    wait_until(delivered(conn, 1), 30, "delivered once the receiver is back")
    assert len(receiver.received) == 1
    assert receiver.bodies()[0]["delivery_id"] == str(row["delivery_id"])


def test_500_then_200_is_delivered_with_its_attempts_counted(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,
    tmp_path: Path,
    answering: Callable[[Answer], Receiver],
) -> None:
    receiver = answering(lambda n: (500, 0.0) if n < 2 else (200, 0.0))
    cfg = write_config(tmp_path, db, {"url": receiver.url})
    start_runner("--config", cfg, env=FAST)
    add_event(conn)
    wait_until(delivered(conn, 1), 30, "delivered after two 500s")
    [row] = deliveries(conn)
    assert (row["attempts"], row["last_status"]) == (3, 200)
    ids = {b["delivery_id"] for b in receiver.bodies()}
    assert ids == {str(row["delivery_id"])} and len(receiver.received) == 3
    # the backoff doubles: 2 s, then 4 s
    gaps = [b.at - a.at for a, b in zip(receiver.received, receiver.received[1:], strict=False)]
    assert 1.8 <= gaps[0] < 3.5 and 3.8 <= gaps[1] < 6, gaps


def test_a_200_twice_for_a_redelivery_keeps_the_delivery_id(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,
    tmp_path: Path,
    answering: Callable[[Answer], Receiver],
) -> None:
    """The receiver takes each event the first time but answers after the runner's 10 s:
    each comes again, with the same delivery_id; none lost, none made up."""
    receiver = answering(lambda n: (200, 10.5) if n < 3 else (200, 0.0))
    cfg = write_config(tmp_path, db, {"url": receiver.url})
    start_runner("--config", cfg, env=FAST)
    ids = [add_event(conn, "failed", f"t{i}") for i in range(3)]
    wait_until(delivered(conn, 3), 40, "all three delivered")
    rows = deliveries(conn)
    assert [r["event_id"] for r in rows] == ids
    assert [r["attempts"] for r in rows] == [2, 2, 2], rows
    got = [b["delivery_id"] for b in receiver.bodies()]
    assert sorted(got) == sorted(2 * [str(r["delivery_id"]) for r in rows])
    assert len({str(r["delivery_id"]) for r in rows}) == 3


def test_two_runners_deliver_each_event_exactly_once(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    cfg = write_config(tmp_path, db, {"url": receiver.url})
    start_runner("--config", cfg, env=FAST)
    start_runner("--config", cfg, env=FAST)
    ids = [add_event(conn, "failed", f"t{i % 7}") for i in range(60)]
    wait_until(delivered(conn, 60), 40, "sixty deliveries")
    got = sorted(b["event_id"] for b in receiver.bodies())
    assert got == ids
    runners = conn.execute(
        "SELECT count(DISTINCT leased_by) FROM timers.event_deliveries"
    ).fetchone()
    assert runners is not None and runners[0] >= 1


def test_a_runner_killed_during_a_post_leaves_it_to_another(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,
    tmp_path: Path,
    answering: Callable[[Answer], Receiver],
) -> None:
    receiver = answering(lambda n: (200, 20.0) if n == 0 else (200, 0.0))
    cfg = write_config(tmp_path, db, {"url": receiver.url})
    first = start_runner("--config", cfg, env=FAST)
    add_event(conn)
    wait_until(lambda: len(receiver.received) == 1, 20, "the first POST")
    first.kill()  # SIGKILL in the middle of the POST
    [row] = deliveries(conn)
    assert row["state"] == "retrying" and row["attempts"] == 1
    start_runner("--config", cfg, env=FAST)
    wait_until(delivered(conn, 1), 30, "delivered by the other runner")
    a, b = receiver.received
    assert b.at - a.at >= 10  # after the lease (12 s) of the killed runner
    assert a.json["delivery_id"] == b.json["delivery_id"]
    assert deliveries(conn)[0]["attempts"] == 2


def test_given_up_24_hours_after_the_event(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,
    tmp_path: Path,
    answering: Callable[[Answer], Receiver],
) -> None:
    receiver = answering(lambda n: (500, 0.0))
    cfg = write_config(tmp_path, db, {"url": receiver.url})
    runner = start_runner("--config", cfg, env=FAST)
    event_id = add_event(conn)
    wait_until(attempted(conn, 1), 20, "a first attempt")
    # the event is a day old now: its next failure is its last
    conn.execute("UPDATE timers.events SET at = at - interval '24 hours' WHERE id = %s", [event_id])
    wait_until(lambda: deliveries(conn)[0]["state"] == "undeliverable", 20, "given up")
    [row] = deliveries(conn)
    assert row["last_error"].startswith("HTTP 500") and row["last_status"] == 500
    assert row["next_at"] is None and row["given_up_at"] is not None
    attempts = len(receiver.received)
    assert [ln for ln in runner.log().splitlines() if "event=delivery_given_up" in ln]
    time.sleep(3)
    assert len(receiver.received) == attempts  # no more tries


def test_a_slow_receiver_times_out_at_10s_and_timers_fire_on_time(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,
    tmp_path: Path,
    answering: Callable[[Answer], Receiver],
) -> None:
    receiver = answering(lambda n: (200, 30.0) if n == 0 else (200, 0.0))
    cfg = write_config(tmp_path, db, {"url": receiver.url})
    start_runner("--config", cfg, env=FAST)
    save(conn, "tick", "every 1s", "SELECT 1")

    def late_ms(since: float, until: float) -> list[int]:
        rows = conn.execute(
            "SELECT late_ms FROM timers.runs WHERE timer = 'tick' AND started_at"
            " BETWEEN to_timestamp(%s) AND to_timestamp(%s)",
            [since, until],
        ).fetchall()
        return [int(r[0]) for r in rows]

    def now() -> float:
        row = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
        assert row is not None
        return float(row[0])

    time.sleep(2)
    start = now()
    time.sleep(6)
    baseline = late_ms(start, now())
    add_event(conn)
    wait_until(lambda: len(receiver.received) == 1, 10, "the slow POST")
    slow_from = now()
    wait_until(lambda: len(receiver.received) == 2, 20, "the POST again after 10 s")
    during = late_ms(slow_from, now())
    wait_until(delivered(conn, 1), 10, "delivered")
    a, b = receiver.received
    assert 10 <= b.at - a.at < 15  # cut off at 10 s, tried again 2 s later
    [row] = deliveries(conn)
    assert row["attempts"] == 2 and row["last_error"] == "no answer within 10s"
    assert len(during) >= 9, during  # a run every second while the POST hung
    assert max(during) <= max(baseline) + 250, (baseline, during)


def test_the_monitor_lists_what_was_not_delivered(
    db: Database,
    conn: psycopg.Connection,
    start_runner: StartRunner,
    tmp_path: Path,
    answering: Callable[[Answer], Receiver],
) -> None:
    receiver = answering(lambda n: (503, 0.0))
    cfg = write_config(tmp_path, db, {"url": receiver.url})
    runner = start_runner("--config", cfg, "--http", "127.0.0.1:0", "--http-anonymous", env=FAST)
    event_id = add_event(conn, "paused", "nightly_totals")
    wait_until(attempted(conn, 1), 20, "a first attempt")
    conn.execute("UPDATE timers.events SET at = at - interval '1 day' WHERE id = %s", [event_id])
    wait_until(lambda: deliveries(conn)[0]["state"] == "undeliverable", 20, "given up")
    runner.wait_for("event=http_serving")
    url = next(
        ln.split("url=")[1].split()[0]
        for ln in runner.log().splitlines()
        if "event=http_serving" in ln
    )
    with urllib.request.urlopen(f"{url}/api/stats", timeout=10) as answer:
        stats = json.load(answer)
    [given_up] = stats["undeliverable"]
    assert (given_up["database"], given_up["event"], given_up["timer"]) == (
        db.name,
        "paused",
        "nightly_totals",
    )
    assert given_up["last_error"].startswith("HTTP 503") and given_up["target"].startswith(
        "http://127.0.0.1:"
    )
