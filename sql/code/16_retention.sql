-- pgtimers code: retention: history pruning and dropping old partitions.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- Retention: runs, ended run-now requests and backfills, and events (with their
-- deliveries) older than runs_retention; one pruner at a time by timers.locks 'prune'.
CREATE OR REPLACE FUNCTION timers._prune() RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_keep interval;
    v_runs bigint := 0;
    v_batch bigint;
    v_requests bigint;
    v_events bigint := 0;
BEGIN
    PERFORM 1 FROM timers.locks k WHERE k.name = 'prune' FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_keep := coalesce((SELECT value::interval FROM timers.settings WHERE key = 'runs_retention'),
                       interval '30 days');
    -- caller tickets left by transactions that have ended (a call that checked rights but
    -- then acted for nobody leaves one)
    DELETE FROM timers.callers WHERE xid < pg_snapshot_xmin(pg_current_snapshot());
    LOOP
        DELETE FROM timers.runs WHERE id IN (
            SELECT id FROM timers.runs WHERE started_at < now() - v_keep LIMIT 10000);
        GET DIAGNOSTICS v_batch = ROW_COUNT;
        v_runs := v_runs + v_batch;
        EXIT WHEN v_batch < 10000;
    END LOOP;
    UPDATE timers.run_requests
       SET finished_at = clock_timestamp(),
           result = jsonb_build_object('name', timer, 'finished', false, 'ok', NULL,
                                       'error', 'no runner took the request within 5 minutes',
                                       'took_ms', 0, 'rows', 0)
     WHERE finished_at IS NULL AND requested_at < now() - interval '5 minutes';
    DELETE FROM timers.run_requests WHERE finished_at < now() - interval '1 day';
    GET DIAGNOSTICS v_requests = ROW_COUNT;
    -- ended backfills go with their runs
    DELETE FROM timers.backfill_jobs WHERE ended_at < now() - v_keep;
    -- and the events (their deliveries with them), in batches as the runs
    LOOP
        DELETE FROM timers.events WHERE id IN (
            SELECT id FROM timers.events WHERE at < now() - v_keep LIMIT 10000);
        GET DIAGNOSTICS v_batch = ROW_COUNT;
        v_events := v_events + v_batch;
        EXIT WHEN v_batch < 10000;
    END LOOP;
    RETURN jsonb_build_object('runs', v_runs, 'run_requests', v_requests, 'events', v_events,
                              'retention', v_keep::text);
END
$$;

-- The partition key column type of a table keep_data_for can work on; raises a
-- clear error for anything else (not partitioned, not by range, wrong key).
CREATE OR REPLACE FUNCTION timers._keep_key_type(p_table regclass) RETURNS regtype
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_kind "char";
    v_strategy "char";
    v_natts smallint;
    v_attnum smallint;
    v_type regtype;
BEGIN
    IF p_table IS NULL THEN
        RAISE EXCEPTION 'table must name a range-partitioned table, not NULL' USING ERRCODE = '22004';
    END IF;
    SELECT c.relkind INTO v_kind FROM pg_class c WHERE c.oid = p_table;
    IF v_kind IS DISTINCT FROM 'p' THEN
        RAISE EXCEPTION 'table % is not partitioned: keep data for drops whole partitions of a range-partitioned table and never single rows', p_table
            USING ERRCODE = '42809',
                  HINT = 'Partition it by a date or time column: CREATE TABLE ... PARTITION BY RANGE (created_at).';
    END IF;
    SELECT p.partstrat, p.partnatts, p.partattrs[0] INTO v_strategy, v_natts, v_attnum
      FROM pg_partitioned_table p WHERE p.partrelid = p_table;
    IF v_strategy <> 'r' THEN
        RAISE EXCEPTION 'table % is partitioned by %, not by range: keep data for needs partitions that each hold a range of time', p_table,
            CASE v_strategy WHEN 'l' THEN 'list' WHEN 'h' THEN 'hash' ELSE v_strategy::text END
            USING ERRCODE = '42809';
    END IF;
    IF v_natts <> 1 OR v_attnum = 0 THEN
        RAISE EXCEPTION 'table % is partitioned by %: keep data for needs a key of one date, timestamp or timestamptz column', p_table,
            pg_get_partkeydef(p_table)
            USING ERRCODE = '42809';
    END IF;
    SELECT a.atttypid::regtype INTO v_type
      FROM pg_attribute a WHERE a.attrelid = p_table AND a.attnum = v_attnum;
    IF v_type NOT IN ('date'::regtype, 'timestamp without time zone'::regtype, 'timestamp with time zone'::regtype) THEN
        RAISE EXCEPTION 'table % is partitioned by %, a column of type %: keep data for needs a date, timestamp or timestamptz column', p_table,
            pg_get_partkeydef(p_table), v_type
            USING ERRCODE = '42809';
    END IF;
    RETURN v_type;
END
$$;

-- A retention span for keep_data_for: at least a day.
CREATE OR REPLACE FUNCTION timers._check_keep(p_keep interval) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_keep IS NULL OR p_keep < interval '1 day' THEN
        RAISE EXCEPTION 'bad keep %: keep data for at least 1 day, for example ''6 months'' or ''1 year''',
            coalesce(quote_literal(p_keep::text), 'NULL')
            USING ERRCODE = '22023';
    END IF;
END
$$;

-- The exclusive upper bound of a range partition as text, NULL for a DEFAULT
-- partition or MAXVALUE. Bounds are literals of the key's type, so the caller
-- casts the text to it.
CREATE OR REPLACE FUNCTION timers._partition_upper(p_partition regclass) RETURNS text
    LANGUAGE sql STABLE
    AS $$
        SELECT replace(m[1], '''''', '''')
          FROM pg_class c,
               regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''(.*)''\)$') AS m
         WHERE c.oid = p_partition
    $$;

-- Detach and drop every partition of p_table whose upper bound is at or before
-- now() - p_keep (so every row it can hold is older than that). Returns the
-- dropped partitions' qualified names, one row each: a timer's last_rows counts them.
CREATE OR REPLACE FUNCTION timers.drop_old_partitions("table" regclass, keep interval)
    RETURNS SETOF text
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_type regtype := timers._keep_key_type(drop_old_partitions."table");
    v_cutoff timestamptz;
    v_part regclass;
    v_name text;
    v_upper text;
    v_old boolean;
BEGIN
    PERFORM timers._check_keep(drop_old_partitions.keep);
    v_cutoff := now() - drop_old_partitions.keep;
    FOR v_part IN
        SELECT i.inhrelid::regclass FROM pg_inherits i
         WHERE i.inhparent = drop_old_partitions."table"
         ORDER BY i.inhrelid::regclass::text
    LOOP
        v_upper := timers._partition_upper(v_part);
        CONTINUE WHEN v_upper IS NULL;
        v_old := CASE WHEN v_type = 'timestamp with time zone'::regtype THEN v_upper::timestamptz <= v_cutoff
                      ELSE v_upper::timestamp <= v_cutoff::timestamp END;
        CONTINUE WHEN NOT v_old;
        v_name := v_part::text;
        EXECUTE format('ALTER TABLE %s DETACH PARTITION %s', drop_old_partitions."table", v_part);
        EXECUTE format('DROP TABLE %s', v_part);
        RETURN NEXT v_name;
    END LOOP;
END
$$;

COMMENT ON FUNCTION timers.drop_old_partitions(regclass, interval) IS
    'Detach and drop the partitions of a range-partitioned table whose every row is older than now() - keep; returns their names. Never deletes single rows.';

-- The name of a table's keep timer: keep_<table>, or keep_<schema>_<table>
-- outside public; only the characters a timer name may have, at most 64.
CREATE OR REPLACE FUNCTION timers._keep_timer_name(p_table regclass) RETURNS text
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT left('keep_' || regexp_replace(
                   CASE WHEN n.nspname = 'public' THEN c.relname ELSE n.nspname || '_' || c.relname END,
                   '[^A-Za-z0-9_-]', '_', 'g'), 64)
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.oid = p_table
    $$;

-- Save the timer that keeps p_table's data for p_keep: on p_schedule it drops
-- the partitions older than that. Runs as the caller, who must own the table.
CREATE OR REPLACE FUNCTION timers.keep_data_for(
    "table" regclass, keep interval, schedule text DEFAULT 'monthly 1 02:00')
    RETURNS timers.status
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_owner name;
    v_qualified text;
BEGIN
    PERFORM timers._require_admin('save a keep-data timer');
    PERFORM timers._keep_key_type(keep_data_for."table");
    PERFORM timers._check_keep(keep_data_for.keep);
    SELECT r.rolname, format('%I.%I', n.nspname, c.relname) INTO v_owner, v_qualified
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
      JOIN pg_roles r ON r.oid = c.relowner
     WHERE c.oid = keep_data_for."table";
    IF NOT pg_has_role(current_user, v_owner, 'USAGE') THEN
        RAISE EXCEPTION 'permission denied to keep data for table %: its partitions can be dropped only by its owner "%", and role "%" is not', keep_data_for."table", v_owner, current_user
            USING ERRCODE = '42501',
                  HINT = 'Call timers.keep_data_for as the table''s owner (SET ROLE ' || quote_ident(v_owner) || ').';
    END IF;
    RETURN timers.save(
        name => timers._keep_timer_name(keep_data_for."table"),
        schedule => coalesce(keep_data_for.schedule, 'monthly 1 02:00'),
        sql => format('SELECT * FROM timers.drop_old_partitions(%L, %L)', v_qualified, keep_data_for.keep::text));
END
$$;

COMMENT ON FUNCTION timers.keep_data_for(regclass, interval, text) IS
    'Save the timer keep_<table> that runs timers.drop_old_partitions(table, keep) on schedule (default monthly 1 02:00). Needs pgtimers_admin and the table''s ownership.';

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._prune(),
    timers._keep_key_type(regclass),
    timers._check_keep(interval),
    timers._partition_upper(regclass),
    timers.drop_old_partitions(regclass,interval),
    timers._keep_timer_name(regclass),
    timers.keep_data_for(regclass,interval,text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._prune()
    TO pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._keep_key_type(regclass),
    timers._check_keep(interval),
    timers._partition_upper(regclass),
    timers._keep_timer_name(regclass)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers.drop_old_partitions(regclass,interval),
    timers.keep_data_for(regclass,interval,text)
    TO pgtimers_admin;
