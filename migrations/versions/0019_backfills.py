"""Backfills: timers.backfill_jobs, and the runs that name one.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0019_backfills.sql."""
    apply_sql_file("migrations/0019_backfills.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
