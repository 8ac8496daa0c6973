"""The exit codes of every `pgtimers` command, defined once."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """What a command's exit status means."""

    OK = 0
    # `pgtimers run NAME`: the run failed; `pgtimers backfill --wait`: a due time of it
    # failed, or it was cancelled; `pgtimers run`: it served no database for
    # PGTIMERS_GIVE_UP_AFTER seconds (its supervisor should start it again)
    FAILED = 1
    # `pgtimers apply --check`: the database differs from the files
    DIFFERS = 1
    BAD_INPUT = 2  # bad input or a database error; the error is on stderr


EPILOG = (
    f"exit codes: {ExitCode.OK.value} ok, {ExitCode.FAILED.value} a failed run"
    f" (or backfill, or a runner that gave up, or apply --check found a difference),"
    f" {ExitCode.BAD_INPUT.value} bad input (the error on stderr)"
)
