"""The runner: serves databases, claims due timers and runs each in its own transaction."""
