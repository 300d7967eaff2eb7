-- ---------------------------------------------------------------------------------------------
-- One fused, explained search for SQL callers. The same steps, in the same order and with the
-- same float arithmetic, as the Python client and its pure ranker (a test compares them):
--   fusion     = the request's, else the model's registered default (model_defaults), else rrf
--   weights    = the request's, else the model's registered defaults, else 1.0 each
--   rrf        : (0.0 + w_lex / (60 + lexical_rank)) + w_vec / (60 + vector_rank)
--   dbsf       : (0.0 + w_lex * n_lex) + w_vec * n_vec, n = max(0, (x - lower) / (upper - lower))
--                with x the BM25 score or 1 - cosine distance and lower/upper = mean -/+ 3 sample
--                std of that leg's candidates (dbsf_distribution, summed in rank order); 0.5 when
--                upper <= lower
--   freshness  = least(1.0, greatest(0.5, 1.0 - 0.5 * (age_us / max_age_us)))   (1.0 without max_age)
--   final      = fused * freshness; order by final desc, fused desc, content_digest, fragment_id
--   confidence = least(1, greatest(0, (fused / ideal) * freshness * (61 / (60 + rank)) * semantic_factor))
-- The explanation is the Python ranker's (pyretrieve/explain.py), key for key and value for value:
-- its canonical JSON is byte-identical to the client's for the same request and decision.
-- ---------------------------------------------------------------------------------------------

-- A double as a jsonb number that reads back as the same double, and as a float: the shortest
-- exact digits (extra_float_digits pinned), with at least one decimal place (1.0, not 1), as
-- Python's json module renders floats.
CREATE FUNCTION pyretrieve.json_double(p_value double precision)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET extra_float_digits = 1
BEGIN ATOMIC
    SELECT pg_catalog.to_jsonb(pg_catalog.round(n.v, GREATEST(pg_catalog.scale(n.v), 1)))
      FROM (SELECT p_value::text::numeric AS v) n;
END;
COMMENT ON FUNCTION pyretrieve.json_double(double precision) IS
    'A double precision value as a jsonb number with its shortest exact digits and at least one decimal place, so a JSON reader gets back the same IEEE double, as a float.';

-- A timestamp as the explanation renders it: ISO 8601 in UTC, always with microseconds and Z.
CREATE FUNCTION pyretrieve.iso_utc(p_value timestamptz)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT pg_catalog.to_char(p_value AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
END;
COMMENT ON FUNCTION pyretrieve.iso_utc(timestamptz) IS
    'A timestamp in ISO 8601, in UTC, with microseconds and a Z suffix: how explanations render times.';

-- sha256 of the embedding as float32 little-endian bytes, the digest the client records.
-- vector_send() writes a 4-byte header then big-endian float4 values.
CREATE FUNCTION pyretrieve.embedding_digest(p_embedding public.vector)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT pg_catalog.sha256(pg_catalog.string_agg(
               pg_catalog.substr(b.raw, 5 + 4 * i + 3, 1)
            || pg_catalog.substr(b.raw, 5 + 4 * i + 2, 1)
            || pg_catalog.substr(b.raw, 5 + 4 * i + 1, 1)
            || pg_catalog.substr(b.raw, 5 + 4 * i, 1), ''::bytea ORDER BY i))
      FROM (SELECT public.vector_send(p_embedding) AS raw) b,
           pg_catalog.generate_series(0, public.vector_dims(p_embedding) - 1) AS i;
END;
COMMENT ON FUNCTION pyretrieve.embedding_digest(public.vector) IS
    'sha256 of an embedding as float32 little-endian bytes: the embedding digest that authorize() records instead of the values.';

-- The distribution DBSF normalises one leg's candidate scores by: count, mean and sample
-- standard deviation, summed one addition at a time in the array's order (rank order), as the
-- Python ranker does (pyretrieve.ranking.distribution); avg() and stddev() would accumulate
-- differently. No row for no values.
CREATE FUNCTION pyretrieve.dbsf_distribution(p_values double precision[])
RETURNS TABLE (candidates integer, mean double precision, std double precision,
               lower_bound double precision, upper_bound double precision)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;
COMMENT ON FUNCTION pyretrieve.dbsf_distribution(double precision[]) IS
    'The distribution-based score fusion range of one leg''s candidate scores, given in rank order: count, mean, sample standard deviation and mean -/+ 3 std, summed one addition at a time in the given order so the doubles are the Python ranker''s. No row for an empty array.';
-- The stable code of the typed error the Python client raises for a database error (the
-- SQLSTATE and the server's primary message, as pyretrieve.db.errors.translate reads them): a
-- failed vector leg names it as its cause, on both sides. A test raises every SQLSTATE and
-- compares the two.
CREATE FUNCTION pyretrieve.error_code(p_sqlstate text, p_message text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT CASE
        -- Told apart by the message (read here, never shown).
        WHEN s.state IN ('28P01', '28000') THEN 'VES_MEMORY_AUTHENTICATION_FAILED'
        WHEN s.state = '3F000' AND pg_catalog.strpos(s.message, '"pyretrieve"') > 0
            THEN 'VES_MEMORY_SCHEMA_MISSING'
        WHEN s.state IN ('42883', '42P01') AND (pg_catalog.strpos(s.message, 'pyretrieve.') > 0
                                             OR pg_catalog.strpos(s.message, '"pyretrieve') > 0)
            THEN 'VES_MEMORY_SCHEMA_MISSING'
        WHEN s.state IN ('22023', '42704') AND s.message ~ '^role "[^\n]*" does not exist$'
            THEN 'VES_MEMORY_UNKNOWN_PRINCIPAL'
        WHEN s.state = '42501' AND pg_catalog.starts_with(s.message, 'permission denied to set role')
            THEN 'VES_MEMORY_UNKNOWN_PRINCIPAL'
        -- The schema's own SQLSTATEs.
        WHEN s.state = 'PR001' THEN 'VES_MEMORY_ACCESS_DENIED'
        WHEN s.state IN ('PR002', 'PR003') THEN 'VES_MEMORY_INVALID_DECISION'
        WHEN s.state = 'PR004' THEN 'VES_MEMORY_PRIVILEGED_CALLER'
        WHEN s.state IN ('PR010', 'PR015') THEN 'VES_MEMORY_INVALID_INPUT'
        WHEN s.state = 'PR016' THEN 'VES_MEMORY_INVALID_FUSION'
        WHEN s.state = 'PR011' THEN 'VES_MEMORY_INVALID_EMBEDDING'
        WHEN s.state = 'PR012' THEN 'VES_MEMORY_UNKNOWN_MODEL'
        WHEN s.state = 'PR013' THEN 'VES_MEMORY_CONFLICT'
        WHEN s.state = 'PR014' THEN 'VES_MEMORY_LIMIT_EXCEEDED'
        WHEN s.state = 'PR020' THEN 'VES_MEMORY_NOT_FOUND'
        WHEN s.state = 'PR030' THEN 'VES_MEMORY_SEMANTIC_REQUIRED'
        -- Standard SQLSTATEs, then their classes.
        WHEN s.state = '42501' THEN 'VES_MEMORY_ACCESS_DENIED'
        WHEN s.state IN ('23505', '40001', '40P01') THEN 'VES_MEMORY_CONFLICT'
        WHEN s.state IN ('55P03', '57014', '25P03') THEN 'VES_MEMORY_TIMEOUT'
        WHEN s.state = '54000' THEN 'VES_MEMORY_LIMIT_EXCEEDED'
        WHEN pg_catalog.left(s.state, 2) IN ('08', '53', '57') THEN 'VES_MEMORY_DATABASE_UNAVAILABLE'
        WHEN pg_catalog.left(s.state, 2) IN ('22', '23') THEN 'VES_MEMORY_INVALID_INPUT'
        -- The classes the driver reports as operational errors.
        WHEN pg_catalog.left(s.state, 2) IN ('27', '28', '2F', '38', '39', '3B', '40', '54', '55',
                                             '58', 'F0', 'HV')
            THEN 'VES_MEMORY_DATABASE_UNAVAILABLE'
        ELSE 'VES_MEMORY_INTERNAL'
    END
      FROM (SELECT coalesce(p_sqlstate, '') AS state, coalesce(p_message, '') AS message) s;
END;
COMMENT ON FUNCTION pyretrieve.error_code(text, text) IS
    'The stable code of the typed error the Python client raises for a database error with this SQLSTATE and primary message (pyretrieve.db.errors.translate): the cause search() records when the vector leg fails, as the client does.';

CREATE FUNCTION pyretrieve.search(
    p_workspace text,
    p_project text,
    p_purpose text,
    p_query text,
    p_embedding public.vector DEFAULT NULL,
    p_model text DEFAULT NULL,
    p_limit integer DEFAULT 10,
    p_mode text DEFAULT 'hybrid',
    p_lexical_weight double precision DEFAULT NULL,
    p_vector_weight double precision DEFAULT NULL,
    p_ranking text DEFAULT 'bm25',
    p_semantic text DEFAULT 'optional',
    p_candidate_limit integer DEFAULT NULL,
    p_fusion text DEFAULT NULL)
RETURNS TABLE (
    rank integer, fragment_id uuid, content_digest bytea, body text, final_score double precision,
    fused_score double precision, freshness double precision, confidence double precision,
    explanation jsonb)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
-- Each statement's plan is generic from the first call. PL/pgSQL plans a statement afresh for
-- each of a session's first five calls and then keeps the generic plan, which is what the
-- statements run with from then on anyway: planning them again cost a new session's second to
-- sixth search about 4 ms each (evals/bench/session_start.py). Functions it calls inherit the
-- setting unless they pin their own.
SET plan_cache_mode = force_generic_plan
-- Whatever the caller set: the explanation's numbers never depend on it. (Until 0036 the legs'
-- rows reached the fusion as jsonb, made through float text, which a caller's
-- extra_float_digits of 0 or below rounded; they travel as arrays of their own types now.)
SET extra_float_digits = 1
AS $$
#variable_conflict use_column
DECLARE
    d record;
    v_wants_vector boolean;
    v_required boolean;
    v_intent text;
    v_embedding_digest bytea;
    -- Each leg's rows in rank order, column by column (NULL: the leg did not run, or its
    -- rows were stale): the fusion reads them back with unnest, every value its own type.
    v_lex_ranks integer[];
    v_lex_ids uuid[];
    v_lex_scores double precision[];
    v_lex_terms json[];
    v_vec_ranks integer[];
    v_vec_ids uuid[];
    v_vec_distances double precision[];
    v_vec_generations bigint[];
    v_vec_searches text[];
    v_vec_count integer;
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
        SELECT array_agg(c.rank ORDER BY c.rank), array_agg(c.fragment_id ORDER BY c.rank),
               array_agg(c.score ORDER BY c.rank), array_agg(c.terms ORDER BY c.rank)
          INTO v_lex_ranks, v_lex_ids, v_lex_scores, v_lex_terms
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
            SELECT array_agg(c.rank ORDER BY c.rank), array_agg(c.fragment_id ORDER BY c.rank),
                   array_agg(c.distance ORDER BY c.rank),
                   array_agg(c.vector_generation ORDER BY c.rank),
                   array_agg(c.search ORDER BY c.rank), count(*),
                   count(*) FILTER (WHERE c.source_digest <> c.content_digest
                                       OR c.vector_generation < c.lexical_generation)
              INTO v_vec_ranks, v_vec_ids, v_vec_distances, v_vec_generations, v_vec_searches,
                   v_vec_count, v_stale
              FROM pyretrieve.vector_candidates(d.decision_id, p_model, p_embedding, v_per_leg) c;
            IF v_stale > 0 THEN
                v_status := 'degraded';
                v_reason := 'stale';
                v_evidence := jsonb_build_object('model', p_model, 'stale_candidates', v_stale,
                                                 'candidates', v_vec_count);
                v_vec_ranks := NULL;
                v_vec_ids := NULL;
                v_vec_distances := NULL;
                v_vec_generations := NULL;
                v_vec_searches := NULL;
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
          FROM pyretrieve.dbsf_distribution(coalesce(v_lex_scores, '{}'::double precision[])) x;
        SELECT x.candidates, x.mean, x.std, x.lower_bound, x.upper_bound
          INTO v_vn, v_vmean, v_vstd, v_vlo, v_vhi
          FROM pyretrieve.dbsf_distribution(ARRAY(
                   SELECT 1.0::double precision - u.distance
                     FROM unnest(v_vec_distances) WITH ORDINALITY AS u(distance, o)
                    ORDER BY u.o)) x;
    END IF;

    -- 4. Authoritative records, fusion, freshness, total order, confidence, explanation.
    -- The lexical terms travel as the leg wrote them and are rendered (each number through
    -- json_double) only for the rows returned: a leg's 100 candidates hold several hundred
    -- numbers, and each json_double call costs a few microseconds.
    RETURN QUERY
    WITH lex AS (
        SELECT x.rank, x.fragment_id, x.score, x.terms
          FROM unnest(v_lex_ranks, v_lex_ids, v_lex_scores, v_lex_terms)
               AS x(rank, fragment_id, score, terms)
    ), vec AS (
        SELECT x.rank, x.fragment_id, x.distance, x.vector_generation, x.search
          FROM unnest(v_vec_ranks, v_vec_ids, v_vec_distances, v_vec_generations, v_vec_searches)
               AS x(rank, fragment_id, distance, vector_generation, search)
    ), rec AS (
        SELECT r.*
          FROM pyretrieve.fragments(d.decision_id, ARRAY(
                   SELECT l.fragment_id FROM lex l UNION SELECT v.fragment_id FROM vec v)) r
    ), joined AS (
        SELECT r.*, l.rank AS lexical_rank, l.score AS lexical_score, l.terms AS lexical_terms,
               v.rank AS vector_rank, v.distance, v.vector_generation, v.search AS vector_search,
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
                       -- Each term's entry parsed once, typed (json_to_recordset): '->' on json
                       -- parsed the entry's text again for each of its six keys.
                       'terms', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                           'term', e.term, 'tf', e.tf, 'query_tf', e.query_tf,
                           'idf', pyretrieve.json_double(e.idf),
                           'length_norm', pyretrieve.json_double(e.length_norm),
                           'contribution', pyretrieve.json_double(e.contribution))
                           ORDER BY e.o), '[]'::jsonb)
                  FROM ROWS FROM (json_to_recordset(t.lexical_terms)
                                  AS (term text, tf integer, query_tf integer, idf double precision,
                                      length_norm double precision, contribution double precision))
                       WITH ORDINALITY AS e(term, tf, query_tf, idf, length_norm, contribution, o)),
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
                       'metric', 'cosine_distance', 'search', t.vector_search,
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
$$;
COMMENT ON FUNCTION pyretrieve.search(text, text, text, text, public.vector, text, integer, text, double precision, double precision, text, text, integer, text) IS
    'One fused, explained search, the Python client''s request path in one call: authorize (recording the semantic intent of p_mode and p_semantic, ''optional'', ''required'' or ''disabled'', as the client does), lexical candidates (BM25 by default, p_ranking ''ts_rank'' for comparison), vector candidates (when the mode, p_semantic and the grant''s semantic policy allow and an embedding and model are given; a failed leg degrades, naming the cause the client names), each leg capped at p_candidate_limit within the decision''s candidate limit, then fusion: weighted Reciprocal Rank Fusion by default (w / (60 + rank), 1-based ranks, k = 60, a missing modality contributes 0) or distribution-based score fusion, p_fusion ''dbsf'' (each leg''s scores mapped affinely from mean -/+ 3 sample std of its candidates to 0 and 1, floored at 0, weighted and summed). The fusion and the weights (both given, or neither) are the request''s, else the named model''s registered defaults, else rrf and 1.0 each; the explanation says which fusion ran, with its parameters, and where it and the weights came from. Then a freshness factor within the grant''s max_age, a total order (final score, fused score, content digest, fragment id), confidence and a jsonb explanation per result: the document the Python ranker builds (fused rank, decision, fragment, content, provenance, modalities, fusion with its method, parameters, weights and where they came from, freshness, scores, tie-break, generations, semantic status, semantic query digest), whose canonical JSON is byte-identical to the client''s. Same order as the Python client. Raises PR001 on deny, PR010 for the arguments the client refuses, PR016 for an unknown p_fusion, and PR030 when semantic retrieval is required (by p_mode, p_semantic or the grant) but unavailable.';

