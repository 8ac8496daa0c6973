"""Telling a person: deadlines, history, messages, histograms; timers.events and its deliveries.

Revision ID: 0027
Revises: 0026
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0027_telling_a_person.sql."""
    apply_sql_file("migrations/0027_telling_a_person.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
