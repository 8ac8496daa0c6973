"""Which database a command uses: the one resolver behind every command's --dsn.

The first that is set wins: the --dsn flag(s), the config file's `dsn` (`pgtimers run
--config`), PGTIMERS_DSN, DATABASE_URL; with none of them, the embedded server."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

ENVIRONMENT = ("PGTIMERS_DSN", "DATABASE_URL")
HELP = "database (default: PGTIMERS_DSN, else DATABASE_URL, else the embedded server)"


def given_dsns(
    flags: Sequence[str] | None,
    config: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """The given databases, first found of flags, config, PGTIMERS_DSN, DATABASE_URL; or []."""
    if flags:
        return list(flags)
    if config:
        return list(config)
    env = os.environ if environ is None else environ
    return next(([env[name]] for name in ENVIRONMENT if env.get(name)), [])


def resolve_dsn(flag: str | None, environ: Mapping[str, str] | None = None) -> str:
    """One database: the flag, PGTIMERS_DSN or DATABASE_URL, else the embedded server's."""
    found = given_dsns([flag] if flag else None, environ=environ)
    if found:
        return found[0]
    from pgtimers.cli.embedded import embedded_dsn

    return embedded_dsn()
