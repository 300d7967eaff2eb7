-- pyretrieve migration 0009, downgrade: back to 0008
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- By hand: dependents first (the SQL-standard bodies of the word functions depend on each
-- other, and a CASCADE drop of one would remove the next before its own DROP).
DROP FUNCTION pyretrieve.discover_tools(text,text,text,text,public.vector,text,text,text,double precision,double precision,boolean,boolean,boolean);
DROP FUNCTION pyretrieve.tool_recommended_k(text,text,double precision[],double precision[],double precision[]);
DROP FUNCTION pyretrieve.tool_rollout_bucket(text,text);
DROP FUNCTION pyretrieve.tool_query_operations(text);
DROP FUNCTION pyretrieve.tool_entity_words(text);
DROP FUNCTION pyretrieve.tool_words(text);
DROP FUNCTION pyretrieve.tool_stop_words();
DROP FUNCTION pyretrieve.tool_operation_words();
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.json_double(p_value double precision)
 RETURNS jsonb
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET extra_float_digits TO '1'
BEGIN ATOMIC
 SELECT to_jsonb(round(n.v, GREATEST(scale(n.v), 1))) AS to_jsonb
    FROM ( SELECT ((json_double.p_value)::text)::numeric AS v) n;
END;
COMMENT ON FUNCTION pyretrieve.json_double(double precision) IS 'A double precision value as a jsonb number with its shortest exact digits and at least one decimal place, so a JSON reader gets back the same IEEE double, as a float.';
REVOKE ALL ON FUNCTION pyretrieve.json_double(double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.json_double(double precision) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.iso_utc(p_value timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT to_char((p_value AT TIME ZONE 'UTC'::text), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'::text) AS to_char;
END;
COMMENT ON FUNCTION pyretrieve.iso_utc(timestamp with time zone) IS 'A timestamp in ISO 8601, in UTC, with microseconds and a Z suffix: how explanations render times.';
REVOKE ALL ON FUNCTION pyretrieve.iso_utc(timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.iso_utc(timestamp with time zone) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.tool_entries(p_decision uuid, p_ids uuid[])
 RETURNS TABLE(fragment_id uuid, name text, schema_version integer, operation text, tags text[], server text, schema_chars integer)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 1000 ids';
    END IF;
    RETURN QUERY
    SELECT t.fragment_id, t.name, t.schema_version, t.operation, t.tags, t.server,
           length(t.schema::text)
      FROM unnest(p_ids) AS u(id)
      JOIN pyretrieve.tools t ON t.workspace_id = d.workspace_id AND t.fragment_id = u.id
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) IS 'The tool metadata (name, schema version, operation family, tags, server, schema size in characters; not the schema) of the given fragment ids that are tools the transaction''s decision admits; absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.tool_schemas(p_decision uuid, p_ids uuid[])
 RETURNS TABLE(fragment_id uuid, name text, schema_version integer, schema jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 1000 ids';
    END IF;
    RETURN QUERY
    SELECT t.fragment_id, t.name, t.schema_version, t.schema
      FROM unnest(p_ids) AS u(id)
      JOIN pyretrieve.tools t ON t.workspace_id = d.workspace_id AND t.fragment_id = u.id
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.tool_schemas(uuid,uuid[]) IS 'The JSON schemas of the given fragment ids that are tools the transaction''s decision admits (active, in scope, at or below the ceiling, fresh, not expired); absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.tool_schemas(uuid,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_schemas(uuid,uuid[]) TO pyretrieve_reader;
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
GRANT EXECUTE ON FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0008';

RESET ROLE;
-- By hand: the grants to pyretrieve_api that 0009 added (CREATE OR REPLACE keeps a
-- function's privileges, so re-creating the 0008 definitions does not remove them).
SET LOCAL ROLE pyretrieve_owner;
REVOKE EXECUTE ON FUNCTION
    pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer),
    pyretrieve.json_double(double precision), pyretrieve.iso_utc(timestamp with time zone)
    FROM pyretrieve_api;
RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
