"""pgtimers and alembic: an application's autogenerate leaves pgtimers' schemas alone with
pgtimers.alembic's hooks, pgtimers' own chain runs from any directory (and from the
installed package), prints what it applies, and `alembic downgrade base` uninstalls it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import psycopg.conninfo
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

import pgtimers.alembic
from pgtimers.schema.install import current_revision
from tests.conftest import HEAD_REVISION, PREVIOUS_REVISION, Database

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PGTIMERS_SCHEMAS = {"timers", "timers_exec"}


def _app_metadata(*extra: str) -> sa.MetaData:
    """The application's models: public.orders (in the database), plus tables it lacks."""
    metadata = sa.MetaData()
    sa.Table("orders", metadata, sa.Column("id", sa.Integer, primary_key=True))
    for name in extra:
        sa.Table(name, metadata, sa.Column("id", sa.Integer, primary_key=True))
    return metadata


@pytest.fixture
def app_db(db: Database) -> Database:
    """A database with pgtimers and the application's table public.orders."""
    with db.connect() as conn:
        conn.execute("CREATE TABLE public.orders (id integer PRIMARY KEY)")
    return db


def _diffs(db: Database, metadata: sa.MetaData, **opts: Any) -> list[tuple[Any, ...]]:
    """What autogenerate would do, as flat (operation, object, ...) tuples."""
    # the application's engine: its session's own search path (pgtimers' install pins its)
    engine = sa.create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(db.dsn), poolclass=sa.pool.NullPool
    )
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_schemas": True, **opts})
        found = compare_metadata(context, metadata)
    flat: list[tuple[Any, ...]] = []
    for diff in found:
        flat.extend(diff if isinstance(diff, list) else [diff])
    return flat


def _schemas_in(diff: tuple[Any, ...]) -> set[str]:
    """The schema names a diff mentions: of its tables, columns, indexes, or as a string."""
    found = set()
    for part in diff:
        table = getattr(part, "table", part)
        schema = part if isinstance(part, str) else getattr(table, "schema", None)
        if schema:
            found.add(schema)
    return found


def _touching_pgtimers(diffs: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [d for d in diffs if _schemas_in(d) & PGTIMERS_SCHEMAS]


def test_without_the_hooks_autogenerate_wants_to_drop_pgtimers_tables(app_db: Database) -> None:
    diffs = _diffs(app_db, _app_metadata())
    dropped = {(d[1].schema, d[1].name) for d in diffs if d[0] == "remove_table"}
    assert {("timers", "timers"), ("timers", "runs"), ("timers", "alembic_version")} <= dropped


@pytest.mark.parametrize(
    "hooks",
    [
        {"include_object": pgtimers.alembic.include_object},
        {"include_name": pgtimers.alembic.include_name},
        {
            "include_name": pgtimers.alembic.include_name,
            "include_object": pgtimers.alembic.include_object,
        },
    ],
    ids=["include_object", "include_name", "both"],
)
def test_with_the_hooks_nothing_of_pgtimers_shows(app_db: Database, hooks: dict[str, Any]) -> None:
    assert _diffs(app_db, _app_metadata(), **hooks) == []
    # the application's own changes still show
    diffs = _diffs(app_db, _app_metadata("customers"), **hooks)
    assert [(d[0], d[1].name) for d in diffs] == [("add_table", "customers")]
    assert _touching_pgtimers(diffs) == []


def test_the_hooks_wrap_the_applications_own(app_db: Database) -> None:
    with app_db.connect() as conn:
        conn.execute("CREATE TABLE public.legacy (id integer)")

    def mine(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        return not (type_ == "table" and name == "legacy")

    def mine_by_name(name: str | None, type_: str, parents: Any) -> bool:
        return not (type_ == "table" and name == "legacy")

    alone = _diffs(app_db, _app_metadata(), include_object=pgtimers.alembic.include_object)
    assert [(d[0], d[1].name) for d in alone] == [("remove_table", "legacy")]
    wrapped = pgtimers.alembic.include_object_excluding_pgtimers(mine)
    assert _diffs(app_db, _app_metadata(), include_object=wrapped) == []
    by_name = pgtimers.alembic.include_name_excluding_pgtimers(mine_by_name)
    assert _diffs(app_db, _app_metadata(), include_name=by_name) == []
    # without another filter they are the plain hooks
    plain = pgtimers.alembic.include_object_excluding_pgtimers()
    assert [(d[0], d[1].name) for d in _diffs(app_db, _app_metadata(), include_object=plain)] == [
        ("remove_table", "legacy")
    ]


APP_ENV = """\
import os
import sqlalchemy as sa
from alembic import context
import pgtimers.alembic

metadata = sa.MetaData()
sa.Table("orders", metadata, sa.Column("id", sa.Integer, primary_key=True))
hooks = {}
if os.environ.get("WITH_HOOKS"):
    hooks = {
        "include_name": pgtimers.alembic.include_name,
        "include_object": pgtimers.alembic.include_object,
    }
engine = sa.create_engine(context.config.get_main_option("sqlalchemy.url"))
with engine.connect() as connection:
    context.configure(
        connection=connection, target_metadata=metadata, include_schemas=True, **hooks
    )
    with context.begin_transaction():
        context.run_migrations()
"""


def _alembic(ini: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(ini), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )


def test_an_applications_alembic_check_passes_with_the_hook(
    app_db: Database, tmp_path: Path
) -> None:
    project = tmp_path / "app"
    (project / "versions").mkdir(parents=True)
    (project / "env.py").write_text(APP_ENV)
    info = psycopg.conninfo.conninfo_to_dict(app_db.dsn)
    host = _text(info.get("host"))
    port = int(str(info["port"])) if info.get("port") else None
    # a unix socket directory (the embedded server) goes in the query, as libpq takes it
    socket = host is not None and host.startswith("/")
    url = sa.URL.create(
        "postgresql+psycopg",
        username=_text(info.get("user")),
        password=_text(info.get("password")),
        host=None if socket else host,
        port=None if socket else port,
        database=app_db.name,
        query={"host": str(host), **({"port": str(port)} if port else {})} if socket else {},
    )
    ini = tmp_path / "alembic.ini"
    ini.write_text(
        "[alembic]\nscript_location = %(here)s/app\nsqlalchemy.url = "
        + url.render_as_string(hide_password=False).replace("%", "%%")
        + "\n"
    )
    without = _alembic(ini, "check", cwd=tmp_path)
    assert without.returncode != 0
    said = without.stdout + without.stderr
    assert "New upgrade operations detected" in said, said
    assert "remove_table" in said and "schema='timers'" in said, said
    with_hooks = _alembic(ini, "check", cwd=tmp_path, env={"WITH_HOOKS": "1"})
    assert with_hooks.returncode == 0, with_hooks.stderr
    assert "No new upgrade operations detected" in with_hooks.stdout + with_hooks.stderr
    # with include_name, pgtimers' tables are not even read (no warnings about their types)
    assert "SAWarning" not in with_hooks.stderr


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


# --- pgtimers' own chain: alembic.ini from anywhere, the installed-package form ---


def test_the_ini_works_from_any_directory_and_prints_what_it_applies(
    empty_db: Database, tmp_path: Path
) -> None:
    done = _alembic(
        ROOT / "alembic.ini", "-x", f"dsn={empty_db.dsn}", "upgrade", "head", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "Running upgrade  -> 0001" in done.stderr
    assert f"Running upgrade {PREVIOUS_REVISION} -> {HEAD_REVISION}" in done.stderr
    assert f"Applied the code of revision {HEAD_REVISION}" in done.stderr
    assert current_revision(empty_db.dsn) == HEAD_REVISION


def test_downgrade_to_a_revision_is_refused_and_base_uninstalls(
    db: Database, tmp_path: Path
) -> None:
    ini, dsn = ROOT / "alembic.ini", f"dsn={db.dsn}"
    for target in (PREVIOUS_REVISION, "-1"):
        done = _alembic(ini, "-x", dsn, "downgrade", target, cwd=tmp_path)
        assert done.returncode != 0
        assert "Traceback" not in done.stderr
        assert "pgtimers migrations are forward-only" in done.stderr
        assert "`alembic downgrade base` uninstalls pgtimers" in done.stderr
        assert current_revision(db.dsn) == HEAD_REVISION

    with db.connect() as conn:
        conn.execute("CREATE VIEW public.names AS SELECT name FROM timers.status")
    done = _alembic(ini, "-x", dsn, "-x", "keep_roles=1", "downgrade", "base", cwd=tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "view public.names" in done.stderr and "-x cascade=1" in done.stderr
    assert current_revision(db.dsn) == HEAD_REVISION

    with db.connect() as conn:
        conn.execute("DROP VIEW public.names")
    done = _alembic(ini, "-x", dsn, "-x", "keep_roles=1", "downgrade", "base", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Running downgrade 0001 -> " in done.stderr
    assert "dropped schema timers (0 timer(s) with their history)" in done.stderr
    assert "dropped schema timers_exec" in done.stderr
    assert "kept roles pgtimers_admin, pgtimers_reader, pgtimers_runner: --keep-roles" in (
        done.stderr
    )
    with db.connect() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname IN ('timers', 'timers_exec')"
        ).fetchone()
    assert row == (0,)
    assert current_revision(db.dsn) is None


@pytest.fixture
def wheel_layout(tmp_path: Path) -> Iterator[Path]:
    """The package as the wheel lays it out (pyproject's packages and force-include)."""
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"
    ]["wheel"]
    site = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__")
    for package in wheel["packages"]:
        shutil.copytree(ROOT / package, site / package, ignore=ignore)
    for source, target in wheel["force-include"].items():
        shutil.copytree(ROOT / source, site / target, ignore=ignore)
    yield site


def test_the_installed_package_form_of_script_location(
    empty_db: Database, tmp_path: Path, wheel_layout: Path
) -> None:
    ini = tmp_path / "alembic.ini"
    ini.write_text(
        (ROOT / "alembic.ini")
        .read_text()
        .replace("script_location = %(here)s/migrations", "script_location = pgtimers:migrations")
    )
    assert "pgtimers:migrations" in ini.read_text()
    env = {"PYTHONPATH": str(wheel_layout)}
    where = subprocess.run(
        [sys.executable, "-c", "import pgtimers.schema.paths as p; print(p.migrations_dir())"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=tmp_path,
        check=True,
    )
    assert where.stdout.strip() == str(wheel_layout / "pgtimers" / "migrations")
    done = _alembic(ini, "-x", f"dsn={empty_db.dsn}", "upgrade", "head", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert f"Running upgrade {PREVIOUS_REVISION} -> {HEAD_REVISION}" in done.stderr
    assert current_revision(empty_db.dsn) == HEAD_REVISION
    history = _alembic(ini, "history", cwd=tmp_path, env=env)
    assert f"{PREVIOUS_REVISION} -> {HEAD_REVISION} (head)" in history.stdout
