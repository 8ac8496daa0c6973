-- Named queries of `pgtimers apply` and `export` (pgtimers/cli/apply.py). Parameters are
-- %(name)s (psycopg).

-- name: apply
-- The plan of a spec (dry_run) or the plan it carried out, in one statement.
SELECT action, name, changes
  FROM timers.apply(%(spec)s::jsonb, prune => %(prune)s, dry_run => %(dry_run)s);

-- name: export
SELECT timers.export(%(pattern)s);

-- name: database_now
SELECT current_database(), now();
