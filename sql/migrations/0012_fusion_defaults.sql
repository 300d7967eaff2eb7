-- pyretrieve migration 0012: a default fusion and default weights per model, and DBSF.
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff (on 0011); reviewed by hand.
-- When renumbering: re-draft, then put back the two hand-written parts below (table DDL, data)
-- in place of the drafter's TODO lines, and the same for the .down.sql.
--
-- Each registered model carries a default fusion and default lexical and vector weights
-- (embedding_models), which search() and the client use when a request gives none;
-- register_model sets them (an unknown fusion or bad default weights: PR016, before anything is
-- written) and model_defaults() reads them. search() gains p_fusion ('rrf' or 'dbsf', after
-- p_candidate_limit; NULL, the default, means the model's), takes its weights from the model
-- when none are given (the weights default to NULL now), says in every explanation which fusion
-- ran, with its parameters and weights and where each came from (the "fusion" key, which
-- replaces "rrf"), and returns fused_score (formerly rrf_score). error_code() names PR016.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- ---- hand-written: table DDL (columns and their privileges) ---------------------------------
-- Models registered before this migration keep RRF and 1.0 each, what they were searched with
-- (the data step below moves the known ones to their evaluated defaults).
ALTER TABLE pyretrieve.embedding_models
    ADD COLUMN lexical_weight double precision NOT NULL DEFAULT 1.0
               CHECK (lexical_weight > 0 AND lexical_weight <= 1000),
    ADD COLUMN vector_weight  double precision NOT NULL DEFAULT 1.0
               CHECK (vector_weight > 0 AND vector_weight <= 1000),
    ADD COLUMN fusion         text NOT NULL DEFAULT 'rrf' CHECK (fusion IN ('rrf', 'dbsf'));
GRANT INSERT (model_id, dimension, lexical_weight, vector_weight, fusion),
      UPDATE (lexical_weight, vector_weight, fusion) ON pyretrieve.embedding_models TO pyretrieve_api;
COMMENT ON TABLE pyretrieve.embedding_models IS
    'Registered embedding models and their default fusion and weights. Global, not per workspace: a model id, its dimension and its defaults are configuration, not tenant data.';

-- ---- hand-written: data -----------------------------------------------------------------------
-- The models this package ships get the defaults it registers them with
-- (pyretrieve.embedders.registry.DEFAULTS as of this migration; a test checks they agree), so an
-- upgraded database searches as a fresh one does. No admin can have chosen other values: the
-- columns are new.
-- The owner is bound by the forced RLS (no UPDATE policy admits it): lifted for this statement,
-- inside the migration's transaction, as 0003 did for its backfill.
ALTER TABLE pyretrieve.embedding_models NO FORCE ROW LEVEL SECURITY;
UPDATE pyretrieve.embedding_models m
   SET fusion = d.fusion, lexical_weight = d.lexical_weight, vector_weight = d.vector_weight
  FROM (VALUES ('hash-ngram-v1', 'rrf', 20.0, 1.0),
               ('all-MiniLM-L6-v2-int8', 'dbsf', 1.5, 1.0),
               ('all-MiniLM-L6-v2-int8-windowed', 'dbsf', 1.5, 1.0))
       AS d(model_id, fusion, lexical_weight, vector_weight)
 WHERE m.model_id = d.model_id;
ALTER TABLE pyretrieve.embedding_models FORCE ROW LEVEL SECURITY;
-- ---- end of the hand-written part; the rest is the drafter's ------------------------------
DROP FUNCTION pyretrieve.register_model(text,integer) CASCADE;
DROP FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer) CASCADE;
DROP FUNCTION pyretrieve.list_models() CASCADE;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.dbsf_distribution(p_values double precision[])
 RETURNS TABLE(candidates integer, mean double precision, std double precision, lower_bound double precision, upper_bound double precision)
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_value double precision;
    v_total double precision := 0.0;
    v_squares double precision := 0.0;
    v_delta double precision;
    v_spread double precision;
BEGIN
    candidates := coalesce(pg_catalog.array_length(p_values, 1), 0);
    IF candidates = 0 THEN
        RETURN;
    END IF;
    FOREACH v_value IN ARRAY p_values LOOP
        v_total := v_total + v_value;
    END LOOP;
    mean := v_total / candidates::double precision;
    std := 0.0::double precision;
    IF candidates > 1 THEN
        FOREACH v_value IN ARRAY p_values LOOP
            v_delta := v_value - mean;
            v_squares := v_squares + v_delta * v_delta;
        END LOOP;
        std := pg_catalog.sqrt(v_squares / (candidates - 1)::double precision);
    END IF;
    v_spread := 3.0::double precision * std;
    lower_bound := mean - v_spread;
    upper_bound := mean + v_spread;
    RETURN NEXT;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.dbsf_distribution(double precision[]) IS 'The distribution-based score fusion range of one leg''s candidate scores, given in rank order: count, mean, sample standard deviation and mean -/+ 3 std, summed one addition at a time in the given order so the doubles are the Python ranker''s. No row for an empty array.';
REVOKE ALL ON FUNCTION pyretrieve.dbsf_distribution(double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.dbsf_distribution(double precision[]) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.error_code(p_sqlstate text, p_message text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT
         CASE
             WHEN (s.state = ANY (ARRAY['28P01'::text, '28000'::text])) THEN 'VES_MEMORY_AUTHENTICATION_FAILED'::text
             WHEN ((s.state = '3F000'::text) AND (strpos(s.message, '"pyretrieve"'::text) > 0)) THEN 'VES_MEMORY_SCHEMA_MISSING'::text
             WHEN ((s.state = ANY (ARRAY['42883'::text, '42P01'::text])) AND ((strpos(s.message, 'pyretrieve.'::text) > 0) OR (strpos(s.message, '"pyretrieve'::text) > 0))) THEN 'VES_MEMORY_SCHEMA_MISSING'::text
             WHEN ((s.state = ANY (ARRAY['22023'::text, '42704'::text])) AND (s.message ~ '^role "[^\n]*" does not exist$'::text)) THEN 'VES_MEMORY_UNKNOWN_PRINCIPAL'::text
             WHEN ((s.state = '42501'::text) AND starts_with(s.message, 'permission denied to set role'::text)) THEN 'VES_MEMORY_UNKNOWN_PRINCIPAL'::text
             WHEN (s.state = 'PR001'::text) THEN 'VES_MEMORY_ACCESS_DENIED'::text
             WHEN (s.state = ANY (ARRAY['PR002'::text, 'PR003'::text])) THEN 'VES_MEMORY_INVALID_DECISION'::text
             WHEN (s.state = 'PR004'::text) THEN 'VES_MEMORY_PRIVILEGED_CALLER'::text
             WHEN (s.state = ANY (ARRAY['PR010'::text, 'PR015'::text])) THEN 'VES_MEMORY_INVALID_INPUT'::text
             WHEN (s.state = 'PR016'::text) THEN 'VES_MEMORY_INVALID_FUSION'::text
             WHEN (s.state = 'PR011'::text) THEN 'VES_MEMORY_INVALID_EMBEDDING'::text
             WHEN (s.state = 'PR012'::text) THEN 'VES_MEMORY_UNKNOWN_MODEL'::text
             WHEN (s.state = 'PR013'::text) THEN 'VES_MEMORY_CONFLICT'::text
             WHEN (s.state = 'PR014'::text) THEN 'VES_MEMORY_LIMIT_EXCEEDED'::text
             WHEN (s.state = 'PR020'::text) THEN 'VES_MEMORY_NOT_FOUND'::text
             WHEN (s.state = 'PR030'::text) THEN 'VES_MEMORY_SEMANTIC_REQUIRED'::text
             WHEN (s.state = '42501'::text) THEN 'VES_MEMORY_ACCESS_DENIED'::text
             WHEN (s.state = ANY (ARRAY['23505'::text, '40001'::text, '40P01'::text])) THEN 'VES_MEMORY_CONFLICT'::text
             WHEN (s.state = ANY (ARRAY['55P03'::text, '57014'::text, '25P03'::text])) THEN 'VES_MEMORY_TIMEOUT'::text
             WHEN (s.state = '54000'::text) THEN 'VES_MEMORY_LIMIT_EXCEEDED'::text
             WHEN ("left"(s.state, 2) = ANY (ARRAY['08'::text, '53'::text, '57'::text])) THEN 'VES_MEMORY_DATABASE_UNAVAILABLE'::text
             WHEN ("left"(s.state, 2) = ANY (ARRAY['22'::text, '23'::text])) THEN 'VES_MEMORY_INVALID_INPUT'::text
             WHEN ("left"(s.state, 2) = ANY (ARRAY['27'::text, '28'::text, '2F'::text, '38'::text, '39'::text, '3B'::text, '40'::text, '54'::text, '55'::text, '58'::text, 'F0'::text, 'HV'::text])) THEN 'VES_MEMORY_DATABASE_UNAVAILABLE'::text
             ELSE 'VES_MEMORY_INTERNAL'::text
         END AS "case"
    FROM ( SELECT COALESCE(error_code.p_sqlstate, ''::text) AS state,
             COALESCE(error_code.p_message, ''::text) AS message) s;
END;
COMMENT ON FUNCTION pyretrieve.error_code(text,text) IS 'The stable code of the typed error the Python client raises for a database error with this SQLSTATE and primary message (pyretrieve.db.errors.translate): the cause search() records when the vector leg fails, as the client does.';
REVOKE ALL ON FUNCTION pyretrieve.error_code(text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.error_code(text,text) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.search(p_workspace text, p_project text, p_purpose text, p_query text, p_embedding public.vector DEFAULT NULL::public.vector, p_model text DEFAULT NULL::text, p_limit integer DEFAULT 10, p_mode text DEFAULT 'hybrid'::text, p_lexical_weight double precision DEFAULT NULL::double precision, p_vector_weight double precision DEFAULT NULL::double precision, p_ranking text DEFAULT 'bm25'::text, p_semantic text DEFAULT 'optional'::text, p_candidate_limit integer DEFAULT NULL::integer, p_fusion text DEFAULT NULL::text)
 RETURNS TABLE(rank integer, fragment_id uuid, content_digest bytea, body text, final_score double precision, fused_score double precision, freshness double precision, confidence double precision, explanation jsonb)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    v_wl double precision;
    v_wv double precision;
    v_source text;
    v_weights_model text;
    v_weights jsonb;
    v_fusion text;
    v_fusion_source text;
    v_fusion_model text;
    v_model_fusion text;
    v_model_wl double precision;
    v_model_wv double precision;
    v_ln integer;
    v_lmean double precision;
    v_lstd double precision;
    v_llo double precision;
    v_lhi double precision;
    v_vn integer;
    v_vmean double precision;
    v_vstd double precision;
    v_vlo double precision;
    v_vhi double precision;
    v_per_leg integer;
BEGIN
    -- The client's checks (pyretrieve.client.build_request), each refused alike (PR010).
    IF p_query IS NULL OR length(p_query) NOT BETWEEN 1 AND 4096 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query must be 1 to 4096 characters';
    END IF;
    IF p_mode IS NULL OR p_mode NOT IN ('hybrid', 'lexical', 'vector') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'mode must be hybrid, lexical or vector';
    END IF;
    IF p_semantic IS NULL OR p_semantic NOT IN ('optional', 'required', 'disabled') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'semantic must be optional, required or disabled';
    END IF;
    IF p_ranking IS NULL OR p_ranking NOT IN ('bm25', 'ts_rank') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'ranking must be bm25 or ts_rank';
    END IF;
    IF p_mode = 'vector' AND p_semantic = 'disabled' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'vector mode needs semantic retrieval';
    END IF;
    IF p_candidate_limit IS NOT NULL AND p_candidate_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'candidate limit must be between 1 and 1000';
    END IF;
    IF p_model IS NOT NULL AND length(p_model) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid model id';
    END IF;
    IF p_fusion IS NOT NULL AND p_fusion NOT IN ('rrf', 'dbsf') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR016', MESSAGE = 'fusion must be rrf or dbsf';
    END IF;
    IF (p_lexical_weight IS NULL) <> (p_vector_weight IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'give both weights or neither';
    END IF;
    IF p_lexical_weight IS NOT NULL
       AND (NOT (p_lexical_weight >= 0 AND p_lexical_weight <= 1000)
            OR NOT (p_vector_weight >= 0 AND p_vector_weight <= 1000)) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'weights must be between 0 and 1000';
    END IF;
    v_wants_vector := p_mode <> 'lexical' AND p_semantic <> 'disabled';
    IF v_wants_vector AND p_embedding IS NOT NULL THEN
        v_embedding_digest := pyretrieve.embedding_digest(p_embedding);
    END IF;
    -- The client's rule (pyretrieve.contract.semantic_intent).
    v_intent := CASE WHEN NOT v_wants_vector THEN 'disabled'
                     WHEN p_mode = 'vector' OR p_semantic = 'required' THEN 'required'
                     ELSE 'optional' END;

    -- 1. Policy.
    SELECT * INTO d FROM pyretrieve.authorize(
        p_workspace => p_workspace, p_project => p_project, p_purpose => p_purpose,
        p_query_digest => pyretrieve.content_digest(p_query), p_semantic_intent => v_intent,
        p_embedding_digest => v_embedding_digest, p_requested_limit => p_limit);
    -- Required by the request (its intent: lexical mode wants no semantic leg at all, so it
    -- requires none) or by the grant.
    v_required := v_intent = 'required' OR d.semantic_policy = 'required';
    v_per_leg := least(d.candidate_limit, coalesce(p_candidate_limit, d.candidate_limit));

    -- The fusion and the weights: the request's, else the named model's registered defaults,
    -- else rrf and 1.0 each (the client's rule, Retriever._fusion).
    IF p_model IS NOT NULL AND (p_fusion IS NULL OR p_lexical_weight IS NULL) THEN
        SELECT m.fusion, m.lexical_weight, m.vector_weight INTO v_model_fusion, v_model_wl, v_model_wv
          FROM pyretrieve.model_defaults(p_model) m;
    END IF;
    IF p_fusion IS NOT NULL THEN
        v_fusion := p_fusion;
        v_fusion_source := 'request';
    ELSIF v_model_fusion IS NOT NULL THEN
        v_fusion := v_model_fusion;
        v_fusion_source := 'model';
        v_fusion_model := p_model;
    ELSE
        v_fusion := 'rrf';
        v_fusion_source := 'default';
    END IF;
    IF p_lexical_weight IS NOT NULL THEN
        v_wl := p_lexical_weight;
        v_wv := p_vector_weight;
        v_source := 'request';
    ELSIF v_model_wl IS NOT NULL THEN
        v_wl := v_model_wl;
        v_wv := v_model_wv;
        v_source := 'model';
        v_weights_model := p_model;
    ELSE
        v_wl := 1.0::double precision;
        v_wv := 1.0::double precision;
        v_source := 'default';
    END IF;
    v_weights := jsonb_build_object('lexical', pyretrieve.json_double(v_wl),
                                    'vector', pyretrieve.json_double(v_wv),
                                    'source', v_source, 'model', v_weights_model);

    -- 2. Lexical candidates (a failure here is a hard error).
    IF p_mode <> 'vector' THEN
        SELECT coalesce(jsonb_agg(to_jsonb(c) ORDER BY c.rank), '[]'::jsonb) INTO v_lexical
          FROM pyretrieve.lexical_candidates(d.decision_id, p_query, v_per_leg, p_ranking) c;
        IF v_fusion = 'rrf' THEN
            v_ideal := v_ideal + v_wl / 61.0::double precision;
        ELSE
            v_ideal := v_ideal + v_wl;
        END IF;
    END IF;

    -- 3. Vector candidates, when mode, intent and policy allow and an embedding exists.
    IF NOT v_wants_vector THEN
        v_status := 'not_requested';
    ELSIF d.semantic_policy = 'disabled' THEN
        v_status := 'degraded';
        v_reason := 'disabled';
        v_evidence := jsonb_build_object('policy', 'disabled');
    ELSIF p_embedding IS NULL THEN
        -- The client's evidence when it has no embedding and no embedder for the model.
        v_status := 'degraded';
        v_reason := 'missing_embedding';
        v_evidence := jsonb_build_object('model', p_model, 'embedder_registered', false);
    ELSIF p_model IS NULL THEN
        v_status := 'degraded';
        v_reason := 'missing_embedding';
        v_evidence := jsonb_build_object('model', p_model);
    ELSE
        BEGIN
            SELECT coalesce(jsonb_agg(to_jsonb(c) ORDER BY c.rank), '[]'::jsonb),
                   count(*) FILTER (WHERE c.source_digest <> c.content_digest
                                       OR c.vector_generation < c.lexical_generation)
              INTO v_vector, v_stale
              FROM pyretrieve.vector_candidates(d.decision_id, p_model, p_embedding, v_per_leg) c;
            IF v_stale > 0 THEN
                v_status := 'degraded';
                v_reason := 'stale';
                v_evidence := jsonb_build_object('model', p_model, 'stale_candidates', v_stale,
                                                 'candidates', jsonb_array_length(v_vector));
                v_vector := NULL;
            ELSE
                v_status := 'used';
                v_evidence := jsonb_build_object('model', p_model);
                IF v_fusion = 'rrf' THEN
                    v_ideal := v_ideal + v_wv / 61.0::double precision;
                ELSE
                    v_ideal := v_ideal + v_wv;
                END IF;
            END IF;
        EXCEPTION
            WHEN SQLSTATE 'PR012' THEN
                v_status := 'degraded'; v_reason := 'unavailable';
                v_evidence := jsonb_build_object('model', p_model, 'cause', 'unknown_model');
            WHEN SQLSTATE 'PR011' THEN
                v_status := 'degraded'; v_reason := 'corrupt';
                v_evidence := jsonb_build_object('model', p_model, 'cause', 'invalid_embedding');
            -- Any other failure of the leg (OTHERS leaves out query_canceled: a cancel or a
            -- statement_timeout ends the whole call, which is one statement).
            WHEN OTHERS THEN
                v_status := 'degraded'; v_reason := 'unavailable';
                v_evidence := jsonb_build_object(
                    'model', p_model, 'cause', pyretrieve.error_code(SQLSTATE, SQLERRM));
        END;
    END IF;
    IF v_required AND v_status IS DISTINCT FROM 'used' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR030', MESSAGE = 'semantic retrieval is required but was not available';
    END IF;
    IF NOT v_ideal > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'the weights of the modalities that ran are all zero';
    END IF;
    v_factor := CASE WHEN v_status = 'degraded' THEN 0.75::double precision ELSE 1.0::double precision END;
    -- DBSF: each leg's distribution over all of its candidates, in rank order.
    IF v_fusion = 'dbsf' THEN
        SELECT x.candidates, x.mean, x.std, x.lower_bound, x.upper_bound
          INTO v_ln, v_lmean, v_lstd, v_llo, v_lhi
          FROM pyretrieve.dbsf_distribution(ARRAY(
                   SELECT (e->>'score')::double precision
                     FROM jsonb_array_elements(coalesce(v_lexical, '[]'::jsonb)) WITH ORDINALITY AS u(e, o)
                    ORDER BY o)) x;
        SELECT x.candidates, x.mean, x.std, x.lower_bound, x.upper_bound
          INTO v_vn, v_vmean, v_vstd, v_vlo, v_vhi
          FROM pyretrieve.dbsf_distribution(ARRAY(
                   SELECT 1.0::double precision - (e->>'distance')::double precision
                     FROM jsonb_array_elements(coalesce(v_vector, '[]'::jsonb)) WITH ORDINALITY AS u(e, o)
                    ORDER BY o)) x;
    END IF;

    -- 4. Authoritative records, fusion, freshness, total order, confidence, explanation.
    RETURN QUERY
    WITH lex AS (
        SELECT (x->>'rank')::integer AS rank, (x->>'fragment_id')::uuid AS fragment_id,
               (x->>'score')::double precision AS score,
               (SELECT coalesce(jsonb_agg(jsonb_build_object(
                           'term', e->'term', 'tf', e->'tf', 'query_tf', e->'query_tf',
                           'idf', pyretrieve.json_double((e->>'idf')::double precision),
                           'length_norm', pyretrieve.json_double((e->>'length_norm')::double precision),
                           'contribution', pyretrieve.json_double((e->>'contribution')::double precision))
                           ORDER BY o), '[]'::jsonb)
                  FROM jsonb_array_elements(x->'terms') WITH ORDINALITY AS u(e, o)) AS terms
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
    ), joined AS (
        SELECT r.*, l.rank AS lexical_rank, l.score AS lexical_score, l.terms AS lexical_terms,
               v.rank AS vector_rank, v.distance, v.vector_generation,
               1.0::double precision - v.distance AS vector_input,
               CASE WHEN v_fusion = 'dbsf' AND l.rank IS NOT NULL THEN
                   CASE WHEN NOT (v_lhi > v_llo) THEN 0.5::double precision
                        ELSE greatest(0.0::double precision, (l.score - v_llo) / (v_lhi - v_llo)) END
               END AS lexical_normalized,
               CASE WHEN v_fusion = 'dbsf' AND v.rank IS NOT NULL THEN
                   CASE WHEN NOT (v_vhi > v_vlo) THEN 0.5::double precision
                        ELSE greatest(0.0::double precision,
                                      ((1.0::double precision - v.distance) - v_vlo) / (v_vhi - v_vlo)) END
               END AS vector_normalized,
               (extract(epoch FROM d.evaluated_at - r.observed_at) * 1000000)::bigint AS age_us,
               (extract(epoch FROM d.max_age) * 1000000)::bigint AS max_age_us
          FROM rec r
          LEFT JOIN lex l ON l.fragment_id = r.fragment_id
          LEFT JOIN vec v ON v.fragment_id = r.fragment_id
    ), fused AS (
        SELECT j.*,
               CASE WHEN v_fusion = 'rrf' THEN v_wl / (60 + j.lexical_rank)::double precision
                    ELSE v_wl * j.lexical_normalized END AS lexical_contribution,
               CASE WHEN v_fusion = 'rrf' THEN v_wv / (60 + j.vector_rank)::double precision
                    ELSE v_wv * j.vector_normalized END AS vector_contribution
          FROM joined j
    ), scored AS (
        SELECT f.*,
               (0.0::double precision + coalesce(f.lexical_contribution, 0.0::double precision))
                   + coalesce(f.vector_contribution, 0.0::double precision) AS fused,
               CASE WHEN f.max_age_us IS NULL THEN 1.0::double precision
                    ELSE least(1.0::double precision, greatest(0.5::double precision,
                         1.0::double precision - 0.5::double precision
                             * (f.age_us::double precision / f.max_age_us::double precision)))
               END AS fresh
          FROM fused f
    ), ordered AS (
        SELECT s.*, s.fused * s.fresh AS final,
               (row_number() OVER (ORDER BY s.fused * s.fresh DESC, s.fused DESC,
                                            s.content_digest, s.fragment_id))::integer AS fused_rank
          FROM scored s
    ), top AS (
        SELECT o.*,
               least(1.0::double precision, greatest(0.0::double precision,
                   (o.fused / v_ideal) * o.fresh * (61.0::double precision / (60.0::double precision + o.fused_rank))
                   * v_factor)) AS conf
          FROM ordered o
         WHERE o.fused_rank <= p_limit
    )
    SELECT t.fused_rank, t.fragment_id, t.content_digest, t.body, t.final, t.fused, t.fresh, t.conf,
           jsonb_build_object(
               'fused_rank', t.fused_rank,
               'decision_id', d.decision_id,
               'fragment', jsonb_build_object('workspace_id', t.workspace_id, 'project_id', t.project_id,
                                              'fragment_id', t.fragment_id,
                                              'classification', t.classification),
               'content', jsonb_build_object('text', t.body, 'trust', 'untrusted-data'),
               'provenance', jsonb_build_object(
                   'source_uri', t.source_uri, 'source_revision', t.source_revision,
                   'manifest_id', t.manifest_id, 'observed_at', pyretrieve.iso_utc(t.observed_at),
                   'retrieved_at', pyretrieve.iso_utc(d.evaluated_at),
                   'expires_at', pyretrieve.iso_utc(t.expires_at),
                   'ingested_at', pyretrieve.iso_utc(t.ingested_at),
                   'content_digest', encode(t.content_digest, 'hex')),
               'modalities', jsonb_build_object(
                   'lexical', CASE WHEN t.lexical_rank IS NULL THEN NULL ELSE jsonb_build_object(
                       'rank', t.lexical_rank, 'score', pyretrieve.json_double(t.lexical_score),
                       'terms', t.lexical_terms,
                       'contribution', pyretrieve.json_double(t.lexical_contribution),
                       'weight', pyretrieve.json_double(v_wl))
                       || CASE WHEN v_fusion = 'dbsf' THEN jsonb_build_object('normalization', jsonb_build_object(
                              'input', pyretrieve.json_double(t.lexical_score), 'candidates', v_ln,
                              'mean', pyretrieve.json_double(v_lmean), 'std', pyretrieve.json_double(v_lstd),
                              'lower', pyretrieve.json_double(v_llo), 'upper', pyretrieve.json_double(v_lhi),
                              'normalized', pyretrieve.json_double(t.lexical_normalized)))
                          ELSE '{}'::jsonb END END,
                   'vector', CASE WHEN t.vector_rank IS NULL THEN NULL ELSE jsonb_build_object(
                       'rank', t.vector_rank, 'distance', pyretrieve.json_double(t.distance),
                       'metric', 'cosine_distance',
                       'contribution', pyretrieve.json_double(t.vector_contribution),
                       'weight', pyretrieve.json_double(v_wv))
                       || CASE WHEN v_fusion = 'dbsf' THEN jsonb_build_object('normalization', jsonb_build_object(
                              'input', pyretrieve.json_double(t.vector_input), 'candidates', v_vn,
                              'mean', pyretrieve.json_double(v_vmean), 'std', pyretrieve.json_double(v_vstd),
                              'lower', pyretrieve.json_double(v_vlo), 'upper', pyretrieve.json_double(v_vhi),
                              'normalized', pyretrieve.json_double(t.vector_normalized)))
                          ELSE '{}'::jsonb END END),
               'fusion', CASE WHEN v_fusion = 'rrf' THEN jsonb_build_object(
                   'method', 'rrf', 'source', v_fusion_source, 'model', v_fusion_model,
                   'k', 60, 'rank_base', 1,
                   'formula', 'sum of w/(60+rank) over modalities, 1-based ranks, missing modality contributes 0',
                   'weights', v_weights, 'score', pyretrieve.json_double(t.fused))
                   ELSE jsonb_build_object(
                   'method', 'dbsf', 'source', v_fusion_source, 'model', v_fusion_model,
                   'spread', pyretrieve.json_double(3.0::double precision),
                   'formula', 'sum of w*max(0,(x-lower)/(upper-lower)) over modalities, x = lexical score or 1 - cosine distance, lower/upper = mean -/+ 3 sample std of that modality''s candidates for this query (0.5 when upper <= lower), missing modality contributes 0',
                   'weights', v_weights, 'score', pyretrieve.json_double(t.fused)) END,
               'freshness', jsonb_build_object('factor', pyretrieve.json_double(t.fresh),
                                               'age_us', t.age_us, 'max_age_us', t.max_age_us),
               'final_score', pyretrieve.json_double(t.final),
               'confidence', pyretrieve.json_double(t.conf),
               'tie_break', encode(t.content_digest, 'hex') || ':' || t.fragment_id::text,
               'generations', jsonb_build_object('lexical_generation', t.lexical_generation,
                                                 'vector_generation', t.vector_generation),
               'semantic', jsonb_build_object('status', v_status, 'reason', v_reason, 'evidence', v_evidence,
                                              'lowers_confidence', v_status = 'degraded'),
               'semantic_query_digest', encode(v_embedding_digest, 'hex'))
      FROM top t
     ORDER BY t.fused_rank;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer,text) IS 'One fused, explained search, the Python client''s request path in one call: authorize (recording the semantic intent of p_mode and p_semantic, ''optional'', ''required'' or ''disabled'', as the client does), lexical candidates (BM25 by default, p_ranking ''ts_rank'' for comparison), vector candidates (when the mode, p_semantic and the grant''s semantic policy allow and an embedding and model are given; a failed leg degrades, naming the cause the client names), each leg capped at p_candidate_limit within the decision''s candidate limit, then fusion: weighted Reciprocal Rank Fusion by default (w / (60 + rank), 1-based ranks, k = 60, a missing modality contributes 0) or distribution-based score fusion, p_fusion ''dbsf'' (each leg''s scores mapped affinely from mean -/+ 3 sample std of its candidates to 0 and 1, floored at 0, weighted and summed). The fusion and the weights (both given, or neither) are the request''s, else the named model''s registered defaults, else rrf and 1.0 each; the explanation says which fusion ran, with its parameters, and where it and the weights came from. Then a freshness factor within the grant''s max_age, a total order (final score, fused score, content digest, fragment id), confidence and a jsonb explanation per result: the document the Python ranker builds (fused rank, decision, fragment, content, provenance, modalities, fusion with its method, parameters, weights and where they came from, freshness, scores, tie-break, generations, semantic status, semantic query digest), whose canonical JSON is byte-identical to the client''s. Same order as the Python client. Raises PR001 on deny, PR010 for the arguments the client refuses, PR016 for an unknown p_fusion, and PR030 when semantic retrieval is required (by p_mode, p_semantic or the grant) but unavailable.';
REVOKE ALL ON FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer,text) TO pyretrieve_api, pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.register_model(p_model text, p_dimension integer, p_lexical_weight double precision DEFAULT NULL::double precision, p_vector_weight double precision DEFAULT NULL::double precision, p_fusion text DEFAULT NULL::text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    PERFORM pyretrieve.create_model_index(p_model);
    RETURN p_model;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.register_model(text,integer,double precision,double precision,text) IS 'Register an embedding model and its dimension (idempotent) and create its HNSW index; returns the model id. With both default weights (each above 0, at most 1000) it sets the lexical and vector weights, and with p_fusion (rrf or dbsf) the fusion, that searches naming this model use when they give none; what is not given is 1.0 each and rrf for a new model and stays as it was for an existing one. Raises PR016 for an unknown fusion or default weights not both given or outside (0, 1000], before anything is written, and PR013 if the model exists with another dimension. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.register_model(text,integer,double precision,double precision,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.register_model(text,integer,double precision,double precision,text) TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.list_models()
 RETURNS TABLE(model_id text, dimension integer, registered_at timestamp with time zone, fusion text, lexical_weight double precision, vector_weight double precision)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    IF NOT (pyretrieve.caller_in('pyretrieve_reader') OR pyretrieve.caller_in('pyretrieve_admin')) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    RETURN QUERY
    SELECT m.model_id, m.dimension, m.registered_at, m.fusion, m.lexical_weight, m.vector_weight
      FROM pyretrieve.embedding_models m ORDER BY 1;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.list_models() IS 'The registered embedding models, their dimensions, default fusions and default weights (configuration, not tenant data). Readers, writers and admins. SECURITY DEFINER (runs as pyretrieve_api).';
REVOKE ALL ON FUNCTION pyretrieve.list_models() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.list_models() TO pyretrieve_admin, pyretrieve_reader, pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.model_defaults(p_model text)
 RETURNS TABLE(fusion text, lexical_weight double precision, vector_weight double precision)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    IF NOT (pyretrieve.caller_in('pyretrieve_reader') OR pyretrieve.caller_in('pyretrieve_admin')) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    RETURN QUERY
    SELECT m.fusion, m.lexical_weight, m.vector_weight FROM pyretrieve.embedding_models m
     WHERE m.model_id = p_model;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.model_defaults(text) IS 'A registered model''s default fusion and weights (lexical, vector), or no row for a model that is not registered: what a search naming the model uses when it gives none. Configuration, not tenant data. Readers, writers and admins. SECURITY DEFINER (runs as pyretrieve_api) because principals hold no table privilege.';
REVOKE ALL ON FUNCTION pyretrieve.model_defaults(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.model_defaults(text) TO pyretrieve_admin, pyretrieve_reader, pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.discover_tools(p_workspace text, p_project text, p_purpose text, p_query text, p_embedding public.vector DEFAULT NULL::public.vector, p_model text DEFAULT NULL::text, p_policy text DEFAULT NULL::text, p_mode text DEFAULT 'hybrid'::text, p_lexical_weight double precision DEFAULT 1.0, p_vector_weight double precision DEFAULT 1.0, p_protect boolean DEFAULT true, p_adaptive boolean DEFAULT NULL::boolean, p_master boolean DEFAULT true)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET extra_float_digits TO '1'
AS $function$
DECLARE
    c_pool constant integer := 48;
    c_candidates constant integer := 100;
    c_formula constant text := 'normalized = fused / ideal fused score (1-based RRF, k = 60); '
                               'adjusted = normalized * product of penalty factors';
    v_policy text := coalesce(p_policy, 'near');
    d pyretrieve.decisions;
    v_hits jsonb;
    v_ideal double precision := 0.0;
    v_asked text[];
    v_query_entities text[];
    v_scored jsonb;
    v_n integer;
    v_s1 double precision;
    v_s2 double precision;
    v_level text;
    v_reason text;
    v_recommended integer;
    v_baseline integer;
    v_stage text;
    v_applied boolean;
    v_k integer;
    v_schemas jsonb;
    v_tools jsonb;
    v_omissions jsonb;
    v_fingerprint text;
BEGIN
    IF v_policy NOT IN ('fixed-10', 'fixed-15', 'fixed-20', 'fixed-48', 'tight', 'gap', 'wide', 'near') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010',
            MESSAGE = 'policy must be one of fixed-10, fixed-15, fixed-20, fixed-48, tight, gap, wide, near';
    END IF;
    IF p_protect IS NULL OR p_master IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'protect and master must not be null';
    END IF;

    -- 1. The search path (it authorizes: one decision for the transaction) for a pool of 48.
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'fragment_id', s.fragment_id, 'fused_rank', s.rank, 'score', s.final_score,
               'lexical_rank', s.explanation -> 'modalities' -> 'lexical' -> 'rank',
               'vector_rank', s.explanation -> 'modalities' -> 'vector' -> 'rank',
               'lexical_score', s.explanation -> 'modalities' -> 'lexical' -> 'score',
               'vector_distance', s.explanation -> 'modalities' -> 'vector' -> 'distance',
               'vector_used', s.explanation -> 'semantic' ->> 'status' = 'used') ORDER BY s.rank),
           '[]'::jsonb)
      INTO v_hits
      FROM pyretrieve.search(p_workspace => p_workspace, p_project => p_project,
                             p_purpose => p_purpose, p_query => p_query,
                             p_embedding => p_embedding, p_model => p_model, p_limit => c_pool,
                             p_mode => p_mode, p_lexical_weight => p_lexical_weight,
                             p_vector_weight => p_vector_weight,
                             p_candidate_limit => c_candidates,
                             -- K is calibrated on RRF scores, whatever the model's default.
                             p_fusion => 'rrf') s;
    SELECT * INTO STRICT d FROM pyretrieve.bound_decision();
    d := pyretrieve.require_decision(d.decision_id);

    -- The fused score of a tool ranked first by every leg that ran.
    IF p_mode <> 'vector' THEN
        v_ideal := v_ideal + p_lexical_weight / 61.0::double precision;
    END IF;
    IF coalesce((v_hits -> 0 ->> 'vector_used')::boolean, false) THEN
        v_ideal := v_ideal + p_vector_weight / 61.0::double precision;
    END IF;

    -- 2. The tools among them the decision admits; penalties; the order by adjusted score.
    v_asked := CASE WHEN p_protect THEN pyretrieve.tool_query_operations(p_query) ELSE '{}' END;
    v_query_entities := pyretrieve.tool_entity_words(p_query);
    WITH hit AS (
        SELECT (h ->> 'fragment_id')::uuid AS fragment_id, (h ->> 'fused_rank')::integer AS fused_rank,
               (h ->> 'score')::double precision AS score, h -> 'lexical_rank' AS lexical_rank,
               h -> 'vector_rank' AS vector_rank, h -> 'lexical_score' AS lexical_score,
               h -> 'vector_distance' AS vector_distance
          FROM jsonb_array_elements(v_hits) AS h
    ), tool AS (
        SELECT h.*, e.name, e.schema_version, e.operation,
               CASE WHEN v_ideal > 0 THEN h.score / v_ideal ELSE 0.0::double precision END AS normalized,
               CASE
                 WHEN cardinality(v_asked) = 0 OR e.operation NOT IN ('delete', 'update', 'create') THEN NULL
                 WHEN NOT e.operation = ANY (v_asked) THEN jsonb_build_object(
                     'code', 'operation_contradiction', 'factor', pyretrieve.json_double(0.5),
                     'asked', to_jsonb(v_asked), 'tool_family', e.operation)
                 WHEN NOT pyretrieve.tool_entity_words(e.name) && v_query_entities THEN jsonb_build_object(
                     'code', 'no_shared_entity', 'factor', pyretrieve.json_double(0.8),
                     'tool_family', e.operation)
               END AS penalty
          FROM hit h
          JOIN pyretrieve.tool_entries(p_decision => d.decision_id,
                                       p_ids => ARRAY(SELECT x.fragment_id FROM hit x)) e
            ON e.fragment_id = h.fragment_id
    ), adjusted AS (
        SELECT t.*, t.normalized * coalesce((t.penalty ->> 'factor')::double precision,
                                            1.0::double precision) AS adjusted
          FROM tool t
    )
    SELECT coalesce(jsonb_agg(to_jsonb(a) || jsonb_build_object('rank', a.rank)
                              ORDER BY a.rank), '[]'::jsonb)
      INTO v_scored
      FROM (SELECT x.*, (row_number() OVER (ORDER BY x.adjusted DESC, x.fused_rank))::integer AS rank
              FROM adjusted x) a;
    v_n := jsonb_array_length(v_scored);

    -- 3. Confidence from the top adjusted score, the second and the gap.
    IF v_n = 0 THEN
        v_level := 'none';
        v_reason := 'no authorised tool matched';
    ELSE
        v_s1 := (v_scored -> 0 ->> 'adjusted')::double precision;
        v_s2 := CASE WHEN v_n > 1 THEN (v_scored -> 1 ->> 'adjusted')::double precision
                     ELSE 0.0::double precision END;
        IF v_s1 >= 0.9 AND v_s1 - v_s2 >= 0.1 THEN
            v_level := 'high';
            v_reason := 'top tool ranked first by every leg, clear gap to the next';
        ELSIF v_s1 >= 0.6 THEN
            v_level := 'normal';
            v_reason := 'top tool ranked high by the legs that ran';
        ELSIF v_s1 >= 0.4 THEN
            v_level := 'low';
            v_reason := 'top tool found by one leg only or ranked low';
        ELSE
            v_level := 'fail';
            v_reason := 'no tool ranked high by any leg';
        END IF;
    END IF;

    -- 4. K: the policy's, applied by the rollout stage (or the caller's choice), never more than
    --    the baseline K of 48 or the candidates.
    v_recommended := pyretrieve.tool_recommended_k(v_policy, v_level,
        ARRAY(SELECT (x ->> 'adjusted')::double precision FROM jsonb_array_elements(v_scored) AS x),
        ARRAY(SELECT (x ->> 'lexical_score')::double precision FROM jsonb_array_elements(v_scored) AS x),
        ARRAY(SELECT (x ->> 'vector_distance')::double precision FROM jsonb_array_elements(v_scored) AS x));
    v_baseline := least(48, v_n);
    v_stage := pyretrieve.tool_rollout(d.decision_id);
    v_applied := CASE
        WHEN v_policy IN ('fixed-10', 'fixed-15', 'fixed-20', 'fixed-48') THEN true
        WHEN p_adaptive IS NOT NULL THEN p_adaptive AND p_master
        ELSE p_master AND pyretrieve.tool_rollout_bucket(d.workspace_id, d.principal)
                 < CASE v_stage WHEN 'canary' THEN 5 WHEN 'majority' THEN 50 WHEN 'full' THEN 100 ELSE 0 END
    END;
    v_k := CASE WHEN v_applied THEN least(v_recommended, v_baseline) ELSE v_baseline END;

    -- 5. Schemas of the chosen K only, under the same decision.
    SELECT coalesce(jsonb_object_agg(s.fragment_id::text, s.schema), '{}'::jsonb)
      INTO v_schemas
      FROM pyretrieve.tool_schemas(p_decision => d.decision_id, p_ids => ARRAY(
               SELECT (x ->> 'fragment_id')::uuid FROM jsonb_array_elements(v_scored) AS x
                WHERE (x ->> 'rank')::integer <= v_k)) s;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'name', x ->> 'name', 'schema_version', (x ->> 'schema_version')::integer,
               'rank', (x ->> 'rank')::integer, 'fused_rank', (x ->> 'fused_rank')::integer,
               'lexical_rank', x -> 'lexical_rank', 'vector_rank', x -> 'vector_rank',
               'lexical_score', x -> 'lexical_score', 'vector_distance', x -> 'vector_distance',
               'operation', x ->> 'operation',
               'fused_score', pyretrieve.json_double((x ->> 'score')::double precision),
               'normalized_score', pyretrieve.json_double((x ->> 'normalized')::double precision),
               'adjusted_score', pyretrieve.json_double((x ->> 'adjusted')::double precision),
               'penalties', CASE WHEN x -> 'penalty' = 'null'::jsonb THEN '[]'::jsonb
                                 ELSE jsonb_build_array(x -> 'penalty') END,
               'chosen', (x ->> 'rank')::integer <= v_k,
               'cut', CASE WHEN (x ->> 'rank')::integer <= v_k THEN NULL
                           WHEN v_applied OR v_k = v_recommended THEN 'cut_by_k'
                           ELSE 'cut_by_baseline_k' END,
               'formula', c_formula) ORDER BY (x ->> 'rank')::integer), '[]'::jsonb),
           coalesce(jsonb_agg(jsonb_build_object(
               'name', x ->> 'name', 'fragment_id', x ->> 'fragment_id',
               'position', (x ->> 'rank')::integer, 'reason', 'cut_by_k',
               'score', pyretrieve.json_double((x ->> 'adjusted')::double precision))
               ORDER BY (x ->> 'rank')::integer) FILTER (WHERE (x ->> 'rank')::integer > v_k), '[]'::jsonb)
      INTO v_tools, v_omissions
      FROM jsonb_array_elements(v_scored) AS x;

    -- The context fingerprint: sha256 over the sorted "name NUL version" lines of the chosen.
    SELECT pg_catalog.encode(pg_catalog.sha256(coalesce(pg_catalog.string_agg(l.line, '\x0a'::bytea ORDER BY l.line),
                                                        ''::bytea)), 'hex')
      INTO v_fingerprint
      FROM (SELECT pg_catalog.convert_to(x ->> 'name', 'UTF8') || '\x00'::bytea
                   || pg_catalog.convert_to(x ->> 'schema_version', 'UTF8') AS line
              FROM jsonb_array_elements(v_scored) AS x
             WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')) l;

    RETURN jsonb_build_object(
        'decision_id', d.decision_id,
        'query_digest', pg_catalog.encode(pyretrieve.content_digest(p_query), 'hex'),
        'policy', v_policy,
        'stage', v_stage,
        'applied', v_applied,
        'confidence', jsonb_build_object(
            'level', v_level,
            'score', pyretrieve.json_double(coalesce(v_s1, 0.0::double precision)),
            'reason', v_reason,
            'recommended_k', v_recommended,
            'top_score', pyretrieve.json_double(v_s1),
            'second_score', pyretrieve.json_double(v_s2),
            'gap', pyretrieve.json_double(v_s1 - v_s2)),
        'k', (SELECT count(*) FROM jsonb_array_elements(v_scored) AS x
               WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')),
        'fingerprint', v_fingerprint,
        'tools', v_tools,
        'omissions', v_omissions,
        'schemas', (SELECT coalesce(jsonb_agg(v_schemas -> (x ->> 'fragment_id') ORDER BY (x ->> 'rank')::integer),
                                    '[]'::jsonb)
                      FROM jsonb_array_elements(v_scored) AS x
                     WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')));
END;
$function$;
COMMENT ON FUNCTION pyretrieve.discover_tools(text,text,text,text,public.vector,text,text,text,double precision,double precision,boolean,boolean,boolean) IS 'Tool discovery for an agent request, as one jsonb document: the ranked tools the caller may use (search''s authorization, legs, fusion and freshness for a pool of 48, then only tools the decision admits), each with its explanation (fused, lexical and vector ranks, fused, normalised and adjusted scores, similar-tool penalties, chosen, why cut), the confidence (level none/high/normal/low/fail, score, reason, recommended K, top and second score, gap), K, omissions for authorised tools cut by K, the context fingerprint and the schemas of the chosen K only. p_policy: fixed-10, fixed-15, fixed-20, fixed-48, tight, gap, wide or near (default near, the evaluated default); adaptive K only truncates and is applied by the project''s rollout stage unless p_adaptive says otherwise; p_master false turns it off. Byte-identical, as canonical JSON, to the Python client''s Discovery.document() for the same request and decision. Raises what search raises (PR001 on deny, PR010 on bad input, PR030). SECURITY DEFINER (runs as pyretrieve_api): it calls helpers that principals are not granted (the bound decision, the word lists, the rollout bucket) and principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.discover_tools(text,text,text,text,public.vector,text,text,text,double precision,double precision,boolean,boolean,boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.discover_tools(text,text,text,text,public.vector,text,text,text,double precision,double precision,boolean,boolean,boolean) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
CREATE POLICY embedding_models_admin_update ON pyretrieve.embedding_models FOR UPDATE TO pyretrieve_api USING (( SELECT pyretrieve.caller_in('pyretrieve_admin'::name) AS caller_in)) WITH CHECK (( SELECT pyretrieve.caller_in('pyretrieve_admin'::name) AS caller_in));

UPDATE pyretrieve.installation SET schema_version = '0012';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
