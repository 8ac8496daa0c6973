"""The runner's claim and bookkeeping functions, test clocks, run-now.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0005_runner.sql."""
    apply_sql_file("0005_runner.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
