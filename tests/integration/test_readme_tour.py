"""README.md's "60-second tour in psql", verbatim, on a fresh database with a runner up."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import psycopg

from tests.conftest import Database, scalar
from tests.integration.sqlblocks import ROOT, run_psql, runner_up, section_block

TOUR_HEADING = "A 60-second tour in psql"


def test_the_tour_is_marked_runnable() -> None:
    assert section_block(ROOT / "README.md", TOUR_HEADING).runnable


def test_the_tour_runs_top_to_bottom_and_its_run_is_ok(
    db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    tour = section_block(ROOT / "README.md", TOUR_HEADING)
    with runner_up(db, tmp_path / "runner.log") as runner:
        done = run_psql(db, tour.sql)
    assert done.returncode == 0, f"{done.stderr}\n{done.stdout}\nrunner log:\n{runner.log()}"
    assert '"ok": true' in done.stdout, done.stdout
    run = conn.execute(
        "SELECT ok, error, rows FROM timers.runs WHERE timer = 'shop_totals' AND kind = 'run_now'"
    ).fetchall()
    assert len(run) == 1, run
    ok, error, rows = run[0]
    assert (ok, error) == (True, "")
    # the procedure upserted one total per shop: north and south
    assert conn.execute("SELECT shop, amount FROM shop_totals ORDER BY shop").fetchall() == [
        ("north", Decimal(200)),
        ("south", Decimal("45.50")),
    ]
    assert rows == 2, "rows of CALL refresh_shop_totals(): the two totals it upserted"
    assert scalar(conn, "SELECT last_rows FROM timers.status WHERE name = 'shop_totals'") == 2
    # what the tour left: one timer, the other deleted at its end
    assert conn.execute("SELECT name FROM timers.status").fetchall() == [("shop_totals",)]
