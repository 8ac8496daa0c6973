"""Alembic environment for pgtimers: its own version table in schema timers, one install lock."""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import text

from pgtimers.install import INSTALL_LOCK_KEY, VERSION_SCHEMA, VERSION_TABLE, engine_for

config = context.config


def _dsn() -> str:
    dsn = config.attributes.get("dsn") or context.get_x_argument(as_dictionary=True).get("dsn")
    dsn = dsn or config.get_main_option("sqlalchemy.url")
    dsn = dsn or os.environ.get("PGTIMERS_DSN") or os.environ.get("DATABASE_URL")
    if not dsn:
        raise SystemExit("no database: pass -x dsn=..., or set PGTIMERS_DSN or DATABASE_URL")
    return str(dsn).replace("postgresql+psycopg://", "postgresql://", 1)


def run_migrations_online() -> None:
    """Apply the pending revisions in one transaction, under an advisory lock."""
    engine = engine_for(_dsn())
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": INSTALL_LOCK_KEY})
        connection.execute(text("CREATE SCHEMA IF NOT EXISTS timers"))
        context.configure(
            connection=connection,
            version_table=VERSION_TABLE,
            version_table_schema=VERSION_SCHEMA,
            transactional_ddl=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


if context.is_offline_mode():
    raise SystemExit("pgtimers migrations run online only: they apply SQL files to a database")
run_migrations_online()
