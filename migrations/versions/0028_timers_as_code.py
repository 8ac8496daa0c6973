"""Timers as code: timers.timers gains managed_by; applies take turns (timers.locks apply).

Revision ID: 0028
Revises: 0027
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0028_timers_as_code.sql."""
    apply_sql_file("migrations/0028_timers_as_code.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
