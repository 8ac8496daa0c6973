"""Facts about keyed timers that the CLI and the HTTP API both show."""

from __future__ import annotations

# timers.keyed_timers' status check, in the order of docs/keyed.md
STATUSES = ("armed", "fired", "superseded", "held", "void")
