"""Autonomous timers: timers.timers gains autonomous; timers.autonomous_runs, attempts under way.

Revision ID: 0026
Revises: 0025
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0026_autonomous.sql."""
    apply_sql_file("migrations/0026_autonomous.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
