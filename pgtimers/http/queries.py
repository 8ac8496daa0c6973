"""The HTTP API's named SQL statements, kept in queries.sql beside this module; each runs
under the caller's role."""

from __future__ import annotations

from pgtimers.queries import beside

query = beside(__file__, "queries.sql")
