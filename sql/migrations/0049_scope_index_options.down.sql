-- pyretrieve migration 0049, downgrade: back to 0048
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP FUNCTION pyretrieve.vector_index_options();
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
CREATE OR REPLACE FUNCTION pyretrieve.approximate_vector_candidates(p_decision pyretrieve.decisions, p_model text, p_embedding public.vector, p_limit integer, p_scope_serial integer, p_dimension integer)
 RETURNS TABLE(rank integer, fragment_id uuid, content_digest bytea, distance double precision, source_digest bytea, vector_generation bigint, lexical_generation bigint, search text)
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
           t.lexical_generation, 'hnsw'::text
      FROM top t
     ORDER BY 1$q$, p_dimension, p_scope_serial)
    USING p_model, p_embedding, p_decision.workspace_id::text, p_decision.project_id::text,
          p_decision.ceiling, p_decision.evaluated_at, p_decision.max_age, p_limit;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.approximate_vector_candidates(pyretrieve.decisions,text,public.vector,integer,integer,integer) IS 'The vector leg over a scope''s own HNSW index (internal to vector_candidates, which calls it when the index exists): the decision''s filters applied during an iterative, strictly ordered index scan (ef_search 600), then the content-bound tie-break. Every row says search ''hnsw''.';
REVOKE ALL ON FUNCTION pyretrieve.approximate_vector_candidates(pyretrieve.decisions,text,public.vector,integer,integer,integer) FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.maintain_vector_indexes(p_min_rows integer DEFAULT 20000, p_dry_run boolean DEFAULT false)
 RETURNS TABLE(workspace_id text, project_id text, model_id text, embeddings bigint, action text, applied boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
                   pg_catalog.to_regclass(pg_catalog.format('pyretrieve.embeddings_hnsw_s%s_m%s',
                                          p.scope_serial, m.model_serial)) IS NOT NULL AS indexed
              FROM pyretrieve.projects p
             CROSS JOIN pyretrieve.embedding_models m
              LEFT JOIN counts c
                ON c.workspace_id = p.workspace_id AND c.project_id = p.project_id
               AND c.model_id = m.model_id
        )
        SELECT x.workspace_id::text AS workspace_id, x.project_id::text AS project_id,
               x.scope_serial, x.model_id::text AS model_id, x.embeddings,
               CASE WHEN NOT x.indexed THEN 'create'
                    WHEN x.embeddings < p_min_rows / 2 THEN 'drop'
                    ELSE 'keep' END AS action
          FROM pairs x
         WHERE x.indexed OR x.embeddings >= p_min_rows
         ORDER BY x.workspace_id, x.project_id, x.model_id
    LOOP
        IF NOT p_dry_run AND r.action = 'create' THEN
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
$function$;
COMMENT ON FUNCTION pyretrieve.maintain_vector_indexes(integer,boolean) IS 'Choose each scope''s vector search path from its size: every workspace/project holding at least p_min_rows embeddings of a model (default 20,000, where evals/bench/vector-index.json puts the line) gets its own HNSW index of that model (as create_vector_index), and an indexed scope holding fewer than half as many loses it (as drop_vector_index). The count is every embedding of the scope and model, of every classification and state (what the index holds), from pyretrieve.embedding_count_log. Returns one row per scope and model with an index or due one: embeddings, action (create, drop or keep) and whether it was applied; p_dry_run applies nothing. Run it as a maintenance job (with pg_cron, say); building an index blocks writes to the embeddings while it runs. Admins only; PR010 for p_min_rows below 2. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.maintain_vector_indexes(integer,boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.maintain_vector_indexes(integer,boolean) TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0048';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
