"""The console script's entry point: stop signals are noted before anything heavy loads,
so a `pgtimers run` told to stop while it starts exits 0, not by the signal."""

from __future__ import annotations

from pgtimers.cli import early_signals


def main() -> int:
    """Install the early signal handlers, then run the command line."""
    early_signals.install()
    from pgtimers.cli.main import main as command_line

    return command_line()
