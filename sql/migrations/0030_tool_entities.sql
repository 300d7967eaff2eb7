-- pyretrieve migration 0030: tool_entities
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.
-- Similar-tool protection reads a tool's description too: pyretrieve.tools.entities holds the
-- entity words of its name and description (a stored generated column, so the table is
-- rewritten once here), and plurals are stemmed so that games matches game.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP FUNCTION pyretrieve.tool_entries(uuid,uuid[]) CASCADE;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.tool_entries(p_decision uuid, p_ids uuid[])
 RETURNS TABLE(fragment_id uuid, name text, schema_version integer, operation text, tags text[], server text, schema_chars integer, entities text[])
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
           length(t.schema::text), t.entities
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND f.workspace_id = d.workspace_id
       AND t.fragment_id = ANY (p_ids)
       AND t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) IS 'The tool metadata (name, schema version, operation family, tags, server, schema size in characters, entity words of the name and description; not the schema) of the given fragment ids that are tools the transaction''s decision admits; absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) TO pyretrieve_reader;
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
                     WHEN ((length(u.w) > 4) AND (u.w ~ '(s|x|z|ch|sh)es$'::text)) THEN "left"(u.w, '-2'::integer)
                     WHEN ((length(u.w) > 3) AND (u.w ~~ '%s'::text) AND (u.w !~~ '%ss'::text)) THEN "left"(u.w, '-1'::integer)
                     ELSE u.w
                 END COLLATE "C") AS stem
            FROM unnest(pyretrieve.tool_words(tool_entity_words.p_text)) u(w)
           WHERE ((length(u.w) > 1) AND (u.w !~ '^[0-9]+$'::text) AND (NOT (u.w = ANY (pyretrieve.tool_stop_words()))) AND (NOT (EXISTS ( SELECT 1
                    FROM pyretrieve.tool_operation_words() o(family, word)
                   WHERE (o.word = u.w)))))) s;
END;
COMMENT ON FUNCTION pyretrieve.tool_entity_words(text) IS 'The entity words of a text (not operation verbs, not stop words, longer than one letter, not numbers, plurals lightly stemmed), sorted: pyretrieve.tools.definitions.entity_words.';
REVOKE ALL ON FUNCTION pyretrieve.tool_entity_words(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_entity_words(text) TO pyretrieve_api;

-- After the function above: the column is computed with the new stemming. As the head adds it,
-- after every other column.
SET LOCAL ROLE pyretrieve_owner;
ALTER TABLE pyretrieve.tools ADD COLUMN entities text[] NOT NULL
    GENERATED ALWAYS AS (pyretrieve.tool_entity_words(
        name || ' ' || coalesce(schema ->> 'description', ''))) STORED;
COMMENT ON COLUMN pyretrieve.tools.entities IS
    'The entity words of the tool''s name and description (pyretrieve.tool_entity_words), kept by the database: a write tool of the family a request asks for that shares none of them with the request is penalised (no_shared_entity).';
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
        SELECT h.*, e.name, e.schema_version, e.operation, e.entities,
               CASE WHEN v_ideal > 0 THEN h.score / v_ideal ELSE 0.0::double precision END AS normalized,
               CASE
                 WHEN cardinality(v_asked) = 0 OR e.operation NOT IN ('delete', 'update', 'create') THEN NULL
                 WHEN NOT e.operation = ANY (v_asked) THEN jsonb_build_object(
                     'code', 'operation_contradiction', 'factor', pyretrieve.json_double(0.5),
                     'asked', to_jsonb(v_asked), 'tool_family', e.operation)
                 WHEN NOT e.entities && v_query_entities THEN jsonb_build_object(
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

UPDATE pyretrieve.installation SET schema_version = '0030';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
