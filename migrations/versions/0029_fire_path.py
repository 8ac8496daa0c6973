"""The fire path in one file: timers.run_outcome, the outcome of a run between its routines.

Revision ID: 0029
Revises: 0028
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0029_fire_path.sql."""
    apply_sql_file("migrations/0029_fire_path.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
