"""The runner: a catch-up column, the due indexes, timers.runners and timers.run_requests.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0005_runners_and_requests.sql."""
    apply_sql_file("migrations/0005_runners_and_requests.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
