-- pyretrieve migration 0057: search_terms_parsed_once
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.
-- search() parses each lexical explanation term once, typed (json_to_recordset), where '->' on
-- json parsed the entry's text again for each of its six keys. Explanations are unchanged, byte
-- for byte.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION pyretrieve.search(p_workspace text, p_project text, p_purpose text, p_query text, p_embedding public.vector DEFAULT NULL::public.vector, p_model text DEFAULT NULL::text, p_limit integer DEFAULT 10, p_mode text DEFAULT 'hybrid'::text, p_lexical_weight double precision DEFAULT NULL::double precision, p_vector_weight double precision DEFAULT NULL::double precision, p_ranking text DEFAULT 'bm25'::text, p_semantic text DEFAULT 'optional'::text, p_candidate_limit integer DEFAULT NULL::integer, p_fusion text DEFAULT NULL::text)
 RETURNS TABLE(rank integer, fragment_id uuid, content_digest bytea, body text, final_score double precision, fused_score double precision, freshness double precision, confidence double precision, explanation jsonb)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
 SET extra_float_digits TO '1'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer,text) IS 'One fused, explained search, the Python client''s request path in one call: authorize (recording the semantic intent of p_mode and p_semantic, ''optional'', ''required'' or ''disabled'', as the client does), lexical candidates (BM25 by default, p_ranking ''ts_rank'' for comparison), vector candidates (when the mode, p_semantic and the grant''s semantic policy allow and an embedding and model are given; a failed leg degrades, naming the cause the client names), each leg capped at p_candidate_limit within the decision''s candidate limit, then fusion: weighted Reciprocal Rank Fusion by default (w / (60 + rank), 1-based ranks, k = 60, a missing modality contributes 0) or distribution-based score fusion, p_fusion ''dbsf'' (each leg''s scores mapped affinely from mean -/+ 3 sample std of its candidates to 0 and 1, floored at 0, weighted and summed). The fusion and the weights (both given, or neither) are the request''s, else the named model''s registered defaults, else rrf and 1.0 each; the explanation says which fusion ran, with its parameters, and where it and the weights came from. Then a freshness factor within the grant''s max_age, a total order (final score, fused score, content digest, fragment id), confidence and a jsonb explanation per result: the document the Python ranker builds (fused rank, decision, fragment, content, provenance, modalities, fusion with its method, parameters, weights and where they came from, freshness, scores, tie-break, generations, semantic status, semantic query digest), whose canonical JSON is byte-identical to the client''s. Same order as the Python client. Raises PR001 on deny, PR010 for the arguments the client refuses, PR016 for an unknown p_fusion, and PR030 when semantic retrieval is required (by p_mode, p_semantic or the grant) but unavailable.';
REVOKE ALL ON FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer,text) TO pyretrieve_api, pyretrieve_reader;

UPDATE pyretrieve.installation SET schema_version = '0057';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
