"""Run groups: at most max_running timers of a group run at once.

Revision ID: 0030
Revises: 0029
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0030_run_groups.sql."""
    apply_sql_file("migrations/0030_run_groups.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
