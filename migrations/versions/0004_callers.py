"""Caller tickets: timers.callers with row-level security.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0004_callers.sql."""
    apply_sql_file("migrations/0004_callers.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
