"""Each timer keeps the zone its wall times are read in, resolved.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file
from pgtimers.schema.uninstall import only_to_base

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/migrations/0017_zones.sql."""
    apply_sql_file("migrations/0017_zones.sql")


def downgrade() -> None:
    """Forward-only: only `alembic downgrade base` passes, and it uninstalls pgtimers."""
    only_to_base()
