-- pyretrieve migration 0003, downgrade: back to the 0002 schema (ts_rank lexical scoring,
-- scope counters in one table, unweighted fusion). Generations and configurations are carried
-- back from the append-only tables.

SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP FUNCTION pyretrieve.search(text, text, text, text, public.vector, text, integer, text, double precision, double precision, text);
DROP FUNCTION pyretrieve.lexical_candidates(uuid, text, integer, text);
DROP FUNCTION pyretrieve.set_bm25(text, text, double precision, double precision);
DROP TRIGGER fragments_postings_insert ON pyretrieve.fragments;
DROP TRIGGER fragments_postings_update ON pyretrieve.fragments;
DROP FUNCTION pyretrieve.postings_insert();
DROP FUNCTION pyretrieve.postings_update();

-- Embeddings lose their copy of the fragment's columns; the vector leg joins fragments again.
DROP POLICY embeddings_read ON pyretrieve.embeddings;
DROP POLICY embeddings_write_read ON pyretrieve.embeddings;
DROP POLICY embeddings_insert ON pyretrieve.embeddings;
DROP POLICY embeddings_update ON pyretrieve.embeddings;
CREATE POLICY embeddings_read ON pyretrieve.embeddings FOR SELECT TO pyretrieve_reader
    USING (EXISTS (SELECT 1 FROM pyretrieve.fragments f
                    WHERE f.workspace_id = embeddings.workspace_id
                      AND f.fragment_id = embeddings.fragment_id
                      AND f.project_id = embeddings.project_id));
CREATE POLICY embeddings_insert ON pyretrieve.embeddings FOR INSERT TO pyretrieve_writer
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND EXISTS (SELECT 1 FROM pyretrieve.fragments f
                    WHERE f.workspace_id = embeddings.workspace_id
                      AND f.fragment_id = embeddings.fragment_id
                      AND f.project_id = embeddings.project_id));
CREATE POLICY embeddings_update ON pyretrieve.embeddings FOR UPDATE TO pyretrieve_writer
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w))
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w));
DROP TRIGGER embeddings_mirror ON pyretrieve.embeddings;
DROP FUNCTION pyretrieve.mirror_fragment();
DROP TRIGGER embeddings_stamp ON pyretrieve.embeddings;
CREATE TRIGGER embeddings_stamp BEFORE INSERT OR UPDATE ON pyretrieve.embeddings
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.stamp_vector_generation();
REVOKE UPDATE (fragment_state) ON pyretrieve.embeddings FROM pyretrieve_writer;
ALTER TABLE pyretrieve.embeddings DROP COLUMN classification, DROP COLUMN fragment_state,
    DROP COLUMN observed_at, DROP COLUMN expires_at;
CREATE OR REPLACE FUNCTION pyretrieve.vector_candidates(p_decision uuid, p_model text, p_embedding public.vector, p_limit integer)
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, distance double precision,
               source_digest bytea, vector_generation bigint, lexical_generation bigint)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    PERFORM pyretrieve.check_embedding(p_model, p_embedding);
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'candidate limit out of range for this decision';
    END IF;

    -- Exact cosine distance over the scope's rows, reached through the scope index: under RLS
    -- the distance operator is not leakproof, so a global HNSW index would filter after the
    -- scan and lose recall on small scopes. Exact search has recall 1.
    RETURN QUERY
    WITH top AS (
        SELECT e.fragment_id, f.content_digest,
               (e.embedding OPERATOR(public.<=>) p_embedding)::double precision AS distance,
               e.source_digest, e.vector_generation, f.lexical_generation
          FROM pyretrieve.embeddings e
          JOIN pyretrieve.fragments f
            ON f.workspace_id = e.workspace_id AND f.fragment_id = e.fragment_id
         WHERE e.workspace_id = d.workspace_id
           AND e.project_id = d.project_id
           AND e.model_id = p_model
           AND f.workspace_id = d.workspace_id
           AND f.project_id = d.project_id
           AND f.state = 'active'
           AND f.classification <= d.ceiling
           AND f.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
           AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
         ORDER BY distance, f.content_digest, f.fragment_id
         LIMIT p_limit
    )
    SELECT (row_number() OVER (ORDER BY t.distance, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.distance, t.source_digest, t.vector_generation,
           t.lexical_generation
      FROM top t
     ORDER BY 1;
END;
$$;


-- The scope counters return to their table.
CREATE TABLE pyretrieve.scope_generations_0003 AS
SELECT * FROM pyretrieve.scope_generations;
DROP VIEW pyretrieve.scope_generations;
CREATE TABLE pyretrieve.scope_generations (
    workspace_id        pyretrieve.identifier NOT NULL,
    project_id          pyretrieve.identifier NOT NULL,
    lexical_generation  bigint NOT NULL DEFAULT 0,
    vector_generation   bigint NOT NULL DEFAULT 0,
    ts_configs          regconfig[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (workspace_id, project_id),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects
);
INSERT INTO pyretrieve.scope_generations (workspace_id, project_id, lexical_generation, vector_generation, ts_configs)
SELECT workspace_id, project_id, lexical_generation, vector_generation, ts_configs
  FROM pyretrieve.scope_generations_0003;
DROP TABLE pyretrieve.scope_generations_0003;

CREATE OR REPLACE FUNCTION pyretrieve.bump_scope_lexical()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE pyretrieve.scope_generations sg
       SET lexical_generation = greatest(sg.lexical_generation, n.generation),
           ts_configs = ARRAY(SELECT DISTINCT c FROM unnest(sg.ts_configs || n.configs) AS c ORDER BY c)
      FROM (SELECT r.workspace_id, r.project_id,
                   max(r.lexical_generation) AS generation,
                   array_agg(DISTINCT r.ts_config) AS configs
              FROM changed r
             GROUP BY r.workspace_id, r.project_id) n
     WHERE sg.workspace_id = n.workspace_id AND sg.project_id = n.project_id;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION pyretrieve.bump_scope_vector()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE pyretrieve.scope_generations sg
       SET vector_generation = greatest(sg.vector_generation, n.generation)
      FROM (SELECT r.workspace_id, r.project_id, max(r.vector_generation) AS generation
              FROM changed r
             GROUP BY r.workspace_id, r.project_id) n
     WHERE sg.workspace_id = n.workspace_id AND sg.project_id = n.project_id;
    RETURN NULL;
END;
$$;

-- Writers update the scope counters through the triggers above, so they hold UPDATE on them;
-- this guard keeps a hand-written UPDATE from rewinding a counter or dropping a configuration.
CREATE FUNCTION pyretrieve.scope_generations_forward()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.lexical_generation < OLD.lexical_generation
       OR NEW.vector_generation < OLD.vector_generation
       OR NOT (NEW.ts_configs @> OLD.ts_configs) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'scope generations only move forward';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER scope_generations_forward BEFORE UPDATE ON pyretrieve.scope_generations
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.scope_generations_forward();

ALTER TABLE pyretrieve.scope_generations ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY scope_generations_read ON pyretrieve.scope_generations FOR SELECT TO pyretrieve_reader
    USING ((workspace_id = (SELECT d.workspace_id FROM pyretrieve.bound_decision() d)
            AND project_id = (SELECT d.project_id FROM pyretrieve.bound_decision() d))
        OR (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
            AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)));
CREATE POLICY scope_generations_write ON pyretrieve.scope_generations FOR UPDATE TO pyretrieve_writer
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w))
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w));
CREATE POLICY scope_generations_admin ON pyretrieve.scope_generations FOR ALL TO pyretrieve_admin
    USING (true) WITH CHECK (true);

CREATE OR REPLACE FUNCTION pyretrieve.create_project(
    p_workspace text, p_project text, p_ts_config regconfig DEFAULT 'pg_catalog.english')
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM 1 FROM pyretrieve.workspaces w WHERE w.workspace_id = p_workspace;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'workspace not found';
    END IF;
    INSERT INTO pyretrieve.projects (workspace_id, project_id, ts_config)
    VALUES (p_workspace, p_project, coalesce(p_ts_config, 'pg_catalog.english'))
    ON CONFLICT (workspace_id, project_id) DO NOTHING;
    INSERT INTO pyretrieve.scope_generations (workspace_id, project_id, ts_configs)
    VALUES (p_workspace, p_project, ARRAY[coalesce(p_ts_config, 'pg_catalog.english')]::regconfig[])
    ON CONFLICT (workspace_id, project_id) DO NOTHING;
    RETURN p_project;
END;
$$;

DROP TABLE pyretrieve.postings, pyretrieve.generation_log, pyretrieve.scope_configs;

DROP INDEX pyretrieve.fragments_scope_idx;
CREATE INDEX fragments_scope_idx
    ON pyretrieve.fragments (workspace_id, project_id, state, classification);
ALTER TABLE pyretrieve.fragments DROP COLUMN doc_length;
DROP FUNCTION pyretrieve.tsvector_length(tsvector);
ALTER TABLE pyretrieve.projects DROP COLUMN bm25_k1, DROP COLUMN bm25_b;

CREATE FUNCTION pyretrieve.lexical_candidates(p_decision uuid, p_query text, p_limit integer)
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, score double precision,
               lexical_generation bigint)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_query IS NULL OR length(p_query) NOT BETWEEN 1 AND 4096 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query must be 1 to 4096 characters';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'candidate limit out of range for this decision';
    END IF;

    -- The decision's filters are stated explicitly (with the scope as parameters the planner
    -- can use for the scope index) and RLS applies them again as the caller: both must pass.
    -- Scoring is the replaceable part: ts_rank with length normalisation 1.
    RETURN QUERY
    WITH q AS MATERIALIZED (
        SELECT c.cfg, pyretrieve.or_tsquery(c.cfg, p_query) AS tsq
          FROM pyretrieve.scope_generations sg
         CROSS JOIN LATERAL unnest(sg.ts_configs) AS c(cfg)
         WHERE sg.workspace_id = d.workspace_id AND sg.project_id = d.project_id
    ), top AS (
        SELECT f.fragment_id, f.content_digest,
               ts_rank(f.tsv, q.tsq, 1)::double precision AS score, f.lexical_generation
          FROM pyretrieve.fragments f
          JOIN q ON f.ts_config = q.cfg
         WHERE f.workspace_id = d.workspace_id
           AND f.project_id = d.project_id
           AND f.state = 'active'
           AND f.classification <= d.ceiling
           AND f.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
           AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
           AND numnode(q.tsq) > 0
           AND f.tsv @@ q.tsq
         ORDER BY score DESC, f.content_digest, f.fragment_id
         LIMIT p_limit
    )
    SELECT (row_number() OVER (ORDER BY t.score DESC, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.score, t.lexical_generation
      FROM top t
     ORDER BY 1;
END;
$$;
COMMENT ON FUNCTION pyretrieve.lexical_candidates(uuid, text, integer) IS
    'Lexical candidates for the bound decision: OR over the query''s lexemes, scored with ts_rank (normalisation 1), 1-based ranks in a total order (score desc, then content digest, then fragment id). Returns rank, fragment_id, content_digest, score, lexical_generation. Raises PR002 for a decision that is not the caller''s bound decision of this transaction.';

CREATE FUNCTION pyretrieve.search(
    p_workspace text,
    p_project text,
    p_purpose text,
    p_query text,
    p_embedding public.vector DEFAULT NULL,
    p_model text DEFAULT NULL,
    p_limit integer DEFAULT 10,
    p_mode text DEFAULT 'hybrid')
RETURNS TABLE (
    rank integer, fragment_id uuid, content_digest bytea, body text, final_score double precision,
    rrf_score double precision, freshness double precision, confidence double precision,
    explanation jsonb)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    d record;
    v_wants_vector boolean;
    v_required boolean;
    v_intent text;
    v_embedding_digest bytea;
    v_lexical jsonb;
    v_vector jsonb;
    v_status text;
    v_reason text;
    v_evidence jsonb := '{}'::jsonb;
    v_ideal double precision := 0.0;
    v_factor double precision;
    v_stale integer;
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('hybrid', 'lexical', 'vector') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'mode must be hybrid, lexical or vector';
    END IF;
    IF p_query IS NULL OR length(p_query) NOT BETWEEN 1 AND 4096 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query must be 1 to 4096 characters';
    END IF;
    v_wants_vector := p_mode <> 'lexical';
    IF v_wants_vector AND p_embedding IS NOT NULL THEN
        v_embedding_digest := pyretrieve.embedding_digest(p_embedding);
    END IF;
    v_intent := CASE WHEN NOT v_wants_vector THEN 'disabled'
                     WHEN p_mode = 'vector' THEN 'required' ELSE 'optional' END;

    -- 1. Policy.
    SELECT * INTO d FROM pyretrieve.authorize(
        p_workspace => p_workspace, p_project => p_project, p_purpose => p_purpose,
        p_query_digest => pyretrieve.content_digest(p_query), p_semantic_intent => v_intent,
        p_embedding_digest => v_embedding_digest, p_requested_limit => p_limit);
    v_required := p_mode = 'vector' OR d.semantic_policy = 'required';

    -- 2. Lexical candidates (a failure here is a hard error).
    IF p_mode <> 'vector' THEN
        SELECT coalesce(jsonb_agg(to_jsonb(c) ORDER BY c.rank), '[]'::jsonb) INTO v_lexical
          FROM pyretrieve.lexical_candidates(d.decision_id, p_query, d.candidate_limit) c;
        v_ideal := v_ideal + 1.0::double precision / 61.0::double precision;
    END IF;

    -- 3. Vector candidates, when mode, intent and policy allow and an embedding exists.
    IF NOT v_wants_vector THEN
        v_status := 'not_requested';
    ELSIF d.semantic_policy = 'disabled' THEN
        v_status := 'degraded';
        v_reason := 'disabled';
        v_evidence := jsonb_build_object('policy', 'disabled');
    ELSIF p_embedding IS NULL OR p_model IS NULL THEN
        v_status := 'degraded';
        v_reason := 'missing_embedding';
        v_evidence := jsonb_build_object('model', p_model);
    ELSE
        BEGIN
            SELECT coalesce(jsonb_agg(to_jsonb(c) ORDER BY c.rank), '[]'::jsonb),
                   count(*) FILTER (WHERE c.source_digest <> c.content_digest
                                       OR c.vector_generation < c.lexical_generation)
              INTO v_vector, v_stale
              FROM pyretrieve.vector_candidates(d.decision_id, p_model, p_embedding, d.candidate_limit) c;
            IF v_stale > 0 THEN
                v_status := 'degraded';
                v_reason := 'stale';
                v_evidence := jsonb_build_object('model', p_model, 'stale_candidates', v_stale,
                                                 'candidates', jsonb_array_length(v_vector));
                v_vector := NULL;
            ELSE
                v_status := 'used';
                v_evidence := jsonb_build_object('model', p_model);
                v_ideal := v_ideal + 1.0::double precision / 61.0::double precision;
            END IF;
        EXCEPTION
            WHEN SQLSTATE 'PR012' THEN
                v_status := 'degraded'; v_reason := 'unavailable';
                v_evidence := jsonb_build_object('model', p_model, 'cause', 'unknown_model');
            WHEN SQLSTATE 'PR011' THEN
                v_status := 'degraded'; v_reason := 'corrupt';
                v_evidence := jsonb_build_object('model', p_model, 'cause', 'invalid_embedding');
        END;
    END IF;
    IF v_required AND v_status IS DISTINCT FROM 'used' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR030', MESSAGE = 'semantic retrieval is required but was not available';
    END IF;
    v_factor := CASE WHEN v_status = 'degraded' THEN 0.75::double precision ELSE 1.0::double precision END;

    -- 4. Authoritative records, fusion, freshness, total order, confidence, explanation.
    RETURN QUERY
    WITH lex AS (
        SELECT (x->>'rank')::integer AS rank, (x->>'fragment_id')::uuid AS fragment_id,
               (x->>'score')::double precision AS score
          FROM jsonb_array_elements(coalesce(v_lexical, '[]'::jsonb)) x
    ), vec AS (
        SELECT (x->>'rank')::integer AS rank, (x->>'fragment_id')::uuid AS fragment_id,
               (x->>'distance')::double precision AS distance,
               (x->>'vector_generation')::bigint AS vector_generation
          FROM jsonb_array_elements(coalesce(v_vector, '[]'::jsonb)) x
    ), rec AS (
        SELECT r.*
          FROM pyretrieve.fragments(d.decision_id, ARRAY(
                   SELECT l.fragment_id FROM lex l UNION SELECT v.fragment_id FROM vec v)) r
    ), fused AS (
        SELECT r.*, l.rank AS lexical_rank, l.score AS lexical_score,
               v.rank AS vector_rank, v.distance, v.vector_generation,
               1.0::double precision / (60 + l.rank)::double precision AS lexical_contribution,
               1.0::double precision / (60 + v.rank)::double precision AS vector_contribution,
               (extract(epoch FROM d.evaluated_at - r.observed_at) * 1000000)::bigint AS age_us,
               (extract(epoch FROM d.max_age) * 1000000)::bigint AS max_age_us
          FROM rec r
          LEFT JOIN lex l ON l.fragment_id = r.fragment_id
          LEFT JOIN vec v ON v.fragment_id = r.fragment_id
    ), scored AS (
        SELECT f.*,
               (0.0::double precision + coalesce(f.lexical_contribution, 0.0::double precision))
                   + coalesce(f.vector_contribution, 0.0::double precision) AS rrf,
               CASE WHEN f.max_age_us IS NULL THEN 1.0::double precision
                    ELSE least(1.0::double precision, greatest(0.5::double precision,
                         1.0::double precision - 0.5::double precision
                             * (f.age_us::double precision / f.max_age_us::double precision)))
               END AS fresh
          FROM fused f
    ), ordered AS (
        SELECT s.*, s.rrf * s.fresh AS final,
               (row_number() OVER (ORDER BY s.rrf * s.fresh DESC, s.rrf DESC,
                                            s.content_digest, s.fragment_id))::integer AS fused_rank
          FROM scored s
    ), top AS (
        SELECT o.*,
               least(1.0::double precision, greatest(0.0::double precision,
                   (o.rrf / v_ideal) * o.fresh * (61.0::double precision / (60.0::double precision + o.fused_rank))
                   * v_factor)) AS conf
          FROM ordered o
         WHERE o.fused_rank <= p_limit
    )
    SELECT t.fused_rank, t.fragment_id, t.content_digest, t.body, t.final, t.rrf, t.fresh, t.conf,
           jsonb_build_object(
               'fragment', jsonb_build_object('workspace_id', t.workspace_id, 'project_id', t.project_id,
                                              'fragment_id', t.fragment_id),
               'content', jsonb_build_object('text', t.body, 'trust', 'untrusted-data'),
               'provenance', jsonb_build_object(
                   'source_uri', t.source_uri, 'source_revision', t.source_revision,
                   'manifest_id', t.manifest_id, 'observed_at', t.observed_at,
                   'retrieved_at', d.evaluated_at, 'expires_at', t.expires_at,
                   'ingested_at', t.ingested_at, 'content_digest', encode(t.content_digest, 'hex')),
               'lexical', CASE WHEN t.lexical_rank IS NULL THEN NULL ELSE jsonb_build_object(
                   'rank', t.lexical_rank, 'score', t.lexical_score,
                   'contribution', t.lexical_contribution, 'weight', 1.0) END,
               'vector', CASE WHEN t.vector_rank IS NULL THEN NULL ELSE jsonb_build_object(
                   'rank', t.vector_rank, 'distance', t.distance, 'metric', 'cosine_distance',
                   'contribution', t.vector_contribution, 'weight', 1.0) END,
               'rrf', jsonb_build_object('k', 60, 'rank_base', 1, 'score', t.rrf,
                   'formula', 'sum over modalities of w/(60+rank), 1-based ranks, a missing modality contributes 0'),
               'freshness', jsonb_build_object('factor', t.fresh, 'age_us', t.age_us, 'max_age_us', t.max_age_us),
               'final_score', t.final,
               'confidence', t.conf,
               'tie_break', encode(t.content_digest, 'hex') || ':' || t.fragment_id::text,
               'generations', jsonb_build_object('lexical', t.lexical_generation, 'vector', t.vector_generation),
               'semantic', jsonb_build_object('status', v_status, 'reason', v_reason, 'evidence', v_evidence,
                                              'lowers_confidence', v_status = 'degraded'),
               'semantic_query_digest', encode(v_embedding_digest, 'hex'),
               'decision_id', d.decision_id)
      FROM top t
     ORDER BY t.fused_rank;
END;
$$;
COMMENT ON FUNCTION pyretrieve.search(text, text, text, text, public.vector, text, integer, text) IS
    'One fused, explained search: authorize, lexical candidates, vector candidates (when the mode and the grant''s semantic policy allow and an embedding and model are given), then Reciprocal Rank Fusion (1-based ranks, k = 60, a missing modality contributes 0), a freshness factor within the grant''s max_age, a total order (final score, RRF score, content digest, fragment id), confidence and a jsonb explanation per result. Same order as the Python client. Raises PR001 on deny and PR030 when semantic retrieval is required but unavailable.';

REVOKE ALL ON pyretrieve.scope_generations FROM PUBLIC;
REVOKE ALL ON FUNCTION pyretrieve.scope_generations_forward(),
    pyretrieve.lexical_candidates(uuid, text, integer),
    pyretrieve.search(text, text, text, text, public.vector, text, integer, text)
    FROM PUBLIC;
GRANT SELECT ON pyretrieve.scope_generations TO pyretrieve_reader;
GRANT UPDATE (lexical_generation, vector_generation, ts_configs)
    ON pyretrieve.scope_generations TO pyretrieve_writer;
GRANT SELECT, INSERT ON pyretrieve.scope_generations TO pyretrieve_admin;
GRANT EXECUTE ON FUNCTION
    pyretrieve.lexical_candidates(uuid, text, integer),
    pyretrieve.search(text, text, text, text, public.vector, text, integer, text)
    TO pyretrieve_reader;
GRANT EXECUTE ON FUNCTION pyretrieve.scope_generations_forward() TO pyretrieve_writer;

REVOKE SELECT ON SEQUENCE pyretrieve.generation_seq FROM pyretrieve_writer;

UPDATE pyretrieve.installation SET schema_version = '0002';

RESET ROLE;
