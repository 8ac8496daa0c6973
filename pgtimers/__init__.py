"""pgtimers: PostgreSQL-native timers that run saved SQL at set times, exactly once per due time."""

from __future__ import annotations

__version__ = "0.1.0"
