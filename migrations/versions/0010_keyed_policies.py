"""Keyed re-arms: timers.keyed_policies and the calendar and policy columns of keyed timers.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0010_keyed_policies.sql."""
    apply_sql_file("migrations/0010_keyed_policies.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
