"""Retries, pause after failures, jitter and priority: the timers' options and state, fire_at.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0018_run_policies.sql."""
    apply_sql_file("migrations/0018_run_policies.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
