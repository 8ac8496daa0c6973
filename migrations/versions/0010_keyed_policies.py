"""Keyed re-arms: timers.keyed_policies and the calendar and policy columns of keyed timers.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0010_keyed_policies.sql."""
    apply_sql_file("migrations/0010_keyed_policies.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
