"""A timer names its executor; the executor's owner is the role it runs as.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0016_executors.sql."""
    apply_sql_file("migrations/0016_executors.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
