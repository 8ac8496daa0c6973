"""The runner API: the number of the internal routines this runner calls by name, checked
against the numbers a database's schema serves (sql/code/24_runner_api.sql) before the
runner serves it, and what the runner says and does when they do not match."""

from __future__ import annotations

import logging

from pgtimers.queries import beside
from pgtimers.runner import log
from pgtimers.runner.session import Session

# The runner API this runner speaks. Raise it with the schema's `newest` whenever the
# runner calls a routine of another name or arguments (docs/upgrading.md).
RUNNER_API = 1

query = beside(__file__, "api_version.sql")

INSTALL_HINT = "run: pgtimers install --dsn <this database> (with this runner's package)"
UPGRADE_HINT = (
    "upgrade the pgtimers package where this runner runs to the one installed in the"
    " database, and restart the runner"
)


class ApiMismatch(Exception):
    """The database's schema does not serve this runner's API: the runner serves it not."""

    def __init__(self, oldest: int | None, newest: int | None) -> None:
        self.oldest, self.newest = oldest, newest
        served = "none declared" if newest is None else f"{oldest}..{newest}"
        super().__init__(f"runner API {RUNNER_API}, schema serves {served}")

    @property
    def schema_older(self) -> bool:
        """The schema is older than this runner (an install fixes it), not newer."""
        return self.newest is None or self.newest < RUNNER_API

    @property
    def event(self) -> str:
        """The log line's event name."""
        return "schema_outdated" if self.schema_older else "runner_outdated"

    @property
    def hint(self) -> str:
        """What to do, for a person."""
        return INSTALL_HINT if self.schema_older else UPGRADE_HINT


async def check(control: Session) -> None:
    """Raise ApiMismatch unless the database's schema serves RUNNER_API."""
    if not await control.fetchval(query("declared")):
        raise ApiMismatch(None, None)
    row = await control.fetchrow(query("served"))
    assert row is not None  # one row, always
    oldest, newest = int(row["oldest"]), int(row["newest"])
    if not oldest <= RUNNER_API <= newest:
        raise ApiMismatch(oldest, newest)


def refused(exc: ApiMismatch, database: str, said: str, retry_in: float) -> str:
    """Log the one line of a refusal (unless it was `said` last); what was said."""
    if str(exc) != said:
        log.event(
            logging.ERROR,
            exc.event,
            database=database,
            runner_api=RUNNER_API,
            schema_api="none" if exc.newest is None else f"{exc.oldest}..{exc.newest}",
            hint=exc.hint,
            retry_in=f"{retry_in:g}s",
        )
    return str(exc)
