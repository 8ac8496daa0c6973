"""Where the shipped SQL files and alembic migrations live, in a wheel or a checkout."""

from __future__ import annotations

from pathlib import Path

# the pgtimers package folder, where a wheel puts sql/ and migrations/
_HERE = Path(__file__).resolve().parent.parent


def _shipped(name: str) -> Path:
    # In a wheel the folders are copied into the package; in a checkout they sit beside it.
    packaged = _HERE / name
    return packaged if packaged.is_dir() else _HERE.parent / name


def sql_dir() -> Path:
    """The folder of versioned SQL files (`NNNN_name.sql`)."""
    return _shipped("sql")


def migrations_dir() -> Path:
    """The alembic script folder of this package."""
    return _shipped("migrations")


def sql_file(name: str) -> str:
    """The text of one versioned SQL file."""
    return (sql_dir() / name).read_text(encoding="utf-8")
