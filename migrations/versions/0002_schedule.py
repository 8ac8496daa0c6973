"""The schedule engine (code only: sql/code/02_schedule_grammar.sql, 03_next_due.sql).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from pgtimers.schema.uninstall import only_to_base

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing versioned: this revision changed code only, which every upgrade applies whole."""


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
