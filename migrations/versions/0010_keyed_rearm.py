"""Keyed timers: calendar edits re-roll their dates, policy changes re-arm silence spans.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0010_keyed_rearm.sql."""
    apply_sql_file("0010_keyed_rearm.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
