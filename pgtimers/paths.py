"""Shim: `pgtimers.paths` is now `pgtimers.schema.paths`; kept for migrations/env.py, which
still imports it by its old name."""

from __future__ import annotations

from pgtimers.schema.paths import migrations_dir, sql_dir, sql_file

__all__ = ["migrations_dir", "sql_dir", "sql_file"]
