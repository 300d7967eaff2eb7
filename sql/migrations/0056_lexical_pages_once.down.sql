-- pyretrieve migration 0056, downgrade: back to 0055
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.lexical_candidates(p_decision uuid, p_query text, p_limit integer, p_ranking text DEFAULT 'bm25'::text)
 RETURNS TABLE(rank integer, fragment_id uuid, content_digest bytea, score double precision, lexical_generation bigint, terms json)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET client_min_messages TO 'warning'
 SET extra_float_digits TO '1'
 SET enable_seqscan TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
AS $function$
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
        -- with its tombstones' document numbers (one probe of their key per term).
        SELECT q.lexeme, q.qtf, (row_number() OVER (ORDER BY q.lexeme COLLATE "C"))::integer AS ti,
               pyretrieve.lexeme_bucket(q.lexeme) AS bucket,
               (SELECT array_agg(x.docno ORDER BY x.docno)
                  FROM pyretrieve.lexical_tombstones x
                 WHERE x.workspace_id = d.workspace_id AND x.project_id = d.project_id
                   AND x.lexeme = q.lexeme AND x.classification <= d.ceiling) AS tombstones
          FROM (SELECT u.lexeme, max(greatest(cardinality(u.positions), 1))::double precision AS qtf
                  FROM pyretrieve.scope_configs c
                 CROSS JOIN LATERAL unnest(to_tsvector(c.ts_config, p_query)) AS u
                 WHERE c.workspace_id = d.workspace_id AND c.project_id = d.project_id
                 GROUP BY u.lexeme) q
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
                CROSS JOIN LATERAL (SELECT array_position(p.lexemes, ql.lexeme) AS i) i
                CROSS JOIN LATERAL (
                      SELECT p.entries[p.starts[i.i] : coalesce(p.starts[i.i + 1] - 1, p.postings)] AS e) x
                WHERE p.workspace_id = d.workspace_id AND p.project_id = d.project_id
                  AND p.bucket = ql.bucket
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
                 CROSS JOIN LATERAL (
                       SELECT width_bucket((td.docnos[k.k]::bigint << 32) | 4294967295, bl.entries) AS i) i
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
$function$;
COMMENT ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) IS 'Lexical candidates for the bound decision. p_ranking ''bm25'' (default): BM25 over the OR of the query''s lexemes (repeated query terms count), with k1 and b from the project and corpus statistics (document count, average length, document frequency) computed only from the fragments the decision admits; ''ts_rank'': the earlier ts_rank scoring, for comparison. 1-based ranks in a total order (score desc, then content digest, then fragment id). Returns rank, fragment_id, content_digest, score, lexical_generation and terms (a json array, kept as written: each matched term, in bytewise lexeme order, with idf, tf, query_tf, length_norm and contribution). Raises PR002 for a decision that is not the caller''s bound decision of this transaction. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0055';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
