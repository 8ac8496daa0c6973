"""Parked runners: a runner may close an idle control session and still serve the database.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0021_parked_runners.sql."""
    apply_sql_file("migrations/0021_parked_runners.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
