"""The schedule engine: parse, validate and compute due times in PL/pgSQL.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0002_schedule.sql."""
    apply_sql_file("0002_schedule.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
