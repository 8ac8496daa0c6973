"""Fresh install and the chain of upgrades give the same catalog; installs are idempotent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.script import ScriptDirectory

from pgtimers.install import alembic_config, current_revision, install
from tests.catalog import snapshot
from tests.conftest import Database

ROOT = Path(__file__).resolve().parents[2]


def _revisions() -> list[str]:
    script = ScriptDirectory.from_config(alembic_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def test_every_revision_applies_one_sql_file() -> None:
    revisions = _revisions()
    sql_files = sorted(p.name.split("_", 1)[0] for p in (ROOT / "sql").glob("[0-9]*.sql"))
    assert revisions == sql_files


def test_chain_of_upgrades_equals_fresh_install(db: Database, empty_db: Database) -> None:
    # db comes from the template: installed in one go by pgtimers install.
    for revision in _revisions():
        command.upgrade(alembic_config(empty_db.dsn), revision)
    assert snapshot(empty_db.dsn) == snapshot(db.dsn)


def test_install_is_idempotent(db: Database) -> None:
    before = snapshot(db.dsn)
    assert install(db.dsn) == _revisions()[-1]
    assert snapshot(db.dsn) == before


def test_install_leaves_the_application_alone(empty_db: Database) -> None:
    with empty_db.connect() as conn:
        conn.execute("CREATE TABLE public.alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("INSERT INTO public.alembic_version VALUES ('app_rev_42')")
        conn.execute("CREATE TABLE public.orders (id int PRIMARY KEY, total numeric)")
        conn.execute("INSERT INTO public.orders VALUES (1, 9.5)")
    install(empty_db.dsn)
    install(empty_db.dsn)
    with empty_db.connect() as conn:
        assert conn.execute("SELECT * FROM public.alembic_version").fetchall() == [("app_rev_42",)]
        assert conn.execute("SELECT count(*) FROM public.orders").fetchone() == (1,)
    assert current_revision(empty_db.dsn) == _revisions()[-1]


def test_alembic_command_line_upgrades_from_a_checkout(empty_db: Database, db: Database) -> None:
    env = {**os.environ, "PGTIMERS_DSN": empty_db.dsn}
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(ROOT / "alembic.ini"), "upgrade", "head"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert snapshot(empty_db.dsn) == snapshot(db.dsn)


def test_pgtimers_install_command(empty_db: Database) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pgtimers", "install", "--dsn", empty_db.dsn],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "pgtimers schema at revision" in result.stdout
    assert current_revision(empty_db.dsn) == _revisions()[-1]


def test_partial_install_upgrades_to_head(empty_db: Database, db: Database) -> None:
    command.upgrade(alembic_config(empty_db.dsn), _revisions()[0])
    assert current_revision(empty_db.dsn) == _revisions()[0]
    install(empty_db.dsn)
    assert snapshot(empty_db.dsn) == snapshot(db.dsn)


def test_failed_install_changes_nothing(empty_db: Database) -> None:
    # A database where the schema name is taken by something that is not pgtimers.
    with empty_db.connect() as conn:
        conn.execute("CREATE SCHEMA timers")
        conn.execute("CREATE TABLE timers.timers (x int)")
    with pytest.raises(psycopg.Error):
        install(empty_db.dsn)
    with empty_db.connect() as conn:
        assert conn.execute("SELECT to_regclass('timers.alembic_version')").fetchone() == (None,)
        assert conn.execute("SELECT to_regclass('timers.runs')").fetchone() == (None,)
