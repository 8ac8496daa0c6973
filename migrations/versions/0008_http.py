"""HTTP support in SQL: keep data for (drop old partitions of range-partitioned tables).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0008_http.sql."""
    apply_sql_file("0008_http.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
