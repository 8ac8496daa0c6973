"""Polling until a condition holds, failing the test with what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    what: str | Callable[[], str] = "",
    interval: float = 0.02,
) -> Any:
    """The predicate's first truthy value; AssertionError (naming `what`, which may be a
    callable such as a runner's log, read at that moment) once `timeout` s have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout} s waiting for {said or predicate}")
        time.sleep(interval)
