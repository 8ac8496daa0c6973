"""Security: a run's settings undone, no advisory locks, cut errors, running timers stopped.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0014_security.sql."""
    apply_sql_file("0014_security.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
