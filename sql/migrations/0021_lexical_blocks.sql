-- pyretrieve migration 0021: lexical_blocks
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP FUNCTION pyretrieve.postings_insert() CASCADE;
DROP FUNCTION pyretrieve.postings_update() CASCADE;
DROP POLICY postings_delete ON pyretrieve.postings;
DROP POLICY postings_insert ON pyretrieve.postings;
DROP POLICY postings_read ON pyretrieve.postings;
-- The lexical index moves from a row per (fragment, lexeme) to blocks of up to 128 postings per
-- scope, lexeme and classification (lexical_blocks), with tombstones for postings whose
-- fragment left the active set while another writer held their block. Every fragment gets its
-- document number: the generation it carries now (unique in its scope, and what a new fragment
-- is stamped with). The installing superuser builds every scope's blocks from its active
-- fragments past row-level security, in document-number order, as the triggers would; the
-- postings table goes.
SET LOCAL ROLE pyretrieve_owner;
DO $check$
BEGIN
    IF EXISTS (SELECT 1 FROM pyretrieve.fragments WHERE lexical_generation > 2147483647) THEN
        RAISE EXCEPTION 'a scope holds generations past 2147483647, more than document numbers can hold';
    END IF;
END
$check$;
ALTER TABLE pyretrieve.fragments ADD COLUMN docno integer;
RESET ROLE;
ALTER TABLE pyretrieve.fragments DISABLE TRIGGER USER;
UPDATE pyretrieve.fragments SET docno = lexical_generation::integer;
ALTER TABLE pyretrieve.fragments ENABLE TRIGGER USER;
SET LOCAL ROLE pyretrieve_owner;
ALTER TABLE pyretrieve.fragments ALTER COLUMN docno SET NOT NULL;
CREATE UNIQUE INDEX fragments_docno_key
    ON pyretrieve.fragments (workspace_id, project_id, docno)
    INCLUDE (state, classification, observed_at, expires_at);

CREATE TABLE pyretrieve.lexical_blocks (
    workspace_id    pyretrieve.identifier NOT NULL,
    project_id      pyretrieve.identifier NOT NULL,
    lexeme          text NOT NULL,
    classification  pyretrieve.classification NOT NULL,
    first_docno     integer NOT NULL,
    last_docno      integer NOT NULL,
    postings        integer NOT NULL CHECK (postings BETWEEN 1 AND 128),
    max_tf          integer NOT NULL,
    min_length      integer NOT NULL,
    min_observed_at timestamptz NOT NULL,
    max_observed_at timestamptz NOT NULL,
    min_expires_at  timestamptz,
    max_expires_at  timestamptz,
    entries         bigint[] NOT NULL,
    PRIMARY KEY (workspace_id, project_id, lexeme, classification, first_docno),
    CHECK (cardinality(entries) = postings)
);
CREATE INDEX lexical_blocks_partial_idx
    ON pyretrieve.lexical_blocks (workspace_id, project_id, lexeme, classification)
    INCLUDE (postings)
    WHERE postings < 128;
COMMENT ON TABLE pyretrieve.lexical_blocks IS
    'The lexical index: per scope, lexeme and classification, the postings of active fragments in blocks of up to 128 (docno << 32 | (tf - 1) << 24 | document length, in document-number order), with the count, largest tf, smallest length and time range each block''s read policy and the lexical leg use; maintained by triggers only.';
CREATE TABLE pyretrieve.lexical_tombstones (
    workspace_id    pyretrieve.identifier NOT NULL,
    project_id      pyretrieve.identifier NOT NULL,
    lexeme          text NOT NULL,
    classification  pyretrieve.classification NOT NULL,
    docno           integer NOT NULL,
    PRIMARY KEY (workspace_id, project_id, lexeme, classification, docno)
);
COMMENT ON TABLE pyretrieve.lexical_tombstones IS
    'Postings still inside a block whose fragment is no longer active, maintained by triggers: the lexical leg checks a block with one in its range fragment by fragment.';
REVOKE ALL ON pyretrieve.lexical_blocks, pyretrieve.lexical_tombstones FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON pyretrieve.lexical_blocks, pyretrieve.lexical_tombstones TO pyretrieve_api;
GRANT UPDATE (postings) ON pyretrieve.lexical_blocks TO pyretrieve_api;
ALTER TABLE pyretrieve.lexical_blocks ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.lexical_tombstones ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
RESET ROLE;
INSERT INTO pyretrieve.lexical_blocks (
    workspace_id, project_id, lexeme, classification, first_docno, last_docno, postings, max_tf,
    min_length, min_observed_at, max_observed_at, min_expires_at, max_expires_at, entries)
SELECT x.workspace_id, x.project_id, x.lexeme, x.classification, min(x.docno), max(x.docno),
       count(*)::integer, max(x.tf), min(x.doc_length), min(x.observed_at), max(x.observed_at),
       min(x.expires_at), CASE WHEN bool_and(x.expires_at IS NOT NULL) THEN max(x.expires_at) END,
       array_agg((x.docno::bigint << 32) | ((x.tf - 1)::bigint << 24) | x.doc_length ORDER BY x.docno)
  FROM (SELECT f.workspace_id, f.project_id, u.lexeme, f.classification, f.docno,
               least(greatest(cardinality(u.positions), 1), 256) AS tf, f.doc_length,
               f.observed_at, f.expires_at,
               (row_number() OVER (PARTITION BY f.workspace_id, f.project_id, u.lexeme, f.classification
                                   ORDER BY f.docno) - 1) / 128 AS chunk
          FROM pyretrieve.fragments f CROSS JOIN LATERAL unnest(f.tsv) AS u
         WHERE f.state = 'active') x
 GROUP BY x.workspace_id, x.project_id, x.lexeme, x.classification, x.chunk;
SET LOCAL ROLE pyretrieve_owner;
DROP TABLE pyretrieve.postings;

SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.stamp_lexical_generation()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
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
$function$;
COMMENT ON FUNCTION pyretrieve.stamp_lexical_generation() IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.stamp_lexical_generation() FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.write_lexical_postings(p_workspace text, p_project text, p_lexemes text[], p_classes pyretrieve.classification[], p_entries bigint[], p_observed timestamp with time zone[], p_expires timestamp with time zone[])
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_blocks tid[];
BEGIN
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
CREATE OR REPLACE FUNCTION pyretrieve.lexical_index_insert()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.lexical_index_insert() IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.lexical_index_insert() FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.lexical_index_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.lexical_index_update() IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.lexical_index_update() FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.lexical_candidates(p_decision uuid, p_query text, p_limit integer, p_ranking text DEFAULT 'bm25'::text)
 RETURNS TABLE(rank integer, fragment_id uuid, content_digest bytea, score double precision, lexical_generation bigint, terms jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET client_min_messages TO 'warning'
 SET extra_float_digits TO '1'
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
        -- ceiling, a time range that meets the window: one key range per term), each marked
        -- whole when the decision admits every posting in it: the window holds its whole time
        -- range and none of the term's tombstones lies in its range.
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
                  AND (b.max_expires_at IS NULL OR b.max_expires_at > d.evaluated_at)) b
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
CREATE VIEW pyretrieve.lexical_postings WITH (security_invoker=true) AS
 SELECT b.workspace_id,
    b.project_id,
    b.lexeme,
    b.classification,
    ((u.entry >> 32))::integer AS docno,
    ((((u.entry >> 24) & (255)::bigint))::integer + 1) AS tf,
    ((u.entry & (16777215)::bigint))::integer AS doc_length
   FROM (pyretrieve.lexical_blocks b
     CROSS JOIN LATERAL unnest(b.entries) u(entry))
  WHERE (NOT (EXISTS ( SELECT 1
           FROM pyretrieve.lexical_tombstones t
          WHERE (((t.workspace_id)::text = (b.workspace_id)::text) AND ((t.project_id)::text = (b.project_id)::text) AND (t.lexeme = b.lexeme) AND (t.classification = b.classification) AND (t.docno = ((u.entry >> 32))::integer)))));
COMMENT ON VIEW pyretrieve.lexical_postings IS 'The lexical index one posting a row (scope, lexeme, classification, docno, tf, doc_length), tombstones left out: for tests and audits, granted to no principal.';
CREATE POLICY lexical_blocks_delete ON pyretrieve.lexical_blocks FOR DELETE TO pyretrieve_api USING ((((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))));
CREATE POLICY lexical_blocks_insert ON pyretrieve.lexical_blocks FOR INSERT TO pyretrieve_api WITH CHECK ((((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))));
CREATE POLICY lexical_blocks_lock ON pyretrieve.lexical_blocks FOR UPDATE TO pyretrieve_api USING ((((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))) WITH CHECK (false);
CREATE POLICY lexical_blocks_read ON pyretrieve.lexical_blocks FOR SELECT TO pyretrieve_api USING ((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
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
CREATE POLICY lexical_tombstones_delete ON pyretrieve.lexical_tombstones FOR DELETE TO pyretrieve_api USING ((((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))));
CREATE POLICY lexical_tombstones_insert ON pyretrieve.lexical_tombstones FOR INSERT TO pyretrieve_api WITH CHECK ((((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))));
CREATE POLICY lexical_tombstones_read ON pyretrieve.lexical_tombstones FOR SELECT TO pyretrieve_api USING ((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((project_id)::text = (COALESCE(( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((classification <= ( SELECT d.ceiling
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) OR ((classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")
  WHERE (NOT (EXISTS ( SELECT 1
           FROM pyretrieve.bound_decision() bound_decision(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))))) IS TRUE))));
CREATE TRIGGER fragments_lexical_insert AFTER INSERT ON pyretrieve.fragments REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.lexical_index_insert();
CREATE TRIGGER fragments_lexical_update AFTER UPDATE ON pyretrieve.fragments REFERENCING OLD TABLE AS before_rows NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.lexical_index_update();

UPDATE pyretrieve.installation SET schema_version = '0021';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
