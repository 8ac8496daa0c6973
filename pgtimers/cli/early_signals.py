"""SIGTERM and SIGINT before the runner's own handlers are in place: noted, not fatal, so
that a runner told to stop while it starts exits 0 (it had no runs to let finish)."""

from __future__ import annotations

import os
import signal
from types import FrameType

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_received: list[int] = []
_installed: list[bool] = []


def _note(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)


def install() -> None:
    """Note SIGTERM/SIGINT from now on instead of dying by them."""
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _note)
    _installed.append(True)


def received() -> bool:
    """Whether a stop signal came since install()."""
    return bool(_received)


def uninstall() -> None:
    """Back to the default handlers (for commands other than the runner); a signal that
    came meanwhile is delivered again, now with its usual effect. Nothing without
    install() (main() called from Python)."""
    if not _installed:
        return
    _installed.clear()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if _received:
        os.kill(os.getpid(), _received[0])
