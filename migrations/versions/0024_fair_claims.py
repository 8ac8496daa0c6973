"""Fair claims: timers_due orders by fire_at, then last_run_at (never first), then id.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0024_fair_claims.sql."""
    apply_sql_file("migrations/0024_fair_claims.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
