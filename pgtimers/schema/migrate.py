"""Helpers for alembic revisions: each revision applies exactly one file from sql/."""

from __future__ import annotations

from alembic import op

from pgtimers.schema.paths import sql_file


def apply_sql_file(name: str) -> None:
    """Run one versioned SQL file on the migration's connection, inside its transaction."""
    driver_conn = op.get_bind().connection.driver_connection
    if driver_conn is None:
        raise RuntimeError("the migration connection is closed")
    # No parameters: psycopg uses the simple protocol, so the file may hold many statements.
    driver_conn.execute(sql_file(name))
