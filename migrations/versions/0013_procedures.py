"""Thin shells for CALL timers.run and timers.advance_test_clock (they COMMIT).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0013_procedures.sql."""
    apply_sql_file("0013_procedures.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
