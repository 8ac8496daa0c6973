"""Keyed timers fire faster on test clocks: the advance naps for the time the stop should take.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0011_keyed_speed.sql."""
    apply_sql_file("0011_keyed_speed.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
