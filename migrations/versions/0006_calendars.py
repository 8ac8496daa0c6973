"""Trading calendars: week eras, holidays, extra trading days, and their timers.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from pgtimers.migrate import apply_sql_file

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply sql/0006_calendars.sql."""
    apply_sql_file("0006_calendars.sql")


def downgrade() -> None:
    """pgtimers migrations are forward-only."""
    raise RuntimeError("pgtimers migrations are forward-only")
