"""Keyed occurrence timers: timers.keyed_timers and timers.keyed_events.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0009_keyed_timers.sql."""
    apply_sql_file("migrations/0009_keyed_timers.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
