-- ---------------------------------------------------------------------------------------------
-- Errors. Every error raised here has its own SQLSTATE in class PR, a fixed message that names
-- no row, id or content, and is mapped to a typed Python error in one place.
--   PR001 access denied (no grant, scope absent, not a reader/writer/admin)   same for all
--   PR002 decision not valid for this request (not the caller's, not this transaction,
--         not the bound one)
--   PR003 transaction already bound (one binding, a read decision or a write scope, per
--         transaction)
--   PR004 the caller is a superuser or bypasses row-level security
--   PR010 invalid input (limits, lengths, identifiers, digests)
--   PR011 invalid embedding (dimension, NaN/Inf, zero norm)
--   PR012 unknown embedding model
--   PR013 conflict (a model registered with another dimension)
--   PR014 a value exceeds a limit of the database (a text with too many distinct words for a
--         tsvector)
--   PR015 unsupported text-search configuration (only pg_catalog's or pyretrieve's)
--   PR016 invalid fusion setting (an unknown fusion, a model's default weights not both given
--         or outside (0, 1000])
--   PR020 not found (a fragment absent or not visible to the caller: the same error)
--   PR030 semantic retrieval required but not available
-- ---------------------------------------------------------------------------------------------

CREATE FUNCTION pyretrieve.check_identifier(p_value text, p_what text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NULL OR p_value !~ '^[a-z0-9][a-z0-9_.-]{0,62}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid ' || p_what;
    END IF;
END;
$$;

-- The decision of this request: the transaction's decision, only if it is the one named and
-- belongs to the caller.
CREATE FUNCTION pyretrieve.require_decision(p_decision uuid)
RETURNS pyretrieve.decisions
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d pyretrieve.decisions;
BEGIN
    SELECT * INTO d FROM pyretrieve.bound_decision();
    IF NOT FOUND OR p_decision IS NULL OR d.decision_id <> p_decision
       OR d.principal <> pyretrieve.caller() THEN
        RAISE EXCEPTION USING ERRCODE = 'PR002', MESSAGE = 'decision not valid for this request';
    END IF;
    RETURN d;
END;
$$;

CREATE FUNCTION pyretrieve.or_tsquery(p_config regconfig, p_query text)
RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
BEGIN ATOMIC
    SELECT replace(plainto_tsquery(p_config, p_query)::text, ' & ', ' | ')::tsquery;
END;
COMMENT ON FUNCTION pyretrieve.or_tsquery(regconfig, text) IS
    'The OR of the query''s lexemes in one text-search configuration (phrases from compound words stay phrases).';

CREATE FUNCTION pyretrieve.check_embedding(p_model text, p_embedding public.vector)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_dimension integer;
    v_norm double precision;
BEGIN
    SELECT m.dimension INTO v_dimension FROM pyretrieve.embedding_models m WHERE m.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    IF p_embedding IS NULL OR public.vector_dims(p_embedding) <> v_dimension THEN
        RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding dimension does not match the model';
    END IF;
    v_norm := public.vector_norm(p_embedding);
    IF NOT (v_norm > 0 AND v_norm < 'Infinity'::double precision) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding must be finite and non-zero';
    END IF;
    -- Subnormal float4 values (below 2^-126 in magnitude) lose precision and can make cosine
    -- distances NaN; the client refuses them too.
    IF EXISTS (SELECT 1 FROM unnest(p_embedding::real[]) AS x(v)
                WHERE x.v <> 0 AND abs(x.v) < 1.17549435e-38::real) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding must not hold subnormal values';
    END IF;
END;
$$;

-- ---------------------------------------------------------------------------------------------
-- The read API. SECURITY DEFINER, written reason: principals hold no privilege on any table,
-- so these functions are their only door to the data. Each runs as pyretrieve_api (never the
-- table owner), takes the caller's identity from pyretrieve.caller(), works only under the
-- transaction's one decision, states the decision's filters explicitly, and is bound by the
-- row-level security policies of pyretrieve_api as a second wall.
-- ---------------------------------------------------------------------------------------------
SET LOCAL ROLE pyretrieve_api;

CREATE FUNCTION pyretrieve.authorize(
    p_workspace text,
    p_project text,
    p_purpose text,
    p_query_digest bytea,
    p_semantic_intent text,
    p_embedding_digest bytea,
    p_requested_limit integer)
RETURNS TABLE (
    decision_id uuid, principal name, workspace_id text, project_id text, purpose text,
    evaluated_at timestamptz, ceiling pyretrieve.classification, max_age interval,
    semantic_policy pyretrieve.semantic_policy, candidate_limit integer, grant_id uuid)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside: with index scans off (any principal may
-- set enable_indexscan and enable_bitmapscan) its statements scanned every tenant's rows of
-- the table whole, a time that grows with what the others hold and a load any caller could
-- multiply. Index scans stay on and sequential scans off here, whatever the caller set.
-- Every function of the API pins how it is planned (plan_cache_mode), generically unless it
-- says why not: a plan for the values at hand follows the statistics of those values, and the
-- statistics lag a growing scope. Taken
-- before a scope held a row, they take it for one row, and planned for that, a writer's probe
-- of one fragment by its key read the scope whole, through the scope's index (3,000 rows read
-- by one retract at a 3,000-row scope, 9,006 by one created_now, until 0043).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    g pyretrieve.grants;
    d pyretrieve.decisions;
    v_attempt integer;
    v_grant uuid;
BEGIN
    PERFORM pyretrieve.check_caller();
    PERFORM pyretrieve.apply_request_timeouts();
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM pyretrieve.check_identifier(p_purpose, 'purpose');
    IF p_query_digest IS NULL OR length(p_query_digest) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query digest must be 32 bytes (sha256)';
    END IF;
    IF p_embedding_digest IS NOT NULL AND length(p_embedding_digest) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'embedding digest must be 32 bytes (sha256)';
    END IF;
    IF p_semantic_intent IS NULL OR p_semantic_intent NOT IN ('disabled', 'optional', 'required') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'semantic intent must be disabled, optional or required';
    END IF;
    IF p_requested_limit IS NULL OR p_requested_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'requested limit must be between 1 and 1000';
    END IF;

    -- One binding per transaction, whatever any setting says: a second decision (for any scope,
    -- any principal) or a decision after a write scope is refused.
    IF EXISTS (SELECT 1 FROM pyretrieve.bound_decision()) OR EXISTS (SELECT 1 FROM pyretrieve.bound_write()) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR003', MESSAGE = 'transaction already bound to another scope';
    END IF;

    -- The grants policy shows only grants that apply to the caller, so an absent scope and
    -- a scope without a grant look the same here: both are denied with the same error. The most
    -- specific grant wins (the caller's own before a group's), then the widest. It is chosen
    -- once, before the grant is read: compared row by row, a caller's enable_indexscan off made
    -- a scan of the grants choose it again for every grant. The grant is then read by its whole
    -- key: compared with a sub-select's value, the plan read the workspace's grants and kept one.
    v_grant := pyretrieve.effective_grant(p_workspace, p_project, p_purpose);
    SELECT gr.* INTO g
      FROM pyretrieve.grants gr
     WHERE gr.workspace_id = p_workspace
       AND gr.grant_id = v_grant;
    IF NOT FOUND OR NOT pyretrieve.caller_in('pyretrieve_reader') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;

    -- The decisions log is partitioned by month. When the partition of this month does not
    -- exist yet (no maintenance has run since the month began), the first decision creates it
    -- and the insert is retried once.
    FOR v_attempt IN 1..2 LOOP
        BEGIN
            INSERT INTO pyretrieve.decisions AS dn (
                workspace_id, principal, project_id, purpose, grant_id, ceiling, max_age, semantic_policy,
                requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest)
            VALUES (
                g.workspace_id, pyretrieve.caller(), g.project_id, g.purpose, g.grant_id, g.ceiling,
                g.max_age, g.semantic_policy,
                p_requested_limit, least(greatest(p_requested_limit, 100), 1000),
                p_query_digest, p_semantic_intent, p_embedding_digest)
            RETURNING dn.* INTO d;
            EXIT;
        EXCEPTION WHEN check_violation THEN
            -- Every CHECK of the row was validated above: only a missing partition is left.
            IF v_attempt = 2 THEN
                RAISE;
            END IF;
            PERFORM pyretrieve.ensure_decision_partitions();
        END;
    END LOOP;

    -- The binding the second wall reads (bound_filter): this process's row in the workspace.
    INSERT INTO pyretrieve.read_bindings AS r (
        xact_id, decision_id, workspace_id, project_id, ceiling, evaluated_at, max_age)
    VALUES (
        d.xact_id, d.decision_id, d.workspace_id, d.project_id, d.ceiling, d.evaluated_at,
        d.max_age)
    ON CONFLICT (workspace_id, session_pid) DO UPDATE
       SET xact_id = excluded.xact_id, decision_id = excluded.decision_id,
           project_id = excluded.project_id,
           ceiling = excluded.ceiling, evaluated_at = excluded.evaluated_at,
           max_age = excluded.max_age;

    RETURN QUERY SELECT d.decision_id, d.principal, d.workspace_id::text, d.project_id::text,
                        d.purpose::text, d.evaluated_at, d.ceiling, d.max_age, d.semantic_policy,
                        d.candidate_limit, d.grant_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.authorize(text, text, text, bytea, text, bytea, integer) IS
    'Authorise the caller (pyretrieve.caller(): the role the request runs as) for one workspace/project and purpose. Checks the caller''s live grants, records the decision (digests and intent only: never query text, embedding values or content), binds this transaction to that scope (one decision per transaction: a second authorize, or one after a write, raises PR003) and returns the decision with its evaluation time, ceiling, max_age, semantic policy and bounded candidate limit. Raises SQLSTATE PR001 (access denied) alike for an absent scope and a scope without a grant, and PR004 for a superuser or BYPASSRLS caller. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.lexical_candidates(
    p_decision uuid, p_query text, p_limit integer, p_ranking text DEFAULT 'bm25')
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, score double precision,
               lexical_generation bigint, terms json)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
-- The terms' numbers are written as text: the shortest text that reads back as the same double.
SET extra_float_digits = 1
-- Every table is read through a key of the scope and term: a small index table's statistics
-- made a scan of every scope's pages look cheaper in a test, and a caller's enable_* settings
-- do not reach inside.
SET enable_seqscan = off
-- Its statement's plan is generic from the first call: PL/pgSQL plans it afresh for each of a
-- session's first five calls, about 3.5 ms each, and then keeps the generic plan, which every
-- later call runs with anyway (evals/bench/session_start.py). The results do not depend on
-- the plan (sums in lexeme order, a total order for the cut).
SET plan_cache_mode = force_generic_plan
-- Nor a caller's index scans off (see authorize).
SET enable_indexscan = on
SET enable_bitmapscan = on
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
    v_k1 double precision;
    v_b double precision;
BEGIN
    IF p_query IS NULL OR length(p_query) NOT BETWEEN 1 AND 4096 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query must be 1 to 4096 characters';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'candidate limit out of range for this decision';
    END IF;
    IF p_ranking IS NULL OR p_ranking NOT IN ('bm25', 'ts_rank') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'ranking must be bm25 or ts_rank';
    END IF;

    IF p_ranking = 'ts_rank' THEN
        -- The earlier scoring, kept for comparison: OR over the lexemes, ts_rank normalisation 1.
        RETURN QUERY
        WITH q AS MATERIALIZED (
            SELECT c.ts_config AS cfg, pyretrieve.or_tsquery(c.ts_config, p_query) AS tsq
              FROM pyretrieve.scope_configs c
             WHERE c.workspace_id = d.workspace_id AND c.project_id = d.project_id
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
               t.fragment_id, t.content_digest, t.score, t.lexical_generation, '[]'::json
          FROM top t
         ORDER BY 1;
        RETURN;
    END IF;

    SELECT p.bm25_k1, p.bm25_b INTO v_k1, v_b
      FROM pyretrieve.projects p
     WHERE p.workspace_id = d.workspace_id AND p.project_id = d.project_id;

    -- BM25 with statistics of the rows this decision admits, and nothing else:
    --   idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    --   norm(d)  = k1 * (1 - b + b * |d| / avgdl)
    --   score(d) = sum over query terms t in d of qtf(t) * idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + norm(d))
    -- Every predicate is stated explicitly (the scope as parameters for the primary keys) and
    -- RLS applies it again. Sums run in lexeme order (bytewise) so the float result never depends
    -- on the plan.
    RETURN QUERY
    WITH ql AS MATERIALIZED (
        -- The query's lexemes, numbered in bytewise order (the order every sum runs in), each
        -- with the keys of the pages that may hold its small list (its bucket's and its group
        -- of 16's, 256 + bucket / 16) and its tombstones' document numbers (one probe of their
        -- key per term).
        SELECT q.lexeme, q.qtf, (row_number() OVER (ORDER BY q.lexeme COLLATE "C"))::integer AS ti,
               ARRAY[k.bucket, (256 + (k.bucket >> 4))::smallint] AS keys,
               (SELECT array_agg(x.docno ORDER BY x.docno)
                  FROM pyretrieve.lexical_tombstones x
                 WHERE x.workspace_id = d.workspace_id AND x.project_id = d.project_id
                   AND x.lexeme = q.lexeme AND x.classification <= d.ceiling) AS tombstones
          FROM (SELECT u.lexeme, max(greatest(cardinality(u.positions), 1))::double precision AS qtf
                  FROM pyretrieve.scope_configs c
                 CROSS JOIN LATERAL unnest(to_tsvector(c.ts_config, p_query)) AS u
                 WHERE c.workspace_id = d.workspace_id AND c.project_id = d.project_id
                 GROUP BY u.lexeme) q
         CROSS JOIN LATERAL (SELECT pyretrieve.lexeme_bucket(q.lexeme) AS bucket OFFSET 0) k
    ), st AS MATERIALIZED (
        -- The admitted fragments' count and average length, from the statistics log: a few rows
        -- per writing statement rather than one index entry per fragment. The average is the
        -- same numeric division of the same integers that avg() over the fragments makes.
        SELECT coalesce(sum(s.fragments), 0)::double precision AS n,
               coalesce(sum(s.length_sum) / nullif(sum(s.fragments), 0), 0)::double precision AS avgdl
          FROM pyretrieve.statistics_log s
         WHERE s.workspace_id = d.workspace_id
           AND s.project_id = d.project_id
           AND s.classification <= d.ceiling
           AND s.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR s.observed_at >= d.evaluated_at - d.max_age)
           AND (s.expires_at IS NULL OR s.expires_at > d.evaluated_at)
    ), bl AS MATERIALIZED (
        -- The blocks of the query's terms the decision may admit (a classification within the
        -- ceiling, a time range that meets the window: one key range per term), and the terms'
        -- slices of the pages of their buckets (small lists) read as blocks with their page's
        -- time range, each marked timely when the window holds its whole time range, and whole
        -- when it is timely and none of the term's tombstones lies in its range.
        SELECT t.ti, t.first_docno, t.last_docno, t.postings, t.entries, t.tombstones, t.timely,
               t.timely AND (t.tombstones IS NULL
                             OR NOT EXISTS (SELECT 1 FROM unnest(t.tombstones) AS x(docno)
                                             WHERE x.docno BETWEEN t.first_docno AND t.last_docno)) AS whole
          FROM (
        SELECT ql.ti, b.first_docno, b.last_docno, b.postings, b.entries, ql.tombstones,
               (b.max_observed_at <= d.evaluated_at
                AND (d.max_age IS NULL OR b.min_observed_at >= d.evaluated_at - d.max_age)
                AND (b.min_expires_at IS NULL OR b.min_expires_at > d.evaluated_at)) AS timely
          FROM ql
         CROSS JOIN LATERAL (
               SELECT b.first_docno, b.last_docno, b.postings, b.entries,
                      b.min_observed_at, b.max_observed_at, b.min_expires_at
                 FROM pyretrieve.lexical_blocks b
                WHERE b.workspace_id = d.workspace_id AND b.project_id = d.project_id
                  AND b.lexeme = ql.lexeme
                  AND b.classification <= d.ceiling
                  AND b.min_observed_at <= d.evaluated_at
                  AND (d.max_age IS NULL OR b.max_observed_at >= d.evaluated_at - d.max_age)
                  AND (b.max_expires_at IS NULL OR b.max_expires_at > d.evaluated_at)
               UNION ALL
               SELECT (x.e[1] >> 32)::integer, (x.e[cardinality(x.e)] >> 32)::integer,
                      cardinality(x.e), x.e, p.min_observed_at, p.max_observed_at, p.min_expires_at
                 FROM pyretrieve.lexical_pages p
                -- OFFSET 0 keeps each sub-select whole, computed once per page: pulled up, its
                -- expression was copied into every reference (the filter, the slice's bounds,
                -- the four uses of the slice), and each copy read the page's arrays again,
                -- decompressed when compressed (until 0056: a tenth of the leg on SciFact).
                CROSS JOIN LATERAL (SELECT array_position(p.lexemes, ql.lexeme) AS i OFFSET 0) i
                CROSS JOIN LATERAL (
                      SELECT p.entries[p.starts[i.i] : coalesce(p.starts[i.i + 1] - 1, p.postings)] AS e
                      OFFSET 0) x
                WHERE p.workspace_id = d.workspace_id AND p.project_id = d.project_id
                  AND p.bucket = ANY (ql.keys)
                  AND p.classification <= d.ceiling
                  AND ql.lexeme COLLATE "C" BETWEEN p.first_lexeme AND p.last_lexeme
                  AND p.min_observed_at <= d.evaluated_at
                  AND (d.max_age IS NULL OR p.max_observed_at >= d.evaluated_at - d.max_age)
                  AND (p.max_expires_at IS NULL OR p.max_expires_at > d.evaluated_at)
                  AND i.i IS NOT NULL) b) t
    ), part AS MATERIALIZED (
        -- The postings of blocks admitted in part. In a timely block, every posting but the
        -- tombstoned is admitted: its fragment is active (a retract or supersede tombstones its
        -- postings in the same transaction), of the block's classification and in its time
        -- range. Each is looked up among the term's tombstones (sorted: a binary search), not
        -- read: until compaction rewrote their blocks, the tombstones of 20 retracts made each
        -- search of 3,000 SciFact abstracts check 3,200 fragments against 200.
        SELECT bl.ti, u.entry
          FROM bl
         CROSS JOIN LATERAL unnest(bl.entries) AS u(entry)
         CROSS JOIN LATERAL (SELECT width_bucket((u.entry >> 32)::integer, bl.tombstones) AS i) k
         WHERE bl.timely AND NOT bl.whole
           AND (k.i = 0 OR bl.tombstones[k.i] <> (u.entry >> 32)::integer)
        UNION ALL
        -- The postings of the other blocks, each checked against its fragment: the decision's
        -- filter stated here, and the fragments' read policy again.
        SELECT bl.ti, u.entry
          FROM bl
         CROSS JOIN LATERAL unnest(bl.entries) AS u(entry)
         WHERE NOT bl.timely
           AND EXISTS (SELECT 1 FROM pyretrieve.fragments f
                        WHERE f.workspace_id = d.workspace_id AND f.project_id = d.project_id
                          AND f.docno = (u.entry >> 32)::integer
                          AND f.state = 'active'
                          AND f.classification <= d.ceiling
                          AND f.observed_at <= d.evaluated_at
                          AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
                          AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at))
    ), df AS MATERIALIZED (
        -- Each term's document frequency over the admitted fragments: whole blocks by their
        -- counts, the others by their checked postings.
        SELECT x.ti, sum(x.n)::double precision AS df
          FROM (SELECT bl.ti, bl.postings::bigint AS n FROM bl WHERE bl.whole
                UNION ALL
                SELECT part.ti, count(*) FROM part GROUP BY part.ti) x
         GROUP BY x.ti
    ), w AS MATERIALIZED (
        -- Each term's idf and weight qtf * idf, with the constants of its parts, and the text
        -- its explanation entries share (written once per term, not once per returned row).
        SELECT ql.ti, ql.lexeme, ql.qtf, i.idf, ql.qtf * i.idf AS wq,
               '{"term": ' || to_json(ql.lexeme)::text || ', "idf": ' || i.idf::text
               || ', "tf": ' AS head,
               ', "query_tf": ' || ql.qtf::integer::text || ', "length_norm": ' AS mid
          FROM ql
          JOIN df ON df.ti = ql.ti
         CROSS JOIN st
         CROSS JOIN LATERAL (SELECT ln(1.0 + (st.n - df.df + 0.5) / (df.df + 0.5)) AS idf) i
    ), scored AS MATERIALIZED (
        -- Each fragment's score: its terms' parts summed in bytewise lexeme order, over input
        -- sorted by fragment and term (so no group is sorted again), so the float result never
        -- depends on the plan. A part is qtf * idf * (tf * (k1 + 1)) / (tf + norm) with
        -- norm = k1 * (1 - b + b * length / avgdl), each operation in that order. The term's
        -- weight joins its blocks (a few dozen rows), not each of their postings.
        SELECT h.docno, sum(h.part ORDER BY h.ti) AS score
          FROM (SELECT p.docno, p.ti,
                       p.wq * (p.tf * (v_k1 + 1.0)) / (p.tf + v_k1 * (1.0 - v_b + v_b * p.len / p.avgdl)) AS part
                  FROM (SELECT y.ti, y.wq, y.avgdl, (y.entry >> 32)::integer AS docno,
                               (((y.entry >> 24) & 255) + 1)::double precision AS tf,
                               (y.entry & 16777215)::double precision AS len
                          FROM (SELECT b.ti, b.wq, b.avgdl, unnest(b.entries) AS entry
                                  FROM (SELECT bl.ti, w.wq, st.avgdl, bl.entries
                                          FROM bl JOIN w ON w.ti = bl.ti CROSS JOIN st
                                         WHERE bl.whole
                                        OFFSET 0) b
                                UNION ALL
                                SELECT part.ti, w.wq, st.avgdl, part.entry
                                  FROM part JOIN w ON w.ti = part.ti CROSS JOIN st) y) p
                 ORDER BY p.docno, p.ti) h
         GROUP BY h.docno
    ), top AS MATERIALIZED (
        -- Every fragment scoring at least the p_limit-th best score competes for the last
        -- places on the content-bound tie-break, so the cut is exact and plan-independent;
        -- the threshold is a sub-select, computed once. Each such fragment is probed by its
        -- document number (LIMIT 1: the key is unique in the scope), whatever the statistics
        -- say: joined, a scope taken for a few rows (no statistics yet) was read whole to
        -- hash it against the one fragment that passed.
        SELECT s.docno, s.score, f.fragment_id, f.content_digest, f.lexical_generation
          FROM scored s
         CROSS JOIN LATERAL (
               SELECT f.fragment_id, f.content_digest, f.lexical_generation
                 FROM pyretrieve.fragments f
                WHERE f.workspace_id = d.workspace_id AND f.project_id = d.project_id
                  AND f.docno = s.docno
                  AND f.state = 'active'
                  AND f.classification <= d.ceiling
                  AND f.observed_at <= d.evaluated_at
                  AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
                  AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
                LIMIT 1) f
         WHERE s.score >= (SELECT min(x.score)
                             FROM (SELECT sc.score FROM scored sc ORDER BY sc.score DESC LIMIT p_limit) x)
         ORDER BY s.score DESC, f.content_digest, f.fragment_id
         LIMIT p_limit
    ), top_docnos AS MATERIALIZED (
        SELECT array_agg(t.docno ORDER BY t.docno) AS docnos FROM top t
    ), terms AS MATERIALIZED (
        -- The explanation's terms of the returned rows alone: each row's posting of each term,
        -- found by binary search (width_bucket over the entries, which sort by document number)
        -- in the blocks whose range holds it, and its part
        -- from the same expressions as its score, so the parts add up to it exactly. The JSON
        -- is written as text (floats as their shortest exact text, the setting pinned above):
        -- jsonb_build_object cost several times as much. It is returned as json, checked and
        -- kept as written: jsonb parsed every number into a numeric and printed it again, a
        -- tenth of the leg's time on SciFact (evals/bench/lexical-0054-scifact.json).
        SELECT y.docno,
               ('[' || string_agg(
                   w.head || y.tf::integer::text || w.mid || y.norm::text || ', "contribution": '
                   || (w.wq * (y.tf * (v_k1 + 1.0)) / (y.tf + y.norm))::text || '}',
                   ', ' ORDER BY w.ti) || ']')::json AS terms
          FROM (SELECT bl.ti, td.docnos[k.k] AS docno,
                       (((bl.entries[i.i] >> 24) & 255) + 1)::double precision AS tf,
                       v_k1 * (1.0 - v_b + v_b * (bl.entries[i.i] & 16777215)::double precision / st.avgdl) AS norm
                  FROM bl
                 CROSS JOIN top_docnos td
                 CROSS JOIN st
                 CROSS JOIN LATERAL generate_series(width_bucket(bl.first_docno - 1, td.docnos) + 1,
                                                    width_bucket(bl.last_docno, td.docnos)) AS k(k)
                 -- Computed once per probe, not once per reference (OFFSET 0, as for the pages).
                 CROSS JOIN LATERAL (
                       SELECT width_bucket((td.docnos[k.k]::bigint << 32) | 4294967295, bl.entries) AS i
                       OFFSET 0) i
                 WHERE i.i > 0 AND (bl.entries[i.i] >> 32) = td.docnos[k.k]) y
          JOIN w ON w.ti = y.ti
         GROUP BY y.docno
    )
    SELECT (row_number() OVER (ORDER BY t.score DESC, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.score, t.lexical_generation, tm.terms
      FROM top t
      JOIN terms tm ON tm.docno = t.docno
     ORDER BY 1;
END;
$$;
COMMENT ON FUNCTION pyretrieve.lexical_candidates(uuid, text, integer, text) IS
    'Lexical candidates for the bound decision. p_ranking ''bm25'' (default): BM25 over the OR of the query''s lexemes (repeated query terms count), with k1 and b from the project and corpus statistics (document count, average length, document frequency) computed only from the fragments the decision admits; ''ts_rank'': the earlier ts_rank scoring, for comparison. 1-based ranks in a total order (score desc, then content digest, then fragment id). Returns rank, fragment_id, content_digest, score, lexical_generation and terms (a json array, kept as written: each matched term, in bytewise lexeme order, with idf, tf, query_tf, length_norm and contribution). Raises PR002 for a decision that is not the caller''s bound decision of this transaction. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- The approximate vector leg of a scope that has its own HNSW index (create_vector_index):
-- the nearest rows by the index, with the decision's filters applied during the scan, so
-- pgvector's iterative scan goes on until enough admitted rows are found. The index holds only
-- this scope's rows of this model, so neither the rows found nor the time taken depend on any
-- other scope. The settings are the function's own, fixed here, whatever the caller set:
-- ef_search and a strict distance order for recall, and no plan other than the index (a
-- caller's enable_* settings do not reach inside). p_limit + 32 nearest rows compete for the
-- p_limit places on the content-bound tie-break, as in the exact leg. The statement is built
-- with format() only from integers (the scope's serial, the model's dimension); every value
-- is a parameter.
CREATE FUNCTION pyretrieve.approximate_vector_candidates(
    p_decision pyretrieve.decisions, p_model text, p_embedding public.vector, p_limit integer,
    p_scope_serial integer, p_dimension integer)
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, distance double precision,
               source_digest bytea, vector_generation bigint, lexical_generation bigint,
               search text)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_sort = off
AS $$
BEGIN
    -- Set here rather than as SET clauses: pgvector defines them only once its library is
    -- loaded, which the vector argument has done by now. The SET clauses above make these
    -- local to the call as well.
    PERFORM pg_catalog.set_config('hnsw.ef_search', '1000', true);
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
$$;
COMMENT ON FUNCTION pyretrieve.approximate_vector_candidates(pyretrieve.decisions, text, public.vector, integer, integer, integer) IS
    'The vector leg over a scope''s own HNSW index (internal to vector_candidates, which calls it when the index exists): the decision''s filters applied during an iterative, strictly ordered index scan (ef_search 1000, pgvector''s maximum), then the content-bound tie-break. Every row says search ''hnsw''.';

-- plan_cache_mode: the statements' plans are generic from the first call, made once per session
-- and blind to the scope's size, so no scan in them may depend on it. Each nearest row's
-- fragment is one look-up by key (the LATERAL ... OFFSET 0 below): a generic plan of a plain
-- join read the whole scope for each row, 20x slower at a 10,000-row scope, which is why 0007
-- to 0032 planned every call afresh; that planning was 0.6 to 1.2 ms of each call, with the
-- same rows (evals/bench/vector-plans.json: 0.70 against 1.43 ms p50 at a 200-row scope, 6.45
-- against 7.17 at 10,000). No sequential scan of the table either (enable_seqscan): a plan
-- made for an average scope must not read every scope's embeddings for a small one.
CREATE FUNCTION pyretrieve.vector_candidates(p_decision uuid, p_model text, p_embedding public.vector, p_limit integer)
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, distance double precision,
               source_digest bytea, vector_generation bigint, lexical_generation bigint,
               search text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
-- Nor a caller's index scans off (see authorize).
SET enable_indexscan = on
SET enable_bitmapscan = on
AS $$
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
$$;
COMMENT ON FUNCTION pyretrieve.vector_candidates(uuid, text, public.vector, integer) IS
    'Vector candidates for the bound decision: cosine distance to p_embedding over the scope''s embeddings of model p_model, exact, or through the scope''s own HNSW index of that model when an admin created one (create_vector_index; recall measured in evals/bench), 1-based ranks in a total order (distance, then content digest, then fragment id). Returns rank, fragment_id, content_digest, distance, source_digest (digest of the text the embedding was computed from), vector_generation, lexical_generation and search (''exact'' for the exact scan, ''hnsw'' through the scope''s index; the same for every row of a call, and it depends on this scope alone). Raises PR011 for a wrong dimension, NaN/Inf or zero public.vector, PR012 for an unknown model. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.fragments(p_decision uuid, p_ids uuid[])
RETURNS TABLE (
    workspace_id text, project_id text, fragment_id uuid, body text, content_digest bytea,
    classification pyretrieve.classification, state pyretrieve.fragment_state, superseded_by uuid,
    observed_at timestamptz, expires_at timestamptz, ingested_at timestamptz, source_uri text,
    source_revision text, manifest_id text, ts_config regconfig, lexical_generation bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside: with index scans off (any principal may
-- set enable_indexscan and enable_bitmapscan) its statements scanned every tenant's rows of
-- the table whole, a time that grows with what the others hold and a load any caller could
-- multiply. Index scans stay on and sequential scans off here, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
-- A plan for any scope, not for the statistics of the one at hand: those lag a growing scope,
-- and planned for a scope they took for one row, the records of 200 ids were read through the
-- scope's index, every fragment of the scope (5,000 of a 5,000-row scope), at every search.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 2 * d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'too many ids for this decision';
    END IF;
    -- One probe of the key per id (LIMIT 1 keeps it a probe, whatever the estimates).
    RETURN QUERY
    SELECT f.workspace_id::text, f.project_id::text, f.fragment_id, f.body, f.content_digest,
           f.classification, f.state, f.superseded_by, f.observed_at, f.expires_at, f.ingested_at,
           f.source_uri, f.source_revision, f.manifest_id, f.ts_config, f.lexical_generation
      FROM (SELECT DISTINCT i.id FROM unnest(p_ids) AS i(id)) i
     CROSS JOIN LATERAL (
           SELECT f.* FROM pyretrieve.fragments f
            WHERE f.workspace_id = d.workspace_id
              AND f.fragment_id = i.id
              AND f.project_id = d.project_id
              AND f.state = 'active'
              AND f.classification <= d.ceiling
              AND f.observed_at <= d.evaluated_at
              AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
              AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
            LIMIT 1) f
     ORDER BY f.fragment_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.fragments(uuid, uuid[]) IS
    'The authoritative records (body, digest, classification, state, times, provenance, generation) for the given ids, only those visible under the bound decision; ids that are absent or not visible are silently left out, alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';


SET LOCAL ROLE pyretrieve_owner;
