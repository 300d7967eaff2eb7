-- pyretrieve migration 0059: lexical_page_groups
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.
--
-- A group of 16 lexeme buckets whose small lists of a classification hold fewer than 1,024
-- postings keeps them in one page of its own (key 256 + group) instead of a page per bucket:
-- in a scope of a few hundred fragments a bucket's page held about 30 postings, and the rows'
-- own bytes were two thirds of its small lists. write_lexical_lists chooses the key per group;
-- the lexical leg reads a term's pages under its bucket's key and its group's; compaction
-- rewrites whole groups, and also takes a group whose pages are not as it leaves them, which is
-- how the pages of an existing install are merged at the end of this migration.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION pyretrieve.write_lexical_lists(p_workspace text, p_project text, p_lists pyretrieve.lexical_list[], p_pages boolean DEFAULT true, p_pending boolean DEFAULT false)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_written integer;
BEGIN
    WITH grouped AS (
        SELECT l.classification, l.lexeme, pyretrieve.lexeme_bucket(l.lexeme) AS bucket,
               l.min_observed_at, l.max_observed_at, l.min_expires_at, l.max_expires_at,
               l.entries, cardinality(l.entries) AS n
          FROM unnest(p_lists) AS l
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
         WHERE g.n >= 128 OR NOT p_pages
        RETURNING 1
    ), slotted AS (
        -- Each small lexeme's page key: its group's (256 + bucket / 16) where the small lists
        -- written here of its group and classification hold fewer than 1,024 postings, else its
        -- bucket's. Compaction writes a group whole, so it decides from the group's postings.
        SELECT g.classification, g.lexeme, g.min_observed_at, g.max_observed_at,
               g.min_expires_at, g.max_expires_at, g.entries, g.n,
               CASE WHEN sum(g.n) OVER (PARTITION BY g.classification, g.bucket >> 4) < 1024
                    THEN (256 + (g.bucket >> 4))::smallint ELSE g.bucket END AS bucket
          FROM grouped g
         WHERE g.n < 128 AND p_pages
    ), placed AS (
        -- Each small lexeme's page under its key and where its postings start there.
        SELECT p.*, p.before / 1024 AS page_no
          FROM (SELECT s.*, sum(s.n) OVER (PARTITION BY s.classification, s.bucket
                                           ORDER BY s.lexeme COLLATE "C") - s.n AS before
                  FROM slotted s) p
    ), paged AS (
        SELECT p.*, (p.before - min(p.before) OVER (PARTITION BY p.classification, p.bucket, p.page_no))::integer + 1
                        AS start
          FROM placed p
    ), pages AS (
        INSERT INTO pyretrieve.lexical_pages (
            workspace_id, project_id, bucket, classification, first_lexeme, last_lexeme,
            postings, first_docno, last_docno, min_observed_at, max_observed_at, min_expires_at,
            max_expires_at, lexemes, starts, entries, pending)
        SELECT p_workspace, p_project, h.bucket, h.classification, h.lexemes[1],
               h.lexemes[cardinality(h.lexemes)], cardinality(e.entries), e.first_docno,
               e.last_docno, h.min_observed_at, h.max_observed_at, h.min_expires_at,
               h.max_expires_at, h.lexemes, h.starts, e.entries, p_pending
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
    SELECT (SELECT count(*) FROM blocks) + (SELECT count(*) FROM pages) INTO v_written;
    RETURN v_written;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.write_lexical_lists(text,text,pyretrieve.lexical_list[],boolean,boolean) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.write_lexical_lists(text,text,pyretrieve.lexical_list[],boolean,boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.write_lexical_lists(text,text,pyretrieve.lexical_list[],boolean,boolean) TO pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.overlapping_pages(p_workspace text, p_project text, p_ceiling pyretrieve.classification)
 RETURNS TABLE(classification pyretrieve.classification, bucket smallint, postings integer)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT p.classification,
     p.bucket,
     p.postings
    FROM pyretrieve.lexical_pages p
   WHERE (((p.workspace_id)::text = overlapping_pages.p_workspace) AND ((p.project_id)::text = overlapping_pages.p_project) AND (p.classification <= overlapping_pages.p_ceiling) AND (NOT p.pending) AND (EXISTS ( SELECT 1
            FROM pyretrieve.lexical_pages o
           WHERE (((o.workspace_id)::text = (p.workspace_id)::text) AND ((o.project_id)::text = (p.project_id)::text) AND (
                 CASE
                     WHEN (o.bucket < 256) THEN ((o.bucket >> 4))::integer
                     ELSE (o.bucket - 256)
                 END =
                 CASE
                     WHEN (p.bucket < 256) THEN ((p.bucket >> 4))::integer
                     ELSE (p.bucket - 256)
                 END) AND ((o.bucket = p.bucket) OR (o.bucket >= 256) OR (p.bucket >= 256)) AND (o.classification = p.classification) AND (o.page <> p.page) AND (NOT o.pending) AND ((o.first_lexeme COLLATE "C") <= p.last_lexeme) AND ((p.first_lexeme COLLATE "C") <= o.last_lexeme)))));
END;
COMMENT ON FUNCTION pyretrieve.overlapping_pages(text,text,pyretrieve.classification) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.overlapping_pages(text,text,pyretrieve.classification) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.overlapping_pages(text,text,pyretrieve.classification) TO pyretrieve_api;
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
    v_lists pyretrieve.lexical_list[];
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

    -- The groups of 16 buckets to rewrite (of a small lexeme, of a tombstone, with pages that
    -- overlap, with a bulk write's pending pages, or whose pages are not as a compaction leaves
    -- them: one page of the group's own where its postings are fewer than 1,024, else none),
    -- the pages of each that no other transaction holds (taken), and the groups with a page held
    -- elsewhere (left alone). A group is rewritten whole, its buckets' pages and its own, so
    -- that the write sees all of its postings to choose between the two.
    WITH wanted AS (
        SELECT DISTINCT x.classification,
               CASE WHEN x.bucket < 256 THEN x.bucket >> 4 ELSE x.bucket - 256 END AS grp
          FROM (SELECT u.classification, u.bucket FROM unnest(v_classes, v_buckets) AS u(classification, bucket)
                UNION ALL
                SELECT t.classification, pyretrieve.lexeme_bucket(t.lexeme)
                  FROM pyretrieve.lexical_tombstones t
                 WHERE t.workspace_id = p_workspace AND t.project_id = p_project
                   AND t.classification <= p_ceiling
                UNION ALL
                SELECT o.classification, o.bucket
                  FROM pyretrieve.overlapping_pages(p_workspace, p_project, p_ceiling) o
                UNION ALL
                SELECT p.classification, p.bucket
                  FROM pyretrieve.lexical_pages p
                 WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                   AND p.classification <= p_ceiling AND p.pending
                UNION ALL
                SELECT c.classification, (256 + c.grp)::smallint  -- its group's key
                  FROM (SELECT p.classification,
                               CASE WHEN p.bucket < 256 THEN p.bucket >> 4 ELSE p.bucket - 256 END AS grp,
                               sum(p.postings) AS n, count(*) AS pages,
                               count(*) FILTER (WHERE p.bucket >= 256) AS own
                          FROM pyretrieve.lexical_pages p
                         WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                           AND p.classification <= p_ceiling AND NOT p.pending
                         GROUP BY 1, 2) c
                 WHERE CASE WHEN c.n < 1024 THEN c.pages > 1 OR c.own = 0 ELSE c.own > 0 END) x
    ), seen AS MATERIALIZED (
        -- A group's keys: its 16 buckets' and its own.
        SELECT w.classification, w.grp, c.pages, t.page
          FROM wanted w
         CROSS JOIN LATERAL (
               SELECT (256 + w.grp)::smallint
                      || ARRAY(SELECT b::smallint FROM generate_series(w.grp * 16, w.grp * 16 + 15) AS b)
                          AS keys
               OFFSET 0) k
         CROSS JOIN LATERAL (
               SELECT count(*) AS pages FROM pyretrieve.lexical_pages p
                WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                  AND p.bucket = ANY (k.keys)
                  AND p.classification = w.classification) c
          LEFT JOIN LATERAL (
               SELECT p.ctid AS page FROM pyretrieve.lexical_pages p
                WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                  AND p.bucket = ANY (k.keys)
                  AND p.classification = w.classification
                  FOR UPDATE SKIP LOCKED) t ON true
    ), grouped AS (
        SELECT s.classification, s.grp, count(s.page) < max(s.pages) AS held,
               array_agg(s.page) FILTER (WHERE s.page IS NOT NULL) AS pages
          FROM seen s
         GROUP BY s.classification, s.grp
    )
    SELECT (SELECT array_agg(u.page) FROM grouped k CROSS JOIN LATERAL unnest(k.pages) AS u(page)
             WHERE NOT k.held),
           (SELECT array_agg(k.classification::text || '/' || k.grp) FROM grouped k WHERE k.held)
      INTO v_pages, v_held;

    -- The small lexemes' blocks not full in the groups taken, as far as no other transaction
    -- holds them: one read of the scope's blocks not full (the partial index) against the
    -- lexemes, where a probe per lexeme cost three times as much after a first load.
    SELECT array_agg(b.ctid) INTO v_blocks
      FROM (SELECT b.ctid
              FROM pyretrieve.lexical_blocks b
             WHERE b.workspace_id = p_workspace AND b.project_id = p_project
               AND b.classification <= p_ceiling AND b.postings < 128
               AND (b.classification, b.lexeme) IN (
                     SELECT c.classification, c.lexeme
                       FROM unnest(v_classes, v_lexemes, v_buckets) AS c(classification, lexeme, bucket)
                      WHERE v_held IS NULL
                         OR NOT (c.classification::text || '/' || (c.bucket >> 4) = ANY (v_held)))
               FOR UPDATE OF b SKIP LOCKED) b;

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
    ), slices AS (
        -- Each taken page's slice of each of its lexemes, and each taken block, as arrays: a
        -- list's entries are stored in document-number order, so a slice is one already.
        SELECT g.classification, l.lexeme,
               g.entries[l.start : coalesce(g.starts[l.n + 1] - 1, g.postings)] AS e,
               g.min_observed_at, g.max_observed_at, g.min_expires_at, g.max_expires_at
          FROM gone_pages g
         CROSS JOIN LATERAL unnest(g.lexemes, g.starts) WITH ORDINALITY AS l(lexeme, start, n)
        UNION ALL
        SELECT g.classification, g.lexeme, g.entries, g.min_observed_at, g.max_observed_at,
               g.min_expires_at, g.max_expires_at
          FROM gone_blocks g
    ), dropped AS (
        -- The tombstones of postings taken, with them (one probe of each tombstone's slices).
        DELETE FROM pyretrieve.lexical_tombstones x
         USING slices s
         WHERE x.workspace_id = p_workspace AND x.project_id = p_project
           AND x.lexeme = s.lexeme AND x.classification = s.classification
           AND x.docno BETWEEN (s.e[1] >> 32)::integer AND (s.e[cardinality(s.e)] >> 32)::integer
           AND EXISTS (SELECT 1 FROM unnest(s.e) AS u(v) WHERE (u.v >> 32)::integer = x.docno)
        RETURNING x.lexeme, x.classification, x.docno
    ), keyed AS (
        -- A list with one slice and no tombstone is written as it is; only the others are
        -- opened, filtered and sorted (posting by posting).
        SELECT s.*, count(*) OVER (PARTITION BY s.classification, s.lexeme) = 1
                    AND t.lexeme IS NULL AS kept
          FROM slices s
          LEFT JOIN (SELECT DISTINCT d.classification, d.lexeme FROM dropped d) t
            ON t.classification = s.classification AND t.lexeme = s.lexeme
    ), grouped AS (
        SELECT k.classification, k.lexeme, k.min_observed_at, k.max_observed_at,
               k.min_expires_at, k.max_expires_at, k.e AS entries
          FROM keyed k
         WHERE k.kept
        UNION ALL
        SELECT g.classification, g.lexeme, g.min_observed_at, g.max_observed_at,
               g.min_expires_at, g.max_expires_at, o.entries
          FROM (SELECT k.classification, k.lexeme, min(k.min_observed_at) AS min_observed_at,
                       max(k.max_observed_at) AS max_observed_at,
                       min(k.min_expires_at) AS min_expires_at,
                       CASE WHEN bool_and(k.max_expires_at IS NOT NULL) THEN max(k.max_expires_at) END
                           AS max_expires_at,
                       array_agg(u.v) AS entries
                  FROM keyed k
                 CROSS JOIN LATERAL unnest(k.e) AS u(v)
                 WHERE NOT k.kept
                   AND NOT EXISTS (SELECT 1 FROM dropped d
                                    WHERE d.lexeme = k.lexeme AND d.classification = k.classification
                                      AND d.docno = (u.v >> 32)::integer)
                 GROUP BY k.classification, k.lexeme) g
         CROSS JOIN LATERAL (SELECT array_agg(v.e ORDER BY v.e) AS entries
                               FROM unnest(g.entries) AS v(e)) o
    )
    SELECT array_agg(ROW(g.classification, g.lexeme, g.min_observed_at, g.max_observed_at,
                         g.min_expires_at, g.max_expires_at, g.entries)::pyretrieve.lexical_list),
           coalesce(sum(cardinality(g.entries)), 0)
      INTO v_lists, v_postings
      FROM grouped g;
    v_written := coalesce(pyretrieve.write_lexical_lists(p_workspace, p_project, v_lists), 0);

    RETURN QUERY SELECT coalesce(cardinality(v_pages), 0) + coalesce(cardinality(v_blocks), 0),
                        v_written, v_postings;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.compact_lexical_postings(text,text,pyretrieve.classification) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.compact_lexical_postings(text,text,pyretrieve.classification) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.compact_lexical_postings(text,text,pyretrieve.classification) TO pyretrieve_api;
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
$function$;
COMMENT ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) IS 'Lexical candidates for the bound decision. p_ranking ''bm25'' (default): BM25 over the OR of the query''s lexemes (repeated query terms count), with k1 and b from the project and corpus statistics (document count, average length, document frequency) computed only from the fragments the decision admits; ''ts_rank'': the earlier ts_rank scoring, for comparison. 1-based ranks in a total order (score desc, then content digest, then fragment id). Returns rank, fragment_id, content_digest, score, lexical_generation and terms (a json array, kept as written: each matched term, in bytewise lexeme order, with idf, tf, query_tf, length_norm and contribution). Raises PR002 for a decision that is not the caller''s bound decision of this transaction. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.compact_lexical_index(p_workspace text, p_project text, p_min_share double precision DEFAULT 0)
 RETURNS TABLE(rows_read integer, rows_written integer, postings integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
DECLARE
    v_ceiling pyretrieve.classification := pyretrieve.bind_write_scope(p_workspace, p_project);
    v_small bigint;
    v_paged bigint;
    v_pending bigint;
    v_most_pending bigint;
BEGIN
    IF p_min_share IS NULL OR p_min_share = 'NaN'::double precision OR p_min_share < 0
       OR p_min_share = 'Infinity'::double precision THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'min share must be a finite number of at least 0';
    END IF;
    IF p_min_share > 0 THEN
        SELECT coalesce(sum(b.postings), 0)
               + (SELECT count(*) FROM pyretrieve.lexical_tombstones t
                   WHERE t.workspace_id = p_workspace AND t.project_id = p_project
                     AND t.classification <= v_ceiling)
               + (SELECT coalesce(sum(o.postings), 0)
                    FROM pyretrieve.overlapping_pages(p_workspace, p_project, v_ceiling) o)
          INTO v_small
          FROM pyretrieve.lexical_blocks b
         WHERE b.workspace_id = p_workspace AND b.project_id = p_project
           AND b.classification <= v_ceiling AND b.postings < 128;
        SELECT coalesce(sum(p.postings) FILTER (WHERE NOT p.pending), 0),
               coalesce(sum(p.postings) FILTER (WHERE p.pending), 0)
          INTO v_paged, v_pending
          FROM pyretrieve.lexical_pages p
         WHERE p.workspace_id = p_workspace AND p.project_id = p_project
           AND p.classification <= v_ceiling;
        -- The most pending pages a term reads: of its bucket, and of its bucket's group.
        SELECT coalesce(max(c.pages), 0) INTO v_most_pending
          FROM (SELECT count(*) AS pages
                  FROM pyretrieve.lexical_pages p
                 -- A bucket's page is read for the bucket's terms, a group's for its 16 buckets'.
                 CROSS JOIN LATERAL generate_series(
                       CASE WHEN p.bucket < 256 THEN p.bucket ELSE (p.bucket - 256) * 16 END,
                       CASE WHEN p.bucket < 256 THEN p.bucket ELSE (p.bucket - 256) * 16 + 15 END)
                       AS k(bucket)
                 WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                   AND p.classification <= v_ceiling AND p.pending
                 GROUP BY p.classification, k.bucket) c;
        IF v_small + v_pending < p_min_share * v_paged AND v_most_pending < 16 THEN
            RETURN QUERY SELECT 0, 0, 0;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT c.rows_read, c.rows_written, c.postings
                   FROM pyretrieve.compact_lexical_postings(p_workspace, p_project, v_ceiling) c;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.compact_lexical_index(text,text,double precision) IS 'Compact the write scope''s lexical index, for the writer''s classifications: the postings of lexemes with fewer than 128 in a classification move from their blocks into pages shared by the lexemes of a bucket (a row per rare lexeme is most of the index otherwise), lexemes that reached 128 move back to blocks, tombstoned postings of the rewritten pages go, and pages that overlap, and the pending pages of bulk writes, are merged into their buckets'' pages (a group of 16 buckets whose small lists hold fewer than 1,024 postings shares one page). Rows another transaction holds are left for a later run (it never waits on a writer). p_min_share > 0 compacts only when the postings in blocks not full, the tombstones, the postings of pages whose lexeme range meets another''s in their bucket (two first writes at once) and those of pending pages are at least that share of the postings in the other pages, or when a term would read 16 pending pages (of its bucket and of its bucket''s group of 16), else returns zeros (the Ingestor runs it with 1 after each ingest run and every 16 batches of one, so a growing scope rewrites each posting a bounded number of times); 0, the default, always compacts. Raises PR010 for a share that is negative, infinite or not a number. Returns the rows read and written and the postings moved. Searches return the same rows, scores and terms before and after. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.compact_lexical_index(text,text,double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.compact_lexical_index(text,text,double precision) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;

ALTER TABLE pyretrieve.lexical_pages
    DROP CONSTRAINT lexical_pages_bucket_check,
    ADD CONSTRAINT lexical_pages_bucket_check CHECK (bucket BETWEEN 0 AND 271);
COMMENT ON TABLE pyretrieve.lexical_pages IS
    'The lexical index''s small lists: per scope, lexeme bucket (0 to 255; or 256 + g for a group of 16 buckets whose small lists hold fewer than 1,024 postings) and classification, pages holding the postings of lexemes with fewer than 128 (the lexemes in bytewise order, where each one''s postings start, the entries packed as in lexical_blocks), with their lexeme, document-number and time ranges; written by a scope''s first write, by bulk writes (pending, until compaction merges them) and by compact_lexical_index.';

RESET ROLE;
-- Every scope's groups of fewer than 1,024 small postings merged into a page of their own.
SELECT count(*) AS compacted_scopes
  FROM pyretrieve.projects p
 CROSS JOIN LATERAL pyretrieve.compact_lexical_postings(
           p.workspace_id, p.project_id, enum_last(NULL::pyretrieve.classification)) c;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0059';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
