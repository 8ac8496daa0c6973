-- Named queries of the runner API check (pgtimers/runner/api_version.py), loaded by name.
-- Each block starts with `-- name: <name>`; parameters are $1, $2 ... (asyncpg).

-- name: declared
-- Whether the schema declares the runner API numbers it serves (one that does not is
-- older than every runner that checks).
SELECT pg_catalog.to_regprocedure('timers._runner_api()') IS NOT NULL

-- name: served
-- The runner API numbers the schema serves: oldest, newest.
SELECT oldest, newest FROM timers._runner_api()
