-- pyretrieve migration 0022: lexical_pages
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- The pages of small lists, and the blocks' partial index keyed by classification first.
CREATE SEQUENCE pyretrieve.lexical_page_seq AS bigint;
CREATE TABLE pyretrieve.lexical_pages (
    workspace_id    pyretrieve.identifier NOT NULL,
    project_id      pyretrieve.identifier NOT NULL,
    bucket          smallint NOT NULL CHECK (bucket BETWEEN 0 AND 255),
    classification  pyretrieve.classification NOT NULL,
    page            bigint NOT NULL DEFAULT nextval('pyretrieve.lexical_page_seq'),
    first_lexeme    text NOT NULL,
    last_lexeme     text NOT NULL,
    postings        integer NOT NULL CHECK (postings >= 1),
    first_docno     integer NOT NULL,
    last_docno      integer NOT NULL,
    -- As in lexical_blocks: bounds of the page's fragments' times (of a superset after a
    -- fragment leaves).
    min_observed_at timestamptz NOT NULL,
    max_observed_at timestamptz NOT NULL,
    min_expires_at  timestamptz,
    max_expires_at  timestamptz,
    lexemes         text[] NOT NULL,
    starts          integer[] NOT NULL,
    entries         bigint[] NOT NULL,
    PRIMARY KEY (workspace_id, project_id, bucket, classification, page),
    CHECK (cardinality(entries) = postings AND cardinality(starts) = cardinality(lexemes))
);
COMMENT ON TABLE pyretrieve.lexical_pages IS
    'The lexical index''s small lists: per scope, lexeme bucket and classification, pages holding the postings of lexemes with fewer than 128 (the lexemes in bytewise order, where each one''s postings start, the entries packed as in lexical_blocks), with their lexeme, document-number and time ranges; written by compact_lexical_index only.';
ALTER TABLE pyretrieve.lexical_pages ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
REVOKE ALL ON pyretrieve.lexical_pages FROM PUBLIC;
REVOKE ALL ON SEQUENCE pyretrieve.lexical_page_seq FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON pyretrieve.lexical_pages TO pyretrieve_api;
GRANT UPDATE (postings) ON pyretrieve.lexical_pages TO pyretrieve_api;
GRANT USAGE ON SEQUENCE pyretrieve.lexical_page_seq TO pyretrieve_api;
DROP INDEX pyretrieve.lexical_blocks_partial_idx;
CREATE INDEX lexical_blocks_partial_idx
    ON pyretrieve.lexical_blocks (workspace_id, project_id, classification, lexeme)
    INCLUDE (postings)
    WHERE postings < 128;
COMMENT ON TABLE pyretrieve.lexical_tombstones IS
    'Postings still inside a block or a page whose fragment is no longer active, maintained by triggers and compaction: the lexical leg checks a block (or a term''s slice of a page) with one in its range fragment by fragment.';

DROP VIEW pyretrieve.lexical_postings CASCADE;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.lexeme_bucket(p_lexeme text)
 RETURNS smallint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT get_byte(sha256(convert_to(p_lexeme, 'UTF8')), 0)::smallint
$function$;
COMMENT ON FUNCTION pyretrieve.lexeme_bucket(text) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.lexeme_bucket(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.lexeme_bucket(text) TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.compact_lexical_postings(p_workspace text, p_project text, p_ceiling pyretrieve.classification)
 RETURNS TABLE(rows_read integer, rows_written integer, postings integer)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_pages tid[];
    v_blocks tid[];
    v_classes pyretrieve.classification[];
    v_lexemes text[];
    v_buckets smallint[];
    v_held text[];
    v_written integer;
    v_postings integer;
BEGIN
    -- The small lexemes of the classifications up to p_ceiling (the partial index holds the
    -- blocks not full), each with its bucket. Whether a lexeme has a full block is one probe of
    -- the key per lexeme (a sub-select in the target list, never turned into a join: right
    -- after a load the planner takes the scope for empty and a join read every block once per
    -- block).
    SELECT array_agg(s.classification), array_agg(s.lexeme), array_agg(s.bucket)
      INTO v_classes, v_lexemes, v_buckets
      FROM (SELECT b.classification, b.lexeme, pyretrieve.lexeme_bucket(b.lexeme) AS bucket,
                   EXISTS (SELECT 1 FROM pyretrieve.lexical_blocks f
                            WHERE f.workspace_id = p_workspace AND f.project_id = p_project
                              AND f.lexeme = b.lexeme AND f.classification = b.classification
                              AND f.postings = 128) AS full_block
              FROM (SELECT DISTINCT b.classification, b.lexeme
                      FROM pyretrieve.lexical_blocks b
                     WHERE b.workspace_id = p_workspace AND b.project_id = p_project
                       AND b.classification <= p_ceiling AND b.postings < 128) b
            OFFSET 0) s
     WHERE NOT s.full_block;

    -- The buckets to rewrite (of a small lexeme, or of a tombstone), the pages of each that no
    -- other transaction holds (taken), and the buckets with a page held elsewhere (left alone).
    WITH wanted AS (
        SELECT DISTINCT x.classification, x.bucket
          FROM (SELECT u.classification, u.bucket FROM unnest(v_classes, v_buckets) AS u(classification, bucket)
                UNION ALL
                SELECT t.classification, pyretrieve.lexeme_bucket(t.lexeme)
                  FROM pyretrieve.lexical_tombstones t
                 WHERE t.workspace_id = p_workspace AND t.project_id = p_project
                   AND t.classification <= p_ceiling) x
    ), seen AS MATERIALIZED (
        SELECT w.classification, w.bucket, c.pages, t.page
          FROM wanted w
         CROSS JOIN LATERAL (
               SELECT count(*) AS pages FROM pyretrieve.lexical_pages p
                WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                  AND p.bucket = w.bucket AND p.classification = w.classification) c
          LEFT JOIN LATERAL (
               SELECT p.ctid AS page FROM pyretrieve.lexical_pages p
                WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                  AND p.bucket = w.bucket AND p.classification = w.classification
                  FOR UPDATE SKIP LOCKED) t ON true
    ), bucket AS (
        SELECT s.classification, s.bucket, count(s.page) < max(s.pages) AS held,
               array_agg(s.page) FILTER (WHERE s.page IS NOT NULL) AS pages
          FROM seen s
         GROUP BY s.classification, s.bucket
    )
    SELECT (SELECT array_agg(u.page) FROM bucket k CROSS JOIN LATERAL unnest(k.pages) AS u(page)
             WHERE NOT k.held),
           (SELECT array_agg(k.classification::text || '/' || k.bucket) FROM bucket k WHERE k.held)
      INTO v_pages, v_held;

    -- The small lexemes' blocks not full in the buckets taken, as far as no other transaction
    -- holds them.
    SELECT array_agg(b.block) INTO v_blocks
      FROM unnest(v_classes, v_lexemes, v_buckets) AS c(classification, lexeme, bucket)
     CROSS JOIN LATERAL (
           SELECT b.ctid AS block
             FROM pyretrieve.lexical_blocks b
            WHERE b.workspace_id = p_workspace AND b.project_id = p_project
              AND b.classification = c.classification AND b.lexeme = c.lexeme
              AND b.postings < 128
              FOR UPDATE SKIP LOCKED) b
     WHERE v_held IS NULL OR NOT (c.classification::text || '/' || c.bucket = ANY (v_held));

    WITH gone_pages AS (
        DELETE FROM pyretrieve.lexical_pages p
         WHERE p.ctid = ANY (v_pages)
           AND p.workspace_id = p_workspace AND p.project_id = p_project
        RETURNING p.*
    ), gone_blocks AS (
        DELETE FROM pyretrieve.lexical_blocks b
         WHERE b.ctid = ANY (v_blocks)
           AND b.workspace_id = p_workspace AND b.project_id = p_project
        RETURNING b.*
    ), old AS (
        SELECT g.classification, l.lexeme, g.entries[i.i] AS entry, g.min_observed_at,
               g.max_observed_at, g.min_expires_at, g.max_expires_at
          FROM gone_pages g
         CROSS JOIN LATERAL unnest(g.lexemes, g.starts) WITH ORDINALITY AS l(lexeme, start, n)
         CROSS JOIN LATERAL generate_series(l.start, coalesce(g.starts[l.n + 1], g.postings + 1) - 1)
               AS i(i)
        UNION ALL
        SELECT g.classification, g.lexeme, u.entry, g.min_observed_at, g.max_observed_at,
               g.min_expires_at, g.max_expires_at
          FROM gone_blocks g CROSS JOIN LATERAL unnest(g.entries) AS u(entry)
    ), dropped AS (
        DELETE FROM pyretrieve.lexical_tombstones x
         USING old o
         WHERE x.workspace_id = p_workspace AND x.project_id = p_project
           AND x.lexeme = o.lexeme AND x.classification = o.classification
           AND x.docno = (o.entry >> 32)::integer
        RETURNING x.lexeme, x.classification, x.docno
    ), grouped AS (
        SELECT g.classification, g.lexeme, pyretrieve.lexeme_bucket(g.lexeme) AS bucket,
               g.min_observed_at, g.max_observed_at, g.min_expires_at, g.max_expires_at,
               o.entries, cardinality(o.entries) AS n
          FROM (SELECT o.classification, o.lexeme, min(o.min_observed_at) AS min_observed_at,
                       max(o.max_observed_at) AS max_observed_at,
                       min(o.min_expires_at) AS min_expires_at,
                       CASE WHEN bool_and(o.max_expires_at IS NOT NULL) THEN max(o.max_expires_at) END
                           AS max_expires_at,
                       array_agg(o.entry) AS entries
                  FROM old o
                 WHERE NOT EXISTS (SELECT 1 FROM dropped d
                                    WHERE d.lexeme = o.lexeme AND d.classification = o.classification
                                      AND d.docno = (o.entry >> 32)::integer)
                 GROUP BY o.classification, o.lexeme) g
         CROSS JOIN LATERAL (SELECT array_agg(v.e ORDER BY v.e) AS entries
                               FROM unnest(g.entries) AS v(e)) o
    ), blocks AS (
        INSERT INTO pyretrieve.lexical_blocks (
            workspace_id, project_id, lexeme, classification, first_docno, last_docno, postings,
            max_tf, min_length, min_observed_at, max_observed_at, min_expires_at, max_expires_at,
            entries)
        SELECT p_workspace, p_project, g.lexeme, g.classification,
               (c.e[1] >> 32)::integer, (c.e[cardinality(c.e)] >> 32)::integer, cardinality(c.e),
               s.max_tf, s.min_length, g.min_observed_at, g.max_observed_at, g.min_expires_at,
               g.max_expires_at, c.e
          FROM grouped g
         CROSS JOIN LATERAL generate_series(0, (g.n - 1) / 128) AS k(k)
         CROSS JOIN LATERAL (SELECT g.entries[k.k * 128 + 1 : k.k * 128 + 128] AS e) c
         CROSS JOIN LATERAL (SELECT max(((x.v >> 24) & 255)::integer + 1) AS max_tf,
                                    min((x.v & 16777215)::integer) AS min_length
                               FROM unnest(c.e) AS x(v)) s
         WHERE g.n >= 128
        RETURNING 1
    ), placed AS (
        -- Each small lexeme's page in its bucket (a page closes once 1,024 postings precede the
        -- next lexeme) and where its postings start there.
        SELECT p.*, p.before / 1024 AS page_no
          FROM (SELECT g.*, sum(g.n) OVER (PARTITION BY g.classification, g.bucket
                                           ORDER BY g.lexeme COLLATE "C") - g.n AS before
                  FROM grouped g
                 WHERE g.n < 128) p
    ), paged AS (
        SELECT p.*, (p.before - min(p.before) OVER (PARTITION BY p.classification, p.bucket, p.page_no))::integer + 1
                        AS start
          FROM placed p
    ), pages AS (
        INSERT INTO pyretrieve.lexical_pages (
            workspace_id, project_id, bucket, classification, first_lexeme, last_lexeme,
            postings, first_docno, last_docno, min_observed_at, max_observed_at, min_expires_at,
            max_expires_at, lexemes, starts, entries)
        SELECT p_workspace, p_project, h.bucket, h.classification, h.lexemes[1],
               h.lexemes[cardinality(h.lexemes)], cardinality(e.entries), e.first_docno,
               e.last_docno, h.min_observed_at, h.max_observed_at, h.min_expires_at,
               h.max_expires_at, h.lexemes, h.starts, e.entries
          FROM (SELECT p.classification, p.bucket, p.page_no,
                       array_agg(p.lexeme ORDER BY p.lexeme COLLATE "C") AS lexemes,
                       array_agg(p.start ORDER BY p.lexeme COLLATE "C") AS starts,
                       min(p.min_observed_at) AS min_observed_at,
                       max(p.max_observed_at) AS max_observed_at,
                       min(p.min_expires_at) AS min_expires_at,
                       CASE WHEN bool_and(p.max_expires_at IS NOT NULL) THEN max(p.max_expires_at) END
                           AS max_expires_at
                  FROM paged p
                 GROUP BY p.classification, p.bucket, p.page_no) h
          JOIN (SELECT p.classification, p.bucket, p.page_no,
                       array_agg(u.e ORDER BY p.lexeme COLLATE "C", u.e) AS entries,
                       min((u.e >> 32)::integer) AS first_docno,
                       max((u.e >> 32)::integer) AS last_docno
                  FROM paged p CROSS JOIN LATERAL unnest(p.entries) AS u(e)
                 GROUP BY p.classification, p.bucket, p.page_no) e
            ON e.classification = h.classification AND e.bucket = h.bucket
           AND e.page_no = h.page_no
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM blocks) + (SELECT count(*) FROM pages),
           (SELECT coalesce(sum(g.n), 0) FROM grouped g)
      INTO v_written, v_postings;

    RETURN QUERY SELECT coalesce(cardinality(v_pages), 0) + coalesce(cardinality(v_blocks), 0),
                        v_written, v_postings;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.compact_lexical_postings(text,text,pyretrieve.classification) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.compact_lexical_postings(text,text,pyretrieve.classification) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.compact_lexical_postings(text,text,pyretrieve.classification) TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.lexical_candidates(p_decision uuid, p_query text, p_limit integer, p_ranking text DEFAULT 'bm25'::text)
 RETURNS TABLE(rank integer, fragment_id uuid, content_digest bytea, score double precision, lexical_generation bigint, terms jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET client_min_messages TO 'warning'
 SET extra_float_digits TO '1'
 SET enable_seqscan TO 'off'
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
               t.fragment_id, t.content_digest, t.score, t.lexical_generation, '[]'::jsonb
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
               (SELECT array_agg(x.docno)
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
        -- time range, each marked whole when the decision admits every posting in it: the
        -- window holds its whole time range and none of the term's tombstones lies in its range.
        SELECT ql.ti, b.first_docno, b.last_docno, b.postings, b.entries,
               (b.max_observed_at <= d.evaluated_at
                AND (d.max_age IS NULL OR b.min_observed_at >= d.evaluated_at - d.max_age)
                AND (b.min_expires_at IS NULL OR b.min_expires_at > d.evaluated_at)
                AND (ql.tombstones IS NULL
                     OR NOT EXISTS (SELECT 1 FROM unnest(ql.tombstones) AS x(docno)
                                     WHERE x.docno BETWEEN b.first_docno AND b.last_docno))) AS whole
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
                  AND i.i IS NOT NULL) b
    ), part AS MATERIALIZED (
        -- The postings of blocks admitted in part, each checked against its fragment: the
        -- decision's filter stated here, and the fragments' read policy again.
        SELECT bl.ti, u.entry
          FROM bl
         CROSS JOIN LATERAL unnest(bl.entries) AS u(entry)
         WHERE NOT bl.whole
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
        -- Each term's idf and weight qtf * idf, with the constants of its parts.
        SELECT ql.ti, ql.lexeme, ql.qtf, i.idf, ql.qtf * i.idf AS wq
          FROM ql
          JOIN df ON df.ti = ql.ti
         CROSS JOIN st
         CROSS JOIN LATERAL (SELECT ln(1.0 + (st.n - df.df + 0.5) / (df.df + 0.5)) AS idf) i
    ), scored AS MATERIALIZED (
        -- Each fragment's score: its terms' parts summed in bytewise lexeme order, over input
        -- sorted by fragment and term (so no group is sorted again), so the float result never
        -- depends on the plan. A part is qtf * idf * (tf * (k1 + 1)) / (tf + norm) with
        -- norm = k1 * (1 - b + b * length / avgdl), each operation in that order.
        SELECT h.docno, sum(h.part ORDER BY h.ti) AS score
          FROM (SELECT p.docno, p.ti,
                       w.wq * (p.tf * (v_k1 + 1.0)) / (p.tf + v_k1 * (1.0 - v_b + v_b * p.len / st.avgdl)) AS part
                  FROM (SELECT y.ti, (y.entry >> 32)::integer AS docno,
                               (((y.entry >> 24) & 255) + 1)::double precision AS tf,
                               (y.entry & 16777215)::double precision AS len
                          FROM (SELECT bl.ti, unnest(bl.entries) AS entry FROM bl WHERE bl.whole
                                UNION ALL
                                SELECT part.ti, part.entry FROM part) y) p
                  JOIN w ON w.ti = p.ti
                 CROSS JOIN st
                 ORDER BY p.docno, p.ti) h
         GROUP BY h.docno
    ), top AS MATERIALIZED (
        -- Every fragment scoring at least the p_limit-th best score competes for the last
        -- places on the content-bound tie-break, so the cut is exact and plan-independent;
        -- the threshold is a sub-select, computed once.
        SELECT s.docno, s.score, f.fragment_id, f.content_digest, f.lexical_generation
          FROM scored s
          JOIN pyretrieve.fragments f
            ON f.workspace_id = d.workspace_id AND f.project_id = d.project_id AND f.docno = s.docno
         WHERE s.score >= (SELECT min(x.score)
                             FROM (SELECT sc.score FROM scored sc ORDER BY sc.score DESC LIMIT p_limit) x)
           AND f.state = 'active'
           AND f.classification <= d.ceiling
           AND f.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
           AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
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
        -- jsonb_build_object cost several times as much.
        SELECT y.docno,
               ('[' || string_agg(
                   '{"term": ' || to_json(w.lexeme)::text || ', "idf": ' || w.idf::text
                   || ', "tf": ' || y.tf::integer::text || ', "query_tf": ' || w.qtf::integer::text
                   || ', "length_norm": ' || y.norm::text || ', "contribution": '
                   || (w.wq * (y.tf * (v_k1 + 1.0)) / (y.tf + y.norm))::text || '}',
                   ', ' ORDER BY w.ti) || ']')::jsonb AS terms
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
COMMENT ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) IS 'Lexical candidates for the bound decision. p_ranking ''bm25'' (default): BM25 over the OR of the query''s lexemes (repeated query terms count), with k1 and b from the project and corpus statistics (document count, average length, document frequency) computed only from the fragments the decision admits; ''ts_rank'': the earlier ts_rank scoring, for comparison. 1-based ranks in a total order (score desc, then content digest, then fragment id). Returns rank, fragment_id, content_digest, score, lexical_generation and terms (each matched term with idf, tf, query_tf, length_norm and contribution). Raises PR002 for a decision that is not the caller''s bound decision of this transaction. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.compact_lexical_index(p_workspace text, p_project text)
 RETURNS TABLE(rows_read integer, rows_written integer, postings integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_ceiling pyretrieve.classification := pyretrieve.bind_write_scope(p_workspace, p_project);
BEGIN
    RETURN QUERY SELECT c.rows_read, c.rows_written, c.postings
                   FROM pyretrieve.compact_lexical_postings(p_workspace, p_project, v_ceiling) c;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.compact_lexical_index(text,text) IS 'Compact the write scope''s lexical index, for the writer''s classifications: the postings of lexemes with fewer than 128 in a classification move from their blocks into pages shared by the lexemes of a bucket (a row per rare lexeme is most of the index otherwise), lexemes that reached 128 move back to blocks, and tombstoned postings of the rewritten pages go. Rows another transaction holds are left for a later run (it never waits on a writer). Returns the rows read and written and the postings moved. Searches return the same rows, scores and terms before and after. The Ingestor runs it after each ingest run. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.compact_lexical_index(text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.compact_lexical_index(text,text) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
CREATE VIEW pyretrieve.lexical_postings WITH (security_invoker=true) AS
 SELECT workspace_id,
    project_id,
    lexeme,
    classification,
    ((entry >> 32))::integer AS docno,
    ((((entry >> 24) & (255)::bigint))::integer + 1) AS tf,
    ((entry & (16777215)::bigint))::integer AS doc_length
   FROM ( SELECT b.workspace_id,
            b.project_id,
            b.lexeme,
            b.classification,
            u.entry
           FROM (pyretrieve.lexical_blocks b
             CROSS JOIN LATERAL unnest(b.entries) u(entry))
        UNION ALL
         SELECT p.workspace_id,
            p.project_id,
            l.lexeme,
            p.classification,
            p.entries[i.i] AS entry
           FROM ((pyretrieve.lexical_pages p
             CROSS JOIN LATERAL UNNEST(p.lexemes, p.starts) WITH ORDINALITY l(lexeme, start, n))
             CROSS JOIN LATERAL generate_series(l.start, (COALESCE(p.starts[(l.n + 1)], (p.postings + 1)) - 1)) i(i))) x
  WHERE (NOT (EXISTS ( SELECT 1
           FROM pyretrieve.lexical_tombstones t
          WHERE (((t.workspace_id)::text = (x.workspace_id)::text) AND ((t.project_id)::text = (x.project_id)::text) AND (t.lexeme = x.lexeme) AND (t.classification = x.classification) AND (t.docno = ((x.entry >> 32))::integer)))));
COMMENT ON VIEW pyretrieve.lexical_postings IS 'The lexical index (blocks and pages) one posting a row (scope, lexeme, classification, docno, tf, doc_length), tombstones left out: for tests and audits, granted to no principal.';
CREATE POLICY lexical_pages_delete ON pyretrieve.lexical_pages FOR DELETE TO pyretrieve_api USING ((((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))));
CREATE POLICY lexical_pages_insert ON pyretrieve.lexical_pages FOR INSERT TO pyretrieve_api WITH CHECK ((((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))));
CREATE POLICY lexical_pages_lock ON pyretrieve.lexical_pages FOR UPDATE TO pyretrieve_api USING ((((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))) WITH CHECK (false);
CREATE POLICY lexical_pages_read ON pyretrieve.lexical_pages FOR SELECT TO pyretrieve_api USING ((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((project_id)::text = (COALESCE(( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND (((classification <= ( SELECT d.ceiling
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (min_observed_at <= ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (max_observed_at >= COALESCE(( SELECT (d.evaluated_at - d.max_age)
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), '-infinity'::timestamp with time zone)) AND ((max_expires_at IS NULL) OR (max_expires_at > ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))))) OR ((classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")
  WHERE (NOT (EXISTS ( SELECT 1
           FROM pyretrieve.bound_decision() bound_decision(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))))) IS TRUE))));

-- Every scope's small lists move into pages, as compaction does (as the installer: every
-- classification, and row-level security does not apply).
RESET ROLE;
SELECT count(*) AS compacted_scopes
  FROM pyretrieve.projects p
 CROSS JOIN LATERAL pyretrieve.compact_lexical_postings(
           p.workspace_id, p.project_id, enum_last(NULL::pyretrieve.classification)) c;
SET LOCAL ROLE pyretrieve_owner;
UPDATE pyretrieve.installation SET schema_version = '0022';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
