"""Shim: `pgtimers.migrate` is now `pgtimers.schema.migrate`; kept for the alembic revisions
in migrations/versions/, which still import it by its old name."""

from __future__ import annotations

from pgtimers.schema.migrate import apply_sql_file

__all__ = ["apply_sql_file"]
