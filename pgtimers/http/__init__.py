"""The HTTP API, metrics and console of `pgtimers run --http`, on the runner's event loop."""
