"""Locks only pgtimers can take (timers.locks), runner identity, changes of running timers.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0014_locks_and_pending_changes.sql."""
    apply_sql_file("migrations/0014_locks_and_pending_changes.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
