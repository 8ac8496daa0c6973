"""Hooks for an application's own alembic: autogenerate and `alembic check` leave pgtimers alone.

pgtimers keeps everything in its schemas (timers, timers_exec), with its own version table
timers.alembic_version. An application whose env.py passes `include_schemas=True` would
otherwise see every pgtimers table as one its models lack, and autogenerate would drop them.
In the application's env.py:

    import pgtimers.alembic

    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_schemas=True,
        include_name=pgtimers.alembic.include_name,  # pgtimers' schemas are not even read
        include_object=pgtimers.alembic.include_object,
    )

With filters of its own, wrap them: `include_object=include_object_excluding_pgtimers(mine)`
(and `include_name_excluding_pgtimers(mine)`): pgtimers' objects are left out, the rest is
up to `mine`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

SCHEMAS = frozenset({"timers", "timers_exec"})

# alembic's hook signatures: include_object(object, name, type_, reflected, compare_to)
# and include_name(name, type_, parent_names)
IncludeObject = Callable[[Any, "str | None", str, bool, Any], bool]
IncludeName = Callable[["str | None", str, Mapping[str, "str | None"]], bool]


def _schema_of(obj: Any, type_: str) -> str | None:
    if type_ == "table":
        return getattr(obj, "schema", None)
    table = getattr(obj, "table", None)  # columns, indexes, constraints
    return getattr(table, "schema", None) if table is not None else getattr(obj, "schema", None)


def is_pgtimers(obj: Any, type_: str) -> bool:
    """Whether an object alembic compares (a table, or a column, index or constraint of
    one) lives in one of pgtimers' schemas."""
    return _schema_of(obj, type_) in SCHEMAS


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """alembic's include_object hook: False for pgtimers' objects, True for the rest."""
    return not is_pgtimers(obj, type_)


def include_name(name: str | None, type_: str, parent_names: Mapping[str, str | None]) -> bool:
    """alembic's include_name hook: pgtimers' schemas (and what is in them) are not reflected."""
    if type_ == "schema":
        return name not in SCHEMAS
    return parent_names.get("schema_name") not in SCHEMAS


def include_object_excluding_pgtimers(other: IncludeObject | None = None) -> IncludeObject:
    """An include_object hook that leaves pgtimers' objects out and asks `other` about the rest."""

    def hook(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        if is_pgtimers(obj, type_):
            return False
        return other is None or other(obj, name, type_, reflected, compare_to)

    return hook


def include_name_excluding_pgtimers(other: IncludeName | None = None) -> IncludeName:
    """An include_name hook that leaves pgtimers' schemas out and asks `other` about the rest."""

    def hook(name: str | None, type_: str, parent_names: Mapping[str, str | None]) -> bool:
        if not include_name(name, type_, parent_names):
            return False
        return other is None or other(name, type_, parent_names)

    return hook
