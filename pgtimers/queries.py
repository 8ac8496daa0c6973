"""Named SQL queries kept in .sql files of the package (`-- name: x` blocks), looked up by name."""

from __future__ import annotations

import functools
import re
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_NAME = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$")


def parse(text: str) -> dict[str, str]:
    """Split a file of `-- name: x` blocks into {name: statement}; comment lines are dropped."""
    queries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        found = _NAME.match(line)
        if found:
            name = found.group(1)
            if name in queries:
                raise ValueError(f"query {name!r} is defined twice")
            current = queries[name] = []
        elif current is not None and not line.lstrip().startswith("--"):
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in queries.items()}


@functools.cache
def load(filename: str) -> dict[str, str]:
    """Every named query of one package .sql file."""
    return parse((_HERE / filename).read_text(encoding="utf-8"))


def query(filename: str, name: str) -> str:
    """One named query; a KeyError names what is missing."""
    try:
        return load(filename)[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in pgtimers/{filename}") from None
