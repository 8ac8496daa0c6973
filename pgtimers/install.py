"""Shim: `pgtimers.install` is now `pgtimers.schema.install`; kept for migrations/ and
tests/migration/, which still import it by its old name."""

from __future__ import annotations

from pgtimers.schema.install import (
    INSTALL_LOCK_KEY,
    VERSION_SCHEMA,
    VERSION_TABLE,
    Installed,
    alembic_config,
    current_revision,
    engine_for,
    install,
    upgrade,
)

__all__ = [
    "INSTALL_LOCK_KEY",
    "VERSION_SCHEMA",
    "VERSION_TABLE",
    "Installed",
    "alembic_config",
    "current_revision",
    "engine_for",
    "install",
    "upgrade",
]
