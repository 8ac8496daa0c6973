"""The checksum of the code applied last (timers.installed_code); the code moves to sql/code.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0015_installed_code.sql."""
    apply_sql_file("migrations/0015_installed_code.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
