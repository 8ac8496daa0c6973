"""Lint every PL/pgSQL function of pgtimers with plpgsql_check, where the server has it.

CI runs the suite a second time on Debian's PostgreSQL 15 with postgresql-15-plpgsql-check
installed, so this check runs there; the embedded PostgreSQL 18 has no such extension.
"""

from __future__ import annotations

import psycopg
import pytest

FUNCTIONS = """
    SELECT p.oid::regprocedure::text, p.oid, p.prorettype = 'trigger'::regtype
      FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
     WHERE l.lanname = 'plpgsql' AND p.pronamespace IN ('timers'::regnamespace)
     ORDER BY 1
"""


def test_plpgsql_check_finds_no_errors(conn: psycopg.Connection) -> None:
    available = conn.execute(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'plpgsql_check'"
    ).fetchone()
    if not available:
        pytest.skip("plpgsql_check is not installed on this server (it is on CI's PostgreSQL 15)")
    conn.execute("CREATE EXTENSION plpgsql_check")
    problems: list[str] = []
    functions = conn.execute(FUNCTIONS).fetchall()
    assert len(functions) > 20
    for signature, oid, is_trigger in functions:
        if is_trigger:
            continue
        rows = conn.execute(
            "SELECT level, message, lineno, statement FROM plpgsql_check_function_tb(%s,"
            " fatal_errors => false, extra_warnings => false, other_warnings => false,"
            " performance_warnings => false)",
            [oid],
        ).fetchall()
        problems += [f"{signature} line {r[2]}: {r[0]}: {r[1]}" for r in rows if r[0] == "error"]
    assert problems == []
