"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("${up_revision}_CHANGE.sql")


def downgrade() -> None:
    raise RuntimeError("pgtimers migrations are forward-only")
