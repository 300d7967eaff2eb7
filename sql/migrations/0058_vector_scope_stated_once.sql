-- pyretrieve migration 0058: vector_scope_stated_once
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.
-- vector_candidates states the scope's filter once (a NOT MATERIALIZED CTE read by both passes
-- of 0055's cut) where the tie's pass repeated it; the plans, rows and ranks are unchanged.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.vector_candidates(p_decision uuid, p_model text, p_embedding public.vector, p_limit integer)
 RETURNS TABLE(rank integer, fragment_id uuid, content_digest bytea, distance double precision, source_digest bytea, vector_generation bigint, lexical_generation bigint, search text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
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
    -- statistic, so the same data and indexes always take the same path. Its name and its
    -- index row are read in one snapshot, the statement's: with the name resolved by
    -- to_regclass (the newest catalog), a search whose snapshot predated the commit of a
    -- rebuild (the old index dropped, the new one renamed to its name) found the new name but
    -- not the new row, and scanned the scope exactly (until 0052).
    SELECT p.scope_serial, m.dimension,
           EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                     JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid
                    WHERE c.relnamespace = 'pyretrieve'::pg_catalog.regnamespace
                      AND c.relname = pg_catalog.format('embeddings_hnsw_s%s_m%s',
                                                        p.scope_serial, m.model_serial)
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
    --
    -- One pass keeps the p_limit + 1 nearest rows (a bounded sort, no copy of the scope). When
    -- the next row lies farther than the p_limit-th, those p_limit rows are exactly the rows at
    -- or within the p_limit-th distance. Only when it ties does a second pass (skipped
    -- otherwise: its one-time filter is false) collect every row at or within that distance,
    -- however many tie. Until 0055 every call kept the scope's distances and read them twice,
    -- a seventh of the leg at a 10,000-row scope (evals/bench/vector-revisions-0055.json).
    -- Both passes read the scope as "scoped" states it, once: NOT MATERIALIZED puts the
    -- statement in each pass, each then with its own plan.
    RETURN QUERY
    WITH scoped AS NOT MATERIALIZED (
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
    ), near AS MATERIALIZED (
        SELECT c.fragment_id, c.distance, c.source_digest, c.vector_generation
          FROM scoped c
         ORDER BY c.distance
         LIMIT p_limit + 1
    ), edge AS MATERIALIZED (
        -- The p_limit-th distance (the last row's, when there are fewer) and whether the row
        -- after it ties it.
        SELECT x.last, (SELECT count(*) FROM near n WHERE n.distance <= x.last) > p_limit AS tied
          FROM (SELECT max(y.distance) AS last
                  FROM (SELECT n.distance FROM near n ORDER BY n.distance LIMIT p_limit) y) x
    ), scan AS (
        SELECT n.fragment_id, n.distance, n.source_digest, n.vector_generation
          FROM near n
         WHERE n.distance <= (SELECT g.last FROM edge g) AND NOT (SELECT g.tied FROM edge g)
        UNION ALL
        SELECT c.fragment_id, c.distance, c.source_digest, c.vector_generation
          FROM scoped c
         WHERE (SELECT g.tied FROM edge g) AND c.distance <= (SELECT g.last FROM edge g)
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
         ORDER BY s.distance, f.content_digest, s.fragment_id
         LIMIT p_limit
    )
    SELECT (row_number() OVER (ORDER BY t.distance, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.distance, t.source_digest, t.vector_generation,
           t.lexical_generation, 'exact'::text
      FROM top t
     ORDER BY 1;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.vector_candidates(uuid,text,public.vector,integer) IS 'Vector candidates for the bound decision: cosine distance to p_embedding over the scope''s embeddings of model p_model, exact, or through the scope''s own HNSW index of that model when an admin created one (create_vector_index; recall measured in evals/bench), 1-based ranks in a total order (distance, then content digest, then fragment id). Returns rank, fragment_id, content_digest, distance, source_digest (digest of the text the embedding was computed from), vector_generation, lexical_generation and search (''exact'' for the exact scan, ''hnsw'' through the scope''s index; the same for every row of a call, and it depends on this scope alone). Raises PR011 for a wrong dimension, NaN/Inf or zero public.vector, PR012 for an unknown model. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.vector_candidates(uuid,text,public.vector,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.vector_candidates(uuid,text,public.vector,integer) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0058';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
