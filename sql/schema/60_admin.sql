-- ---------------------------------------------------------------------------------------------
-- Admins. The DDL helpers run as the owner; the admin API runs as pyretrieve_api (SECURITY
-- DEFINER, written reason: principals hold no table privilege; these functions are the admins'
-- door to the configuration tables, and each checks that the caller is an admin).
-- ---------------------------------------------------------------------------------------------
CREATE FUNCTION pyretrieve.require_admin()
RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT pyretrieve.caller_in('pyretrieve_admin') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
END;
$$;

-- SECURITY DEFINER, written reason: a sequence is created by its owner, and neither admins nor
-- pyretrieve_api may own schema objects. The name is derived from the scope (never spliced from
-- the arguments' text), quoted, and only create_project (pyretrieve_api) may execute it.
CREATE FUNCTION pyretrieve.create_scope_sequence(p_workspace text, p_project text)
RETURNS regclass
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name text;
BEGIN
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    v_name := 'generation_' || substr(encode(sha256(convert_to(p_workspace || '/' || p_project, 'UTF8')), 'hex'), 1, 32);
    EXECUTE format('CREATE SEQUENCE IF NOT EXISTS pyretrieve.%I AS bigint', v_name);
    EXECUTE format('GRANT USAGE ON SEQUENCE pyretrieve.%I TO pyretrieve_api', v_name);
    RETURN format('pyretrieve.%I', v_name)::regclass;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_scope_sequence(text, text) IS
    'Create (idempotently) the generation sequence of one workspace/project and return it. SECURITY DEFINER because creating a sequence makes its caller the owner, and only pyretrieve_owner may own schema objects; executable by pyretrieve_api only (create_project).';

-- SECURITY DEFINER, written reason: creating an index on pyretrieve.embeddings requires owning
-- the table, and neither admins nor pyretrieve_api may own it. The function reads the model from the registry
-- (never from its arguments' text), quotes every identifier, and only admins may execute it.
CREATE FUNCTION pyretrieve.create_model_index(p_model text)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m pyretrieve.embedding_models;
    v_name text;
BEGIN
    SELECT * INTO m FROM pyretrieve.embedding_models em WHERE em.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    v_name := format('embeddings_hnsw_m%s', m.model_serial);
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON pyretrieve.embeddings USING hnsw ((embedding::public.vector(%s)) public.vector_cosine_ops) WHERE model_id = %L',
        v_name, m.dimension, m.model_id);
    RETURN v_name;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_model_index(text) IS
    'Create a per-model HNSW index over every scope (cosine, on the embedding cast to the model''s dimension, partial on the model). No search reads it: the vector leg scans a scope exactly or through the scope''s own index (create_vector_index), and since migration 0016 register_model no longer builds it. Kept for admins who want it for their own work. SECURITY DEFINER because index creation needs the table owner; executable by admins only.';

-- The build options of every scope's own HNSW index, one place: create_scope_vector_index
-- builds with them and maintain_vector_indexes rebuilds an index built with others. Measured in
-- evals/bench/hnsw-sweep-synthetic-100k.json on 100,000 low-contrast clustered vectors, searched
-- at ef_search 1000 (pgvector's maximum): recall@100 0.956 with m 16 and ef_construction 128
-- (the options until 0048), 0.990 with these; through the leg, with a tenth of the scope hidden,
-- 0.997 (evals/bench/vector-index-0049.json). A denser graph (m 48) reached 0.998 but searched
-- about as slowly as the exact scan at 50,000 rows. pg_class.reloptions spells an index's
-- options so, in this order.
CREATE FUNCTION pyretrieve.vector_index_options()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN ARRAY['m=32', 'ef_construction=256']::text[];
COMMENT ON FUNCTION pyretrieve.vector_index_options() IS
    'The HNSW build options (reloptions) of every scope''s own index: m 32, ef_construction 256. create_scope_vector_index builds with them; maintain_vector_indexes rebuilds an index built with others. Internal (pyretrieve_api).';

-- SECURITY DEFINER, written reason: as create_model_index, an index on pyretrieve.embeddings
-- needs the table's owner. The name and the predicate are built from two integers (the scope's
-- serial, the model's serial and dimension read from the registry) and the model id quoted as a
-- literal, so the catalog, which every role may read, names no workspace or project; only
-- create_vector_index (pyretrieve_api), which checks the caller and the scope, may execute it.
-- An index built with other options than vector_index_options() is rebuilt: the new one is built
-- under a second name while the old one still serves searches (a build blocks writes, not
-- reads), then the old one is dropped and the new one takes its name, in one transaction, so a
-- search sees the old index or the new one and never neither.
CREATE FUNCTION pyretrieve.create_scope_vector_index(p_scope_serial integer, p_model text)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m pyretrieve.embedding_models;
    v_name text;
    v_old regclass;
    v_build text;
    v_pass integer;
BEGIN
    SELECT * INTO m FROM pyretrieve.embedding_models em WHERE em.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    IF p_scope_serial IS NULL OR p_scope_serial < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid scope';
    END IF;
    v_name := format('embeddings_hnsw_s%s_m%s', p_scope_serial, m.model_serial);
    -- Looked up twice: once without a lock (an index as wanted returns at once, blocking no
    -- writer), and again once builds of the table are serialised (SHARE ROW EXCLUSIVE conflicts
    -- with itself, with writes and with other builds, not with reads), in case another call
    -- built or rebuilt it meanwhile.
    FOR v_pass IN 1..2 LOOP
        v_old := to_regclass(format('pyretrieve.%I', v_name));
        IF v_old IS NOT NULL AND (SELECT c.reloptions FROM pg_catalog.pg_class c WHERE c.oid = v_old)
                                 IS NOT DISTINCT FROM pyretrieve.vector_index_options() THEN
            RETURN v_name;
        END IF;
        IF v_pass = 1 THEN
            LOCK TABLE pyretrieve.embeddings IN SHARE ROW EXCLUSIVE MODE;
        END IF;
    END LOOP;
    v_build := CASE WHEN v_old IS NULL THEN v_name ELSE v_name || '_rebuilt' END;
    EXECUTE format(
        'CREATE INDEX %I ON pyretrieve.embeddings USING hnsw ((embedding::public.vector(%s)) public.vector_cosine_ops) WITH (%s) WHERE scope_serial = %s AND model_id = %L',
        v_build, m.dimension, array_to_string(pyretrieve.vector_index_options(), ', '),
        p_scope_serial, m.model_id);
    IF v_old IS NOT NULL THEN
        EXECUTE format('DROP INDEX pyretrieve.%I', v_name);
        EXECUTE format('ALTER INDEX pyretrieve.%I RENAME TO %I', v_build, v_name);
    END IF;
    RETURN v_name;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_scope_vector_index(integer, text) IS
    'Create (idempotently) one scope''s own HNSW index of one model: cosine, with vector_index_options() (m 32, ef_construction 256), partial on the scope''s serial and the model; an index of that name built with other options is rebuilt (the old one serves searches until the new one replaces it, in one transaction). SECURITY DEFINER because index creation needs the table owner; executable by create_vector_index (pyretrieve_api) only.';

-- SECURITY DEFINER, written reason: dropping an index needs its owner. The name is built from
-- integers alone, as above; only drop_vector_index (pyretrieve_api) may execute it.
CREATE FUNCTION pyretrieve.drop_scope_vector_index(p_scope_serial integer, p_model text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m pyretrieve.embedding_models;
    v_name text;
BEGIN
    SELECT * INTO m FROM pyretrieve.embedding_models em WHERE em.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    v_name := format('embeddings_hnsw_s%s_m%s', p_scope_serial, m.model_serial);
    IF to_regclass(format('pyretrieve.%I', v_name)) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP INDEX pyretrieve.%I', v_name);
    RETURN true;
END;
$$;
COMMENT ON FUNCTION pyretrieve.drop_scope_vector_index(integer, text) IS
    'Drop one scope''s own HNSW index of one model, if it exists; true when one was dropped. SECURITY DEFINER because dropping an index needs its owner; executable by drop_vector_index (pyretrieve_api) only.';

-- A table the planner has no statistics for is planned on its defaults: each condition on the
-- scope is taken for a 1-in-200 filter, so a scope of thousands looks like a row or two, and an
-- index that starts with the scope costs the same as the key a statement probes. Planned so, a
-- retract, a duplicate put or a search read their scope whole. Autovacuum analyses a table
-- about a minute after its first rows, or never where it is off. The writers call this at their
-- end: each of the tables below that holds rows and was never analysed (reltuples < 0, which
-- ANALYZE, VACUUM and an index build on rows set) is analysed now, in the writer's
-- transaction, which sees its own rows, once it holds 1,000 rows: a sample of a few rows takes
-- every column for unique, the scope's too, which misleads as the defaults do (a table analysed
-- at its first row read 145,485 fragments for one search at 3,000). Below 1,000 rows a whole
-- scope is a small read. After that autovacuum keeps the statistics, and a scope that outgrows
-- them stays on its keys (migrations 0041 to 0043). Each table is analysed once in its life,
-- so no writer can make it work more than that; a table another transaction is analysing (or
-- vacuuming, or indexing) is left to it rather than waited for. The rows are counted by the
-- cumulative statistics: those committed, and those of this transaction.
-- SECURITY DEFINER, written reason: ANALYZE needs the table's owner. It takes no argument and
-- returns nothing; only pyretrieve_api (the writers) may execute it.
CREATE FUNCTION pyretrieve.take_first_statistics()
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's statistics target does not make the one analyse cost more.
SET default_statistics_target = 100
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_table regclass;
BEGIN
    FOR v_table IN
        SELECT c.oid::regclass
          FROM pg_catalog.pg_class c
         WHERE c.oid = ANY ('{pyretrieve.fragments, pyretrieve.lexical_blocks, pyretrieve.lexical_pages, pyretrieve.lexical_tombstones, pyretrieve.embeddings}'::regclass[])
           AND c.reltuples < 0
         ORDER BY c.oid
    LOOP
        CONTINUE WHEN pg_catalog.pg_stat_get_live_tuples(v_table)
                      + pg_catalog.pg_stat_get_xact_tuples_inserted(v_table) < 1000;
        BEGIN
            EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE NOWAIT', v_table);
            EXECUTE pg_catalog.format('ANALYZE %s', v_table);
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION pyretrieve.take_first_statistics() IS
    'Analyse each of fragments, lexical_blocks, lexical_pages, lexical_tombstones and embeddings that holds 1,000 rows or more and was never analysed (reltuples < 0), once, in the calling transaction; a table another transaction holds for maintenance is skipped, not waited for. The writers call it at their end, so that no plan of a new install is made on the planner''s defaults, which take a scope of thousands for a row or two. SECURITY DEFINER because ANALYZE needs the table owner; executable by the writers (pyretrieve_api) only.';

-- ---------------------------------------------------------------------------------------------
-- Decision retention. pyretrieve.decisions is partitioned by month of evaluated_at (UTC). The
-- partitions are owned by pyretrieve_owner, have row-level security enabled and forced with no
-- policy of their own (so nothing reads one except through the parent, whose policies apply),
-- and are only ever created or dropped whole: no decision row is ever updated or deleted.
-- ---------------------------------------------------------------------------------------------

-- The monthly partitions of pyretrieve.decisions and the range each holds.
CREATE FUNCTION pyretrieve.decision_partition_ranges()
RETURNS TABLE (partition_name text, range_start timestamptz, range_end timestamptz)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT c.relname::text, b.m[1]::timestamptz, b.m[2]::timestamptz
      FROM pg_catalog.pg_inherits i
      JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
     CROSS JOIN LATERAL (SELECT pg_catalog.regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                '^FOR VALUES FROM \(''([^'']+)''\) TO \(''([^'']+)''\)$') AS m) b
     WHERE i.inhparent = 'pyretrieve.decisions'::regclass AND b.m IS NOT NULL
     ORDER BY 2;
END;
$$;
COMMENT ON FUNCTION pyretrieve.decision_partition_ranges() IS
    'The partitions of pyretrieve.decisions with the range of evaluated_at each holds, oldest first (read from the catalog).';

-- SECURITY DEFINER, written reason: a partition is created by the owner of the partitioned
-- table, and neither admins nor pyretrieve_api may own it. Names and bounds are derived from
-- the clock (never from the arguments' text); the inputs are a number of months and a start.
CREATE FUNCTION pyretrieve.ensure_decision_partitions(p_months_ahead integer DEFAULT 2, p_from timestamptz DEFAULT NULL)
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_first timestamp := date_trunc('month', coalesce(p_from, now()) AT TIME ZONE 'UTC');
    v_last timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
    v_month timestamp;
    v_start timestamptz;
    v_end timestamptz;
    v_name text;
BEGIN
    IF p_months_ahead IS NULL OR p_months_ahead NOT BETWEEN 0 AND 24 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'months ahead must be between 0 and 24';
    END IF;
    IF v_first > v_last OR v_first < v_last - interval '20 years' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'the first month must be in the last 20 years';
    END IF;
    v_month := v_first;
    WHILE v_month <= v_last + make_interval(months => p_months_ahead) LOOP
        v_start := v_month AT TIME ZONE 'UTC';
        v_end := (v_month + interval '1 month') AT TIME ZONE 'UTC';
        v_name := 'decisions_' || to_char(v_month, 'YYYY_MM');
        IF NOT EXISTS (SELECT 1 FROM pyretrieve.decision_partition_ranges() r
                        WHERE r.range_start < v_end AND r.range_end > v_start) THEN
            BEGIN
                EXECUTE format('CREATE TABLE pyretrieve.%I PARTITION OF pyretrieve.decisions FOR VALUES FROM (%L) TO (%L)',
                               v_name, v_start, v_end);
                EXECUTE format('ALTER TABLE pyretrieve.%I ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY', v_name);
                EXECUTE format('COMMENT ON TABLE pyretrieve.%I IS %L', v_name,
                               format('Decisions evaluated in %s (UTC): a partition of pyretrieve.decisions, read and written only through it.',
                                      to_char(v_month, 'YYYY-MM')));
                RETURN NEXT v_name;
            EXCEPTION WHEN duplicate_table OR invalid_object_definition THEN
                -- Another transaction created it meanwhile.
                NULL;
            END;
        END IF;
        v_month := v_month + interval '1 month';
    END LOOP;
END;
$$;
COMMENT ON FUNCTION pyretrieve.ensure_decision_partitions(integer, timestamptz) IS
    'Create the monthly partitions of pyretrieve.decisions (UTC months) from the month of p_from (default: the current month) to p_months_ahead months after the current one, where missing; returns the names created. Idempotent; authorize calls it when no partition holds the current month yet. SECURITY DEFINER (runs as pyretrieve_owner): a partition is created by the owner of the partitioned table.';

-- SECURITY DEFINER, written reason: dropping a partition needs the owner of the table. The
-- function drops only a partition of pyretrieve.decisions, and only one whose range ended at
-- least a day ago, whatever its caller asks: no decision of an open or recent transaction
-- can go.
CREATE FUNCTION pyretrieve.drop_decision_partition(p_partition text)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pyretrieve.decision_partition_ranges() r
                    WHERE r.partition_name = p_partition AND r.range_end <= now() - interval '1 day') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'not a decision partition that ended more than a day ago';
    END IF;
    EXECUTE format('DROP TABLE pyretrieve.%I', p_partition);
END;
$$;
COMMENT ON FUNCTION pyretrieve.drop_decision_partition(text) IS
    'Drop one partition of pyretrieve.decisions whose range ended more than a day ago (prune_decisions calls it). SECURITY DEFINER (runs as pyretrieve_owner): dropping a partition needs the owner of the table.';

SET LOCAL ROLE pyretrieve_api;

CREATE FUNCTION pyretrieve.create_workspace(p_workspace text, p_display_name text DEFAULT '')
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    INSERT INTO pyretrieve.workspaces (workspace_id, display_name)
    VALUES (p_workspace, coalesce(p_display_name, ''))
    ON CONFLICT (workspace_id) DO NOTHING;
    RETURN p_workspace;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_workspace(text, text) IS
    'Create a workspace (idempotent); returns its id. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.create_project(
    p_workspace text, p_project text, p_ts_config regconfig DEFAULT 'pg_catalog.english')
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM 1 FROM pyretrieve.workspaces w WHERE w.workspace_id = p_workspace;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'workspace not found';
    END IF;
    PERFORM pyretrieve.check_ts_config(coalesce(p_ts_config, 'pg_catalog.english'));
    INSERT INTO pyretrieve.projects (workspace_id, project_id, ts_config, generation_seq)
    VALUES (p_workspace, p_project, coalesce(p_ts_config, 'pg_catalog.english'),
            pyretrieve.create_scope_sequence(p_workspace, p_project))
    ON CONFLICT (workspace_id, project_id) DO NOTHING;
    INSERT INTO pyretrieve.scope_configs (workspace_id, project_id, ts_config)
    VALUES (p_workspace, p_project, coalesce(p_ts_config, 'pg_catalog.english'))
    ON CONFLICT DO NOTHING;
    RETURN p_project;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_project(text, text, regconfig) IS
    'Create a project in a workspace (idempotent) with its default text-search configuration; returns its id. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- Per-project BM25 parameters (admins).
CREATE FUNCTION pyretrieve.set_bm25(p_workspace text, p_project text, p_k1 double precision, p_b double precision)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_k1 IS NULL OR NOT (p_k1 > 0 AND p_k1 <= 10) OR p_b IS NULL OR NOT (p_b >= 0 AND p_b <= 1) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'k1 must be in (0, 10] and b in [0, 1]';
    END IF;
    UPDATE pyretrieve.projects p SET bm25_k1 = p_k1, bm25_b = p_b
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'project not found';
    END IF;
END;
$$;
COMMENT ON FUNCTION pyretrieve.set_bm25(text, text, double precision, double precision) IS
    'Set a project''s BM25 parameters k1 (term-frequency saturation, default 0.9) and b (length normalisation, default 0.4). Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- The scope's serial, for an admin: PR020 for a scope that does not exist.
CREATE FUNCTION pyretrieve.admin_scope_serial(p_workspace text, p_project text)
RETURNS integer
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_scope integer;
BEGIN
    PERFORM pyretrieve.require_admin();
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    SELECT p.scope_serial INTO v_scope
      FROM pyretrieve.projects p
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'project not found';
    END IF;
    RETURN v_scope;
END;
$$;
COMMENT ON FUNCTION pyretrieve.admin_scope_serial(text, text) IS
    'A scope''s opaque serial (projects.scope_serial), for the admin functions that name its own indexes: admins only, PR020 for an unknown scope.';

CREATE FUNCTION pyretrieve.create_vector_index(p_workspace text, p_project text, p_model text)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN pyretrieve.create_scope_vector_index(
        pyretrieve.admin_scope_serial(p_workspace, p_project), p_model);
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_vector_index(text, text, text) IS
    'Give one workspace/project its own HNSW index of one model, built with vector_index_options() (idempotent; an index built with other options is rebuilt, and serves searches until the new one replaces it); from then on vector_candidates searches that scope through it instead of exactly. Worth it above about 20,000 rows of the scope (evals/bench/vector-index.json: 1.6 times faster at 10,000 rows, 3.6 times at 30,000, 14 times at 100,000); below that the exact scan is about as fast and has recall 1. The index holds only that scope''s rows, so no other scope changes what it finds or how long it takes. Building it blocks writes to the embeddings for its duration. Admins only; PR020 for an unknown scope, PR012 for an unknown model. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.drop_vector_index(p_workspace text, p_project text, p_model text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN pyretrieve.drop_scope_vector_index(
        pyretrieve.admin_scope_serial(p_workspace, p_project), p_model);
END;
$$;
COMMENT ON FUNCTION pyretrieve.drop_vector_index(text, text, text) IS
    'Drop a scope''s own HNSW index of one model (create_vector_index); the scope''s vector leg is exact again. True when an index was dropped. Admins only; PR020 for an unknown scope, PR012 for an unknown model. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- The automatic choice of the vector leg's path: the leg takes a scope's own index when it
-- exists (vector_candidates), and this keeps the indexes where the measured line puts them. A
-- scope gets an index of a model from p_min_rows embeddings of it, and loses it below half as
-- many, so that a scope near the line does not flap. The count is of every row the index would
-- hold, of every classification and state: what the index and the exact scan cost depends on.
-- An index built with other options than vector_index_options() (an install upgraded from an
-- older schema) is rebuilt, so an upgrade reaches the measured recall through the same job.
-- Building an index blocks writes to the embeddings while it runs; p_dry_run says what would be
-- done and does nothing.
CREATE FUNCTION pyretrieve.maintain_vector_indexes(
    p_min_rows integer DEFAULT 20000, p_dry_run boolean DEFAULT false)
RETURNS TABLE (workspace_id text, project_id text, model_id text, embeddings bigint,
               action text, applied boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    r record;
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_min_rows IS NULL OR p_min_rows < 2 OR p_dry_run IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'min_rows must be at least 2';
    END IF;
    FOR r IN
        WITH counts AS MATERIALIZED (
            SELECT c.workspace_id, c.project_id, c.model_id, sum(c.embeddings)::bigint AS embeddings
              FROM pyretrieve.embedding_count_log c
             GROUP BY c.workspace_id, c.project_id, c.model_id
        ), pairs AS (
            SELECT p.workspace_id, p.project_id, p.scope_serial, m.model_id,
                   coalesce(c.embeddings, 0) AS embeddings,
                   i.oid IS NOT NULL AS indexed, i.reloptions AS options
              FROM pyretrieve.projects p
             CROSS JOIN pyretrieve.embedding_models m
              LEFT JOIN counts c
                ON c.workspace_id = p.workspace_id AND c.project_id = p.project_id
               AND c.model_id = m.model_id
              LEFT JOIN pg_catalog.pg_class i
                ON i.oid = pg_catalog.to_regclass(pg_catalog.format(
                               'pyretrieve.embeddings_hnsw_s%s_m%s', p.scope_serial, m.model_serial))
        )
        SELECT x.workspace_id::text AS workspace_id, x.project_id::text AS project_id,
               x.scope_serial, x.model_id::text AS model_id, x.embeddings,
               CASE WHEN NOT x.indexed THEN 'create'
                    WHEN x.embeddings < p_min_rows / 2 THEN 'drop'
                    WHEN x.options IS DISTINCT FROM pyretrieve.vector_index_options() THEN 'rebuild'
                    ELSE 'keep' END AS action
          FROM pairs x
         WHERE x.indexed OR x.embeddings >= p_min_rows
         ORDER BY x.workspace_id, x.project_id, x.model_id
    LOOP
        IF NOT p_dry_run AND r.action IN ('create', 'rebuild') THEN
            PERFORM pyretrieve.create_scope_vector_index(r.scope_serial, r.model_id);
        ELSIF NOT p_dry_run AND r.action = 'drop' THEN
            PERFORM pyretrieve.drop_scope_vector_index(r.scope_serial, r.model_id);
        END IF;
        workspace_id := r.workspace_id;
        project_id := r.project_id;
        model_id := r.model_id;
        embeddings := r.embeddings;
        action := r.action;
        applied := r.action <> 'keep' AND NOT p_dry_run;
        RETURN NEXT;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION pyretrieve.maintain_vector_indexes(integer, boolean) IS
    'Choose each scope''s vector search path from its size: every workspace/project holding at least p_min_rows embeddings of a model (default 20,000, where evals/bench/vector-index.json puts the line) gets its own HNSW index of that model (as create_vector_index), an indexed scope holding fewer than half as many loses it (as drop_vector_index), and an index built with other options than vector_index_options() is rebuilt (as create_vector_index). The count is every embedding of the scope and model, of every classification and state (what the index holds), from pyretrieve.embedding_count_log. Returns one row per scope and model with an index or due one: embeddings, action (create, drop, rebuild or keep) and whether it was applied; p_dry_run applies nothing. Run it as a maintenance job (with pg_cron, say); building an index blocks writes to the embeddings while it runs. Admins only; PR010 for p_min_rows below 2. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.grant_access(
    p_principal regrole,
    p_workspace text,
    p_project text,
    p_purpose text,
    p_ceiling pyretrieve.classification,
    p_max_age interval DEFAULT NULL,
    p_semantic_policy pyretrieve.semantic_policy DEFAULT 'optional',
    p_expires_at timestamptz DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_id uuid;
BEGIN
    PERFORM pyretrieve.require_admin();
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM pyretrieve.check_identifier(p_purpose, 'purpose');
    IF p_principal IS NULL OR p_ceiling IS NULL OR p_semantic_policy IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'principal, ceiling and semantic policy are required';
    END IF;
    IF p_max_age IS NOT NULL AND (p_max_age <= interval '0'
        OR date_part('month', p_max_age) <> 0 OR date_part('year', p_max_age) <> 0) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'max_age must be positive days/hours (no months or years)';
    END IF;
    -- Days become 24-hour spans (see the CHECK on grants.max_age).
    p_max_age := make_interval(secs => extract(epoch FROM p_max_age));
    PERFORM 1 FROM pyretrieve.projects p WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'project not found';
    END IF;
    INSERT INTO pyretrieve.grants AS g (
        workspace_id, project_id, principal, purpose, ceiling, max_age, semantic_policy, expires_at,
        granted_by)
    VALUES (p_workspace, p_project, p_principal, p_purpose, p_ceiling, p_max_age, p_semantic_policy, p_expires_at,
            pyretrieve.caller())
    ON CONFLICT (workspace_id, project_id, principal, purpose) DO UPDATE
       SET ceiling = EXCLUDED.ceiling, max_age = EXCLUDED.max_age,
           semantic_policy = EXCLUDED.semantic_policy, expires_at = EXCLUDED.expires_at,
           granted_by = EXCLUDED.granted_by, granted_at = now()
    RETURNING g.grant_id INTO v_id;
    RETURN v_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.grant_access(regrole, text, text, text, pyretrieve.classification, interval, pyretrieve.semantic_policy, timestamptz) IS
    'Grant a principal (a role; members that inherit it are covered too) read access to a workspace/project for a purpose, with a classification ceiling, an optional max_age (freshness window), a semantic policy (disabled | optional | required) and an optional expiry. Writers write where they hold a grant, up to its ceiling. Replaces an existing grant for the same principal, scope and purpose; returns the grant id. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.revoke_access(p_principal regrole, p_workspace text, p_project text, p_purpose text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    DELETE FROM pyretrieve.grants g
     WHERE g.workspace_id = p_workspace AND g.project_id = p_project
       AND g.principal = p_principal AND g.purpose = p_purpose;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION pyretrieve.revoke_access(regrole, text, text, text) IS
    'Remove a principal''s grant for a workspace/project and purpose; returns whether one existed. Decisions already made keep their record; new requests are denied. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.register_model(
    p_model text, p_dimension integer,
    p_lexical_weight double precision DEFAULT NULL, p_vector_weight double precision DEFAULT NULL,
    p_fusion text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_dimension integer;
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_model IS NULL OR p_model !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid model id';
    END IF;
    IF p_dimension IS NULL OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'dimension must be between 1 and 2000';
    END IF;
    -- A fusion setting refused has its own SQLSTATE (contract.INVALID_FUSION_SQLSTATE), checked
    -- before anything is written. NaN passes "> 0" in PostgreSQL but fails "<= 1000".
    IF (p_lexical_weight IS NULL) <> (p_vector_weight IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR016', MESSAGE = 'give both default weights or neither';
    END IF;
    IF p_lexical_weight IS NOT NULL
       AND NOT (p_lexical_weight > 0 AND p_lexical_weight <= 1000
                AND p_vector_weight > 0 AND p_vector_weight <= 1000) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR016', MESSAGE = 'default weights must be above 0 and at most 1000';
    END IF;
    IF p_fusion IS NOT NULL AND p_fusion NOT IN ('rrf', 'dbsf') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR016', MESSAGE = 'fusion must be rrf or dbsf';
    END IF;
    INSERT INTO pyretrieve.embedding_models (model_id, dimension, lexical_weight, vector_weight, fusion)
    VALUES (p_model, p_dimension, coalesce(p_lexical_weight, 1.0), coalesce(p_vector_weight, 1.0),
            coalesce(p_fusion, 'rrf'))
    ON CONFLICT (model_id) DO NOTHING;
    SELECT m.dimension INTO v_dimension FROM pyretrieve.embedding_models m WHERE m.model_id = p_model;
    IF v_dimension <> p_dimension THEN
        RAISE EXCEPTION USING ERRCODE = 'PR013', MESSAGE = 'model already registered with another dimension';
    END IF;
    IF p_lexical_weight IS NOT NULL THEN
        UPDATE pyretrieve.embedding_models m
           SET lexical_weight = p_lexical_weight, vector_weight = p_vector_weight
         WHERE m.model_id = p_model;
    END IF;
    IF p_fusion IS NOT NULL THEN
        UPDATE pyretrieve.embedding_models m SET fusion = p_fusion WHERE m.model_id = p_model;
    END IF;
    -- No index: the vector leg never read one over all scopes, and maintaining it slowed every
    -- embedding write. A large scope gets its own (create_vector_index).
    RETURN p_model;
END;
$$;
COMMENT ON FUNCTION pyretrieve.register_model(text, integer, double precision, double precision, text) IS
    'Register an embedding model and its dimension (idempotent); returns the model id. It builds no index: a large scope gets its own HNSW index with create_vector_index. With both default weights (each above 0, at most 1000) it sets the lexical and vector weights, and with p_fusion (rrf or dbsf) the fusion, that searches naming this model use when they give none; what is not given is 1.0 each and rrf for a new model and stays as it was for an existing one. Raises PR016 for an unknown fusion or default weights not both given or outside (0, 1000], before anything is written, and PR013 if the model exists with another dimension. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- Listings for admins and the CLI.
CREATE FUNCTION pyretrieve.list_projects()
RETURNS TABLE (workspace_id text, project_id text, ts_config regconfig, bm25_k1 double precision,
               bm25_b double precision, created_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY
    SELECT w.workspace_id::text, p.project_id::text, p.ts_config, p.bm25_k1, p.bm25_b, w.created_at
      FROM pyretrieve.workspaces w LEFT JOIN pyretrieve.projects p USING (workspace_id)
     ORDER BY 1, 2;
END;
$$;
COMMENT ON FUNCTION pyretrieve.list_projects() IS
    'Every workspace with its projects (a workspace without projects appears once, with NULL project): text-search configuration and BM25 parameters. Admins only. SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.list_grants()
RETURNS TABLE (principal text, workspace_id text, project_id text, purpose text,
               ceiling pyretrieve.classification, max_age interval,
               semantic_policy pyretrieve.semantic_policy, expires_at timestamptz,
               granted_by name, granted_at timestamptz, grant_id uuid)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY
    SELECT g.principal::text, g.workspace_id::text, g.project_id::text, g.purpose::text, g.ceiling,
           g.max_age, g.semantic_policy, g.expires_at, g.granted_by, g.granted_at, g.grant_id
      FROM pyretrieve.grants g
     ORDER BY 1, 2, 3, 4;
END;
$$;
COMMENT ON FUNCTION pyretrieve.list_grants() IS
    'Every grant: principal, scope, purpose, ceiling, max_age, semantic policy, expiry, who granted it and when. Admins only. SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.list_models()
RETURNS TABLE (model_id text, dimension integer, registered_at timestamptz,
               fusion text, lexical_weight double precision, vector_weight double precision)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    IF NOT (pyretrieve.caller_in('pyretrieve_reader') OR pyretrieve.caller_in('pyretrieve_admin')) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    RETURN QUERY
    SELECT m.model_id, m.dimension, m.registered_at, m.fusion, m.lexical_weight, m.vector_weight
      FROM pyretrieve.embedding_models m ORDER BY 1;
END;
$$;
COMMENT ON FUNCTION pyretrieve.list_models() IS
    'The registered embedding models, their dimensions, default fusions and default weights (configuration, not tenant data). Readers, writers and admins. SECURITY DEFINER (runs as pyretrieve_api).';

-- The fusion and weights search() and the client use when a request names this model and
-- gives none.
CREATE FUNCTION pyretrieve.model_defaults(p_model text)
RETURNS TABLE (fusion text, lexical_weight double precision, vector_weight double precision)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    IF NOT (pyretrieve.caller_in('pyretrieve_reader') OR pyretrieve.caller_in('pyretrieve_admin')) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    RETURN QUERY
    SELECT m.fusion, m.lexical_weight, m.vector_weight FROM pyretrieve.embedding_models m
     WHERE m.model_id = p_model;
END;
$$;
COMMENT ON FUNCTION pyretrieve.model_defaults(text) IS
    'A registered model''s default fusion and weights (lexical, vector), or no row for a model that is not registered: what a search naming the model uses when it gives none. Configuration, not tenant data. Readers, writers and admins. SECURITY DEFINER (runs as pyretrieve_api) because principals hold no table privilege.';

CREATE FUNCTION pyretrieve.schema_version()
RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
BEGIN ATOMIC
    SELECT i.schema_version FROM pyretrieve.installation i;
END;
COMMENT ON FUNCTION pyretrieve.schema_version() IS
    'The installed schema version. SECURITY DEFINER (runs as pyretrieve_api) so that principals, who hold no table privilege, can read it.';

-- Decision retention and the audit's questions, for admins.
CREATE FUNCTION pyretrieve.decision_partitions()
RETURNS TABLE (partition_name text, range_start timestamptz, range_end timestamptz, decisions bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY
    SELECT r.partition_name, r.range_start, r.range_end,
           (SELECT count(*) FROM pyretrieve.decisions d
             WHERE d.evaluated_at >= r.range_start AND d.evaluated_at < r.range_end)
      FROM pyretrieve.decision_partition_ranges() r
     ORDER BY r.range_start;
END;
$$;
COMMENT ON FUNCTION pyretrieve.decision_partitions() IS
    'The monthly partitions of the decisions log, with their range and the number of decisions each holds. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals hold no table privilege.';

CREATE FUNCTION pyretrieve.prune_decisions(p_older_than interval, p_dry_run boolean DEFAULT false)
RETURNS TABLE (partition_name text, range_start timestamptz, range_end timestamptz, decisions bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    p record;
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_older_than IS NULL OR p_older_than < interval '1 day' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'retention must be at least one day';
    END IF;
    -- Whole months only: a partition goes when every decision it can hold is older than the
    -- retention, so no decision younger than that is ever dropped.
    FOR p IN SELECT * FROM pyretrieve.decision_partitions() d
              WHERE d.range_end <= now() - p_older_than ORDER BY d.range_start LOOP
        IF NOT p_dry_run THEN
            PERFORM pyretrieve.drop_decision_partition(p.partition_name);
        END IF;
        partition_name := p.partition_name;
        range_start := p.range_start;
        range_end := p.range_end;
        decisions := p.decisions;
        RETURN NEXT;
    END LOOP;
    IF NOT p_dry_run THEN
        PERFORM pyretrieve.ensure_decision_partitions();
    END IF;
END;
$$;
COMMENT ON FUNCTION pyretrieve.prune_decisions(interval, boolean) IS
    'Retention of the decisions log: drop every monthly partition whose whole range is older than p_older_than (at least one day), returning each with the number of decisions it held (with p_dry_run, only report them), then create the partitions ahead. Decisions are never deleted one by one. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals hold no table privilege.';

-- Who searched what scope when: the decisions of a time range, optionally of one scope or one
-- principal, newest first. Each filter given becomes a predicate of its own (dynamic SQL with
-- parameters, never spliced text), so the planner uses the scope or principal index and reads
-- only the months asked for.
CREATE FUNCTION pyretrieve.list_decisions(
    p_since timestamptz,
    p_until timestamptz DEFAULT NULL,
    p_workspace text DEFAULT NULL,
    p_project text DEFAULT NULL,
    p_principal text DEFAULT NULL,
    p_limit integer DEFAULT 1000)
RETURNS TABLE (evaluated_at timestamptz, principal name, workspace_id text, project_id text,
               purpose text, decision_id uuid, grant_id uuid, ceiling pyretrieve.classification,
               semantic_intent text, requested_limit integer, query_digest bytea,
               embedding_digest bytea)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_sql text := 'SELECT d.evaluated_at, d.principal, d.workspace_id::text, d.project_id::text,'
               || ' d.purpose::text, d.decision_id, d.grant_id, d.ceiling, d.semantic_intent,'
               || ' d.requested_limit, d.query_digest, d.embedding_digest'
               || ' FROM pyretrieve.decisions d WHERE d.evaluated_at >= $1 AND d.evaluated_at < $2';
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_since IS NULL OR (p_until IS NOT NULL AND p_until <= p_since) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'a time range: since, and until after it';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'limit must be between 1 and 100000';
    END IF;
    IF p_project IS NOT NULL AND p_workspace IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'a project is named with its workspace';
    END IF;
    IF p_workspace IS NOT NULL THEN
        PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
        v_sql := v_sql || ' AND d.workspace_id = $3';
    END IF;
    IF p_project IS NOT NULL THEN
        PERFORM pyretrieve.check_identifier(p_project, 'project');
        v_sql := v_sql || ' AND d.project_id = $4';
    END IF;
    IF p_principal IS NOT NULL THEN
        v_sql := v_sql || ' AND d.principal = $5';
    END IF;
    v_sql := v_sql || ' ORDER BY d.evaluated_at DESC, d.decision_id LIMIT $6';
    RETURN QUERY EXECUTE v_sql
        USING p_since, coalesce(p_until, 'infinity'::timestamptz), p_workspace, p_project,
              p_principal::name, p_limit;
END;
$$;
COMMENT ON FUNCTION pyretrieve.list_decisions(timestamptz, timestamptz, text, text, text, integer) IS
    'Who searched what scope when: the decisions evaluated in [p_since, p_until), optionally of one workspace (and project) or one principal, newest first, at most p_limit: digests and intent only, never query text. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals hold no table privilege.';

SET LOCAL ROLE pyretrieve_owner;
