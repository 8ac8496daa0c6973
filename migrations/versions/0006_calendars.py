"""Trading calendars (code only: sql/code/05_calendars.sql).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from pgtimers.schema.uninstall import only_to_base

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing versioned: this revision changed code only, which every upgrade applies whole."""


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
