-- pgtimers code: importing pg_cron's jobs (cron.job rows) as timers.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.
--
-- The import functions are SECURITY INVOKER: each job is saved by timers.save with
-- the job's username as the role in effect (SET ROLE for that one save, as a person
-- would do by hand), so a job becomes a timer of that role only when the caller may
-- act as it. No right is lent.
--
-- A superuser may act as every role, so for its import the rows decide whose timers
-- these become: timers.import_pg_cron reads them only from pg_cron's own table (a
-- member of the extension pg_cron, owned by the extension's owner), where a role that
-- is not a superuser can add jobs of its own only. A table cron.job of anyone else's
-- making is never read, not even for a dry run: a view or a row-level security policy
-- would run its maker's functions as the importing role.

-- The reason of a schedule error, without the list of valid forms it ends with.
CREATE OR REPLACE FUNCTION timers._pg_cron_reason(message text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT pg_catalog.split_part(message, '; use a schedule like ', 1)
    $$;

-- The importing role may import (a member of pgtimers_admin), else 42501.
CREATE OR REPLACE FUNCTION timers._pg_cron_may_import() RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF NOT pg_has_role(current_user, timers._role('admin'), 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to import pg_cron''s jobs: it needs the role %, and role "%" is not a member', timers._role('admin'), current_user
            USING ERRCODE = '42501',
                  HINT = 'An administrator can run: GRANT pgtimers_admin TO ' || quote_ident(current_user) || ';';
    END IF;
END
$$;

-- Why job j (a cron.job row as jsonb) cannot be a timer here, else NULL: it runs in
-- another database, on another host or port, or as a role that is not there or may
-- not save timers.
CREATE OR REPLACE FUNCTION timers._pg_cron_cannot(j jsonb) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_db   text := coalesce(j->>'database', current_database());
    v_node text := coalesce(j->>'nodename', 'localhost');
    v_port text := j->>'nodeport';
BEGIN
    IF v_db <> current_database() THEN
        RETURN format('the job runs in database %s: import it into that database (pgtimers import-pg-cron '
                      '--dsn <database %s> --cron-dsn <this database>)', quote_ident(v_db), v_db);
    END IF;
    IF NOT (v_node IN ('', 'localhost', '127.0.0.1', '::1') OR v_node LIKE '/%') THEN
        RETURN format('the job runs on host %s, not on this server: import it there', v_node);
    END IF;
    IF v_port IS NOT NULL AND v_port <> current_setting('port') THEN
        RETURN format('the job runs on port %s, and this server listens on %s: import it there',
                      v_port, current_setting('port'));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = j->>'username') THEN
        RETURN format('the job''s role %s does not exist', quote_ident(j->>'username'));
    END IF;
    IF NOT pg_has_role(j->>'username', timers._role('admin'), 'MEMBER') THEN
        RETURN format('the job''s role %1$s may not save timers: it needs the role %2$s '
                      '(GRANT %2$s TO %1$s;)', quote_ident(j->>'username'), quote_ident(timers._role('admin')));
    END IF;
    RETURN NULL;
END
$$;

-- The jobs as timers: jobs is a JSON array of cron.job rows (to_jsonb of each: jobid,
-- schedule, command, nodename, nodeport, database, username, active, jobname), as read
-- from the database where pg_cron keeps them. Each row says what became (or with
-- dry_run, would become) of one job; a job that cannot be imported is left out with its
-- reason, and the others are imported all the same. pg_cron runs a command outside a
-- transaction block, as its username: a job whose command needs that (VACUUM, CREATE
-- INDEX CONCURRENTLY, CLUSTER, REFRESH MATERIALIZED VIEW CONCURRENTLY, a CALL of a
-- procedure that may COMMIT, ...: timers._sql_wants_autonomy) becomes an autonomous
-- timer, and its row says so. run_group: the run group every imported timer is saved
-- in (timers.save's run_group; NULL: none), but an autonomous one, which cannot be in a
-- group (its row says so).
CREATE OR REPLACE FUNCTION timers.import_pg_cron_jobs(jobs jsonb, dry_run boolean DEFAULT true,
                                                      timezone text DEFAULT NULL,
                                                      run_group text DEFAULT NULL)
    RETURNS TABLE (jobid bigint, jobname text, timer text, schedule text, action text, reason text,
                   username text, command text)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    j        jsonb;
    v_zone   text;
    v_role   text := current_setting('role');
    v_taken  jsonb := '{}';
    v_user   text;
    v_active boolean;
    v_sql    text;
    v_note   text;
    v_auto   text;
    v_group  text;
    s        record;
BEGIN
    PERFORM timers._pg_cron_may_import();
    IF dry_run IS NULL THEN
        RAISE EXCEPTION 'dry_run must be true or false, not NULL' USING ERRCODE = '22004';
    END IF;
    IF import_pg_cron_jobs.run_group IS NOT NULL THEN
        v_group := timers._check_group_name(import_pg_cron_jobs.run_group);
    END IF;
    IF jsonb_typeof(jobs) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'jobs must be a JSON array of cron.job rows, not %', coalesce(jsonb_typeof(jobs), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'In the database of pg_cron: SELECT jsonb_agg(to_jsonb(j) ORDER BY jobid) FROM cron.job j;';
    END IF;
    -- pg_cron reads its schedules in cron.timezone (GMT unless set)
    v_zone := timers._check_zone(coalesce(import_pg_cron_jobs.timezone, current_setting('cron.timezone', true), 'GMT'));
    IF upper(v_zone) IN ('GMT', 'UTC', 'ETC/GMT', 'ETC/UTC', 'Z', 'ZULU', 'UCT') THEN
        v_zone := 'UTC';
    END IF;
    FOR j IN SELECT e FROM jsonb_array_elements(jobs) e LOOP
        IF jsonb_typeof(j) <> 'object' OR coalesce(j->>'jobid', '') !~ '^[0-9]{1,18}$' THEN
            RAISE EXCEPTION 'each job must be a cron.job row with a jobid, not %', left(j::text, 200)
                USING ERRCODE = '22023';
        END IF;
        jobid := (j->>'jobid')::bigint;
        jobname := j->>'jobname';
        timer := coalesce(nullif(jobname, ''), 'pg_cron_' || jobid);
        schedule := NULL;
        action := 'cannot import';
        reason := NULL;
        v_note := NULL;
        v_user := coalesce(j->>'username', current_user);
        j := j || jsonb_build_object('username', v_user);
        v_active := coalesce((j->>'active')::boolean, true);
        v_sql := j->>'command';
        -- what would run, and as whom: for the caller to check before it applies
        username := v_user;
        command := v_sql;
        IF timer !~ '^[A-Za-z0-9_-]{1,64}$' THEN
            v_note := format('named %s: the jobname is not a timer name (1 to 64 letters, digits, "_" and "-")',
                             left(regexp_replace(timer, '[^A-Za-z0-9_-]+', '_', 'g'), 64));
            timer := left(regexp_replace(timer, '[^A-Za-z0-9_-]+', '_', 'g'), 64);
        END IF;
        reason := timers._pg_cron_cannot(j);
        IF reason IS NULL THEN
            BEGIN
                schedule := timers._parse_schedule(j->>'schedule', v_zone, now())->>'schedule';
            EXCEPTION WHEN invalid_parameter_value THEN
                reason := CASE WHEN lower(btrim(coalesce(j->>'schedule', ''))) IN ('@reboot', '@restart')
                               THEN 'pgtimers has no @reboot: a timer runs at set times, not when the server starts'
                               ELSE timers._pg_cron_reason(SQLERRM) END;
            END;
        END IF;
        IF reason IS NULL AND v_taken ? lower(timer) THEN
            reason := format('job %s of this import takes the name %s already: save this one by hand under another name',
                             v_taken->>lower(timer), timer);
        END IF;
        IF reason IS NULL THEN
            v_auto := timers._sql_wants_autonomy(v_sql);
            IF v_auto IS NOT NULL THEN
                v_note := concat_ws('; ', v_note, format(
                    'autonomous: runs outside a transaction, as its owner (it uses %s; docs/running.md#autonomous-timers)',
                    v_auto));
                IF v_group IS NOT NULL THEN
                    v_note := concat_ws('; ', v_note, format(
                        'not in run group %s: an autonomous timer runs outside the transaction that holds a slot',
                        v_group));
                END IF;
            END IF;
            v_taken := v_taken || jsonb_build_object(lower(timer), jobid);
            SELECT st.name, st.schedule, st.sql, st.enabled, st.created_by, st.autonomous, st.run_group INTO s
              FROM timers.status st WHERE lower(st.name) = lower(timer);
            IF FOUND AND s.schedule = schedule AND s.sql = v_sql AND s.enabled = v_active AND s.created_by = v_user
               AND s.autonomous = (v_auto IS NOT NULL)
               AND s.run_group IS NOT DISTINCT FROM (CASE WHEN v_auto IS NULL THEN v_group END) THEN
                action := 'already imported';
                timer := s.name;
            ELSIF FOUND THEN
                reason := format('a timer named %s already exists (with another schedule, SQL, state, owner or run group): '
                                 'delete it first, or save this job by hand under another name', s.name);
            ELSE
                BEGIN
                    IF v_user <> current_user THEN
                        BEGIN
                            PERFORM set_config('role', v_user, true);
                        EXCEPTION WHEN insufficient_privilege THEN
                            RAISE EXCEPTION 'role "%" cannot act as the job''s role "%"', current_user, v_user
                                USING ERRCODE = '42501',
                                      HINT = format('Run the import as %s, or GRANT %s TO %s.',
                                                    quote_ident(v_user), quote_ident(v_user), quote_ident(current_user));
                        END;
                    END IF;
                    PERFORM timers.save(timer, schedule, v_sql, enabled => v_active, timezone => v_zone,
                                        autonomous => v_auto IS NOT NULL,
                                        run_group => CASE WHEN v_auto IS NULL THEN v_group END);
                    PERFORM set_config('role', v_role, true);
                    IF dry_run THEN
                        -- undo the save: this block's subtransaction rolls back
                        RAISE EXCEPTION USING ERRCODE = 'PTDRY', MESSAGE = 'dry run';
                    END IF;
                    action := 'imported';
                EXCEPTION
                    WHEN SQLSTATE 'PTDRY' THEN
                        action := 'would import';
                    WHEN OTHERS THEN
                        GET STACKED DIAGNOSTICS reason = MESSAGE_TEXT, v_note = PG_EXCEPTION_HINT;
                        reason := timers._pg_cron_reason(reason) || coalesce(' (' || nullif(v_note, '') || ')', '');
                        v_note := NULL;
                END;
            END IF;
        END IF;
        IF reason IS NULL THEN
            reason := v_note;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION timers.import_pg_cron_jobs(jsonb, boolean, text, text) IS
    'Import pg_cron jobs given as a JSON array of cron.job rows as timers (dry_run, the default: only report), each in run group run_group when given (not an autonomous one). One row per job: jobid, jobname, timer, schedule, action (would import, imported, already imported, cannot import), reason, username (the role the timer runs as) and command (its SQL). A job becomes a timer of its username only when the caller may SET ROLE to it. The rows are trusted as given: check them first. Needs pgtimers_admin.';

-- pg_cron's own table cron.job in this database, else an error that says what is there
-- instead and why it is not trusted: only a table that is a member of the extension
-- pg_cron and owned by the extension's owner holds rows pg_cron vouches for (a role that
-- is not a superuser can schedule jobs of its own only). Nothing of the table is read.
CREATE OR REPLACE FUNCTION timers._pg_cron_table() RETURNS regclass
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_table regclass := to_regclass('cron.job');
    v_ext   record;
    v_rel   record;
    v_why   text;
BEGIN
    IF v_table IS NULL THEN
        RAISE EXCEPTION 'pg_cron is not installed in database %: there is no table cron.job', current_database()
            USING ERRCODE = '42P01',
                  HINT = 'pg_cron keeps its jobs in one database of the server (its setting cron.database_name, '
                         'often postgres): run the import there, or read them from there with '
                         'pgtimers import-pg-cron --cron-dsn.';
    END IF;
    SELECT e.oid, pg_get_userbyid(e.extowner) AS owner, e.extowner INTO v_ext
      FROM pg_extension e WHERE e.extname = 'pg_cron';
    SELECT c.relowner, pg_get_userbyid(c.relowner) AS owner,
           CASE c.relkind WHEN 'r' THEN 'a table' WHEN 'p' THEN 'a partitioned table' WHEN 'v' THEN 'a view'
                          WHEN 'm' THEN 'a materialized view' WHEN 'f' THEN 'a foreign table'
                          ELSE 'a relation' END AS kind,
           c.relkind = 'r' AS plain,
           EXISTS (SELECT 1 FROM pg_depend d
                    WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.objsubid = 0
                      AND d.refclassid = 'pg_extension'::regclass AND d.refobjid = v_ext.oid
                      AND d.deptype = 'e') AS member
      INTO v_rel
      FROM pg_class c WHERE c.oid = v_table;
    IF v_ext.oid IS NULL THEN
        v_why := format('the extension pg_cron is not installed here, and cron.job is %s of role %s',
                        v_rel.kind, quote_ident(v_rel.owner));
    ELSIF NOT v_rel.member THEN
        v_why := format('it is not a member of the extension pg_cron (it is %s of role %s)',
                        v_rel.kind, quote_ident(v_rel.owner));
    ELSIF v_rel.relowner <> v_ext.extowner THEN
        v_why := format('it is owned by role %s, and the extension pg_cron by role %s',
                        quote_ident(v_rel.owner), quote_ident(v_ext.owner));
    ELSIF NOT v_rel.plain THEN
        v_why := format('it is %s, not a table', v_rel.kind);
    ELSE
        RETURN v_table;
    END IF;
    RAISE EXCEPTION 'cron.job in database % is not pg_cron''s own table: %', current_database(), v_why
        USING ERRCODE = '42501',
              DETAIL = 'The import reads jobs only from the table of the extension pg_cron, owned by the '
                       'extension''s owner: another table of that name could name any role as a job''s '
                       'username, and reading it could run its maker''s functions.',
              HINT = 'Find out who made cron.job and why. To import jobs you have checked yourself, '
                     'pass them to timers.import_pg_cron_jobs.';
END
$$;

-- The jobs of pg_cron installed in this database, as timers (see import_pg_cron_jobs):
-- read from pg_cron's own table only (timers._pg_cron_table).
CREATE OR REPLACE FUNCTION timers.import_pg_cron(dry_run boolean DEFAULT true, run_group text DEFAULT NULL)
    RETURNS TABLE (jobid bigint, jobname text, timer text, schedule text, action text, reason text,
                   username text, command text)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_jobs jsonb;
    v_table regclass;
BEGIN
    PERFORM timers._pg_cron_may_import();
    v_table := timers._pg_cron_table();
    -- row-level security of pg_cron: a role that is not a superuser sees its own jobs only
    EXECUTE format('SELECT coalesce(jsonb_agg(to_jsonb(j) ORDER BY j.jobid), ''[]'') FROM %s j', v_table)
        INTO v_jobs;
    RETURN QUERY SELECT * FROM timers.import_pg_cron_jobs(v_jobs, import_pg_cron.dry_run,
                                                          run_group => import_pg_cron.run_group);
END
$$;

COMMENT ON FUNCTION timers.import_pg_cron(boolean, text) IS
    'Import the jobs of pg_cron installed in this database (cron.job, only when it is the table of the extension pg_cron, owned by its owner) as timers (dry_run, the default: only report), each in run group run_group when given (not an autonomous one). One row per job: jobid, jobname, timer, schedule, action, reason, username, command. Needs pgtimers_admin.';

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._pg_cron_reason(text),
    timers._pg_cron_may_import(),
    timers._pg_cron_cannot(jsonb),
    timers._pg_cron_table(),
    timers.import_pg_cron_jobs(jsonb,boolean,text,text),
    timers.import_pg_cron(boolean,text)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._pg_cron_may_import(),
    timers.import_pg_cron_jobs(jsonb,boolean,text,text),
    timers.import_pg_cron(boolean,text)
    TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    timers._pg_cron_reason(text),
    timers._pg_cron_cannot(jsonb),
    timers._pg_cron_table()
    TO pgtimers_admin;
