"""Keep data for: dropping old partitions (code only: sql/code/16_retention.sql).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from pgtimers.schema.uninstall import only_to_base

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing versioned: this revision changed code only, which every upgrade applies whole."""


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
