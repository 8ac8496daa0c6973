"""Install or upgrade the timers schema in a database, through this package's alembic chain."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgtimers.schema.paths import migrations_dir

if TYPE_CHECKING:
    from alembic.config import Config

VERSION_TABLE = "alembic_version"
VERSION_SCHEMA = "timers"
# Serialises concurrent installs into one database (any int8 constant unique to us).
INSTALL_LOCK_KEY = 7_455_331_210_001
# The search path of every session that installs, upgrades or uninstalls pgtimers. What
# PostgreSQL resolves while it creates a view, a default, a constraint or an index is
# stored with it for good: a function or operator found in a schema others can write (an
# exact match in public wins over pg_catalog's cast-needing one) would run later as
# whoever reads or writes that object. Only pg_catalog is searched (pg_temp last, where
# it is never searched for functions and operators); our own objects are named in full.
PINNED_SEARCH_PATH = "pg_catalog, pg_temp"


def alembic_config(dsn: str | None = None) -> Config:
    """An alembic Config for this package's migrations (no alembic.ini needed)."""
    # alembic and SQLAlchemy are imported here, not above: they take 0.3 s to import and
    # only install, upgrade and uninstall need them, not every CLI command.
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    if dsn is not None:
        cfg.attributes["dsn"] = dsn
    return cfg


def pinned(dsn: str) -> str:
    """The DSN with the session's search path pinned from its start (the `options` of the
    DSN, else of PGOPTIONS, kept): it wins over a path set for the role or the database."""
    options = conninfo_to_dict(dsn).get("options") or os.environ.get("PGOPTIONS", "")
    path = PINNED_SEARCH_PATH.replace(" ", "")
    return make_conninfo(dsn, options=f"{options} -c search_path={path}".strip())


def engine_for(dsn: str) -> Any:
    """A SQLAlchemy engine that connects through psycopg with the DSN as given, its
    search path pinned (what SQLAlchemy asks on connecting included)."""
    from sqlalchemy import create_engine, pool

    target = pinned(dsn)
    return create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(target), poolclass=pool.NullPool
    )


@dataclass(frozen=True)
class Installed:
    """What an install or upgrade did."""

    revision: str | None
    revisions: list[str] = field(default_factory=list)  # the versioned migrations applied
    code: str | None = None  # the checksum of sql/code/ when it was applied, else None

    def summary(self) -> str:
        """One line for a person: what was applied, or that nothing was."""
        if not self.revisions and self.code is None:
            return f"pgtimers schema at revision {self.revision}: up to date, nothing changed"
        done = []
        if self.revisions:
            first, last = self.revisions[0], self.revisions[-1]
            done.append(f"migration {first}" if first == last else f"migrations {first}-{last}")
        if self.code is not None:
            done.append(f"the code (sha256 {self.code[:12]})")
        return f"pgtimers schema at revision {self.revision}: applied {' and '.join(done)}"


def upgrade(dsn: str, revision: str = "head") -> Installed:
    """Upgrade the database to `revision` (pending migrations, then the code if it changed)."""
    from alembic import command

    cfg = alembic_config(dsn)
    command.upgrade(cfg, revision)
    report = cfg.attributes.get("pgtimers", {})
    return Installed(report.get("revision"), list(report.get("revisions", [])), report.get("code"))


def install(dsn: str, revision: str = "head") -> str | None:
    """Upgrade the database to `revision`; returns the revision it is at afterwards."""
    return upgrade(dsn, revision).revision


def current_revision(dsn: str) -> str | None:
    """The pgtimers revision installed in the database, or None when there is none."""
    with psycopg.connect(pinned(dsn)) as conn:
        found = conn.execute(
            "SELECT pg_catalog.to_regclass('timers.alembic_version') IS NOT NULL"
        ).fetchone()
        if not found or not found[0]:
            return None
        row = conn.execute("SELECT version_num FROM timers.alembic_version").fetchone()
        return None if row is None else str(row[0])
