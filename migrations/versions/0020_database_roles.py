"""Database roles: a caller ticket's policy applies to whichever role may insert one.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0020_database_roles.sql."""
    apply_sql_file("migrations/0020_database_roles.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
