"""Named SQL queries kept in .sql files of the package (`-- name: x` blocks), looked up by name."""

from __future__ import annotations

import functools
import re
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
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


class NamedQueries:
    """The named queries of one .sql file, read once on first use; call it with a name."""

    def __init__(self, path: Path) -> None:
        self.path = path.resolve()

    @functools.cached_property
    def all(self) -> dict[str, str]:
        """Every named query of the file."""
        return parse(self.path.read_text(encoding="utf-8"))

    def __call__(self, name: str) -> str:
        """One named query; a KeyError names what is missing and where."""
        try:
            return self.all[name]
        except KeyError:
            shown = self.path.relative_to(_PACKAGE.parent).as_posix()
            raise KeyError(f"no query named {name!r} in {shown}") from None


def beside(module_file: str, filename: str) -> NamedQueries:
    """The named queries of `filename` in the folder of a module (pass its `__file__`)."""
    return NamedQueries(Path(module_file).with_name(filename))
