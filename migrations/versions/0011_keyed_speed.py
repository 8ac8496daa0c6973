"""Keyed fires on test clocks, faster (code only: sql/code/13_test_clocks.sql).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from pgtimers.schema.uninstall import only_to_base

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing versioned: this revision changed code only, which every upgrade applies whole."""


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
