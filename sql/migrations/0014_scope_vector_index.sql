-- pyretrieve migration 0014: scope_vector_index
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL search_path = pg_catalog, pg_temp;

-- Each scope's opaque serial, numbered in the projects' existing order, and its copy on every
-- embedding. The backfill runs as the installing superuser, past row-level security, and
-- without the embeddings' triggers: it moves no generation and touches no other column.
SET LOCAL ROLE pyretrieve_owner;
CREATE SEQUENCE pyretrieve.scope_serial_seq AS integer;
ALTER TABLE pyretrieve.projects
    ADD COLUMN scope_serial integer NOT NULL DEFAULT pg_catalog.nextval('pyretrieve.scope_serial_seq'::regclass);
ALTER SEQUENCE pyretrieve.scope_serial_seq OWNED BY pyretrieve.projects.scope_serial;
REVOKE ALL ON SEQUENCE pyretrieve.scope_serial_seq FROM PUBLIC;
GRANT USAGE ON SEQUENCE pyretrieve.scope_serial_seq TO pyretrieve_api;
RESET ROLE;
ALTER TABLE pyretrieve.embeddings ADD COLUMN scope_serial integer;
SET LOCAL session_replication_role = replica;
UPDATE pyretrieve.embeddings e SET scope_serial = p.scope_serial
  FROM pyretrieve.projects p
 WHERE p.workspace_id = e.workspace_id AND p.project_id = e.project_id;
SET LOCAL session_replication_role = origin;
ALTER TABLE pyretrieve.embeddings ALTER COLUMN scope_serial SET NOT NULL;

SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.mirror_fragment()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    f record;
BEGIN
    SELECT fr.project_id, fr.classification, fr.state, fr.observed_at, fr.expires_at INTO f
      FROM pyretrieve.fragments fr
     WHERE fr.workspace_id = NEW.workspace_id AND fr.fragment_id = NEW.fragment_id;
    IF NOT FOUND OR f.project_id <> NEW.project_id THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
    NEW.classification := f.classification;
    NEW.fragment_state := f.state;
    NEW.observed_at := f.observed_at;
    NEW.expires_at := f.expires_at;
    NEW.scope_serial := (SELECT p.scope_serial FROM pyretrieve.projects p
                          WHERE p.workspace_id = NEW.workspace_id AND p.project_id = NEW.project_id);
    RETURN NEW;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.mirror_fragment() IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.mirror_fragment() FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.approximate_vector_candidates(p_decision pyretrieve.decisions, p_model text, p_embedding public.vector, p_limit integer, p_scope_serial integer, p_dimension integer)
 RETURNS TABLE(rank integer, fragment_id uuid, content_digest bytea, distance double precision, source_digest bytea, vector_generation bigint, lexical_generation bigint)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
AS $function$
BEGIN
    -- Set here rather than as SET clauses: pgvector defines them only once its library is
    -- loaded, which the vector argument has done by now. The SET clauses above make these
    -- local to the call as well.
    PERFORM pg_catalog.set_config('hnsw.ef_search', '600', true);
    PERFORM pg_catalog.set_config('hnsw.iterative_scan', 'strict_order', true);
    PERFORM pg_catalog.set_config('hnsw.max_scan_tuples', '100000', true);
    RETURN QUERY EXECUTE pg_catalog.format($q$
    WITH near AS MATERIALIZED (
        SELECT e.fragment_id,
               (e.embedding::public.vector(%1$s) OPERATOR(public.<=>) $2::public.vector(%1$s))::double precision AS distance,
               e.source_digest, e.vector_generation
          FROM pyretrieve.embeddings e
         WHERE e.scope_serial = %2$s AND e.model_id = $1
           AND e.workspace_id = $3 AND e.project_id = $4
           AND e.fragment_state = 'active'
           AND e.classification <= $5
           AND e.observed_at <= $6
           AND ($7::interval IS NULL OR e.observed_at >= $6 - $7::interval)
           AND (e.expires_at IS NULL OR e.expires_at > $6)
         ORDER BY e.embedding::public.vector(%1$s) OPERATOR(public.<=>) $2::public.vector(%1$s)
         LIMIT $8 + 32
    ), top AS (
        SELECT n.fragment_id, f.content_digest, n.distance, n.source_digest, n.vector_generation,
               f.lexical_generation
          FROM near n
          CROSS JOIN LATERAL (
                SELECT f.content_digest, f.lexical_generation
                  FROM pyretrieve.fragments f
                 WHERE f.workspace_id = $3 AND f.fragment_id = n.fragment_id
                   AND f.project_id = $4
                   AND f.state = 'active'
                   AND f.classification <= $5
                   AND f.observed_at <= $6
                   AND ($7::interval IS NULL OR f.observed_at >= $6 - $7::interval)
                   AND (f.expires_at IS NULL OR f.expires_at > $6)
                OFFSET 0) f
         ORDER BY n.distance, f.content_digest, n.fragment_id
         LIMIT $8
    )
    SELECT (row_number() OVER (ORDER BY t.distance, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.distance, t.source_digest, t.vector_generation,
           t.lexical_generation
      FROM top t
     ORDER BY 1$q$, p_dimension, p_scope_serial)
    USING p_model, p_embedding, p_decision.workspace_id::text, p_decision.project_id::text,
          p_decision.ceiling, p_decision.evaluated_at, p_decision.max_age, p_limit;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.approximate_vector_candidates(pyretrieve.decisions,text,public.vector,integer,integer,integer) IS 'The vector leg over a scope''s own HNSW index (internal to vector_candidates, which calls it when the index exists): the decision''s filters applied during an iterative, strictly ordered index scan (ef_search 600), then the content-bound tie-break.';
REVOKE ALL ON FUNCTION pyretrieve.approximate_vector_candidates(pyretrieve.decisions,text,public.vector,integer,integer,integer) FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.vector_candidates(p_decision uuid, p_model text, p_embedding public.vector, p_limit integer)
 RETURNS TABLE(rank integer, fragment_id uuid, content_digest bytea, distance double precision, source_digest bytea, vector_generation bigint, lexical_generation bigint)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
    v_scope integer;
    v_dimension integer;
    v_indexed boolean;
BEGIN
    PERFORM pyretrieve.check_embedding(p_model, p_embedding);
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'candidate limit out of range for this decision';
    END IF;

    -- A scope with its own HNSW index of this model (create_vector_index) is searched through
    -- it; every other scope exactly. The index's existence is the switch, not a row count or a
    -- statistic, so the same data and indexes always take the same path.
    SELECT p.scope_serial, m.dimension,
           EXISTS (SELECT 1 FROM pg_catalog.pg_index i
                    WHERE i.indexrelid = pg_catalog.to_regclass(pg_catalog.format(
                              'pyretrieve.embeddings_hnsw_s%s_m%s', p.scope_serial, m.model_serial))
                      AND i.indisvalid AND i.indisready)
      INTO v_scope, v_dimension, v_indexed
      FROM pyretrieve.projects p, pyretrieve.embedding_models m
     WHERE p.workspace_id = d.workspace_id AND p.project_id = d.project_id
       AND m.model_id = p_model;
    IF v_indexed THEN
        RETURN QUERY SELECT * FROM pyretrieve.approximate_vector_candidates(
            d, p_model, p_embedding, p_limit, v_scope, v_dimension);
        RETURN;
    END IF;

    -- Exact cosine distance over the scope's embeddings of the model, filtered on the
    -- fragment columns each embedding carries (the decision's filters, stated explicitly with
    -- the scope as parameters for embeddings_scope_idx, and applied again by RLS). Under RLS the
    -- distance operator is not leakproof, so a global HNSW index would filter after the scan
    -- and lose recall on small scopes; exact search has recall 1. Only the returned rows are
    -- joined to their fragments; every row at the p_limit-th distance competes on the
    -- content-bound tie-break, so the cut is exact.
    RETURN QUERY
    WITH scan AS MATERIALIZED (
        SELECT e.fragment_id,
               (e.embedding OPERATOR(public.<=>) p_embedding)::double precision AS distance,
               e.source_digest, e.vector_generation
          FROM pyretrieve.embeddings e
         WHERE e.workspace_id = d.workspace_id
           AND e.project_id = d.project_id
           AND e.model_id = p_model
           AND e.fragment_state = 'active'
           AND e.classification <= d.ceiling
           AND e.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR e.observed_at >= d.evaluated_at - d.max_age)
           AND (e.expires_at IS NULL OR e.expires_at > d.evaluated_at)
    ), top AS (
        SELECT s.fragment_id, f.content_digest, s.distance, s.source_digest, s.vector_generation,
               f.lexical_generation
          FROM scan s
          -- One look-up by primary key per nearest row. As a plain join, the planner (which
          -- under RLS expects about one row of the scan) chose at some scope sizes a bitmap
          -- scan of the whole scope, repeated for every row: 8x slower at 2,500 rows.
          -- OFFSET 0 keeps the sub-select from being flattened into such a join.
          CROSS JOIN LATERAL (
                SELECT f.content_digest, f.lexical_generation
                  FROM pyretrieve.fragments f
                 WHERE f.workspace_id = d.workspace_id AND f.fragment_id = s.fragment_id
                   AND f.project_id = d.project_id
                   AND f.state = 'active'
                   AND f.classification <= d.ceiling
                   AND f.observed_at <= d.evaluated_at
                   AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
                   AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
                OFFSET 0) f
         WHERE s.distance <= (SELECT max(x.distance)
                                FROM (SELECT sc.distance FROM scan sc ORDER BY sc.distance LIMIT p_limit) x)
         ORDER BY s.distance, f.content_digest, s.fragment_id
         LIMIT p_limit
    )
    SELECT (row_number() OVER (ORDER BY t.distance, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.distance, t.source_digest, t.vector_generation,
           t.lexical_generation
      FROM top t
     ORDER BY 1;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.vector_candidates(uuid,text,public.vector,integer) IS 'Vector candidates for the bound decision: cosine distance to p_embedding over the scope''s embeddings of model p_model, exact, or through the scope''s own HNSW index of that model when an admin created one (create_vector_index; recall measured in evals/bench), 1-based ranks in a total order (distance, then content digest, then fragment id). Returns rank, fragment_id, content_digest, distance, source_digest (digest of the text the embedding was computed from), vector_generation, lexical_generation. Raises PR011 for a wrong dimension, NaN/Inf or zero public.vector, PR012 for an unknown model. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.vector_candidates(uuid,text,public.vector,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.vector_candidates(uuid,text,public.vector,integer) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.create_scope_vector_index(p_scope_serial integer, p_model text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    m pyretrieve.embedding_models;
    v_name text;
BEGIN
    SELECT * INTO m FROM pyretrieve.embedding_models em WHERE em.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    IF p_scope_serial IS NULL OR p_scope_serial < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid scope';
    END IF;
    v_name := format('embeddings_hnsw_s%s_m%s', p_scope_serial, m.model_serial);
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON pyretrieve.embeddings USING hnsw ((embedding::public.vector(%s)) public.vector_cosine_ops) WITH (m = 16, ef_construction = 128) WHERE scope_serial = %s AND model_id = %L',
        v_name, m.dimension, p_scope_serial, m.model_id);
    RETURN v_name;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.create_scope_vector_index(integer,text) IS 'Create (idempotently) one scope''s own HNSW index of one model: cosine, m 16, ef_construction 128, partial on the scope''s serial and the model. SECURITY DEFINER because index creation needs the table owner; executable by create_vector_index (pyretrieve_api) only.';
REVOKE ALL ON FUNCTION pyretrieve.create_scope_vector_index(integer,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.create_scope_vector_index(integer,text) TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.drop_scope_vector_index(p_scope_serial integer, p_model text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.drop_scope_vector_index(integer,text) IS 'Drop one scope''s own HNSW index of one model, if it exists; true when one was dropped. SECURITY DEFINER because dropping an index needs its owner; executable by drop_vector_index (pyretrieve_api) only.';
REVOKE ALL ON FUNCTION pyretrieve.drop_scope_vector_index(integer,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.drop_scope_vector_index(integer,text) TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.admin_scope_serial(p_workspace text, p_project text)
 RETURNS integer
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.admin_scope_serial(text,text) IS 'A scope''s opaque serial (projects.scope_serial), for the admin functions that name its own indexes: admins only, PR020 for an unknown scope.';
REVOKE ALL ON FUNCTION pyretrieve.admin_scope_serial(text,text) FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.create_vector_index(p_workspace text, p_project text, p_model text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN pyretrieve.create_scope_vector_index(
        pyretrieve.admin_scope_serial(p_workspace, p_project), p_model);
END;
$function$;
COMMENT ON FUNCTION pyretrieve.create_vector_index(text,text,text) IS 'Give one workspace/project its own HNSW index of one model (idempotent); from then on vector_candidates searches that scope through it instead of exactly. Worth it above about 20,000 rows of the scope (evals/bench/vector-index.json: 1.6 times faster at 10,000 rows, 3.6 times at 30,000, 14 times at 100,000); below that the exact scan is about as fast and has recall 1. The index holds only that scope''s rows, so no other scope changes what it finds or how long it takes. Building it blocks writes to the embeddings for its duration. Admins only; PR020 for an unknown scope, PR012 for an unknown model. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.create_vector_index(text,text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.create_vector_index(text,text,text) TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.drop_vector_index(p_workspace text, p_project text, p_model text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN pyretrieve.drop_scope_vector_index(
        pyretrieve.admin_scope_serial(p_workspace, p_project), p_model);
END;
$function$;
COMMENT ON FUNCTION pyretrieve.drop_vector_index(text,text,text) IS 'Drop a scope''s own HNSW index of one model (create_vector_index); the scope''s vector leg is exact again. True when an index was dropped. Admins only; PR020 for an unknown scope, PR012 for an unknown model. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.drop_vector_index(text,text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.drop_vector_index(text,text,text) TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0014';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
