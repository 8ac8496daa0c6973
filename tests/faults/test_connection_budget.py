"""The connection budget: one runner serving many databases of a small server holds at
most --max-connections connections to it, control sessions and workers together (control
sessions park in turn); every database still runs its timers, nothing is skipped, a run-now
reaches a parked database, and a full server is said once per database, not once per
try."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgtimers.cli.run_config import ConfigError, resolve
from pgtimers.runner.budget import ConnectionBudget
from pgtimers.schema.install import install
from tests.conftest import scalar
from tests.faults.cluster import Cluster
from tests.integration.runner.conftest import LOG_SQL, LOG_TABLE, save
from tests.support.runner import RunnerProcess
from tests.support.wait import wait_until

Start = Callable[..., RunnerProcess]
DATABASES = [f"d{i:02d}" for i in range(1, 13)]
BUDGET = 6
IDLE_CLOSE = 3  # seconds (PGTIMERS_IDLE_CLOSE), so that the test need not wait 30 s
# seconds (PGTIMERS_PARK_LOOK): a parked database looks this often by itself; a run-now
# rings its doorbell, and is answered long before
PARK_LOOK = 60

# the runner's sessions by kind, from the server's side; a worker running a timer is
# named after the timer ('pgtimers: <timer>') while its transaction lasts
COUNT = """
SELECT count(*) FILTER (WHERE application_name = 'pgtimers runner control'),
       count(*) FILTER (WHERE application_name LIKE 'pgtimers%'
                          AND application_name <> 'pgtimers runner control')
FROM pg_stat_activity
"""
UNSERVED = """
SELECT count(*) FROM timers.runs
WHERE kind = 'skipped' AND reason = 'no runner was serving the database'
"""
PARKED = """
SELECT count(*) > 0 FROM timers.runners WHERE stopped_at IS NULL AND parked_until > now()
"""
PER_DATABASE = """
SELECT datname, count(*) FROM pg_stat_activity
WHERE application_name LIKE 'pgtimers%' GROUP BY datname
"""


@pytest.fixture
def small(major: int) -> Iterator[Cluster]:
    """A cluster with max_connections = 25 and databases d01..d12, each with pgtimers, the
    `fired` table and an `every 1s` timer."""
    made = Cluster(major).init()
    try:
        with (made.pgdata / "postgresql.conf").open("a") as conf:
            conf.write("\nmax_connections = 25\n")
        made.start()
        # pgtimers installed once, in the first; the others are copies of it (an install
        # takes seconds, a copy a fraction of one), as the tests' own databases are
        first, *others = DATABASES
        with made.admin() as admin:
            admin.execute(
                psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(first))
            )
        install(made.dsn(first))
        with made.admin() as admin:
            for name in others:
                admin.execute(
                    psycopg.sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        psycopg.sql.Identifier(name), psycopg.sql.Identifier(first)
                    )
                )
        for name in DATABASES:
            with psycopg.connect(made.dsn(name), autocommit=True) as conn:
                conn.execute(LOG_TABLE)
                save(conn, "tick", "every 1s", LOG_SQL)
        with made.admin() as admin:
            # the runner logs in as an ordinary role: the superuser slots stay for the test
            admin.execute("CREATE ROLE runner LOGIN IN ROLE pgtimers_runner")
        yield made
    finally:
        made.cleanup()


def _runner_dsn(cluster: Cluster) -> str:
    return make_conninfo(cluster.dsn(), user="runner")


def _fired(cluster: Cluster, name: str) -> int:
    with psycopg.connect(cluster.dsn(name), autocommit=True) as conn:
        return int(scalar(conn, "SELECT count(*) FROM fired"))


def _unserved(cluster: Cluster, name: str) -> int:
    with psycopg.connect(cluster.dsn(name), autocommit=True) as conn:
        return int(scalar(conn, UNSERVED))


def _parked(cluster: Cluster, name: str) -> bool:
    with psycopg.connect(cluster.dsn(name), autocommit=True) as conn:
        return bool(scalar(conn, PARKED))


def _sessions(cluster: Cluster) -> tuple[int, int]:
    with cluster.admin() as conn:
        row = conn.execute(COUNT).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_many_databases_share_a_small_budget(small: Cluster, runners: Start) -> None:
    proc = runners(
        "--dsn",
        _runner_dsn(small),
        "--all-databases",
        "--max-connections",
        str(BUDGET),
        env={"PGTIMERS_IDLE_CLOSE": str(IDLE_CLOSE), "PGTIMERS_PARK_LOOK": str(PARK_LOOK)},
    )
    wait_until(
        lambda: proc.log().count("event=serving") >= len(DATABASES),
        timeout=60,
        what=f"serving {len(DATABASES)} databases:\n{proc.log()}",
    )
    before = {name: _fired(small, name) for name in DATABASES}
    # skipped before the runner served (saved a while before it started)
    unserved = sum(_unserved(small, name) for name in DATABASES)
    most_control = most_workers = most = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        control, workers = _sessions(small)
        most_control, most_workers = max(most_control, control), max(most_workers, workers)
        most = max(most, control + workers)
        time.sleep(0.05)
    ran = {name: _fired(small, name) - before[name] for name in DATABASES}
    print(
        f"12 databases, budget {BUDGET}: runs in 10 s {ran}; held at most {most} connections"
        f" ({most_control} control, {most_workers} worker connections at most)"
    )
    assert most <= BUDGET, proc.log()
    assert most_control < len(DATABASES)  # control sessions parked in turn
    # every database ran its every-1s timer, in turn: 12 of them in 6 connections is short
    # (control sessions take turns), so some due times are late or skipped (recorded);
    # runs have been 4 to 10 per database here, 80 to 100 in all
    assert min(ran.values()) >= 3, ran
    assert sum(ran.values()) >= 60, ran
    # a parked database was served all along: no due time skipped as unserved (late ones
    # may be: 12 every-1s timers in 6 connections, it is short; the timer's policy says)
    assert sum(_unserved(small, name) for name in DATABASES) == unserved

    # half of the databases go idle: each keeps at most its control session
    quiet = DATABASES[: len(DATABASES) // 2]
    for name in quiet:
        with psycopg.connect(small.dsn(name), autocommit=True) as conn:
            conn.execute("SELECT timers.enable('tick', false)")

    def idle_closed() -> bool:
        with small.admin() as conn:
            held: dict[str, int] = dict(conn.execute(PER_DATABASE).fetchall())
        return all(held.get(name, 0) <= 1 for name in quiet)

    wait_until(idle_closed, timeout=IDLE_CLOSE + 20, what="the idle databases' workers closing")
    busy = {name: _fired(small, name) for name in DATABASES[len(quiet) :]}
    wait_until(
        lambda: all(_fired(small, n) > busy[n] for n in busy), timeout=10, what="busy ones run"
    )
    # a run-now of a parked database's timer is answered at once: it rings the doorbell
    parked = [name for name in quiet if _parked(small, name)]
    assert parked, "no idle database parked while the busy ones waited for slots"
    for name in parked[:3]:
        with psycopg.connect(small.dsn(name), autocommit=True) as conn:
            began = time.monotonic()
            result = scalar(conn, "CALL timers.run('tick')")
            took = time.monotonic() - began
        print(f"run-now of parked {name}: {took:.2f} s")
        assert result["finished"] and result["ok"], (name, result)
        assert took < 5, (name, took)
    assert proc.stop() == 0
    assert "event=connections_refused" not in proc.log()
    # stopped, parked or not, it says so: no database waits for it
    for name in DATABASES:
        with psycopg.connect(small.dsn(name), autocommit=True) as conn:
            assert scalar(conn, "SELECT timers._live_runners()") == 0, name


def test_a_full_server_is_said_once_per_database(small: Cluster, runners: Start) -> None:
    """Other clients leave the runner room for its 12 control sessions and 4 workers only,
    below its --max-connections 20: the server refuses connections (SQLSTATE 53300), the
    runner says so once per database and in the connection_budget line, not once per
    try, holds no more than what works, and every database still runs its timer."""
    logins = 25 - 3  # max_connections less superuser_reserved_connections
    hogs = [
        psycopg.connect(_runner_dsn(small), autocommit=True)
        for _ in range(logins - len(DATABASES) - 4)
    ]
    try:
        before = {name: _fired(small, name) for name in DATABASES}
        proc = runners("--dsn", _runner_dsn(small), "--all-databases", "--max-connections", "20")
        wait_until(
            lambda: proc.log().count("event=serving") >= len(DATABASES),
            timeout=60,
            what=f"serving {len(DATABASES)} databases",
        )
        wait_until(
            lambda: all(_fired(small, n) > before[n] for n in DATABASES),
            timeout=30,
            what="every database running its timer on a full server",
        )
        time.sleep(3)  # many more tries: still at most one line per database
    finally:
        for hog in hogs:
            hog.close()
    assert proc.stop() == 0
    lines = proc.log().splitlines()
    said = Counter(
        (line.split("event=", 1)[1].split()[0], line.split("database=", 1)[1].split()[0])
        for line in lines
        if "event=connections_refused" in line or "event=database_unavailable" in line
    )
    assert max(said.values(), default=1) == 1, said
    summaries = [line for line in lines if "event=connection_budget " in line]
    assert any(" refused=" in line and " refused=0" not in line for line in summaries), lines
    print(f"full server: {len(said)} refusal lines, {len(summaries)} summaries:\n{summaries[0]}")


def test_slots_go_round_the_databases_in_turn() -> None:
    """Database a has 4 workers always wanting a slot, b and c one each, 2 slots: each
    database gets about a third of the slots (not a: 4 of 6), and a stop ends a wait."""

    async def scenario() -> tuple[Counter[str], float]:
        budget = ConnectionBudget(limit=2)
        stop = asyncio.Event()
        grants: Counter[str] = Counter()

        async def worker(database: str) -> None:
            while not stop.is_set():
                if not await budget.acquire(database, (stop,), lambda: None):
                    return
                grants[database] += 1
                await asyncio.sleep(0.001)  # a fire
                budget.release(database)  # others wait: the slot goes round
                if sum(grants.values()) >= 600:
                    stop.set()

        tasks = [asyncio.create_task(worker(db)) for db in ["a"] * 4 + ["b", "c"]]
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        assert budget.held == 0 and budget.waiting == 0
        # a waiter sees a stop at once, and holds nothing after it
        full = ConnectionBudget(limit=1)
        assert await full.acquire("x", (asyncio.Event(),), lambda: None)
        stopped = asyncio.Event()
        began = time.monotonic()
        waiting = asyncio.create_task(full.acquire("y", (stopped,), lambda: None))
        await asyncio.sleep(0.05)
        stopped.set()
        got = await asyncio.wait_for(waiting, 5)
        assert got is False and full.held == 1 and full.waiting == 0
        return grants, time.monotonic() - began

    grants, stop_took = asyncio.run(scenario())
    total = sum(grants.values())
    print(f"grants over 2 slots: {dict(grants)}")
    for database in "abc":
        assert grants[database] >= 0.3 * total, grants  # first come, first served: a 4/6
    assert stop_took < 1.0


def test_max_connections_from_flag_config_environment(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text("max_connections = 8\n")
    env = {"PGTIMERS_MAX_CONNECTIONS": "12"}
    flag = resolve(max_connections="4", config_file=str(config), environ=env)
    assert (flag.max_connections, flag.max_connections_from) == (4, "flag")
    from_file = resolve(config_file=str(config), environ=env)
    assert (from_file.max_connections, from_file.max_connections_from) == (8, "config")
    from_env = resolve(environ=env)
    assert (from_env.max_connections, from_env.max_connections_from) == (12, "environment")
    assert resolve(environ={}).max_connections is None  # from the server
    with pytest.raises(ConfigError, match="PGTIMERS_MAX_CONNECTIONS: max_connections must be"):
        resolve(environ={"PGTIMERS_MAX_CONNECTIONS": "0"})
    with pytest.raises(ConfigError, match=r"--max-connections: .* not 'many'"):
        resolve(max_connections="many", environ={})
    # a control session and a worker: less cannot fire anything
    with pytest.raises(
        ConfigError, match=r"--max-connections: max_connections must be from 2 to 10000, not 1"
    ):
        resolve(max_connections="1", environ={})


def test_one_waiter_makes_one_holder_give_a_slot_back() -> None:
    """Every database's idle workers are woken when a worker starts to wait for a slot:
    only as many of them give theirs back as there are poorer waiters (all of them did,
    and each reconnected a moment later: 36-74 new connections a second at 10 databases)."""

    async def scenario() -> None:
        budget = ConnectionBudget(limit=3)
        for database in "abc":
            assert await budget.acquire(database, (asyncio.Event(),), lambda: None)
        waiting = asyncio.create_task(budget.acquire("d", (asyncio.Event(),), lambda: None))
        await asyncio.sleep(0.01)
        assert [budget.others_waiting(db) for db in "abc"] == [True, True, True]
        assert [budget.take_turn(db) for db in "abc"] == [True, False, False]
        assert not budget.others_waiting("b")  # that waiter's slot is on its way
        budget.release("a")
        assert await asyncio.wait_for(waiting, 5)
        assert budget.held_by == {"b": 1, "c": 1, "d": 1}
        assert not any(budget.take_turn(db) for db in "abcd")  # even: nobody gives one back

    asyncio.run(scenario())
