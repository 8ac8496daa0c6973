"""Views for psql: recent runs, and trouble first.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0007_views.sql."""
    apply_sql_file("0007_views.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
