"""The pg_cron import shows each job's username and command (a changed return type).

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0023_pg_cron_import_columns.sql."""
    apply_sql_file("migrations/0023_pg_cron_import_columns.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
