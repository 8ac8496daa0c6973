"""Timers that wait for other timers: timers.follows and timers.follow_dues.

Revision ID: 0031
Revises: 0030
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0031_following.sql."""
    apply_sql_file("migrations/0031_following.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
