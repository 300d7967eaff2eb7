-- pyretrieve migration 0009: discover_tools
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.
--
-- Functions only (no table change, no data move): pyretrieve.discover_tools and its helpers
-- (operation and stop words, words, entity words, asked operations, rollout bucket, K of a
-- policy); tool_entries and tool_schemas read the ids by key; search, json_double and iso_utc
-- re-created for their new EXECUTE grant to pyretrieve_api, which discover_tools runs as.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

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
GRANT EXECUTE ON FUNCTION pyretrieve.json_double(double precision) TO pyretrieve_api, pyretrieve_reader;
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
GRANT EXECUTE ON FUNCTION pyretrieve.iso_utc(timestamp with time zone) TO pyretrieve_api, pyretrieve_reader;
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
    -- The ids as an index condition (= ANY): one key look-up per id, whatever the size of the
    -- scope's catalog (a join with unnest() let the planner read the whole scope).
    SELECT t.fragment_id, t.name, t.schema_version, t.operation, t.tags, t.server,
           length(t.schema::text)
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND t.fragment_id = ANY (p_ids)
       AND t.project_id = d.project_id AND f.project_id = d.project_id
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
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND t.fragment_id = ANY (p_ids)
       AND t.project_id = d.project_id AND f.project_id = d.project_id
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
CREATE OR REPLACE FUNCTION pyretrieve.tool_operation_words()
 RETURNS TABLE(family text, word text)
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT f.family,
     w.word
    FROM ( VALUES ('delete'::text,ARRAY['delete'::text, 'deletes'::text, 'deleting'::text, 'remove'::text, 'removes'::text, 'removing'::text, 'erase'::text, 'drop'::text, 'purge'::text, 'destroy'::text, 'unregister'::text, 'uninstall'::text, 'cancel'::text, 'revoke'::text, 'discard'::text, 'clear'::text, 'wipe'::text, 'unsubscribe'::text, 'terminate'::text]), ('update'::text,ARRAY['update'::text, 'updates'::text, 'updating'::text, 'modify'::text, 'edit'::text, 'change'::text, 'set'::text, 'rename'::text, 'patch'::text, 'replace'::text, 'adjust'::text, 'alter'::text, 'reschedule'::text, 'move'::text, 'enable'::text, 'disable'::text, 'toggle'::text, 'upgrade'::text, 'assign'::text, 'configure'::text, 'reset'::text]), ('create'::text,ARRAY['create'::text, 'creates'::text, 'creating'::text, 'add'::text, 'adds'::text, 'new'::text, 'make'::text, 'insert'::text, 'register'::text, 'book'::text, 'schedule'::text, 'generate'::text, 'send'::text, 'submit'::text, 'upload'::text, 'open'::text, 'start'::text, 'reserve'::text, 'buy'::text, 'purchase'::text, 'invite'::text, 'build'::text]), ('get'::text,ARRAY['get'::text, 'gets'::text, 'fetch'::text, 'retrieve'::text, 'read'::text, 'show'::text, 'display'::text, 'view'::text, 'lookup'::text, 'check'::text, 'describe'::text, 'obtain'::text, 'calculate'::text, 'compute'::text, 'estimate'::text, 'convert'::text, 'tell'::text, 'what'::text, 'whats'::text, 'how'::text]), ('search'::text,ARRAY['search'::text, 'find'::text, 'query'::text, 'locate'::text, 'discover'::text, 'look'::text, 'seek'::text, 'filter'::text, 'match'::text]), ('list'::text,ARRAY['list'::text, 'lists'::text, 'enumerate'::text, 'all'::text, 'browse'::text])) f(family, words),
     LATERAL unnest(f.words) w(word);
END;
COMMENT ON FUNCTION pyretrieve.tool_operation_words() IS 'The verbs and synonyms of each operation family (delete, update, create, get, search, list) that requests and tool names are read with, as pyretrieve.tools.definitions.OPERATION_SYNONYMS.';
REVOKE ALL ON FUNCTION pyretrieve.tool_operation_words() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_operation_words() TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.tool_stop_words()
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
RETURN ARRAY['a'::text, 'an'::text, 'the'::text, 'of'::text, 'for'::text, 'to'::text, 'in'::text, 'on'::text, 'by'::text, 'with'::text, 'and'::text, 'or'::text, 'from'::text, 'at'::text, 'is'::text, 'are'::text, 'be'::text, 'it'::text, 'this'::text, 'that'::text, 'my'::text, 'me'::text, 'i'::text, 'you'::text, 'your'::text, 'please'::text, 'can'::text, 'could'::text, 'would'::text, 'will'::text, 'should'::text, 'do'::text, 'does'::text, 'need'::text, 'want'::text];
COMMENT ON FUNCTION pyretrieve.tool_stop_words() IS 'Words that never name an entity when a request is compared with a tool name, as pyretrieve.tools.definitions._STOP.';
REVOKE ALL ON FUNCTION pyretrieve.tool_stop_words() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_stop_words() TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.tool_words(p_text text)
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT COALESCE(array_agg(lower((m.w[1] COLLATE "C")) ORDER BY m.n), '{}'::text[]) AS "coalesce"
    FROM regexp_matches(tool_words.p_text, '([A-Za-z][a-z]*|[0-9]+)'::text, 'g'::text) WITH ORDINALITY m(w, n);
END;
COMMENT ON FUNCTION pyretrieve.tool_words(text) IS 'The lower-case words of a text, snake_case, camelCase and dotted names split, in order (pyretrieve.tools.definitions.words).';
REVOKE ALL ON FUNCTION pyretrieve.tool_words(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_words(text) TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.tool_entity_words(p_text text)
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT COALESCE(array_agg(DISTINCT s.stem ORDER BY s.stem), '{}'::text[]) AS "coalesce"
    FROM ( SELECT (
                 CASE
                     WHEN ((length(u.w) > 5) AND (u.w ~~ '%ies'::text)) THEN ("left"(u.w, '-3'::integer) || 'y'::text)
                     WHEN ((length(u.w) > 4) AND (u.w ~~ '%es'::text)) THEN "left"(u.w, '-2'::integer)
                     WHEN ((length(u.w) > 3) AND (u.w ~~ '%s'::text)) THEN "left"(u.w, '-1'::integer)
                     ELSE u.w
                 END COLLATE "C") AS stem
            FROM unnest(pyretrieve.tool_words(tool_entity_words.p_text)) u(w)
           WHERE ((length(u.w) > 1) AND (u.w !~ '^[0-9]+$'::text) AND (NOT (u.w = ANY (pyretrieve.tool_stop_words()))) AND (NOT (EXISTS ( SELECT 1
                    FROM pyretrieve.tool_operation_words() o(family, word)
                   WHERE (o.word = u.w)))))) s;
END;
COMMENT ON FUNCTION pyretrieve.tool_entity_words(text) IS 'The entity words of a text (not operation verbs, not stop words, longer than one letter, not numbers, lightly stemmed), sorted: pyretrieve.tools.definitions.entity_words.';
REVOKE ALL ON FUNCTION pyretrieve.tool_entity_words(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_entity_words(text) TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.tool_query_operations(p_text text)
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 WITH found AS (
          SELECT DISTINCT o.family
            FROM (unnest(pyretrieve.tool_words(tool_query_operations.p_text)) u(w)
              JOIN pyretrieve.tool_operation_words() o(family, word) ON ((o.word = u.w)))
         )
  SELECT COALESCE(array_agg((f.family COLLATE "C") ORDER BY (f.family COLLATE "C")), '{}'::text[]) AS "coalesce"
    FROM found f
   WHERE ((f.family <> ALL (ARRAY['get'::text, 'list'::text])) OR (NOT (EXISTS ( SELECT 1
            FROM found x
           WHERE (x.family <> ALL (ARRAY['get'::text, 'list'::text]))))));
END;
COMMENT ON FUNCTION pyretrieve.tool_query_operations(text) IS 'The operation families a request asks for, sorted (pyretrieve.tools.definitions.query_operations): delete, update, create and search by their verbs; get and list only when no other family is named.';
REVOKE ALL ON FUNCTION pyretrieve.tool_query_operations(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_query_operations(text) TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.tool_rollout_bucket(p_workspace text, p_principal text)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT ((((((('x'::text || encode(substr(h.d, 1, 8), 'hex'::text)))::bit(64))::bigint)::numeric +
         CASE
             WHEN (get_byte(h.d, 0) >= 128) THEN '18446744073709551616'::numeric
             ELSE (0)::numeric
         END) % (100)::numeric))::integer AS int4
    FROM ( SELECT sha256(((convert_to(tool_rollout_bucket.p_workspace, 'UTF8'::name) || '\x00'::bytea) || convert_to(tool_rollout_bucket.p_principal, 'UTF8'::name))) AS d) h;
END;
COMMENT ON FUNCTION pyretrieve.tool_rollout_bucket(text,text) IS 'The rollout bucket (0..99) of a principal in a workspace: sha256 of workspace, NUL, principal; first 8 bytes as an unsigned big-endian integer, modulo 100 (pyretrieve.tools.select.rollout_bucket).';
REVOKE ALL ON FUNCTION pyretrieve.tool_rollout_bucket(text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_rollout_bucket(text,text) TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.tool_recommended_k(p_policy text, p_level text, p_scores double precision[], p_lexical double precision[], p_distances double precision[])
 RETURNS integer
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_n integer := coalesce(cardinality(p_scores), 0);
    v_k integer;
    v_best double precision;
    v_drop double precision;
    v_high integer;
    -- near: the parameters pyretrieve.tools.select.NEAR_DEFAULT (BM25 ratio, distance margin, kmin).
    c_a constant double precision := 0.7;
    c_b constant double precision := 0.1;
    c_kmin constant integer := 8;
    v_best_lexical double precision;
    v_best_distance double precision;
BEGIN
    CASE p_policy
    WHEN 'fixed-10' THEN v_k := 10;
    WHEN 'fixed-15' THEN v_k := 15;
    WHEN 'fixed-20' THEN v_k := 20;
    WHEN 'fixed-48' THEN v_k := 48;
    WHEN 'tight' THEN
        v_k := CASE p_level WHEN 'none' THEN 0 WHEN 'high' THEN 3 WHEN 'normal' THEN 5 WHEN 'low' THEN 10 ELSE 15 END;
    WHEN 'wide' THEN
        v_k := CASE p_level WHEN 'none' THEN 0 WHEN 'high' THEN 5 WHEN 'normal' THEN 8 WHEN 'low' THEN 12 ELSE 15 END;
    WHEN 'gap' THEN
        -- Cut after the largest drop among the first 20 (at least 3; the first of equal drops).
        v_high := least(v_n, 20);
        IF p_level = 'none' THEN
            v_k := 0;
        ELSIF v_high <= 3 THEN
            v_k := v_high;
        ELSE
            v_best := NULL;
            FOR i IN 4 .. v_high LOOP
                v_drop := p_scores[i - 1] - p_scores[i];
                IF v_best IS NULL OR v_drop > v_best THEN
                    v_best := v_drop;
                    v_k := i - 1;
                END IF;
            END LOOP;
            IF NOT v_best > 0 THEN
                v_k := v_high;
            END IF;
        END IF;
    WHEN 'near' THEN
        -- Up to the last tool whose BM25 is at least a times the pool's best, or whose cosine
        -- distance is at most the best plus b; at least kmin.
        IF p_level = 'none' THEN
            v_k := 0;
        ELSE
            SELECT max(x) INTO v_best_lexical FROM unnest(p_lexical) AS x;
            SELECT min(x) INTO v_best_distance FROM unnest(p_distances) AS x;
            v_k := 0;
            FOR i IN 1 .. v_n LOOP
                IF (p_lexical[i] IS NOT NULL AND v_best_lexical > 0 AND p_lexical[i] >= c_a * v_best_lexical)
                   OR (p_distances[i] IS NOT NULL AND p_distances[i] <= v_best_distance + c_b) THEN
                    v_k := i;
                END IF;
            END LOOP;
            v_k := greatest(c_kmin, v_k);
        END IF;
    ELSE
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'unknown K policy';
    END CASE;
    RETURN least(v_k, v_n);
END;
$function$;
COMMENT ON FUNCTION pyretrieve.tool_recommended_k(text,text,double precision[],double precision[],double precision[]) IS 'The K a tool-selection policy recommends for a confidence level and, in the selection''s order, the adjusted scores, BM25 scores and cosine distances (pyretrieve.tools.select.recommended_k), never more than the candidates.';
REVOKE ALL ON FUNCTION pyretrieve.tool_recommended_k(text,text,double precision[],double precision[],double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_recommended_k(text,text,double precision[],double precision[],double precision[]) TO pyretrieve_api;
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

UPDATE pyretrieve.installation SET schema_version = '0009';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
