"""The runner's named SQL statements, kept in queries.sql and loaded by name."""

from __future__ import annotations

import functools
import re
from pathlib import Path

_FILE = Path(__file__).resolve().parent / "queries.sql"
_NAME = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$")


def parse(text: str) -> dict[str, str]:
    """Split a file of `-- name: x` blocks into {name: statement}; comments are dropped."""
    queries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        found = _NAME.match(line)
        if found:
            name = found.group(1)
            if name in queries:
                raise ValueError(f"query {name!r} is defined twice in queries.sql")
            current = queries[name] = []
        elif current is not None and not line.lstrip().startswith("--"):
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in queries.items()}


@functools.cache
def _all() -> dict[str, str]:
    return parse(_FILE.read_text(encoding="utf-8"))


def query(name: str) -> str:
    """The statement named `name` in queries.sql; KeyError names the unknown one."""
    try:
        return _all()[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in {_FILE}") from None
