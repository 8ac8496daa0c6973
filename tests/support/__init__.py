"""Helpers shared by the test packages: `pgtimers run` subprocesses, waiting, embedded servers."""
