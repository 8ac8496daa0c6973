"""Views for psql (code only: sql/code/17_views.sql).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from pgtimers.schema.uninstall import only_to_base

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing versioned: this revision changed code only, which every upgrade applies whole."""


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
