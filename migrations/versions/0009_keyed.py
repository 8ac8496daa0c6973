"""Keyed occurrence timers: arm, move, hold, resume, repin, fire once in tick order, test clocks.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0009_keyed.sql."""
    apply_sql_file("0009_keyed.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
