"""Hardening: safe names in messages, a deeper SQL check, the runner runs saved SQL only.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0012_hardening.sql."""
    apply_sql_file("0012_hardening.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
