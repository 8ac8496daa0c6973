"""Save-time checks of a timer's SQL: size, parse, refused statements.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0003_sqlcheck.sql."""
    apply_sql_file("0003_sqlcheck.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
