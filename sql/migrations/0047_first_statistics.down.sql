-- pyretrieve migration 0047, downgrade: back to 0046
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP FUNCTION pyretrieve.take_first_statistics();
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.put_fragment(p_workspace text, p_project text, p_body text, p_classification pyretrieve.classification DEFAULT 'internal'::pyretrieve.classification, p_observed_at timestamp with time zone DEFAULT NULL::timestamp with time zone, p_expires_at timestamp with time zone DEFAULT NULL::timestamp with time zone, p_source_uri text DEFAULT NULL::text, p_source_revision text DEFAULT NULL::text, p_manifest_id text DEFAULT NULL::text, p_ts_config regconfig DEFAULT NULL::regconfig)
 RETURNS uuid
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_ceiling pyretrieve.classification := pyretrieve.bind_write_scope(p_workspace, p_project);
    v_id uuid;
    v_config regconfig;
    v_observed timestamptz := coalesce(p_observed_at, now());
BEGIN
    IF p_classification IS NULL OR p_classification > v_ceiling THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    IF p_body IS NULL OR length(p_body) NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'body must be 1 to 1000000 characters';
    END IF;
    IF v_observed = 'infinity' OR v_observed = '-infinity' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'observed_at must be finite';
    END IF;
    IF p_expires_at IS NOT NULL AND p_expires_at <= v_observed THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'expires_at must be after observed_at';
    END IF;
    IF length(p_source_uri) > 2048 OR length(p_source_revision) > 256 OR length(p_manifest_id) > 256 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'provenance field too long';
    END IF;
    SELECT coalesce(p_ts_config, p.ts_config) INTO v_config
      FROM pyretrieve.projects p
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    PERFORM pyretrieve.check_ts_config(v_config);

    BEGIN
        INSERT INTO pyretrieve.fragments AS f (
            workspace_id, project_id, body, classification, observed_at, expires_at,
            source_uri, source_revision, manifest_id, ts_config)
        VALUES (p_workspace, p_project, p_body, p_classification, v_observed, p_expires_at,
                p_source_uri, p_source_revision, p_manifest_id, v_config)
        ON CONFLICT (workspace_id, project_id, classification, content_digest) WHERE state = 'active'
        DO NOTHING
        RETURNING f.fragment_id INTO v_id;
    EXCEPTION WHEN program_limit_exceeded THEN
        RAISE EXCEPTION USING ERRCODE = 'PR014',
            MESSAGE = 'body has too many distinct words or positions for a text-search vector';
    END;

    IF v_id IS NULL THEN
        -- Idempotent: the same body at the same classification is already active here.
        SELECT f.fragment_id INTO STRICT v_id
          FROM pyretrieve.fragments f
         WHERE f.workspace_id = p_workspace AND f.project_id = p_project
           AND f.classification = p_classification AND f.state = 'active'
           AND f.content_digest = pyretrieve.content_digest(p_body);
    END IF;
    RETURN v_id;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.put_fragment(text,text,text,pyretrieve.classification,timestamp with time zone,timestamp with time zone,text,text,text,regconfig) IS 'Store a fragment in a workspace/project where the caller is a writer, at or below the writer''s ceiling; returns its id. Idempotent by content: the same body at the same classification returns the existing active fragment. The database computes content_digest (sha256 of the body), the tsvector and the lexical generation. observed_at defaults to now(). SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.put_fragment(text,text,text,pyretrieve.classification,timestamp with time zone,timestamp with time zone,text,text,text,regconfig) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.put_fragment(text,text,text,pyretrieve.classification,timestamp with time zone,timestamp with time zone,text,text,text,regconfig) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.retract_fragment(p_workspace text, p_project text, p_fragment_id uuid)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    UPDATE pyretrieve.fragments f
       SET state = 'retracted'
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project
       AND f.fragment_id = p_fragment_id AND f.state = 'active';
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.retract_fragment(text,text,uuid) IS 'Retract an active fragment: it disappears from every search at once. Raises PR020 alike for an absent fragment and one the writer may not see. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.retract_fragment(text,text,uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.retract_fragment(text,text,uuid) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.put_embedding(p_workspace text, p_project text, p_fragment_id uuid, p_model text, p_embedding public.vector, p_source_digest bytea)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_generation bigint;
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    PERFORM pyretrieve.check_embedding(p_model, p_embedding);
    IF p_source_digest IS NULL OR length(p_source_digest) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'source digest must be 32 bytes (sha256)';
    END IF;
    PERFORM 1 FROM pyretrieve.fragments f
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.fragment_id = p_fragment_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
    INSERT INTO pyretrieve.embeddings AS e (
        workspace_id, project_id, fragment_id, model_id, embedding, source_digest)
    VALUES (p_workspace, p_project, p_fragment_id, p_model, p_embedding, p_source_digest)
    ON CONFLICT (workspace_id, fragment_id, model_id)
    DO UPDATE SET embedding = EXCLUDED.embedding, source_digest = EXCLUDED.source_digest
    RETURNING e.vector_generation INTO v_generation;
    RETURN v_generation;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.put_embedding(text,text,uuid,text,public.vector,bytea) IS 'Store (or replace) the embedding of one fragment for one registered model, with the sha256 digest of the text it was computed from; returns its vector generation. An embedding whose source digest differs from the fragment''s content digest is stale. Raises PR011/PR012 for a bad vector or model and PR020 alike for an absent fragment and one the writer may not see. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.put_embedding(text,text,uuid,text,public.vector,bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.put_embedding(text,text,uuid,text,public.vector,bytea) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.ingest_batch(p_workspace text, p_project text, p_rows pyretrieve.ingest_row[], p_model text DEFAULT NULL::text)
 RETURNS TABLE(ord integer, fragment_id uuid, created boolean, embedded boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_ceiling pyretrieve.classification := pyretrieve.bind_write_scope(p_workspace, p_project);
    v_config regconfig;
    v_dimension integer;
    v_locked uuid[];
    v_replaced uuid[];
    v_kept uuid[];
    v_ords integer[];
    v_ids uuid[];
    v_created boolean[];
    v_found jsonb;
    v_embedded integer[] := '{}';
BEGIN
    IF p_rows IS NULL OR cardinality(p_rows) > 10000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 10000 rows';
    END IF;

    -- Every check runs before any write, over the whole batch: a batch is written whole or
    -- not at all.
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r GROUP BY r.ord HAVING r.ord IS NULL OR count(*) > 1) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'every row needs its own ord';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                WHERE r.keep IS NULL AND (r.classification IS NULL OR r.classification > v_ceiling)) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                WHERE (r.keep IS NULL AND (r.body IS NULL OR length(r.body) NOT BETWEEN 1 AND 1000000))
                   OR (r.keep IS NOT NULL AND r.body IS NOT NULL)) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'body must be 1 to 1000000 characters (and absent for a kept row)';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                WHERE r.observed_at IN ('infinity', '-infinity')) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'observed_at must be finite';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                WHERE r.expires_at <= coalesce(r.observed_at, now())) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'expires_at must be after observed_at';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                WHERE length(r.source_uri) > 2048 OR length(r.source_revision) > 256
                   OR length(r.manifest_id) > 256) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'provenance field too long';
    END IF;

    -- The fragments the batch supersedes and keeps: each named once, each active and visible
    -- in this write scope (an absent id and one the writer may not see fail alike, PR020).
    SELECT coalesce(array_agg(x.id), '{}') INTO v_replaced
      FROM unnest(p_rows) r CROSS JOIN LATERAL unnest(r.replaces) AS x(id);
    SELECT coalesce(array_agg(r.keep), '{}') INTO v_kept FROM unnest(p_rows) r WHERE r.keep IS NOT NULL;
    IF EXISTS (SELECT 1 FROM unnest(v_replaced || v_kept) AS x(id)
                GROUP BY x.id HAVING x.id IS NULL OR count(*) > 1) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'a fragment is superseded or kept twice';
    END IF;
    IF cardinality(v_replaced) + cardinality(v_kept) > 0 THEN
        -- In id order, so concurrent batches lock in one order and never deadlock.
        SELECT coalesce(array_agg(l.fragment_id), '{}') INTO v_locked
          FROM (SELECT f.fragment_id FROM pyretrieve.fragments f
                 WHERE f.workspace_id = p_workspace AND f.project_id = p_project
                   AND f.fragment_id = ANY (v_replaced || v_kept) AND f.state = 'active'
                 ORDER BY f.fragment_id
                   FOR UPDATE) l;
        IF cardinality(v_locked) <> (SELECT count(DISTINCT x.id) FROM unnest(v_replaced || v_kept) AS x(id)) THEN
            RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
        END IF;
    END IF;

    -- Embeddings: a registered model, the model's dimension, finite, non-zero, no subnormal
    -- values (as check_embedding, for the whole batch at once).
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r WHERE r.embedding IS NOT NULL) THEN
        SELECT m.dimension INTO v_dimension FROM pyretrieve.embedding_models m WHERE m.model_id = p_model;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                    WHERE r.embedding IS NOT NULL AND public.vector_dims(r.embedding) <> v_dimension) THEN
            RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding dimension does not match the model';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                    WHERE r.embedding IS NOT NULL
                      AND NOT (public.vector_norm(r.embedding) > 0
                               AND public.vector_norm(r.embedding) < 'Infinity'::double precision)) THEN
            RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding must be finite and non-zero';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(p_rows) r CROSS JOIN LATERAL unnest(r.embedding::real[]) AS x(v)
                    WHERE x.v <> 0 AND abs(x.v) < 1.17549435e-38::real) THEN
            RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding must not hold subnormal values';
        END IF;
    END IF;

    SELECT p.ts_config INTO v_config
      FROM pyretrieve.projects p
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    PERFORM pyretrieve.check_ts_config(v_config);

    -- Content the batch supersedes leaves the active set first (retracted for the moment), so
    -- that a record bringing that content back, under another source, gets a fragment of its
    -- own and not the one being superseded. A fragment with exactly the row's new content and
    -- classification stays active: superseding by the same content keeps it (as
    -- supersede_fragment does).
    IF cardinality(v_replaced) > 0 THEN
        -- The ids as an array too, so the fragments are probes of their key (joined as a set,
        -- they were planned as a hash of every fragment of the scope).
        UPDATE pyretrieve.fragments f
           SET state = 'retracted'
          FROM unnest(p_rows) r CROSS JOIN LATERAL unnest(r.replaces) AS x(id)
         WHERE f.workspace_id = p_workspace AND f.project_id = p_project
           AND f.fragment_id = ANY (v_replaced) AND f.fragment_id = x.id
           AND NOT (r.keep IS NULL AND f.classification = r.classification
                    AND f.content_digest = pyretrieve.content_digest(r.body));
    END IF;

    -- New fragments in content-key order (so concurrent batches take the unique index's
    -- keys in one order and never deadlock), the input order among equal keys (so that of two
    -- records with the same body and classification the first one's row is written and the
    -- second finds it). A superseding
    -- record takes the text-search configuration (and, when it names none, the manifest and
    -- source) of the first fragment it supersedes.
    BEGIN
        INSERT INTO pyretrieve.fragments AS f (
            workspace_id, project_id, body, classification, observed_at, expires_at,
            source_uri, source_revision, manifest_id, ts_config)
        SELECT p_workspace, p_project, r.body, r.classification, coalesce(r.observed_at, now()),
               r.expires_at, coalesce(r.source_uri, o.source_uri), r.source_revision,
               coalesce(r.manifest_id, o.manifest_id), coalesce(o.ts_config, v_config)
          FROM unnest(p_rows) r
          -- Only for a row that supersedes (a filter on the row alone, so a row that does
          -- not never reaches the table): on a table never analysed, the plan read the scope
          -- through its document-number key for every row, superseding or not.
          LEFT JOIN LATERAL (
                SELECT f.source_uri, f.manifest_id, f.ts_config FROM pyretrieve.fragments f
                 WHERE r.replaces[1] IS NOT NULL
                   AND f.workspace_id = p_workspace AND f.project_id = p_project
                   AND f.fragment_id = r.replaces[1]
                 LIMIT 1) o ON true
         WHERE r.keep IS NULL
         ORDER BY r.classification, pyretrieve.content_digest(r.body), r.ord
        ON CONFLICT (workspace_id, project_id, classification, content_digest) WHERE state = 'active'
        DO NOTHING;
    EXCEPTION WHEN program_limit_exceeded THEN
        RAISE EXCEPTION USING ERRCODE = 'PR014',
            MESSAGE = 'body has too many distinct words or positions for a text-search vector';
    END;

    -- Each row's fragment: the active one with its content and classification (written now,
    -- or found), or the one it keeps. The batch's contents are read in one statement, by their
    -- digests, and matched to the rows through a map, not a join: on a table never analysed,
    -- a probe per row went through the scope's document-number key and read the scope once
    -- per row (80,200 fragment rows for a first batch of 400; 17.7 s for 2,000, against 1.6).
    SELECT coalesce(jsonb_object_agg(f.classification::text || ':' || encode(f.content_digest, 'hex'),
                                     jsonb_build_array(f.fragment_id, f.ingested_at = now())), '{}')
      INTO v_found
      FROM pyretrieve.fragments f
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.state = 'active'
       AND f.content_digest = ANY (ARRAY(SELECT pyretrieve.content_digest(r.body)
                                           FROM unnest(p_rows) r WHERE r.keep IS NULL));
    SELECT array_agg(m.ord ORDER BY m.ord), array_agg(m.fragment_id ORDER BY m.ord),
           array_agg(m.created ORDER BY m.ord)
      INTO v_ords, v_ids, v_created
      FROM (SELECT r.ord, (v_found -> k.key ->> 0)::uuid AS fragment_id,
                   (v_found -> k.key ->> 1)::boolean AS created
              FROM unnest(p_rows) r
             CROSS JOIN LATERAL (SELECT r.classification::text || ':'
                                        || encode(pyretrieve.content_digest(r.body), 'hex') AS key) k
             WHERE r.keep IS NULL AND v_found ? k.key
            UNION ALL
            SELECT r.ord, r.keep, false FROM unnest(p_rows) r WHERE r.keep IS NOT NULL) m;
    IF coalesce(cardinality(v_ords), 0) <> cardinality(p_rows) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;

    IF cardinality(v_replaced) > 0 THEN
        UPDATE pyretrieve.fragments f
           SET state = 'superseded', superseded_by = s.successor
          FROM (SELECT x.id AS old, m.fragment_id AS successor
                  FROM unnest(p_rows) r
                 CROSS JOIN LATERAL unnest(r.replaces) AS x(id)
                  JOIN unnest(v_ords, v_ids) AS m(ord, fragment_id) ON m.ord = r.ord) s
         WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.fragment_id = s.old
           AND s.old <> s.successor;
    END IF;

    -- Embeddings where the fragment's is missing or stale, once per fragment (the first row).
    IF v_dimension IS NOT NULL THEN
        WITH t AS (
            SELECT DISTINCT ON (m.fragment_id) m.fragment_id, m.ord, r.embedding
              FROM unnest(p_rows) r
              JOIN unnest(v_ords, v_ids) AS m(ord, fragment_id) ON m.ord = r.ord
             WHERE r.embedding IS NOT NULL
             ORDER BY m.fragment_id, m.ord
        ), need AS (
            SELECT t.fragment_id, t.ord, t.embedding, f.content_digest
              FROM t
              JOIN pyretrieve.fragments f
                ON f.workspace_id = p_workspace AND f.fragment_id = t.fragment_id
              LEFT JOIN pyretrieve.embeddings e
                ON e.workspace_id = p_workspace AND e.fragment_id = t.fragment_id AND e.model_id = p_model
             WHERE e.fragment_id IS NULL OR e.source_digest <> f.content_digest
                OR e.vector_generation < f.lexical_generation
        ), put AS (
            INSERT INTO pyretrieve.embeddings AS e (
                workspace_id, project_id, fragment_id, model_id, embedding, source_digest)
            SELECT p_workspace, p_project, need.fragment_id, p_model, need.embedding, need.content_digest
              FROM need
             ORDER BY need.fragment_id
            ON CONFLICT (workspace_id, fragment_id, model_id)
            DO UPDATE SET embedding = EXCLUDED.embedding, source_digest = EXCLUDED.source_digest
            RETURNING e.fragment_id
        )
        SELECT coalesce(array_agg(need.ord), '{}') INTO v_embedded
          FROM need WHERE need.fragment_id IN (SELECT put.fragment_id FROM put);
    END IF;

    RETURN QUERY
    SELECT m.ord, m.fragment_id, m.created, m.ord = ANY (v_embedded)
      FROM unnest(v_ords, v_ids, v_created) AS m(ord, fragment_id, created)
     ORDER BY m.ord;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.ingest_batch(text,text,pyretrieve.ingest_row[],text) IS 'Write one ingest batch in one set-based step: new fragments (idempotent by content, as put_fragment), the active fragments each row supersedes (replaces: marked superseded by the row''s fragment, as supersede_fragment), kept fragments (keep), and the rows'' embeddings for p_model where missing or stale (the source digest is the fragment''s own content digest). Every check (grant, ceiling PR001, lengths and times PR010, each superseded or kept fragment active and visible PR020, model and vectors PR012/PR011) runs before any write, so the batch is written whole or not at all. Returns each row''s fragment, whether this transaction created it and whether an embedding was stored for it. The rows are a value: the function never reads a caller''s table. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.ingest_batch(text,text,pyretrieve.ingest_row[],text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.ingest_batch(text,text,pyretrieve.ingest_row[],text) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
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

UPDATE pyretrieve.installation SET schema_version = '0046';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
