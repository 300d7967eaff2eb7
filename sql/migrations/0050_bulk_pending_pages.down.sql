-- pyretrieve migration 0050, downgrade: back to 0049
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP FUNCTION pyretrieve.write_lexical_lists(text,text,pyretrieve.lexical_list[],boolean,boolean);
CREATE OR REPLACE FUNCTION pyretrieve.write_lexical_postings(p_workspace text, p_project text, p_lexemes text[], p_classes pyretrieve.classification[], p_entries bigint[], p_observed timestamp with time zone[], p_expires timestamp with time zone[])
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_first boolean;
    v_blocks tid[];
    v_lists pyretrieve.lexical_list[];
BEGIN
    -- Into an index empty of what the writer may see (a new scope's first write), the lists go
    -- as compaction would leave them: blocks for a lexeme with 128 postings or more, pages for
    -- the others. Nothing is there to merge, and compaction need not move them later. (Two
    -- first writes at once may both take this way: their pages then share buckets, which the
    -- leg reads and compaction merges.)
    v_first := p_entries IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_blocks b
                        WHERE b.workspace_id = p_workspace AND b.project_id = p_project)
       AND NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_pages p
                        WHERE p.workspace_id = p_workspace AND p.project_id = p_project)
       AND NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_tombstones x
                        WHERE x.workspace_id = p_workspace AND x.project_id = p_project);

    IF NOT v_first THEN
        -- The blocks to rewrite: for each lexeme, first without a lock whether one may be needed,
        -- then its candidates (through the partial index; for a tombstone, the few blocks starting
        -- last at or before its document number, as concurrent writers' blocks interleave), those
        -- no other transaction holds, then the rule again on what was taken.
        WITH touched AS MATERIALIZED (
            SELECT t.lexeme, t.classification, count(t.entry) % 128 AS fresh
              FROM unnest(p_lexemes, p_classes, p_entries) AS t(lexeme, classification, entry)
             GROUP BY t.lexeme, t.classification
        ), wanted AS MATERIALIZED (
            SELECT t.lexeme, t.classification, t.fresh
              FROM touched t
             CROSS JOIN LATERAL (
                   SELECT count(*) AS blocks, sum(pb.postings) AS postings
                     FROM pyretrieve.lexical_blocks pb
                    WHERE pb.workspace_id = p_workspace AND pb.project_id = p_project
                      AND pb.lexeme = t.lexeme AND pb.classification = t.classification
                      AND pb.postings < 128) pa
             WHERE EXISTS (SELECT 1 FROM pyretrieve.lexical_tombstones x
                            WHERE x.workspace_id = p_workspace AND x.project_id = p_project
                              AND x.lexeme = t.lexeme AND x.classification = t.classification)
                OR pa.blocks + (t.fresh > 0)::integer >= 2
                   AND pa.blocks + (t.fresh > 0)::integer >= 4
        ), candidate AS MATERIALIZED (
            SELECT w.lexeme, w.classification, w.fresh, c.first_docno
              FROM wanted w
             CROSS JOIN LATERAL (
                   SELECT pb.first_docno
                     FROM pyretrieve.lexical_blocks pb
                    WHERE pb.workspace_id = p_workspace AND pb.project_id = p_project
                      AND pb.lexeme = w.lexeme AND pb.classification = w.classification
                      AND pb.postings < 128
                   UNION
                   SELECT tb.first_docno
                     FROM pyretrieve.lexical_tombstones x
                    CROSS JOIN LATERAL (
                          SELECT tb.first_docno, tb.last_docno
                            FROM pyretrieve.lexical_blocks tb
                           WHERE tb.workspace_id = p_workspace AND tb.project_id = p_project
                             AND tb.lexeme = x.lexeme AND tb.classification = x.classification
                             AND tb.first_docno <= x.docno
                           ORDER BY tb.first_docno DESC
                           LIMIT 8) tb
                    WHERE x.workspace_id = p_workspace AND x.project_id = p_project
                      AND x.lexeme = w.lexeme AND x.classification = w.classification
                      AND tb.last_docno >= x.docno) c
        ), taken AS MATERIALIZED (
            SELECT c.fresh, b.*
              FROM candidate c
             CROSS JOIN LATERAL (
                   SELECT b.ctid AS block, b.lexeme, b.classification, b.postings,
                          EXISTS (SELECT 1 FROM pyretrieve.lexical_tombstones x
                                   WHERE x.workspace_id = p_workspace AND x.project_id = p_project
                                     AND x.lexeme = b.lexeme AND x.classification = b.classification
                                     AND x.docno BETWEEN b.first_docno AND b.last_docno) AS tombstoned
                     FROM pyretrieve.lexical_blocks b
                    WHERE b.workspace_id = p_workspace AND b.project_id = p_project
                      AND b.lexeme = c.lexeme AND b.classification = c.classification
                      AND b.first_docno = c.first_docno
                      FOR UPDATE SKIP LOCKED) b
        )
        -- The blocks are held (locked) until the transaction ends, so their row versions stay put.
        SELECT array_agg(k.block) INTO v_blocks
          FROM (SELECT k.block,
                       bool_or(k.tombstoned) OVER w AS dropping,
                       count(*) FILTER (WHERE k.postings < 128) OVER w + (k.fresh > 0)::integer
                           AS partial,
                       sum(k.postings) FILTER (WHERE k.postings < 128) OVER w + k.fresh
                           AS partial_postings
                  FROM taken k
                WINDOW w AS (PARTITION BY k.lexeme, k.classification)) k
         WHERE k.dropping OR k.partial >= 4;
    END IF;

    WITH gone AS (
        DELETE FROM pyretrieve.lexical_blocks b
         WHERE b.ctid = ANY (v_blocks)
           AND b.workspace_id = p_workspace AND b.project_id = p_project
        RETURNING b.*
    ), old AS (
        SELECT gone.lexeme, gone.classification, u.entry, gone.min_observed_at,
               gone.max_observed_at, gone.min_expires_at, gone.max_expires_at
          FROM gone CROSS JOIN LATERAL unnest(gone.entries) AS u(entry)
    ), dropped AS (
        -- The tombstones of the rewritten blocks' postings, found from each block by its
        -- lexeme's key and document-number range (a block holds at most 128 entries), then
        -- deleted by row. Joined to the postings instead, a plan that took the scope's
        -- tombstones for one row compared every one with every posting: 348,508 comparisons
        -- for one retract with 55 tombstones in the scope, and more with each retract after.
        DELETE FROM pyretrieve.lexical_tombstones x
         WHERE x.ctid = ANY (ARRAY(
                   SELECT t.ctid
                     FROM gone g
                    CROSS JOIN LATERAL (
                          SELECT y.ctid
                            FROM pyretrieve.lexical_tombstones y
                           WHERE y.workspace_id = p_workspace AND y.project_id = p_project
                             AND y.lexeme = g.lexeme AND y.classification = g.classification
                             AND y.docno BETWEEN g.first_docno AND g.last_docno
                             AND EXISTS (SELECT 1 FROM unnest(g.entries) AS u(v)
                                          WHERE (u.v >> 32)::integer = y.docno)) t))
           AND x.workspace_id = p_workspace AND x.project_id = p_project
        RETURNING x.lexeme, x.classification, x.docno
    ), posting AS (
        SELECT o.* FROM old o
         WHERE NOT EXISTS (SELECT 1 FROM dropped d
                            WHERE d.lexeme = o.lexeme AND d.classification = o.classification
                              AND d.docno = (o.entry >> 32)::integer)
        UNION ALL
        SELECT n.lexeme, n.classification, n.entry, n.observed_at, n.observed_at, n.expires_at,
               n.expires_at
          FROM unnest(p_lexemes, p_classes, p_entries, p_observed, p_expires)
                   AS n(lexeme, classification, entry, observed_at, expires_at)
         WHERE n.entry IS NOT NULL
    ), grouped AS (
        -- Grouped by a hash, then each lexeme's entries sorted alone (an entry sorts by its
        -- document number): one sort of all the postings by lexeme cost several times as much.
        SELECT g.lexeme, g.classification, g.min_observed_at, g.max_observed_at,
               g.min_expires_at, g.max_expires_at, o.entries
          FROM (SELECT p.lexeme, p.classification, min(p.min_observed_at) AS min_observed_at,
                       max(p.max_observed_at) AS max_observed_at,
                       min(p.min_expires_at) AS min_expires_at,
                       CASE WHEN bool_and(p.max_expires_at IS NOT NULL) THEN max(p.max_expires_at) END
                           AS max_expires_at,
                       array_agg(p.entry) AS entries
                  FROM posting p
                 GROUP BY p.lexeme, p.classification) g
         CROSS JOIN LATERAL (SELECT array_agg(v.e ORDER BY v.e) AS entries
                               FROM unnest(g.entries) AS v(e)) o
    )
    SELECT array_agg(ROW(g.classification, g.lexeme, g.min_observed_at, g.max_observed_at,
                         g.min_expires_at, g.max_expires_at, g.entries)::pyretrieve.lexical_list)
      INTO v_lists
      FROM grouped g;
    PERFORM pyretrieve.write_lexical_lists(p_workspace, p_project, v_lists, p_pages => v_first);
END;
$function$;
COMMENT ON FUNCTION pyretrieve.write_lexical_postings(text,text,text[],pyretrieve.classification[],bigint[],timestamp with time zone[],timestamp with time zone[]) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.write_lexical_postings(text,text,text[],pyretrieve.classification[],bigint[],timestamp with time zone[],timestamp with time zone[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.write_lexical_postings(text,text,text[],pyretrieve.classification[],bigint[],timestamp with time zone[],timestamp with time zone[]) TO pyretrieve_api;
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

    -- The buckets to rewrite (of a small lexeme, of a tombstone, or with pages that overlap),
    -- the pages of each that no other transaction holds (taken), and the buckets with a page
    -- held elsewhere (left alone).
    WITH wanted AS (
        SELECT DISTINCT x.classification, x.bucket
          FROM (SELECT u.classification, u.bucket FROM unnest(v_classes, v_buckets) AS u(classification, bucket)
                UNION ALL
                SELECT t.classification, pyretrieve.lexeme_bucket(t.lexeme)
                  FROM pyretrieve.lexical_tombstones t
                 WHERE t.workspace_id = p_workspace AND t.project_id = p_project
                   AND t.classification <= p_ceiling
                UNION ALL
                SELECT o.classification, o.bucket
                  FROM pyretrieve.overlapping_pages(p_workspace, p_project, p_ceiling) o) x
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
                         OR NOT (c.classification::text || '/' || c.bucket = ANY (v_held)))
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
        SELECT coalesce(sum(p.postings), 0) INTO v_paged
          FROM pyretrieve.lexical_pages p
         WHERE p.workspace_id = p_workspace AND p.project_id = p_project
           AND p.classification <= v_ceiling;
        IF v_small < p_min_share * v_paged THEN
            RETURN QUERY SELECT 0, 0, 0;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT c.rows_read, c.rows_written, c.postings
                   FROM pyretrieve.compact_lexical_postings(p_workspace, p_project, v_ceiling) c;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.compact_lexical_index(text,text,double precision) IS 'Compact the write scope''s lexical index, for the writer''s classifications: the postings of lexemes with fewer than 128 in a classification move from their blocks into pages shared by the lexemes of a bucket (a row per rare lexeme is most of the index otherwise), lexemes that reached 128 move back to blocks, tombstoned postings of the rewritten pages go, and pages that overlap are merged. Rows another transaction holds are left for a later run (it never waits on a writer). p_min_share > 0 compacts only when the postings in blocks not full, the tombstones and the postings of pages whose lexeme range meets another''s in their bucket (two first writes at once) are at least that share of the postings in pages, else returns zeros (the Ingestor runs it after each ingest run with 1, so a growing scope rewrites each posting a bounded number of times); 0, the default, always compacts. Raises PR010 for a share that is negative, infinite or not a number. Returns the rows read and written and the postings moved. Searches return the same rows, scores and terms before and after. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.compact_lexical_index(text,text,double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.compact_lexical_index(text,text,double precision) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
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
   WHERE (((p.workspace_id)::text = overlapping_pages.p_workspace) AND ((p.project_id)::text = overlapping_pages.p_project) AND (p.classification <= overlapping_pages.p_ceiling) AND (EXISTS ( SELECT 1
            FROM pyretrieve.lexical_pages o
           WHERE (((o.workspace_id)::text = (p.workspace_id)::text) AND ((o.project_id)::text = (p.project_id)::text) AND (o.bucket = p.bucket) AND (o.classification = p.classification) AND (o.page <> p.page) AND ((o.first_lexeme COLLATE "C") <= p.last_lexeme) AND ((p.first_lexeme COLLATE "C") <= o.last_lexeme)))));
END;
COMMENT ON FUNCTION pyretrieve.overlapping_pages(text,text,pyretrieve.classification) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.overlapping_pages(text,text,pyretrieve.classification) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.overlapping_pages(text,text,pyretrieve.classification) TO pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.write_lexical_lists(p_workspace text, p_project text, p_lists pyretrieve.lexical_list[], p_pages boolean DEFAULT true)
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
    ), placed AS (
        -- Each small lexeme's page in its bucket and where its postings start there.
        SELECT p.*, p.before / 1024 AS page_no
          FROM (SELECT g.*, sum(g.n) OVER (PARTITION BY g.classification, g.bucket
                                           ORDER BY g.lexeme COLLATE "C") - g.n AS before
                  FROM grouped g
                 WHERE g.n < 128 AND p_pages) p
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
    SELECT (SELECT count(*) FROM blocks) + (SELECT count(*) FROM pages) INTO v_written;
    RETURN v_written;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.write_lexical_lists(text,text,pyretrieve.lexical_list[],boolean) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.write_lexical_lists(text,text,pyretrieve.lexical_list[],boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.write_lexical_lists(text,text,pyretrieve.lexical_list[],boolean) TO pyretrieve_api;

-- Pending pages stay as pages: 0049's leg reads every page of a bucket alike, and its
-- compaction merges pages whose lexeme ranges overlap.
ALTER TABLE pyretrieve.lexical_pages DROP COLUMN pending;
COMMENT ON TABLE pyretrieve.lexical_pages IS
    'The lexical index''s small lists: per scope, lexeme bucket and classification, pages holding the postings of lexemes with fewer than 128 (the lexemes in bytewise order, where each one''s postings start, the entries packed as in lexical_blocks), with their lexeme, document-number and time ranges; written by compact_lexical_index only.';

UPDATE pyretrieve.installation SET schema_version = '0049';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
