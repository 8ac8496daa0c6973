"""Catch-up window and the previous due time: timers.timers gains catch_up_window and origin_at.

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0025_catch_up_window.sql."""
    apply_sql_file("migrations/0025_catch_up_window.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
