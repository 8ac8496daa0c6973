"""The runner's named SQL statements, kept in queries.sql and loaded by name."""

from __future__ import annotations

from pgtimers.queries import parse
from pgtimers.queries import query as _query

__all__ = ["parse", "query"]


def query(name: str) -> str:
    """The statement named `name` in queries.sql; KeyError names the unknown one."""
    return _query("queries.sql", name)
