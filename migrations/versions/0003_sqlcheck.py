"""Save-time checks of a timer's SQL (code only: sql/code/04_sql_checks.sql).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from pgtimers.schema.uninstall import only_to_base

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing versioned: this revision changed code only, which every upgrade applies whole."""


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
