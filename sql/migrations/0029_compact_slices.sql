-- pyretrieve migration 0029: compact_slices
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.
-- Compaction reads slices as arrays; a list with one source and no tombstone is written as it is.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

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
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0029';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
