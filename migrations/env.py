"""Alembic environment for pgtimers: its own version table in schema timers, one install lock,
the pending versioned migrations, then the whole repeatable code (sql/code/) when it changed."""

from __future__ import annotations

import hashlib
import logging
import os
from logging.config import fileConfig
from pathlib import Path
from typing import Any

from alembic import context
from sqlalchemy import text

from pgtimers.schema import uninstall
from pgtimers.schema.install import (
    INSTALL_LOCK_KEY,
    PINNED_SEARCH_PATH,
    VERSION_SCHEMA,
    VERSION_TABLE,
    engine_for,
)
from pgtimers.schema.paths import sql_dir

config = context.config
# The alembic command line prints what it applies when its ini file configures logging
# (the `alembic` logger at INFO); `pgtimers install` passes no ini file and prints its own.
if config.config_file_name is not None and config.file_config.has_section("loggers"):
    fileConfig(config.config_file_name, disable_existing_loggers=False)
log = logging.getLogger("alembic.env")


def _dsn() -> str:
    dsn = config.attributes.get("dsn") or context.get_x_argument(as_dictionary=True).get("dsn")
    dsn = dsn or config.get_main_option("sqlalchemy.url")
    dsn = dsn or os.environ.get("PGTIMERS_DSN") or os.environ.get("DATABASE_URL")
    if not dsn:
        raise SystemExit("no database: pass -x dsn=..., or set PGTIMERS_DSN or DATABASE_URL")
    return str(dsn).replace("postgresql+psycopg://", "postgresql://", 1)


def code_files() -> list[Path]:
    """The repeatable code, in the order it is applied."""
    return sorted((sql_dir() / "code").glob("[0-9][0-9]_*.sql"))


def code_checksum(files: list[Path]) -> str:
    """sha256 over the names and contents of the code files."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _apply_code(connection: Any, revision: str, migrated: bool) -> str | None:
    """Apply every code file unless the code applied last has the same checksum and no
    revision was applied now (one may drop views and routines for the code to re-create:
    0022); the checksum applied, or None when nothing changed."""
    files = code_files()
    checksum = code_checksum(files)
    last = connection.execute(
        text("SELECT checksum FROM timers.installed_code ORDER BY id DESC LIMIT 1")
    ).scalar()
    if last == checksum and not migrated:
        return None
    driver = connection.connection.driver_connection
    for path in files:
        # No parameters: psycopg uses the simple protocol, so a file may hold many statements.
        driver.execute(path.read_text(encoding="utf-8"))
    connection.execute(
        text("INSERT INTO timers.installed_code (checksum, files, revision) VALUES (:c, :n, :r)"),
        {"c": checksum, "n": len(files), "r": revision},
    )
    return checksum


def _flag(name: str) -> bool:
    value = context.get_x_argument(as_dictionary=True).get(name, "")
    return value.lower() in ("1", "true", "yes", "on")


def _uninstall(connection: Any) -> None:
    """After `alembic downgrade base`: drop pgtimers as `pgtimers uninstall --yes` does
    (-x force=1, -x cascade=1, -x keep_roles=1 as its options), or refuse, changing nothing."""
    from alembic.util import CommandError

    driver = connection.connection.driver_connection
    planned = uninstall.plan(driver, _dsn(), keep_roles=_flag("keep_roles"))
    how = ("-x force=1", "-x cascade=1")
    refused = planned.refusals(_flag("force"), _flag("cascade"), how)
    if refused:
        raise CommandError("pgtimers uninstall refused, nothing changed: " + "; ".join(refused))
    for line in uninstall.drop(driver, planned):
        log.info("%s", line)


def _head() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head


def run_migrations_online() -> None:
    """Apply the pending revisions and the code in one transaction, under an advisory lock."""
    engine = engine_for(_dsn())
    applied: list[str] = []
    report: dict[str, Any] = config.attributes.setdefault("pgtimers", {})

    downgraded: list[str] = []

    def on_apply(*, step: Any, **_: Any) -> None:
        (applied if step.is_upgrade else downgraded).extend(step.up_revision_ids)

    with engine.connect() as connection:
        # Before anything is resolved: what the migrations and the code create binds to the
        # functions and operators found now (pinned at connecting too; this states it).
        connection.execute(
            text("SELECT pg_catalog.set_config('search_path', :p, true)"), {"p": PINNED_SEARCH_PATH}
        )
        # Another install waits for this one; one that does not come within a minute is
        # held up by someone else's lock: say so rather than wait forever.
        connection.execute(text("SET LOCAL lock_timeout = '60s'"))
        connection.execute(
            text("SELECT pg_catalog.pg_advisory_xact_lock(:k)"), {"k": INSTALL_LOCK_KEY}
        )
        connection.execute(text("SET LOCAL lock_timeout = 0"))
        connection.execute(text("CREATE SCHEMA IF NOT EXISTS timers"))
        context.configure(
            connection=connection,
            version_table=VERSION_TABLE,
            version_table_schema=VERSION_SCHEMA,
            transactional_ddl=True,
            on_version_apply=on_apply,
        )
        with context.begin_transaction():
            context.run_migrations()
            current = connection.execute(
                text("SELECT version_num FROM timers.alembic_version")
            ).scalar()
            # The code needs every table of the head; an intermediate revision is tables only.
            code = _apply_code(connection, current, bool(applied)) if current == _head() else None
            if code is not None:
                log.info("Applied the code of revision %s (sha256 %s)", current, code[:12])
            if downgraded and current is None:
                _uninstall(connection)
        connection.commit()
    report.update(revisions=applied, code=code, revision=current)


if context.is_offline_mode():
    raise SystemExit("pgtimers migrations run online only: they apply SQL files to a database")
run_migrations_online()
