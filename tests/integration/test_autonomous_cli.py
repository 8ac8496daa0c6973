"""`pgtimers save --autonomous`: saved, shown by `pgtimers show`; without it, SQL that
needs it is refused with a hint naming it."""

from __future__ import annotations

import json

from tests.conftest import Database, scalar
from tests.integration.test_cli_policies import cli, shown


def test_save_autonomous_and_show_it(db: Database) -> None:
    saved = cli(db, "save", "vac", "daily 03:00", "VACUUM (ANALYZE)", "--autonomous")
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout)["autonomous"] is True
    assert shown(db, "vac")["autonomous"] == "yes"
    with db.connect() as conn:
        assert scalar(conn, "SELECT autonomous FROM timers.timers WHERE name = 'vac'") is True


def test_without_the_flag_it_is_atomic_and_vacuum_is_refused_with_a_hint(db: Database) -> None:
    saved = cli(db, "save", "plain", "daily 03:00", "SELECT 1")
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout)["autonomous"] is False
    refused = cli(db, "save", "vac", "daily 03:00", "VACUUM")
    assert refused.returncode != 0
    assert "may not use VACUUM" in refused.stderr
    assert "autonomous => true" in refused.stderr
    with db.connect() as conn:
        assert scalar(conn, "SELECT count(*) FROM timers.timers WHERE name = 'vac'") == 0


def test_autonomous_on_a_test_clock_is_refused(db: Database) -> None:
    with db.connect() as conn:
        conn.execute("SELECT timers.create_test_clock('c', '2030-01-01 00:00+00')")
    refused = cli(db, "save", "t", "every 5m", "SELECT 1", "--test-clock", "c", "--autonomous")
    assert refused.returncode != 0
    assert "autonomous" in refused.stderr and "test clock" in refused.stderr
