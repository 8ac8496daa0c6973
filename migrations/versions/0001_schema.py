"""Roles, schemas and the core tables: settings, test clocks, calendars, timers, runs, audit.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0001_schema.sql."""
    apply_sql_file("migrations/0001_schema.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
