"""A timer runs only as the role that saved it, also after a rename: owners keep their oid.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0014_owner_oid.sql."""
    apply_sql_file("0014_owner_oid.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
