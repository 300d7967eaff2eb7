-- ---------------------------------------------------------------------------------------------
-- Writers. SECURITY DEFINER, written reason: principals hold no privilege on any table, so
-- these functions are their only door. Each runs as pyretrieve_api, binds the transaction's one
-- write scope from the caller's own writer grants, and writes only inside it, up to the
-- writer's ceiling; row-level security checks every row again. Postings, generations and the
-- embeddings' mirror columns are written by triggers only.
-- ---------------------------------------------------------------------------------------------
-- One record of a bulk batch (pyretrieve.ingest_batch): what a writer copies into its own
-- staging table and passes as one array value. No column names a derived value (digest,
-- tsvector, postings, generation, mirror columns): the database computes those.
CREATE TYPE pyretrieve.ingest_row AS (
    ord              integer,
    source_uri       text,
    body             text,
    classification   pyretrieve.classification,
    observed_at      timestamptz,
    expires_at       timestamptz,
    source_revision  text,
    manifest_id      text,
    replaces         uuid[],
    keep             uuid,
    embedding        public.vector
);
COMMENT ON TYPE pyretrieve.ingest_row IS
    'A record of a bulk ingest batch: ord (its position), the fragment to write (source_uri, body, classification, times, provenance) or keep (an active fragment that stays), the active fragments of its source it supersedes (replaces), and optionally its embedding for the batch''s model.';

SET LOCAL ROLE pyretrieve_api;

-- Bind this transaction's write scope and return the writer's ceiling there; access denied
-- (PR001) alike for an absent scope, a scope without a grant and a caller who is not a writer.
CREATE FUNCTION pyretrieve.bind_write_scope(p_workspace text, p_project text)
RETURNS pyretrieve.classification
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_ceiling pyretrieve.classification;
    w pyretrieve.write_bindings;
BEGIN
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM pyretrieve.check_caller();
    PERFORM pyretrieve.apply_request_timeouts();
    SELECT * INTO w FROM pyretrieve.bound_write();
    IF FOUND AND (w.workspace_id, w.project_id, w.principal) = (p_workspace, p_project, pyretrieve.caller()) THEN
        RETURN w.ceiling;
    END IF;
    IF EXISTS (SELECT 1 FROM pyretrieve.bound_decision()) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR003', MESSAGE = 'transaction already bound to another scope';
    END IF;
    v_ceiling := pyretrieve.writer_ceiling(p_workspace, p_project);
    IF v_ceiling IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    INSERT INTO pyretrieve.write_bindings (workspace_id, principal, project_id, ceiling, position)
    VALUES (p_workspace, pyretrieve.caller(), p_project, v_ceiling, coalesce(w.position, 0) + 1);
    RETURN v_ceiling;
END;
$$;
COMMENT ON FUNCTION pyretrieve.bind_write_scope(text, text) IS
    'Bind this transaction''s write scope to a workspace/project where the caller is a writer with a live grant, recording who wrote where (write_bindings); returns the writer''s classification ceiling there (the highest of its grants). The latest binding is in force. Raises PR001 otherwise, PR003 when the transaction holds a read decision, PR004 for a superuser or BYPASSRLS caller. The write functions call it themselves; it never widens access. SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.put_fragment(
    p_workspace text,
    p_project text,
    p_body text,
    p_classification pyretrieve.classification DEFAULT 'internal',
    p_observed_at timestamptz DEFAULT NULL,
    p_expires_at timestamptz DEFAULT NULL,
    p_source_uri text DEFAULT NULL,
    p_source_revision text DEFAULT NULL,
    p_manifest_id text DEFAULT NULL,
    p_ts_config regconfig DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
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
    PERFORM pyretrieve.take_first_statistics();
    RETURN v_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.put_fragment(text, text, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text, regconfig) IS
    'Store a fragment in a workspace/project where the caller is a writer, at or below the writer''s ceiling; returns its id. Idempotent by content: the same body at the same classification returns the existing active fragment. The database computes content_digest (sha256 of the body), the tsvector and the lexical generation. observed_at defaults to now(). SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.supersede_fragment(
    p_workspace text,
    p_project text,
    p_fragment_id uuid,
    p_body text,
    p_classification pyretrieve.classification DEFAULT NULL,
    p_observed_at timestamptz DEFAULT NULL,
    p_expires_at timestamptz DEFAULT NULL,
    p_source_uri text DEFAULT NULL,
    p_source_revision text DEFAULT NULL,
    p_manifest_id text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    old pyretrieve.fragments;
    v_new uuid;
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    SELECT f.* INTO old
      FROM pyretrieve.fragments f
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project
       AND f.fragment_id = p_fragment_id AND f.state = 'active'
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
    v_new := pyretrieve.put_fragment(
        p_workspace := p_workspace, p_project := p_project, p_body := p_body,
        p_classification := coalesce(p_classification, old.classification),
        p_observed_at := p_observed_at, p_expires_at := p_expires_at,
        p_source_uri := coalesce(p_source_uri, old.source_uri),
        p_source_revision := p_source_revision,
        p_manifest_id := coalesce(p_manifest_id, old.manifest_id),
        p_ts_config := old.ts_config);
    IF v_new = old.fragment_id THEN
        RETURN v_new;
    END IF;
    UPDATE pyretrieve.fragments f
       SET state = 'superseded', superseded_by = v_new
     WHERE f.workspace_id = p_workspace AND f.fragment_id = p_fragment_id;
    RETURN v_new;
END;
$$;
COMMENT ON FUNCTION pyretrieve.supersede_fragment(text, text, uuid, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text) IS
    'Replace an active fragment with new content: stores the new fragment (as put_fragment) and marks the old one superseded by it; returns the new id (the old id when the content and classification are unchanged). Raises PR020 alike for an absent fragment and one the writer may not see. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.retract_fragment(p_workspace text, p_project text, p_fragment_id uuid)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    UPDATE pyretrieve.fragments f
       SET state = 'retracted'
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project
       AND f.fragment_id = p_fragment_id AND f.state = 'active';
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
    PERFORM pyretrieve.take_first_statistics();
END;
$$;
COMMENT ON FUNCTION pyretrieve.retract_fragment(text, text, uuid) IS
    'Retract an active fragment: it disappears from every search at once. Raises PR020 alike for an absent fragment and one the writer may not see. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- p_min_share > 0 compacts only once the postings in blocks not full, the tombstones, the
-- postings of overlapping pages (overlapping_pages) and those of pending pages are at least
-- that share of the postings in the other pages: each run rewrites every page of the buckets
-- it touches, so with 1 the pages at least double between runs and a growing scope rewrites
-- each posting a bounded number of times (rewriting at every run made each run cost in
-- proportion to the scope). It also compacts once a bucket holds 16 pending pages, because the
-- leg reads each of them for every term of the bucket (50 per bucket made a 50,000-fragment
-- scope's leg take twice as long).
CREATE FUNCTION pyretrieve.compact_lexical_index(
    p_workspace text, p_project text, p_min_share double precision DEFAULT 0)
RETURNS TABLE (rows_read integer, rows_written integer, postings integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
-- Planned for each call (not generically): its statements join the scope's blocks to arrays
-- built in the call (the small lexemes, the pages taken), whose sizes only a plan for the
-- values at hand sees. A generic plan took them for ten elements and joined by nested loops:
-- compacting a scope of 4,000 fragments after a bulk batch took 39 s against 1 s.
SET plan_cache_mode = force_custom_plan
AS $$
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
$$;
COMMENT ON FUNCTION pyretrieve.compact_lexical_index(text, text, double precision) IS
    'Compact the write scope''s lexical index, for the writer''s classifications: the postings of lexemes with fewer than 128 in a classification move from their blocks into pages shared by the lexemes of a bucket (a row per rare lexeme is most of the index otherwise), lexemes that reached 128 move back to blocks, tombstoned postings of the rewritten pages go, and pages that overlap, and the pending pages of bulk writes, are merged into their buckets'' pages (a group of 16 buckets whose small lists hold fewer than 1,024 postings shares one page). Rows another transaction holds are left for a later run (it never waits on a writer). p_min_share > 0 compacts only when the postings in blocks not full, the tombstones, the postings of pages whose lexeme range meets another''s in their bucket (two first writes at once) and those of pending pages are at least that share of the postings in the other pages, or when a term would read 16 pending pages (of its bucket and of its bucket''s group of 16), else returns zeros (the Ingestor runs it with 1 after each ingest run and every 16 batches of one, so a growing scope rewrites each posting a bounded number of times); 0, the default, always compacts. Raises PR010 for a share that is negative, infinite or not a number. Returns the rows read and written and the postings moved. Searches return the same rows, scores and terms before and after. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.put_embedding(
    p_workspace text,
    p_project text,
    p_fragment_id uuid,
    p_model text,
    p_embedding public.vector,
    p_source_digest bytea)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
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
    PERFORM pyretrieve.take_first_statistics();
    RETURN v_generation;
END;
$$;
COMMENT ON FUNCTION pyretrieve.put_embedding(text, text, uuid, text, public.vector, bytea) IS
    'Store (or replace) the embedding of one fragment for one registered model, with the sha256 digest of the text it was computed from; returns its vector generation. An embedding whose source digest differs from the fragment''s content digest is stale. Raises PR011/PR012 for a bad vector or model and PR020 alike for an absent fragment and one the writer may not see. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- What ingestion needs to stay idempotent, read through the write scope (up to the writer's
-- ceiling, every state where the state matters). VOLATILE: each binds the write scope itself,
-- and a STABLE function would not see the binding it has just written. One index probe per key: right after a bulk
-- load the tables have no statistics, and a planner guessing from none would scan the whole
-- scope once per batch.
CREATE FUNCTION pyretrieve.active_sources(p_workspace text, p_project text, p_uris text[])
RETURNS TABLE (source_uri text, fragment_id uuid, content_digest bytea,
               classification pyretrieve.classification)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_uris IS NULL OR cardinality(p_uris) > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 100000 source uris';
    END IF;
    RETURN QUERY
    SELECT f.source_uri, f.fragment_id, f.content_digest, f.classification
      FROM unnest(p_uris) AS u(uri)
     CROSS JOIN LATERAL (
           SELECT f.source_uri, f.fragment_id, f.content_digest, f.classification
             FROM pyretrieve.fragments f
            WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.state = 'active'
              AND f.source_uri = u.uri
           OFFSET 0) f;
END;
$$;
COMMENT ON FUNCTION pyretrieve.active_sources(text, text, text[]) IS
    'The active fragments (source_uri, fragment_id, content_digest, classification) of the given source uris in the caller''s write scope, up to the writer''s ceiling: what ingestion compares against to stay idempotent. Binds the write scope (PR001 without a writer grant). SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.active_sources_like(p_workspace text, p_project text, p_patterns text[])
RETURNS TABLE (source_uri text, fragment_id uuid)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_patterns IS NULL OR cardinality(p_patterns) > 10000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 10000 patterns';
    END IF;
    RETURN QUERY
    SELECT f.source_uri, f.fragment_id FROM pyretrieve.fragments f
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.state = 'active'
       AND f.source_uri LIKE ANY (p_patterns);
END;
$$;
COMMENT ON FUNCTION pyretrieve.active_sources_like(text, text, text[]) IS
    'The active fragments of the caller''s write scope (up to the writer''s ceiling) whose source_uri matches one of the LIKE patterns: how ingestion finds what a shorter file, or a deleted one, no longer holds. SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.created_now(p_workspace text, p_project text, p_ids uuid[])
RETURNS TABLE (fragment_id uuid)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_ids IS NULL OR cardinality(p_ids) > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 100000 ids';
    END IF;
    RETURN QUERY
    SELECT f.fragment_id
      FROM unnest(p_ids) AS u(id)
     CROSS JOIN LATERAL (
           SELECT f.fragment_id, f.project_id FROM pyretrieve.fragments f
            WHERE f.workspace_id = p_workspace AND f.fragment_id = u.id AND f.ingested_at = now()
           OFFSET 0) f
     WHERE f.project_id = p_project;
END;
$$;
COMMENT ON FUNCTION pyretrieve.created_now(text, text, uuid[]) IS
    'Which of the given fragments this transaction created (as opposed to found already active with the same content). SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.embeddings_needed(p_workspace text, p_project text, p_model text, p_ids uuid[])
RETURNS TABLE (fragment_id uuid, content_digest bytea, missing boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_ids IS NULL OR cardinality(p_ids) > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 100000 ids';
    END IF;
    -- The project is checked outside the probe: inside, (workspace, project) would make the
    -- scope index look as selective as the primary key to a planner without statistics.
    RETURN QUERY
    SELECT f.fragment_id, f.content_digest, f.missing
      FROM unnest(p_ids) AS u(id)
     CROSS JOIN LATERAL (
           SELECT f.fragment_id, f.project_id, f.content_digest, e.fragment_id IS NULL AS missing
             FROM pyretrieve.fragments f
             LEFT JOIN pyretrieve.embeddings e
               ON e.workspace_id = f.workspace_id AND e.fragment_id = f.fragment_id
              AND e.model_id = p_model
            WHERE f.workspace_id = p_workspace AND f.fragment_id = u.id
              AND (e.fragment_id IS NULL OR e.source_digest <> f.content_digest
                   OR e.vector_generation < f.lexical_generation)
           OFFSET 0) f
     WHERE f.project_id = p_project;
END;
$$;
COMMENT ON FUNCTION pyretrieve.embeddings_needed(text, text, text, uuid[]) IS
    'Of the given fragments in the caller''s write scope, those whose embedding for p_model is missing or stale (computed from other text, or older than the fragment), with missing true for the first kind. SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.stale_embeddings(
    p_workspace text, p_project text, p_model text, p_after uuid DEFAULT NULL, p_limit integer DEFAULT NULL)
RETURNS TABLE (fragment_id uuid, body text, content_digest bytea, missing boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_limit IS NOT NULL AND p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'limit must be between 1 and 100000';
    END IF;
    -- Keyset pagination by id: one pass over the scope, even if a write fails to fix a row.
    RETURN QUERY
    SELECT f.fragment_id, f.body, f.content_digest, e.fragment_id IS NULL
      FROM pyretrieve.fragments f
      LEFT JOIN pyretrieve.embeddings e
        ON e.workspace_id = f.workspace_id AND e.fragment_id = f.fragment_id AND e.model_id = p_model
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.state = 'active'
       AND (e.fragment_id IS NULL OR e.source_digest <> f.content_digest
            OR e.vector_generation < f.lexical_generation)
       AND f.fragment_id > coalesce(p_after, '00000000-0000-0000-0000-000000000000'::uuid)
     ORDER BY f.fragment_id
     LIMIT p_limit;
END;
$$;
COMMENT ON FUNCTION pyretrieve.stale_embeddings(text, text, text, uuid, integer) IS
    'Active fragments of the caller''s write scope whose embedding for p_model is missing or stale, in fragment-id order after p_after (keyset pagination), at most p_limit (all when NULL), with their bodies so they can be embedded again. SECURITY DEFINER (runs as pyretrieve_api).';

-- ---------------------------------------------------------------------------------------------
-- Bulk ingestion. A writer copies a batch into a staging table of its own (a temporary table
-- it creates in its transaction) and passes the rows to ingest_batch as one array value,
-- built in its own context: this function never reads a table of the caller's by name, so no
-- object in the caller's pg_temp (a view, a table shadowing a name) runs as pyretrieve_api.
-- ---------------------------------------------------------------------------------------------

-- What ingestion compares a batch against: the active fragments of the given source uris in
-- the caller's write scope (up to the writer's ceiling) and, for one model, whether each one's
-- embedding is current. One index probe per key, as in active_sources.
CREATE FUNCTION pyretrieve.ingest_state(p_workspace text, p_project text, p_uris text[], p_model text DEFAULT NULL)
RETURNS TABLE (source_uri text, fragment_id uuid, content_digest bytea,
               classification pyretrieve.classification, embedding_current boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_uris IS NULL OR cardinality(p_uris) > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 100000 source uris';
    END IF;
    RETURN QUERY
    SELECT f.source_uri, f.fragment_id, f.content_digest, f.classification,
           CASE WHEN p_model IS NULL THEN NULL
                ELSE coalesce(e.source_digest = f.content_digest
                              AND e.vector_generation >= f.lexical_generation, false) END
      FROM unnest(p_uris) AS u(uri)
     CROSS JOIN LATERAL (
           SELECT f.source_uri, f.fragment_id, f.content_digest, f.classification, f.lexical_generation
             FROM pyretrieve.fragments f
            WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.state = 'active'
              AND f.source_uri = u.uri
           OFFSET 0) f
      LEFT JOIN LATERAL (
           SELECT e.source_digest, e.vector_generation
             FROM pyretrieve.embeddings e
            WHERE p_model IS NOT NULL AND e.workspace_id = p_workspace
              AND e.fragment_id = f.fragment_id AND e.model_id = p_model
           OFFSET 0) e ON true;
END;
$$;
COMMENT ON FUNCTION pyretrieve.ingest_state(text, text, text[], text) IS
    'The active fragments (source_uri, fragment_id, content_digest, classification) of the given source uris in the caller''s write scope, up to the writer''s ceiling, and for p_model whether each embedding is current (computed from this content after the fragment was written; NULL without a model): what a bulk ingest plans its batch from. Binds the write scope (PR001 without a writer grant). SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.ingest_batch(
    p_workspace text,
    p_project text,
    p_rows pyretrieve.ingest_row[],
    p_model text DEFAULT NULL)
RETURNS TABLE (ord integer, fragment_id uuid, created boolean, embedded boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
-- Plans that hold for any scope, not for the statistics of the one at hand: those lag a
-- growing scope, and planned for a scope they took for one row, the insert compared each new
-- row with every fragment of the scope (10,000,000 comparisons for a batch of 1,000 into a
-- 10,000-row scope), so each batch cost more than the last. The look-ups by key are also
-- written as one probe per row (LIMIT 1 in a lateral sub-select), whatever the estimates.
SET plan_cache_mode = force_generic_plan
AS $$
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
    PERFORM pyretrieve.take_first_statistics();

    RETURN QUERY
    SELECT m.ord, m.fragment_id, m.created, m.ord = ANY (v_embedded)
      FROM unnest(v_ords, v_ids, v_created) AS m(ord, fragment_id, created)
     ORDER BY m.ord;
END;
$$;
COMMENT ON FUNCTION pyretrieve.ingest_batch(text, text, pyretrieve.ingest_row[], text) IS
    'Write one ingest batch in one set-based step: new fragments (idempotent by content, as put_fragment), the active fragments each row supersedes (replaces: marked superseded by the row''s fragment, as supersede_fragment), kept fragments (keep), and the rows'' embeddings for p_model where missing or stale (the source digest is the fragment''s own content digest). Every check (grant, ceiling PR001, lengths and times PR010, each superseded or kept fragment active and visible PR020, model and vectors PR012/PR011) runs before any write, so the batch is written whole or not at all. Returns each row''s fragment, whether this transaction created it and whether an embedding was stored for it. The rows are a value: the function never reads a caller''s table. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

SET LOCAL ROLE pyretrieve_owner;
