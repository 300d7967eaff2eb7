-- pyretrieve migration 0028, downgrade: back to 0027
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP FUNCTION pyretrieve.write_lexical_lists(text,text,pyretrieve.lexical_list[],boolean);
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.write_lexical_postings(p_workspace text, p_project text, p_lexemes text[], p_classes pyretrieve.classification[], p_entries bigint[], p_observed timestamp with time zone[], p_expires timestamp with time zone[])
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_blocks tid[];
BEGIN
    -- Into an index empty of what the writer may see (a new scope's first write), the lists go
    -- as compaction would leave them: blocks for a lexeme with 128 postings or more, pages for
    -- the others. Nothing is there to merge, and compaction need not move them later. (Two
    -- first writes at once may both take this way: their pages then share buckets, which the
    -- leg reads and compaction merges.)
    IF p_entries IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_blocks b
                        WHERE b.workspace_id = p_workspace AND b.project_id = p_project)
       AND NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_pages p
                        WHERE p.workspace_id = p_workspace AND p.project_id = p_project)
       AND NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_tombstones x
                        WHERE x.workspace_id = p_workspace AND x.project_id = p_project) THEN
        PERFORM pyretrieve.write_lexical_lists(p_workspace, p_project, ARRAY(
            SELECT ROW(g.classification, g.lexeme, g.min_observed_at, g.max_observed_at,
                       g.min_expires_at, g.max_expires_at, o.entries)::pyretrieve.lexical_list
              FROM (SELECT n.lexeme, n.classification, min(n.observed_at) AS min_observed_at,
                           max(n.observed_at) AS max_observed_at,
                           min(n.expires_at) AS min_expires_at,
                           CASE WHEN bool_and(n.expires_at IS NOT NULL) THEN max(n.expires_at) END
                               AS max_expires_at,
                           array_agg(n.entry) AS entries
                      FROM unnest(p_lexemes, p_classes, p_entries, p_observed, p_expires)
                               AS n(lexeme, classification, entry, observed_at, expires_at)
                     GROUP BY n.lexeme, n.classification) g
             CROSS JOIN LATERAL (SELECT array_agg(v.e ORDER BY v.e) AS entries
                                   FROM unnest(g.entries) AS v(e)) o));
        RETURN;
    END IF;

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
        DELETE FROM pyretrieve.lexical_tombstones x
         USING old o
         WHERE x.workspace_id = p_workspace AND x.project_id = p_project
           AND x.lexeme = o.lexeme AND x.classification = o.classification
           AND x.docno = (o.entry >> 32)::integer
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
    INSERT INTO pyretrieve.lexical_blocks (
        workspace_id, project_id, lexeme, classification, first_docno, last_docno, postings,
        max_tf, min_length, min_observed_at, max_observed_at, min_expires_at, max_expires_at,
        entries)
    SELECT p_workspace, p_project, g.lexeme, g.classification,
           (c.e[1] >> 32)::integer, (c.e[cardinality(c.e)] >> 32)::integer, cardinality(c.e),
           s.max_tf, s.min_length, g.min_observed_at, g.max_observed_at, g.min_expires_at,
           g.max_expires_at, c.e
      FROM grouped g
     CROSS JOIN LATERAL generate_series(0, (cardinality(g.entries) - 1) / 128) AS k(k)
     CROSS JOIN LATERAL (SELECT g.entries[k.k * 128 + 1 : k.k * 128 + 128] AS e) c
     CROSS JOIN LATERAL (SELECT max(((x.v >> 24) & 255)::integer + 1) AS max_tf,
                                min((x.v & 16777215)::integer) AS min_length
                           FROM unnest(c.e) AS x(v)) s;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.write_lexical_postings(text,text,text[],pyretrieve.classification[],bigint[],timestamp with time zone[],timestamp with time zone[]) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.write_lexical_postings(text,text,text[],pyretrieve.classification[],bigint[],timestamp with time zone[],timestamp with time zone[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.write_lexical_postings(text,text,text[],pyretrieve.classification[],bigint[],timestamp with time zone[],timestamp with time zone[]) TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.write_lexical_lists(p_workspace text, p_project text, p_lists pyretrieve.lexical_list[])
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
         WHERE g.n >= 128
        RETURNING 1
    ), placed AS (
        -- Each small lexeme's page in its bucket and where its postings start there.
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
    SELECT (SELECT count(*) FROM blocks) + (SELECT count(*) FROM pages) INTO v_written;
    RETURN v_written;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.write_lexical_lists(text,text,pyretrieve.lexical_list[]) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.write_lexical_lists(text,text,pyretrieve.lexical_list[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.write_lexical_lists(text,text,pyretrieve.lexical_list[]) TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0027';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
