"""What one owner's run leaves in the runner's session never reaches the next run, of
another owner, on the same connection: the next run starts from the state a new session
has, for everything a timer can set (settings pgtimers knows and ones it does not, the
seed of random(), sequences' lastval, temporary objects, LISTEN, the run's own
pgtimers.* settings), and a run that wrote nothing reports 0 rows, not the writes of the
runs before it.

The runs are fired by a real `pgtimers run --workers 1`, two timers due at the same
instant of a test clock: one batch of fires (timers._fire_many) on one connection, the
setter first (it was saved first), each in its own transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Database, scalar
from tests.security.helpers import ALICE, BOB, Runner, connect, save

AT = "2027-01-04 09:00:00+00"

# Everything a run can leave in its session, set by alice's timer (plain SETs persist
# after a function returns; nextval, setseed and LISTEN are not undone by a transaction).
LEAVES = (
    "SET app.tenant = 'alice'; SELECT set_config('work_mem', '77MB', false);"
    " SET enable_seqscan = off; SET pgtimers.attempt = '9';"
    " SELECT setseed(0.5); SELECT nextval('public.alice_seq'); SELECT 1"
)
# the same, and a temporary table and a LISTEN (which an older runner reset its session for)
LEAVES_MORE = LEAVES.replace(
    " SELECT 1",
    " CREATE TEMP TABLE alice_left (x int); DO $$ BEGIN EXECUTE 'LISTEN alice_channel'; END $$;"
    " SELECT 1",
)

# What bob's timer sees, run right after alice's on the same connection.
LOOKS = (
    "INSERT INTO public.seen SELECT current_setting('app.tenant', true),"
    " current_setting('work_mem'), current_setting('enable_seqscan'),"
    " current_setting('pgtimers.attempt', true), random(), public.probe_lastval(),"
    " (SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()),"
    " (SELECT count(*) FROM pg_listening_channels())"
)


@pytest.fixture
def stage(db: Database) -> Database:
    with connect(db) as su:
        su.execute(
            "CREATE TABLE public.seen (tenant text, work_mem text, seqscan text, attempt text,"
            " random float8, lastval text, temps bigint, listens bigint)"
        )
        su.execute("GRANT INSERT ON public.seen TO PUBLIC")
        su.execute("CREATE TABLE public.written (x int)")
        su.execute("GRANT INSERT ON public.written TO PUBLIC")
        su.execute(
            "CREATE FUNCTION public.probe_lastval() RETURNS text LANGUAGE plpgsql AS $$"
            " BEGIN RETURN lastval()::text; EXCEPTION WHEN OTHERS THEN RETURN 'none'; END $$"
        )
        su.execute("CREATE PROCEDURE public.noop() LANGUAGE sql AS $$ SELECT 1 $$")
        su.execute(
            "CREATE PROCEDURE public.write_two() LANGUAGE sql AS"
            " $$ INSERT INTO public.written VALUES (1), (2) $$"
        )
        su.execute("SELECT timers.create_test_clock('clk', %s)", [AT])
    with connect(db, ALICE) as alice:
        alice.execute("CREATE SEQUENCE public.alice_seq")
    return db


@pytest.fixture
def runner(stage: Database, tmp_path: Path) -> Iterator[Runner]:
    r = Runner(stage, tmp_path / "runner.log")
    yield r
    r.terminate()


def _fire_together(db: Database, *timers: tuple[str, str, str]) -> None:
    """Save the timers on the test clock, due at the same instant (in this order), and
    advance it to then: the runner fires them in one batch."""
    for owner, name, sql in timers:
        with connect(db, owner) as conn:
            save(conn, name, sql, "daily 09:00", test_clock="clk", timezone="UTC")
    with connect(db, ALICE) as alice:
        alice.execute("CALL timers.advance_test_clock('clk', '2027-01-05 09:00:00+00')")


def _runs(db: Database) -> dict[str, tuple[bool, int, str]]:
    with db.connect() as su:
        return {
            r[0]: (r[1], r[2], r[3])
            for r in su.execute(
                "SELECT timer, ok, rows, error FROM timers.runs WHERE ok IS NOT NULL"
            )
        }


@pytest.mark.parametrize("leaves", [LEAVES, LEAVES_MORE], ids=["settings", "and-temp-listen"])
def test_the_next_owners_run_starts_from_a_new_sessions_state(
    stage: Database, runner: Runner, leaves: str
) -> None:
    _fire_together(stage, (ALICE, "a_leaves", leaves), (BOB, "b_looks", LOOKS))
    runs = _runs(stage)
    assert runs["a_leaves"][0] and runs["b_looks"][0], runs
    with connect(stage) as su:
        seen = su.execute("SELECT * FROM public.seen").fetchone()
        # a new session's values (this one set none)
        fresh = su.execute(
            "SELECT current_setting('work_mem'), current_setting('enable_seqscan')"
        ).fetchone()
        su.execute("SELECT setseed(0.5)")
        seeded = scalar(su, "SELECT random()")
    assert seen is not None
    tenant, work_mem, seqscan, attempt, rand, lastval, temps, listens = seen
    assert tenant in (None, ""), "a custom setting of the run before"
    assert work_mem != "77MB" and seqscan == "on", "a setting of the run before"
    assert (work_mem, seqscan) == fresh
    assert attempt == "1", "the run's own pgtimers.attempt"
    assert rand != seeded, "random() follows the seed the run before set"
    assert lastval == "none", "lastval() of the run before's sequence"
    assert (temps, listens) == (0, 0)


def test_a_keyed_fire_has_its_own_attempt_and_no_setting_of_the_run_before(
    stage: Database, runner: Runner
) -> None:
    with connect(stage, ALICE) as alice:
        save(alice, "a_leaves", LEAVES, "daily 09:00", test_clock="clk", timezone="UTC")
    with connect(stage, BOB) as bob:
        bob.execute(
            "SELECT timers.arm('bob:task:look:1', '2027-01-05 09:00:00.5+00', %s,"
            " test_clock => 'clk')",
            [LOOKS],
        )
    with connect(stage, ALICE) as alice:
        alice.execute("CALL timers.advance_test_clock('clk', '2027-01-05 09:00:01+00')")
    with connect(stage) as su:
        seen = su.execute("SELECT tenant, work_mem, attempt FROM public.seen").fetchone()
        fired = su.execute(
            "SELECT ok, error FROM timers.keyed_timers WHERE key = 'bob:task:look:1'"
        ).fetchone()
    assert fired == (True, ""), fired
    assert seen is not None and seen[0] in (None, "") and seen[1] != "77MB"
    assert seen[2] == "1"


def test_a_run_that_wrote_nothing_reports_no_rows(stage: Database, runner: Runner) -> None:
    """The server's counters hold the earlier transactions' writes until they are sent to
    the statistics (when the session is idle, at most once a second): in one batch, the
    run after a writer would have reported the writer's rows as its own."""
    _fire_together(
        stage,
        (ALICE, "a_writes", "INSERT INTO public.written SELECT generate_series(1, 3)"),
        (BOB, "b_calls_noop", "CALL public.noop()"),
        (BOB, "c_writes_two", "CALL public.write_two()"),
        (BOB, "d_selects_nothing", "SELECT 1 WHERE false"),
    )
    runs = _runs(stage)
    assert runs["a_writes"][:2] == (True, 3), runs
    assert runs["b_calls_noop"][:2] == (True, 0), runs
    assert runs["c_writes_two"][:2] == (True, 2), runs
    assert runs["d_selects_nothing"][:2] == (True, 0), runs
