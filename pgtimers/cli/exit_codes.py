"""The exit codes of every `pgtimers` command, defined once."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """What a command's exit status means."""

    OK = 0
    FAILED = 1  # `pgtimers run NAME`: the run failed
    BAD_INPUT = 2  # bad input or a database error; the error is on stderr


EPILOG = (
    f"exit codes: {ExitCode.OK.value} ok, {ExitCode.FAILED.value} a failed run,"
    f" {ExitCode.BAD_INPUT.value} bad input (the error on stderr)"
)
