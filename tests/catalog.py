"""A comparable snapshot of everything pgtimers puts in a database's catalog."""

from __future__ import annotations

from typing import Any

import psycopg

SCHEMAS = ("timers", "timers_exec")

_QUERIES = {
    "columns": """
        SELECT table_schema, table_name, column_name, data_type, is_nullable,
               column_default, is_identity, generation_expression
          FROM information_schema.columns WHERE table_schema = ANY(%(s)s)
         ORDER BY 1, 2, column_name""",
    "indexes": """
        SELECT schemaname, indexname, indexdef FROM pg_indexes
         WHERE schemaname = ANY(%(s)s) ORDER BY 1, 2""",
    "constraints": """
        SELECT n.nspname, c.relname, k.conname, pg_get_constraintdef(k.oid)
          FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = ANY(%(s)s) ORDER BY 1, 2, 3""",
    "functions": """
        SELECT n.nspname, p.proname, pg_get_function_identity_arguments(p.oid),
               pg_get_functiondef(p.oid), p.proacl::text, obj_description(p.oid, 'pg_proc')
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = ANY(%(s)s) ORDER BY 1, 2, 3""",
    "relations": """
        SELECT n.nspname, c.relname, c.relkind, c.relacl::text,
               CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END,
               obj_description(c.oid, 'pg_class')
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = ANY(%(s)s) AND c.relkind IN ('r', 'v', 'S', 'p')
         ORDER BY 1, 2""",
    "triggers": """
        SELECT n.nspname, c.relname, t.tgname, pg_get_triggerdef(t.oid)
          FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = ANY(%(s)s) AND NOT t.tgisinternal ORDER BY 1, 2, 3""",
    "column_rights_and_comments": """
        SELECT n.nspname, c.relname, a.attname, a.attacl::text, col_description(c.oid, a.attnum)
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = ANY(%(s)s) AND a.attnum > 0 AND NOT a.attisdropped
           AND (a.attacl IS NOT NULL OR col_description(c.oid, a.attnum) IS NOT NULL)
         ORDER BY 1, 2, 3""",
    "row_security": """
        SELECT n.nspname, c.relname, c.relrowsecurity, c.relforcerowsecurity
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = ANY(%(s)s) AND c.relkind IN ('r', 'p') ORDER BY 1, 2""",
    "policies": """
        SELECT schemaname, tablename, policyname, permissive, roles::text, cmd, qual, with_check
          FROM pg_policies WHERE schemaname = ANY(%(s)s) ORDER BY 1, 2, 3""",
    "schemas": """
        SELECT nspname, nspacl::text FROM pg_namespace WHERE nspname = ANY(%(s)s) ORDER BY 1""",
    "settings": "SELECT key, value FROM timers.settings ORDER BY key",
    "version": "SELECT version_num FROM timers.alembic_version",
}


def snapshot(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every pgtimers catalog entry of the database, as sorted rows per kind. Read with an
    empty search path: an expression bound to a function or operator outside pg_catalog
    shows its schema."""
    with psycopg.connect(dsn, options="-c search_path=") as conn:
        return {
            kind: conn.execute(query, {"s": list(SCHEMAS)}).fetchall()
            for kind, query in _QUERIES.items()
        }
