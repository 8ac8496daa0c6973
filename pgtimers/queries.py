"""Named SQL queries kept in .sql files of the package, looked up by name."""

from __future__ import annotations

import functools
import re
from pathlib import Path

_NAME = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


@functools.cache
def load(filename: str) -> dict[str, str]:
    """Every `-- name: x` block of a package .sql file, by name."""
    text = (Path(__file__).resolve().parent / filename).read_text(encoding="utf-8")
    parts = _NAME.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def query(filename: str, name: str) -> str:
    """One named query; a KeyError names what is missing."""
    try:
        return load(filename)[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in pgtimers/{filename}") from None
