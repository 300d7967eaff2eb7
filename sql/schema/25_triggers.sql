-- ---------------------------------------------------------------------------------------------
-- Generations. Every fragment and embedding row is stamped by a trigger from its scope's own
-- sequence (callers cannot choose the number, and no number moves with another scope's
-- writes); the generation log follows with one row per statement and scope, not per row.
-- ---------------------------------------------------------------------------------------------

-- The generation sequence of a scope (created with the project).
CREATE FUNCTION pyretrieve.scope_sequence(p_workspace text, p_project text)
RETURNS regclass
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT p.generation_seq FROM pyretrieve.projects p
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
END;

-- Every write of a fragment row: its text analysed once (the tsvector under its configuration,
-- and the document length from it), kept as it was when neither the body nor the configuration
-- changes, whatever the statement set; and its generation stamped. A fragment's document number
-- in the lexical index is the generation it is first stamped with (unique in its scope), and
-- never changes. Document numbers are int4, as the index keeps them: a scope runs out after
-- 2,147,483,647 generations.
CREATE FUNCTION pyretrieve.stamp_fragment()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.body = OLD.body AND NEW.ts_config = OLD.ts_config THEN
        NEW.tsv := OLD.tsv;
        NEW.doc_length := OLD.doc_length;
    ELSE
        NEW.tsv := to_tsvector(NEW.ts_config, NEW.body);
        NEW.doc_length := pyretrieve.tsvector_length(NEW.tsv);
    END IF;
    NEW.lexical_generation := nextval(pyretrieve.scope_sequence(NEW.workspace_id, NEW.project_id));
    IF TG_OP = 'INSERT' THEN
        IF NEW.lexical_generation > 2147483647 THEN
            RAISE EXCEPTION USING ERRCODE = 'PR014', MESSAGE = 'the scope has no document numbers left';
        END IF;
        NEW.docno := NEW.lexical_generation;
    ELSE
        NEW.docno := OLD.docno;
    END IF;
    RETURN NEW;
END;
$$;

CREATE FUNCTION pyretrieve.stamp_vector_generation()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.vector_generation := nextval(pyretrieve.scope_sequence(NEW.workspace_id, NEW.project_id));
    NEW.embedded_at := now();
    RETURN NEW;
END;
$$;

CREATE FUNCTION pyretrieve.bump_scope_lexical()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO pyretrieve.generation_log (workspace_id, project_id, kind, generation)
    SELECT r.workspace_id, r.project_id, 'lexical', max(r.lexical_generation)
      FROM changed r
     GROUP BY r.workspace_id, r.project_id
    ON CONFLICT DO NOTHING;
    -- A configuration seen before conflicts and is skipped without taking a lock.
    INSERT INTO pyretrieve.scope_configs (workspace_id, project_id, ts_config)
    SELECT DISTINCT r.workspace_id, r.project_id, r.ts_config
      FROM changed r
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;

CREATE FUNCTION pyretrieve.bump_scope_vector()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- A refresh of the mirrored fragment columns keeps the generation, which is then
    -- already logged.
    INSERT INTO pyretrieve.generation_log (workspace_id, project_id, kind, generation)
    SELECT r.workspace_id, r.project_id, 'vector', max(r.vector_generation)
      FROM changed r
     GROUP BY r.workspace_id, r.project_id
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;

-- The statistics log's rows for one statement, from its fragments entering the active set (+1
-- and their length) and leaving it (-1 and minus their length): summed per scope and per
-- (classification, observed_at, expires_at), groups that cancel out left out. Each scope's rows
-- carry the highest generation the statement stamped there, unique to the statement.
CREATE FUNCTION pyretrieve.log_statistics(p_delta pyretrieve.statistics_delta[])
RETURNS void
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO pyretrieve.statistics_log (workspace_id, project_id, generation, position,
                                           classification, observed_at, expires_at,
                                           fragments, length_sum)
    SELECT g.workspace_id, g.project_id,
           max(g.generation) OVER (PARTITION BY g.workspace_id, g.project_id),
           (row_number() OVER (PARTITION BY g.workspace_id, g.project_id
                               ORDER BY g.classification, g.observed_at, g.expires_at))::integer,
           g.classification, g.observed_at, g.expires_at, g.fragments, g.length_sum
      FROM (SELECT x.workspace_id, x.project_id, x.classification, x.observed_at, x.expires_at,
                   max(x.generation) AS generation,
                   sum(x.fragments)::bigint AS fragments, sum(x.length_sum)::bigint AS length_sum
              FROM unnest(p_delta) x
             GROUP BY x.workspace_id, x.project_id, x.classification, x.observed_at, x.expires_at
            HAVING sum(x.fragments) <> 0 OR sum(x.length_sum) <> 0) g;
END;
$$;

-- Writes postings into a scope's lexical index, and rewrites what the write touches. For each
-- (lexeme, classification) of p_lexemes/p_classes (the lexemes of the new postings, or of new
-- tombstones), the blocks not yet full and the blocks that may hold a tombstone are taken as far
-- as no other transaction holds them (FOR UPDATE SKIP LOCKED: a writer never waits on another
-- here, and never takes a block another is rewriting; a lexeme's first blocks take nothing). A
-- lexeme's taken blocks are rewritten with its new postings when that drops a tombstoned
-- posting, or when four blocks not full have gathered (the new postings count as one): each
-- posting is rewritten a few times at most, not in every batch that adds to its lexeme (merging
-- as soon as two had gathered cost a fifth more server time per batch of 1,000 fragments in a
-- growing scope, for a quarter fewer rows). Then every lexeme's postings (new, and those of the
-- blocks rewritten, less the tombstoned ones, whose tombstones go) are written in
-- document-number order in blocks of 128, each with its count, largest tf, smallest length and
-- document-number range, and the time range of its sources (a superset's range still bounds its
-- fragments). The postings come as flat arrays, one element each.
-- A bulk write (4,096 new postings or more in the statement) takes only the lexemes with 128
-- new postings or more through that rule; its other lists (a batch's rare lexemes, and the
-- tails under 128 of the others) go into pending pages, one per bucket and classification,
-- which compaction merges: a row per rare lexeme per batch, written and then deleted, was most
-- of a load's writes to the index and most of its size as loaded.
CREATE FUNCTION pyretrieve.write_lexical_postings(
    p_workspace text, p_project text,
    p_lexemes text[], p_classes pyretrieve.classification[],
    p_entries bigint[], p_observed timestamptz[], p_expires timestamptz[])
RETURNS void
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_first boolean;
    v_blocks tid[];
    v_lists pyretrieve.lexical_list[];
    v_bulk boolean := (SELECT count(e.e) FROM unnest(p_entries) AS e(e)) >= 4096;
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
            HAVING NOT v_bulk OR count(t.entry) >= 128
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
    PERFORM pyretrieve.write_lexical_lists(p_workspace, p_project, v_lists,
                                           p_pages => v_first OR v_bulk,
                                           p_pending => v_bulk AND NOT v_first);
END;
$$;

-- A lexeme's bucket among a scope's pages of small lists (lexical_pages): the first byte of its
-- SHA-256, so the same on every server and every version.
CREATE FUNCTION pyretrieve.lexeme_bucket(p_lexeme text)
RETURNS smallint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT get_byte(sha256(convert_to(p_lexeme, 'UTF8')), 0)::smallint
$$;

-- Writes lists of postings into a scope's lexical index, each (lexeme, classification) once,
-- its entries in document-number order: a list of 128 or more (every list, with p_pages false:
-- a write's lists waiting for compaction) in blocks of 128 (each with its
-- count, largest tf, smallest length, document-number range and the time range of its sources),
-- the others packed into pages of about 1,024 postings per bucket and classification (per
-- group of 16 buckets where the group's lists here hold fewer than 1,024), in
-- bytewise lexeme order (a page closes once 1,024 postings precede the next lexeme), each with
-- where its lexemes start and the time range of their sources. Compaction writes what it takes
-- back through here, and so does every write of postings (into pages only when the scope's
-- index is empty, and a bulk write's pages, p_pending, which compaction merges later). Returns
-- the rows written.
CREATE FUNCTION pyretrieve.write_lexical_lists(
    p_workspace text, p_project text, p_lists pyretrieve.lexical_list[],
    p_pages boolean DEFAULT true, p_pending boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- A scope's pages (of the classifications up to p_ceiling) whose lexeme range meets that of
-- another page that may hold lexemes of the same bucket and classification (of its bucket, or a
-- group's page and a page of one of its buckets): written by two first writes at once, or two
-- compactions at once. The leg reads them all, so they are correct; compaction counts their
-- postings as waiting and rewrites their groups, so they do not stay. Pending pages (a bulk
-- write's) are counted on their own, and are left out here on both sides: a bulk write's page
-- overlaps its bucket's pages as a rule, and counting those would count every page.
CREATE FUNCTION pyretrieve.overlapping_pages(
    p_workspace text, p_project text, p_ceiling pyretrieve.classification)
RETURNS TABLE (classification pyretrieve.classification, bucket smallint, postings integer)
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT p.classification, p.bucket, p.postings
      FROM pyretrieve.lexical_pages p
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project
       AND p.classification <= p_ceiling
       AND NOT p.pending
       AND EXISTS (SELECT 1 FROM pyretrieve.lexical_pages o
                    WHERE o.workspace_id = p.workspace_id AND o.project_id = p.project_id
                      -- The same group of 16 (an expression a hash join keys on: a function
                      -- call here, compared for every pair of the scope's pages, took 420 ms
                      -- at 241 pages), and a key of the other's: the same, or one a group's.
                      AND CASE WHEN o.bucket < 256 THEN o.bucket >> 4 ELSE o.bucket - 256 END
                          = CASE WHEN p.bucket < 256 THEN p.bucket >> 4 ELSE p.bucket - 256 END
                      AND (o.bucket = p.bucket OR o.bucket >= 256 OR p.bucket >= 256)
                      AND o.classification = p.classification
                      AND o.page <> p.page AND NOT o.pending
                      AND o.first_lexeme COLLATE "C" <= p.last_lexeme
                      AND p.first_lexeme COLLATE "C" <= o.last_lexeme);
END;

-- Moves a scope's small lists into pages (lexical_pages), for the classifications up to
-- p_ceiling. A small lexeme is one whose blocks in a classification are all not full; the
-- groups of 16 buckets rewritten are those holding one, or a tombstone, or pages to merge. In
-- each, the pages no other transaction holds are taken with the small lexemes' blocks (FOR
-- UPDATE SKIP LOCKED: a group with a page held elsewhere is left for a later run, a block held
-- elsewhere stays a block), and their postings, less the tombstoned ones (whose tombstones go),
-- are written again: a lexeme with 128 or more in blocks of 128, the others packed into pages of
-- about 1,024 postings in bytewise lexeme order, one page of the group's own where they are
-- fewer than 1,024. A page's time range spans its lexemes' sources' ranges (a superset's
-- range still bounds its fragments). Returns the rows read and written and the postings moved.
CREATE FUNCTION pyretrieve.compact_lexical_postings(
    p_workspace text, p_project text, p_ceiling pyretrieve.classification)
RETURNS TABLE (rows_read integer, rows_written integer, postings integer)
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- New active fragments join the lexical index (write_lexical_postings), one scope at a time:
-- each posting packed as docno << 32 | (tf - 1) << 24 | length, where tf is the number of
-- positions (at least 1, at most the 256 a tsvector keeps) and a length fits 24 bits (a body
-- holds at most 1,000,000 characters); a document number is a positive int4, so the packed
-- entries sort by it. The statistics log follows.
CREATE FUNCTION pyretrieve.lexical_index_insert()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
BEGIN
    FOR s IN
        SELECT r.workspace_id, r.project_id, array_agg(u.lexeme) AS lexemes,
               array_agg(r.classification) AS classes,
               array_agg((r.docno::bigint << 32)
                         | ((least(greatest(cardinality(u.positions), 1), 256) - 1)::bigint << 24)
                         | r.doc_length) AS entries,
               array_agg(r.observed_at) AS observed, array_agg(r.expires_at) AS expires
          FROM changed r CROSS JOIN LATERAL unnest(r.tsv) AS u
         WHERE r.state = 'active'
         GROUP BY r.workspace_id, r.project_id
    LOOP
        PERFORM pyretrieve.write_lexical_postings(s.workspace_id, s.project_id, s.lexemes,
                                                  s.classes, s.entries, s.observed, s.expires);
    END LOOP;
    PERFORM pyretrieve.log_statistics(ARRAY(
        SELECT ROW(r.workspace_id, r.project_id, r.classification, r.observed_at, r.expires_at,
                   1, r.doc_length, r.lexical_generation)::pyretrieve.statistics_delta
          FROM changed r
         WHERE r.state = 'active'));
    RETURN NULL;
END;
$$;

-- A fragment leaves the lexical index when it stops being active (superseded, retracted): each
-- of its postings becomes a tombstone, and write_lexical_postings then drops them from the
-- blocks no other transaction holds (the rest when a later write takes those). Its lexemes come from
-- its own tsvector.
CREATE FUNCTION pyretrieve.lexical_index_update()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
BEGIN
    FOR s IN
        WITH added AS (
            INSERT INTO pyretrieve.lexical_tombstones (workspace_id, project_id, lexeme, classification, docno)
            SELECT o.workspace_id, o.project_id, u.lexeme, o.classification, o.docno
              FROM before_rows o
              JOIN changed n ON n.workspace_id = o.workspace_id AND n.fragment_id = o.fragment_id
             CROSS JOIN LATERAL unnest(o.tsv) AS u
             WHERE o.state = 'active' AND n.state <> 'active'
            RETURNING workspace_id, project_id, lexeme, classification
        )
        SELECT a.workspace_id, a.project_id, array_agg(a.lexeme) AS lexemes,
               array_agg(a.classification) AS classes
          FROM added a
         GROUP BY a.workspace_id, a.project_id
    LOOP
        PERFORM pyretrieve.write_lexical_postings(s.workspace_id, s.project_id, s.lexemes,
                                                  s.classes, NULL, NULL, NULL);
    END LOOP;
    PERFORM pyretrieve.log_statistics(ARRAY(
        SELECT ROW(x.workspace_id, x.project_id, x.classification, x.observed_at, x.expires_at,
                   x.fragments, x.length_sum, g.generation)::pyretrieve.statistics_delta
          FROM (SELECT n.workspace_id, n.project_id, n.classification, n.observed_at,
                       n.expires_at, 1 AS fragments, n.doc_length AS length_sum
                  FROM changed n WHERE n.state = 'active'
                UNION ALL
                SELECT o.workspace_id, o.project_id, o.classification, o.observed_at,
                       o.expires_at, -1, -o.doc_length
                  FROM before_rows o WHERE o.state = 'active') x
          JOIN (SELECT n.workspace_id, n.project_id, max(n.lexical_generation) AS generation
                  FROM changed n
                 GROUP BY n.workspace_id, n.project_id) g
            ON g.workspace_id = x.workspace_id AND g.project_id = x.project_id));
    -- Embeddings re-read their fragment's state (the mirror trigger sets the value).
    UPDATE pyretrieve.embeddings e
       SET fragment_state = n.state
      FROM before_rows o
      JOIN changed n ON n.workspace_id = o.workspace_id AND n.fragment_id = o.fragment_id
     WHERE o.state IS DISTINCT FROM n.state
       AND e.workspace_id = n.workspace_id AND e.fragment_id = n.fragment_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER fragments_lexical_insert AFTER INSERT ON pyretrieve.fragments
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.lexical_index_insert();
CREATE TRIGGER fragments_lexical_update AFTER UPDATE ON pyretrieve.fragments
    REFERENCING OLD TABLE AS before_rows NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.lexical_index_update();

CREATE TRIGGER fragments_stamp BEFORE INSERT OR UPDATE ON pyretrieve.fragments
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.stamp_fragment();
CREATE TRIGGER fragments_bump_insert AFTER INSERT ON pyretrieve.fragments
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_lexical();
CREATE TRIGGER fragments_bump_update AFTER UPDATE ON pyretrieve.fragments
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_lexical();
-- An embedding takes its fragment's classification, state and times from the fragment row on
-- every write (the caller cannot set them), and the fragments' update trigger refreshes them
-- when a fragment changes state.
CREATE FUNCTION pyretrieve.mirror_fragment()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f record;
BEGIN
    SELECT fr.project_id, fr.classification, fr.state, fr.observed_at, fr.expires_at INTO f
      FROM pyretrieve.fragments fr
     WHERE fr.workspace_id = NEW.workspace_id AND fr.fragment_id = NEW.fragment_id;
    IF NOT FOUND OR f.project_id <> NEW.project_id THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
    NEW.classification := f.classification;
    NEW.fragment_state := f.state;
    NEW.observed_at := f.observed_at;
    NEW.expires_at := f.expires_at;
    NEW.scope_serial := (SELECT p.scope_serial FROM pyretrieve.projects p
                          WHERE p.workspace_id = NEW.workspace_id AND p.project_id = NEW.project_id);
    RETURN NEW;
END;
$$;
CREATE TRIGGER embeddings_mirror BEFORE INSERT OR UPDATE ON pyretrieve.embeddings
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.mirror_fragment();
-- A state refresh is not a new vector: the generation moves only when the vector or its
-- source digest is written.
CREATE TRIGGER embeddings_stamp BEFORE INSERT OR UPDATE OF embedding, source_digest ON pyretrieve.embeddings
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.stamp_vector_generation();
CREATE TRIGGER embeddings_bump_insert AFTER INSERT ON pyretrieve.embeddings
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_vector();
CREATE TRIGGER embeddings_bump_update AFTER UPDATE ON pyretrieve.embeddings
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_vector();

-- The count log's rows for one statement's new embeddings: one per scope and model, carrying
-- the highest generation the statement stamped in the scope (unique to the statement).
CREATE FUNCTION pyretrieve.count_embeddings()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO pyretrieve.embedding_count_log (workspace_id, project_id, generation, position,
                                                model_id, embeddings)
    SELECT g.workspace_id, g.project_id,
           max(g.generation) OVER (PARTITION BY g.workspace_id, g.project_id),
           (row_number() OVER (PARTITION BY g.workspace_id, g.project_id
                               ORDER BY g.model_id COLLATE "C"))::integer,
           g.model_id, g.embeddings
      FROM (SELECT r.workspace_id, r.project_id, r.model_id,
                   max(r.vector_generation) AS generation, count(*) AS embeddings
              FROM changed r
             GROUP BY r.workspace_id, r.project_id, r.model_id) g;
    RETURN NULL;
END;
$$;
CREATE TRIGGER embeddings_count AFTER INSERT ON pyretrieve.embeddings
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.count_embeddings();

