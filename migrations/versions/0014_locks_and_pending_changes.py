"""Locks only pgtimers can take (timers.locks), runner identity, changes of running timers.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0014_locks_and_pending_changes.sql."""
    apply_sql_file("migrations/0014_locks_and_pending_changes.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
