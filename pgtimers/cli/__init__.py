"""The `pgtimers` command line: install, administer timers, import calendars, run the runner."""
