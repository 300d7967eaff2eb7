-- pyretrieve migration 0012, downgrade: back to 0011
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff (on 0011); reviewed by hand.
-- When renumbering: re-draft, then put back the hand-written part below (table DDL) in place of
-- the drafter's TODO lines.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- ---- hand-written: table DDL -----------------------------------------------------------------
-- The defaults go with their columns (and the columns' privileges with them).
ALTER TABLE pyretrieve.embedding_models
    DROP COLUMN fusion, DROP COLUMN lexical_weight, DROP COLUMN vector_weight;
COMMENT ON TABLE pyretrieve.embedding_models IS
    'Registered embedding models. Global, not per workspace: a model id and dimension are configuration, not tenant data.';
-- ---- end of the hand-written part; the rest is the drafter's ------------------------------
DROP FUNCTION pyretrieve.dbsf_distribution(double precision[]) CASCADE;
DROP FUNCTION pyretrieve.model_defaults(text) CASCADE;
DROP FUNCTION pyretrieve.register_model(text,integer,double precision,double precision,text) CASCADE;
DROP FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer,text) CASCADE;
DROP FUNCTION pyretrieve.list_models() CASCADE;
DROP POLICY embedding_models_admin_update ON pyretrieve.embedding_models;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.register_model(p_model text, p_dimension integer)
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
    INSERT INTO pyretrieve.embedding_models (model_id, dimension) VALUES (p_model, p_dimension)
    ON CONFLICT (model_id) DO NOTHING;
    SELECT m.dimension INTO v_dimension FROM pyretrieve.embedding_models m WHERE m.model_id = p_model;
    IF v_dimension <> p_dimension THEN
        RAISE EXCEPTION USING ERRCODE = 'PR013', MESSAGE = 'model already registered with another dimension';
    END IF;
    PERFORM pyretrieve.create_model_index(p_model);
    RETURN p_model;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.register_model(text,integer) IS 'Register an embedding model and its dimension (idempotent) and create its HNSW index; returns the model id. Raises PR013 if the model exists with another dimension. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.register_model(text,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.register_model(text,integer) TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.list_models()
 RETURNS TABLE(model_id text, dimension integer, registered_at timestamp with time zone)
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
    SELECT m.model_id, m.dimension, m.registered_at FROM pyretrieve.embedding_models m ORDER BY 1;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.list_models() IS 'The registered embedding models and their dimensions (configuration, not tenant data). Readers, writers and admins. SECURITY DEFINER (runs as pyretrieve_api).';
REVOKE ALL ON FUNCTION pyretrieve.list_models() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.list_models() TO pyretrieve_admin, pyretrieve_reader, pyretrieve_writer;
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
CREATE OR REPLACE FUNCTION pyretrieve.search(p_workspace text, p_project text, p_purpose text, p_query text, p_embedding public.vector DEFAULT NULL::public.vector, p_model text DEFAULT NULL::text, p_limit integer DEFAULT 10, p_mode text DEFAULT 'hybrid'::text, p_lexical_weight double precision DEFAULT 1.0, p_vector_weight double precision DEFAULT 1.0, p_ranking text DEFAULT 'bm25'::text, p_semantic text DEFAULT 'optional'::text, p_candidate_limit integer DEFAULT NULL::integer)
 RETURNS TABLE(rank integer, fragment_id uuid, content_digest bytea, body text, final_score double precision, rrf_score double precision, freshness double precision, confidence double precision, explanation jsonb)
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
    IF p_lexical_weight IS NULL OR p_vector_weight IS NULL
       OR NOT (p_lexical_weight >= 0 AND p_lexical_weight <= 1000)
       OR NOT (p_vector_weight >= 0 AND p_vector_weight <= 1000) THEN
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

    -- 2. Lexical candidates (a failure here is a hard error).
    IF p_mode <> 'vector' THEN
        SELECT coalesce(jsonb_agg(to_jsonb(c) ORDER BY c.rank), '[]'::jsonb) INTO v_lexical
          FROM pyretrieve.lexical_candidates(d.decision_id, p_query, v_per_leg, p_ranking) c;
        v_ideal := v_ideal + p_lexical_weight / 61.0::double precision;
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
                v_ideal := v_ideal + p_vector_weight / 61.0::double precision;
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
    ), fused AS (
        SELECT r.*, l.rank AS lexical_rank, l.score AS lexical_score, l.terms AS lexical_terms,
               v.rank AS vector_rank, v.distance, v.vector_generation,
               p_lexical_weight / (60 + l.rank)::double precision AS lexical_contribution,
               p_vector_weight / (60 + v.rank)::double precision AS vector_contribution,
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
                       'weight', pyretrieve.json_double(p_lexical_weight)) END,
                   'vector', CASE WHEN t.vector_rank IS NULL THEN NULL ELSE jsonb_build_object(
                       'rank', t.vector_rank, 'distance', pyretrieve.json_double(t.distance),
                       'metric', 'cosine_distance',
                       'contribution', pyretrieve.json_double(t.vector_contribution),
                       'weight', pyretrieve.json_double(p_vector_weight)) END),
               'rrf', jsonb_build_object('k', 60, 'rank_base', 1, 'score', pyretrieve.json_double(t.rrf),
                   'formula', 'sum of w/(60+rank) over modalities, 1-based ranks, missing modality contributes 0'),
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
COMMENT ON FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer) IS 'One fused, explained search, the Python client''s request path in one call: authorize (recording the semantic intent of p_mode and p_semantic, ''optional'', ''required'' or ''disabled'', as the client does), lexical candidates (BM25 by default, p_ranking ''ts_rank'' for comparison), vector candidates (when the mode, p_semantic and the grant''s semantic policy allow and an embedding and model are given; a failed leg degrades, naming the cause the client names), each leg capped at p_candidate_limit within the decision''s candidate limit, then weighted Reciprocal Rank Fusion (w / (60 + rank), 1-based ranks, k = 60, weights default 1.0, a missing modality contributes 0), a freshness factor within the grant''s max_age, a total order (final score, RRF score, content digest, fragment id), confidence and a jsonb explanation per result: the document the Python ranker builds (fused rank, decision, fragment, content, provenance, modalities, rrf, freshness, scores, tie-break, generations, semantic status, semantic query digest), whose canonical JSON is byte-identical to the client''s. Same order as the Python client. Raises PR001 on deny, PR010 for the arguments the client refuses, and PR030 when semantic retrieval is required (by p_mode, p_semantic or the grant) but unavailable.';
REVOKE ALL ON FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer) TO pyretrieve_api, pyretrieve_reader;
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
                             p_candidate_limit => c_candidates) s;
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

UPDATE pyretrieve.installation SET schema_version = '0011';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
