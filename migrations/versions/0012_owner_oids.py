"""Each timer keeps its owner's oid: a rename never hands it to another role.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0012_owner_oids.sql."""
    apply_sql_file("migrations/0012_owner_oids.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
