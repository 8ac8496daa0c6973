"""Which database a command uses: the one resolver behind the --dsn of every command."""

from __future__ import annotations

import os

HELP = "database (default: PGTIMERS_DSN, else DATABASE_URL, else the embedded server)"


def resolve_dsn(flag: str | None) -> str:
    """The DSN from the flag, else PGTIMERS_DSN, else DATABASE_URL, else the embedded server."""
    found = flag or os.environ.get("PGTIMERS_DSN") or os.environ.get("DATABASE_URL")
    if found:
        return found
    from pgtimers.cli.embedded import embedded_dsn

    return embedded_dsn()
