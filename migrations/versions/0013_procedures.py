"""The procedures that COMMIT become thin shells (code only).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from pgtimers.schema.uninstall import only_to_base

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing versioned: this revision changed code only, which every upgrade applies whole."""


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
