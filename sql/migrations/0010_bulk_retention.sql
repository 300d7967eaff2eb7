-- pyretrieve migration 0010: bulk_retention
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.
-- What is not drafted is marked "Hand-written" (blocks with an end marker) or "Hand-edited"
-- (a drafted statement changed in place): to renumber, re-draft, drop the drafter's TODO lines
-- for the decisions_YYYY_MM partitions (the hand-written partitioning creates them), and carry
-- these parts over.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- =============================================================================================
-- Hand-written (the drafter does not diff types): the row type of a bulk ingest batch, which
-- ingest_batch (drafted below) takes as an array.
-- =============================================================================================
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
REVOKE ALL ON TYPE pyretrieve.ingest_row FROM PUBLIC;
GRANT USAGE ON TYPE pyretrieve.ingest_row TO pyretrieve_writer, pyretrieve_api;
-- ====================================================================== end of hand-written

SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.authorize(p_workspace text, p_project text, p_purpose text, p_query_digest bytea, p_semantic_intent text, p_embedding_digest bytea, p_requested_limit integer)
 RETURNS TABLE(decision_id uuid, principal name, workspace_id text, project_id text, purpose text, evaluated_at timestamp with time zone, ceiling pyretrieve.classification, max_age interval, semantic_policy pyretrieve.semantic_policy, candidate_limit integer, grant_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    g pyretrieve.grants;
    d pyretrieve.decisions;
    v_attempt integer;
BEGIN
    PERFORM pyretrieve.check_caller();
    PERFORM pyretrieve.apply_request_timeouts();
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM pyretrieve.check_identifier(p_purpose, 'purpose');
    IF p_query_digest IS NULL OR length(p_query_digest) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query digest must be 32 bytes (sha256)';
    END IF;
    IF p_embedding_digest IS NOT NULL AND length(p_embedding_digest) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'embedding digest must be 32 bytes (sha256)';
    END IF;
    IF p_semantic_intent IS NULL OR p_semantic_intent NOT IN ('disabled', 'optional', 'required') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'semantic intent must be disabled, optional or required';
    END IF;
    IF p_requested_limit IS NULL OR p_requested_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'requested limit must be between 1 and 1000';
    END IF;

    -- One binding per transaction, whatever any setting says: a second decision (for any scope,
    -- any principal) or a decision after a write scope is refused.
    IF EXISTS (SELECT 1 FROM pyretrieve.bound_decision()) OR EXISTS (SELECT 1 FROM pyretrieve.bound_write()) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR003', MESSAGE = 'transaction already bound to another scope';
    END IF;

    -- The grants policy shows only grants that apply to the caller, so an absent scope and
    -- a scope without a grant look the same here: both are denied with the same error. The most
    -- specific grant wins (the caller's own before a group's), then the widest.
    SELECT gr.* INTO g
      FROM pyretrieve.grants gr
     WHERE gr.workspace_id = p_workspace
       AND gr.grant_id = pyretrieve.effective_grant(p_workspace, p_project, p_purpose);
    IF NOT FOUND OR NOT pyretrieve.caller_in('pyretrieve_reader') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;

    -- The decisions log is partitioned by month. When the partition of this month does not
    -- exist yet (no maintenance has run since the month began), the first decision creates it
    -- and the insert is retried once.
    FOR v_attempt IN 1..2 LOOP
        BEGIN
            INSERT INTO pyretrieve.decisions AS dn (
                workspace_id, principal, project_id, purpose, grant_id, ceiling, max_age, semantic_policy,
                requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest)
            VALUES (
                g.workspace_id, pyretrieve.caller(), g.project_id, g.purpose, g.grant_id, g.ceiling,
                g.max_age, g.semantic_policy,
                p_requested_limit, least(greatest(p_requested_limit, 100), 1000),
                p_query_digest, p_semantic_intent, p_embedding_digest)
            RETURNING dn.* INTO d;
            EXIT;
        EXCEPTION WHEN check_violation THEN
            -- Every CHECK of the row was validated above: only a missing partition is left.
            IF v_attempt = 2 THEN
                RAISE;
            END IF;
            PERFORM pyretrieve.ensure_decision_partitions();
        END;
    END LOOP;

    RETURN QUERY SELECT d.decision_id, d.principal, d.workspace_id::text, d.project_id::text,
                        d.purpose::text, d.evaluated_at, d.ceiling, d.max_age, d.semantic_policy,
                        d.candidate_limit, d.grant_id;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.authorize(text,text,text,bytea,text,bytea,integer) IS 'Authorise the caller (pyretrieve.caller(): the role the request runs as) for one workspace/project and purpose. Checks the caller''s live grants, records the decision (digests and intent only: never query text, embedding values or content), binds this transaction to that scope (one decision per transaction: a second authorize, or one after a write, raises PR003) and returns the decision with its evaluation time, ceiling, max_age, semantic policy and bounded candidate limit. Raises SQLSTATE PR001 (access denied) alike for an absent scope and a scope without a grant, and PR004 for a superuser or BYPASSRLS caller. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.authorize(text,text,text,bytea,text,bytea,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.authorize(text,text,text,bytea,text,bytea,integer) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.ingest_state(p_workspace text, p_project text, p_uris text[], p_model text DEFAULT NULL::text)
 RETURNS TABLE(source_uri text, fragment_id uuid, content_digest bytea, classification pyretrieve.classification, embedding_current boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.ingest_state(text,text,text[],text) IS 'The active fragments (source_uri, fragment_id, content_digest, classification) of the given source uris in the caller''s write scope, up to the writer''s ceiling, and for p_model whether each embedding is current (computed from this content after the fragment was written; NULL without a model): what a bulk ingest plans its batch from. Binds the write scope (PR001 without a writer grant). SECURITY DEFINER (runs as pyretrieve_api).';
REVOKE ALL ON FUNCTION pyretrieve.ingest_state(text,text,text[],text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.ingest_state(text,text,text[],text) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.ingest_batch(p_workspace text, p_project text, p_rows pyretrieve.ingest_row[], p_model text DEFAULT NULL::text)
 RETURNS TABLE(ord integer, fragment_id uuid, created boolean, embedded boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
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
        UPDATE pyretrieve.fragments f
           SET state = 'retracted'
          FROM unnest(p_rows) r CROSS JOIN LATERAL unnest(r.replaces) AS x(id)
         WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.fragment_id = x.id
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
          LEFT JOIN LATERAL (
                SELECT f.source_uri, f.manifest_id, f.ts_config FROM pyretrieve.fragments f
                 WHERE f.workspace_id = p_workspace AND f.project_id = p_project
                   AND f.fragment_id = r.replaces[1]) o ON true
         WHERE r.keep IS NULL
         ORDER BY r.classification, pyretrieve.content_digest(r.body), r.ord
        ON CONFLICT (workspace_id, project_id, classification, content_digest) WHERE state = 'active'
        DO NOTHING;
    EXCEPTION WHEN program_limit_exceeded THEN
        RAISE EXCEPTION USING ERRCODE = 'PR014',
            MESSAGE = 'body has too many distinct words or positions for a text-search vector';
    END;

    -- Each row's fragment: the active one with its content and classification (written now,
    -- or found), or the one it keeps.
    SELECT array_agg(m.ord ORDER BY m.ord), array_agg(m.fragment_id ORDER BY m.ord),
           array_agg(m.created ORDER BY m.ord)
      INTO v_ords, v_ids, v_created
      FROM (SELECT r.ord, f.fragment_id, f.ingested_at = now() AS created
              FROM unnest(p_rows) r
              JOIN pyretrieve.fragments f
                ON f.workspace_id = p_workspace AND f.project_id = p_project AND f.state = 'active'
               AND f.classification = r.classification
               AND f.content_digest = pyretrieve.content_digest(r.body)
             WHERE r.keep IS NULL
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
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.decision_partition_ranges()
 RETURNS TABLE(partition_name text, range_start timestamp with time zone, range_end timestamp with time zone)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT c.relname::text, b.m[1]::timestamptz, b.m[2]::timestamptz
      FROM pg_catalog.pg_inherits i
      JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
     CROSS JOIN LATERAL (SELECT pg_catalog.regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                '^FOR VALUES FROM \(''([^'']+)''\) TO \(''([^'']+)''\)$') AS m) b
     WHERE i.inhparent = 'pyretrieve.decisions'::regclass AND b.m IS NOT NULL
     ORDER BY 2;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.decision_partition_ranges() IS 'The partitions of pyretrieve.decisions with the range of evaluated_at each holds, oldest first (read from the catalog).';
REVOKE ALL ON FUNCTION pyretrieve.decision_partition_ranges() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.decision_partition_ranges() TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.ensure_decision_partitions(p_months_ahead integer DEFAULT 2, p_from timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_first timestamp := date_trunc('month', coalesce(p_from, now()) AT TIME ZONE 'UTC');
    v_last timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
    v_month timestamp;
    v_start timestamptz;
    v_end timestamptz;
    v_name text;
BEGIN
    IF p_months_ahead IS NULL OR p_months_ahead NOT BETWEEN 0 AND 24 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'months ahead must be between 0 and 24';
    END IF;
    IF v_first > v_last OR v_first < v_last - interval '20 years' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'the first month must be in the last 20 years';
    END IF;
    v_month := v_first;
    WHILE v_month <= v_last + make_interval(months => p_months_ahead) LOOP
        v_start := v_month AT TIME ZONE 'UTC';
        v_end := (v_month + interval '1 month') AT TIME ZONE 'UTC';
        v_name := 'decisions_' || to_char(v_month, 'YYYY_MM');
        IF NOT EXISTS (SELECT 1 FROM pyretrieve.decision_partition_ranges() r
                        WHERE r.range_start < v_end AND r.range_end > v_start) THEN
            BEGIN
                EXECUTE format('CREATE TABLE pyretrieve.%I PARTITION OF pyretrieve.decisions FOR VALUES FROM (%L) TO (%L)',
                               v_name, v_start, v_end);
                EXECUTE format('ALTER TABLE pyretrieve.%I ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY', v_name);
                EXECUTE format('COMMENT ON TABLE pyretrieve.%I IS %L', v_name,
                               format('Decisions evaluated in %s (UTC): a partition of pyretrieve.decisions, read and written only through it.',
                                      to_char(v_month, 'YYYY-MM')));
                RETURN NEXT v_name;
            EXCEPTION WHEN duplicate_table OR invalid_object_definition THEN
                -- Another transaction created it meanwhile.
                NULL;
            END;
        END IF;
        v_month := v_month + interval '1 month';
    END LOOP;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.ensure_decision_partitions(integer,timestamp with time zone) IS 'Create the monthly partitions of pyretrieve.decisions (UTC months) from the month of p_from (default: the current month) to p_months_ahead months after the current one, where missing; returns the names created. Idempotent; authorize calls it when no partition holds the current month yet. SECURITY DEFINER (runs as pyretrieve_owner): a partition is created by the owner of the partitioned table.';
REVOKE ALL ON FUNCTION pyretrieve.ensure_decision_partitions(integer,timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.ensure_decision_partitions(integer,timestamp with time zone) TO pyretrieve_admin, pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.drop_decision_partition(p_partition text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pyretrieve.decision_partition_ranges() r
                    WHERE r.partition_name = p_partition AND r.range_end <= now() - interval '1 day') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'not a decision partition that ended more than a day ago';
    END IF;
    EXECUTE format('DROP TABLE pyretrieve.%I', p_partition);
END;
$function$;
COMMENT ON FUNCTION pyretrieve.drop_decision_partition(text) IS 'Drop one partition of pyretrieve.decisions whose range ended more than a day ago (prune_decisions calls it). SECURITY DEFINER (runs as pyretrieve_owner): dropping a partition needs the owner of the table.';
REVOKE ALL ON FUNCTION pyretrieve.drop_decision_partition(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.drop_decision_partition(text) TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.decision_partitions()
 RETURNS TABLE(partition_name text, range_start timestamp with time zone, range_end timestamp with time zone, decisions bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY
    SELECT r.partition_name, r.range_start, r.range_end,
           (SELECT count(*) FROM pyretrieve.decisions d
             WHERE d.evaluated_at >= r.range_start AND d.evaluated_at < r.range_end)
      FROM pyretrieve.decision_partition_ranges() r
     ORDER BY r.range_start;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.decision_partitions() IS 'The monthly partitions of the decisions log, with their range and the number of decisions each holds. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals hold no table privilege.';
REVOKE ALL ON FUNCTION pyretrieve.decision_partitions() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.decision_partitions() TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.prune_decisions(p_older_than interval, p_dry_run boolean DEFAULT false)
 RETURNS TABLE(partition_name text, range_start timestamp with time zone, range_end timestamp with time zone, decisions bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    p record;
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_older_than IS NULL OR p_older_than < interval '1 day' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'retention must be at least one day';
    END IF;
    -- Whole months only: a partition goes when every decision it can hold is older than the
    -- retention, so no decision younger than that is ever dropped.
    FOR p IN SELECT * FROM pyretrieve.decision_partitions() d
              WHERE d.range_end <= now() - p_older_than ORDER BY d.range_start LOOP
        IF NOT p_dry_run THEN
            PERFORM pyretrieve.drop_decision_partition(p.partition_name);
        END IF;
        partition_name := p.partition_name;
        range_start := p.range_start;
        range_end := p.range_end;
        decisions := p.decisions;
        RETURN NEXT;
    END LOOP;
    IF NOT p_dry_run THEN
        PERFORM pyretrieve.ensure_decision_partitions();
    END IF;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.prune_decisions(interval,boolean) IS 'Retention of the decisions log: drop every monthly partition whose whole range is older than p_older_than (at least one day), returning each with the number of decisions it held (with p_dry_run, only report them), then create the partitions ahead. Decisions are never deleted one by one. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals hold no table privilege.';
REVOKE ALL ON FUNCTION pyretrieve.prune_decisions(interval,boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.prune_decisions(interval,boolean) TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.list_decisions(p_since timestamp with time zone, p_until timestamp with time zone DEFAULT NULL::timestamp with time zone, p_workspace text DEFAULT NULL::text, p_project text DEFAULT NULL::text, p_principal text DEFAULT NULL::text, p_limit integer DEFAULT 1000)
 RETURNS TABLE(evaluated_at timestamp with time zone, principal name, workspace_id text, project_id text, purpose text, decision_id uuid, grant_id uuid, ceiling pyretrieve.classification, semantic_intent text, requested_limit integer, query_digest bytea, embedding_digest bytea)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_sql text := 'SELECT d.evaluated_at, d.principal, d.workspace_id::text, d.project_id::text,'
               || ' d.purpose::text, d.decision_id, d.grant_id, d.ceiling, d.semantic_intent,'
               || ' d.requested_limit, d.query_digest, d.embedding_digest'
               || ' FROM pyretrieve.decisions d WHERE d.evaluated_at >= $1 AND d.evaluated_at < $2';
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_since IS NULL OR (p_until IS NOT NULL AND p_until <= p_since) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'a time range: since, and until after it';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'limit must be between 1 and 100000';
    END IF;
    IF p_project IS NOT NULL AND p_workspace IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'a project is named with its workspace';
    END IF;
    IF p_workspace IS NOT NULL THEN
        PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
        v_sql := v_sql || ' AND d.workspace_id = $3';
    END IF;
    IF p_project IS NOT NULL THEN
        PERFORM pyretrieve.check_identifier(p_project, 'project');
        v_sql := v_sql || ' AND d.project_id = $4';
    END IF;
    IF p_principal IS NOT NULL THEN
        v_sql := v_sql || ' AND d.principal = $5';
    END IF;
    v_sql := v_sql || ' ORDER BY d.evaluated_at DESC, d.decision_id LIMIT $6';
    RETURN QUERY EXECUTE v_sql
        USING p_since, coalesce(p_until, 'infinity'::timestamptz), p_workspace, p_project,
              p_principal::name, p_limit;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.list_decisions(timestamp with time zone,timestamp with time zone,text,text,text,integer) IS 'Who searched what scope when: the decisions evaluated in [p_since, p_until), optionally of one workspace (and project) or one principal, newest first, at most p_limit: digests and intent only, never query text. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals hold no table privilege.';
REVOKE ALL ON FUNCTION pyretrieve.list_decisions(timestamp with time zone,timestamp with time zone,text,text,text,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.list_decisions(timestamp with time zone,timestamp with time zone,text,text,text,integer) TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;

-- Hand-edited: the audit views gain a column at the end (audit_tables.partition_of) and keep
-- their functions and grants: CREATE OR REPLACE here, in the place of the drafted CREATE VIEW
-- of audit_findings, rather than the drafted DROP VIEW ... CASCADE of both views at the top
-- (removed) and the drafted CREATE VIEW of audit_tables further down (removed).
CREATE OR REPLACE VIEW pyretrieve.audit_tables WITH (security_invoker=true) AS
 SELECT format('%I.%I'::text, n.nspname, c.relname) AS table_name,
    (pg_get_userbyid(c.relowner))::text AS owner,
    c.relrowsecurity AS rls_enabled,
    c.relforcerowsecurity AS rls_forced,
    (( SELECT count(*) AS count
           FROM pg_policy p
          WHERE (p.polrelid = c.oid)))::integer AS policies,
    (( SELECT count(*) AS count
           FROM pg_policy p
          WHERE ((p.polrelid = c.oid) AND p.polpermissive)))::integer AS permissive_policies,
    (( SELECT count(*) AS count
           FROM pg_policy p
          WHERE ((p.polrelid = c.oid) AND (NOT p.polpermissive))))::integer AS restrictive_policies,
    (EXISTS ( SELECT
           FROM pg_attribute a
          WHERE ((a.attrelid = c.oid) AND (a.attname = 'workspace_id'::name) AND (NOT a.attisdropped)))) AS has_workspace_id,
    ( SELECT format('%I.%I'::text, pn.nspname, p.relname) AS format
           FROM ((pg_inherits i
             JOIN pg_class p ON ((p.oid = i.inhparent)))
             JOIN pg_namespace pn ON ((pn.oid = p.relnamespace)))
          WHERE (c.relispartition AND (i.inhrelid = c.oid))) AS partition_of
   FROM (pg_class c
     JOIN pg_namespace n ON ((n.oid = c.relnamespace)))
  WHERE ((n.nspname = 'pyretrieve'::name) AND (c.relkind = ANY (ARRAY['r'::"char", 'p'::"char"])));
COMMENT ON VIEW pyretrieve.audit_tables IS 'Each table of the pyretrieve schema: owner, row-level security enabled and forced (so the owner is bound too), its policies (permissive and restrictive), whether it has a workspace_id column and, for a partition, the table it is a partition of (read through that table, under its policies; its own row-level security, with no policy, refuses every direct read).';
CREATE OR REPLACE VIEW pyretrieve.audit_findings WITH (security_invoker=true) AS
 WITH f(severity, code, object_type, object, evidence, fix) AS (
         SELECT 'error'::text AS "?column?",
            'rls_disabled'::text AS "?column?",
            'table'::text AS "?column?",
            t.table_name,
            'row-level security is disabled: every role with a table privilege reads and writes all rows'::text AS "?column?",
            format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;'::text, t.table_name) AS format
           FROM pyretrieve.audit_tables t
          WHERE (NOT t.rls_enabled)
        UNION ALL
         SELECT 'error'::text,
            'rls_not_forced'::text,
            'table'::text,
            t.table_name,
            format('row-level security is not forced: the owner %s, and every SECURITY DEFINER function it owns, bypasses the policies'::text, t.owner) AS format,
            format('ALTER TABLE %s FORCE ROW LEVEL SECURITY;'::text, t.table_name) AS format
           FROM pyretrieve.audit_tables t
          WHERE (t.rls_enabled AND (NOT t.rls_forced))
        UNION ALL
         SELECT 'warning'::text,
            'table_without_policy'::text,
            'table'::text,
            t.table_name,
                CASE
                    WHEN t.rls_enabled THEN 'no policy: every query by a role other than the owner returns no rows'::text
                    ELSE 'no policy, and row-level security is disabled'::text
                END AS "case",
            format('CREATE POLICY ... ON %s TO <the group roles that use it> USING (...); or drop the table'::text, t.table_name) AS format
           FROM pyretrieve.audit_tables t
          WHERE ((t.policies = 0) AND (t.partition_of IS NULL))
        UNION ALL
         SELECT 'warning'::text,
            'overlapping_permissive_policies'::text,
            'table'::text,
            a.table_name,
            format('policies %s (%s) and %s (%s) are both permissive for %s: a row either one allows is allowed'::text, a.policy_name, a.command, b.policy_name, b.command, array_to_string(
                CASE
                    WHEN ('PUBLIC'::text = ANY (a.roles)) THEN b.roles
                    WHEN ('PUBLIC'::text = ANY (b.roles)) THEN a.roles
                    ELSE ARRAY( SELECT r.r
                       FROM unnest(a.roles) r(r)
                      WHERE (r.r = ANY (b.roles))
                      ORDER BY r.r)
                END, ', '::text)) AS format,
            format('merge %s and %s into one policy, or recreate the narrower condition AS RESTRICTIVE so that both must pass'::text, a.policy_name, b.policy_name) AS format
           FROM (pyretrieve.audit_policies a
             JOIN pyretrieve.audit_policies b ON (((b.table_name = a.table_name) AND (a.policy_name < b.policy_name))))
          WHERE (a.permissive AND b.permissive AND ((a.command = b.command) OR (a.command = 'ALL'::text) OR (b.command = 'ALL'::text)) AND ((a.roles && b.roles) OR ('PUBLIC'::text = ANY (a.roles)) OR ('PUBLIC'::text = ANY (b.roles))))
        UNION ALL
         SELECT 'error'::text,
            'policy_trusts_setting'::text,
            'policy'::text,
            format('%s on %s'::text, p.policy_name, p.table_name) AS format,
            format('reads current_setting() (in %s) and checks no identity the caller cannot set (current_user, session_user, pg_has_role): any role can change a custom setting with set_config()'::text, array_to_string(p.trusts_settings_in, ', '::text)) AS format,
            'take the identity from current_user (SET ROLE from an authenticator) and let the setting only select among what that identity was granted, e.g. add AND pg_has_role(<the role granted this row>, ''USAGE'')'::text
           FROM pyretrieve.audit_policies p
          WHERE (cardinality(p.trusts_settings_in) > 0)
        UNION ALL
         SELECT 'warning'::text,
            'policy_per_row_call'::text,
            'policy'::text,
            format('%s on %s'::text, p.policy_name, p.table_name) AS format,
            format('calls %s once per row: outside a sub-select and independent of the row'::text, array_to_string(p.per_row_calls, ', '::text)) AS format,
            'write each such call as a sub-select, (SELECT f(...)), so the planner evaluates it once per query (an InitPlan)'::text
           FROM pyretrieve.audit_policies p
          WHERE (cardinality(p.per_row_calls) > 0)
        UNION ALL
         SELECT 'error'::text,
            'policy_reads_binding_twice'::text,
            'policy'::text,
            format('%s on %s'::text, p.policy_name, p.table_name) AS format,
            format('reads %s, whose result depends on a custom setting, in more than one sub-select: each sub-select is an InitPlan that PostgreSQL evaluates when a qual first needs it, so a caller that changes the setting part-way through a scan (set_config in a LATERAL, or between FETCHes of a cursor) checks one row against two bindings'::text, array_to_string(p.reads_binding_twice, ', '::text)) AS format,
            'bind one decision per transaction in a table keyed by the transaction (never by a setting) and read it there; or read every field of the binding in one sub-select'::text
           FROM pyretrieve.audit_policies p
          WHERE (cardinality(p.reads_binding_twice) > 0)
        UNION ALL
         SELECT 'error'::text,
            'policy_true_for_principals'::text,
            'policy'::text,
            format('%s on %s'::text, p.policy_name, p.table_name) AS format,
            format('%s is %s for %s: every row of every workspace'::text,
                CASE
                    WHEN (p.using_expr = 'true'::text) THEN 'USING'::text
                    ELSE 'WITH CHECK'::text
                END, 'true', array_to_string(p.roles, ', '::text)) AS format,
            format('DROP POLICY %I ON %s; principals reach the tables only through the SQL API (pyretrieve_api)'::text, p.policy_name, p.table_name) AS format
           FROM pyretrieve.audit_policies p
          WHERE (((p.using_expr = 'true'::text) OR (p.with_check_expr = 'true'::text)) AND (EXISTS ( SELECT
                   FROM unnest(p.roles) x(r)
                  WHERE ((x.r = 'PUBLIC'::text) OR (x.r IN ( SELECT ar.role_name
                           FROM pyretrieve.audit_roles ar
                          WHERE (cardinality(ar.app_groups) > 0)))))))
        UNION ALL
         SELECT 'error'::text,
            'principal_table_privilege'::text,
            pr.object_type,
            (pr.object || COALESCE(('.'::text || quote_ident(pr.column_name)), ''::text)),
            format('%s holds %s: principals must reach the data only through the SQL API, with row-level security as the second wall'::text, pr.grantee, pr.privilege) AS format,
            format('REVOKE %s%s ON %s FROM %s;'::text, pr.privilege, COALESCE(((' ('::text || quote_ident(pr.column_name)) || ')'::text), ''::text), pr.object,
                CASE
                    WHEN (pr.grantee = 'PUBLIC'::text) THEN 'PUBLIC'::text
                    ELSE quote_ident(pr.grantee)
                END) AS format
           FROM pyretrieve.audit_privileges pr
          WHERE ((pr.object_type = ANY (ARRAY['table'::text, 'view'::text, 'materialized view'::text, 'sequence'::text, 'foreign table'::text, 'column'::text])) AND (NOT pr.grantee_is_owner) AND ((pr.grantee = 'PUBLIC'::text) OR (pr.grantee IN ( SELECT ar.role_name
                   FROM pyretrieve.audit_roles ar
                  WHERE (cardinality(ar.app_groups) > 0)))))
        UNION ALL
         SELECT 'error'::text,
            'decisions_mutable'::text,
            pr.object_type,
            pr.object,
            format('%s holds %s on an audit log that must be append-only'::text, pr.grantee, pr.privilege) AS format,
            format('REVOKE %s ON %s FROM %s;'::text, pr.privilege, pr.object,
                CASE
                    WHEN (pr.grantee = 'PUBLIC'::text) THEN 'PUBLIC'::text
                    ELSE quote_ident(pr.grantee)
                END) AS format
           FROM pyretrieve.audit_privileges pr
          WHERE (((pr.object = ANY (ARRAY['pyretrieve.decisions'::text, 'pyretrieve.write_bindings'::text])) OR (pr.object IN ( SELECT t.table_name
                   FROM pyretrieve.audit_tables t
                  WHERE (t.partition_of = ANY (ARRAY['pyretrieve.decisions'::text, 'pyretrieve.write_bindings'::text]))))) AND (pr.privilege = ANY (ARRAY['UPDATE'::text, 'DELETE'::text, 'TRUNCATE'::text])) AND (NOT pr.grantee_is_owner))
        UNION ALL
         SELECT 'error'::text,
            'decisions_mutable'::text,
            'policy'::text,
            format('%s on %s'::text, p.policy_name, p.table_name) AS format,
            format('a %s policy on an audit log that must be append-only'::text, p.command) AS format,
            format('DROP POLICY %I ON %s;'::text, p.policy_name, p.table_name) AS format
           FROM pyretrieve.audit_policies p
          WHERE (((p.table_name = ANY (ARRAY['pyretrieve.decisions'::text, 'pyretrieve.write_bindings'::text])) OR (p.table_name IN ( SELECT t.table_name
                   FROM pyretrieve.audit_tables t
                  WHERE (t.partition_of = ANY (ARRAY['pyretrieve.decisions'::text, 'pyretrieve.write_bindings'::text]))))) AND (p.command = ANY (ARRAY['UPDATE'::text, 'DELETE'::text, 'ALL'::text])))
        UNION ALL
         SELECT 'error'::text,
            'content_updatable'::text,
            pr.object_type,
            (pr.object || COALESCE(('.'::text || quote_ident(pr.column_name)), ''::text)),
            format('%s may UPDATE %s: a fragment''s body and classification are fixed once written (new content supersedes), and its digest, postings and embeddings are derived from them'::text, pr.grantee, COALESCE(pr.column_name, 'every column'::text)) AS format,
            format('REVOKE UPDATE%s ON %s FROM %s;'::text, COALESCE(((' ('::text || quote_ident(pr.column_name)) || ')'::text), ''::text), pr.object,
                CASE
                    WHEN (pr.grantee = 'PUBLIC'::text) THEN 'PUBLIC'::text
                    ELSE quote_ident(pr.grantee)
                END) AS format
           FROM pyretrieve.audit_privileges pr
          WHERE ((pr.object = 'pyretrieve.fragments'::text) AND (pr.privilege = 'UPDATE'::text) AND (NOT pr.grantee_is_owner) AND ((pr.column_name IS NULL) OR (pr.column_name = ANY (ARRAY['body'::text, 'classification'::text, 'workspace_id'::text, 'project_id'::text]))))
        UNION ALL
         SELECT 'error'::text,
            'principal_can_become_owner'::text,
            'role'::text,
            r.role_name,
            format('%s (%s) can SET ROLE to %s: as that role it reaches the tables past the SQL API'::text, r.role_name, array_to_string(r.app_groups, ', '::text), r.owner_via) AS format,
            format('REVOKE %I FROM %I; (the first membership of %s)'::text, split_part(r.owner_via, ' -> '::text, 2), r.role_name, r.owner_via) AS format
           FROM pyretrieve.audit_roles r
          WHERE ((cardinality(r.app_groups) > 0) AND (NOT r.can_login) AND (r.owner_via IS NOT NULL) AND (r.role_name <> ALL (ARRAY['pyretrieve_owner'::text, 'pyretrieve_api'::text])))
        UNION ALL
         SELECT 'error'::text,
            'definer_outside_schema'::text,
            'function'::text,
            format('%I.%I(%s)'::text, n.nspname, f_1.proname, oidvectortypes(f_1.proargtypes)) AS format,
            format('SECURITY DEFINER (runs as %s) outside the pyretrieve schema, reads pyretrieve objects and is executable by %s'::text, pg_get_userbyid(f_1.proowner),
                CASE
                    WHEN has_function_privilege('public'::name, f_1.oid, 'EXECUTE'::text) THEN 'PUBLIC'::text
                    ELSE 'a principal group'::text
                END) AS format,
            format('DROP FUNCTION %I.%I(%s); or REVOKE EXECUTE ON it FROM PUBLIC and the principals: the SQL API is the only door'::text, n.nspname, f_1.proname, oidvectortypes(f_1.proargtypes)) AS format
           FROM (pg_proc f_1
             JOIN pg_namespace n ON ((n.oid = f_1.pronamespace)))
          WHERE (f_1.prosecdef AND (n.nspname <> ALL (ARRAY['pyretrieve'::name, 'pg_catalog'::name, 'information_schema'::name])) AND ((COALESCE(f_1.prosrc, ''::text) ~* '\mpyretrieve\.'::text) OR (EXISTS ( SELECT
                   FROM (pg_depend d
                     JOIN pg_class c ON ((c.oid = d.refobjid)))
                  WHERE ((d.classid = ('pg_proc'::regclass)::oid) AND (d.objid = f_1.oid) AND (d.refclassid = ('pg_class'::regclass)::oid) AND (c.relnamespace = ('pyretrieve'::regnamespace)::oid))))) AND (has_function_privilege('public'::name, f_1.oid, 'EXECUTE'::text) OR has_function_privilege('pyretrieve_reader'::name, f_1.oid, 'EXECUTE'::text) OR has_function_privilege('pyretrieve_writer'::name, f_1.oid, 'EXECUTE'::text) OR has_function_privilege('pyretrieve_admin'::name, f_1.oid, 'EXECUTE'::text)))
        UNION ALL
         SELECT 'error'::text,
            'view_outside_schema'::text,
            'view'::text,
            format('%I.%I'::text, n.nspname, v.relname) AS format,
            format('a view outside the pyretrieve schema reads pyretrieve tables with its owner''s (%s) rights and policies, not the caller''s, and principals may read it'::text, pg_get_userbyid(v.relowner)) AS format,
            format('ALTER VIEW %I.%I SET (security_invoker = true); or DROP VIEW it'::text, n.nspname, v.relname) AS format
           FROM (pg_class v
             JOIN pg_namespace n ON ((n.oid = v.relnamespace)))
          WHERE ((v.relkind = 'v'::"char") AND (n.nspname <> ALL (ARRAY['pyretrieve'::name, 'pg_catalog'::name, 'information_schema'::name])) AND (NOT COALESCE((('security_invoker=true'::text = ANY (v.reloptions)) OR ('security_invoker=on'::text = ANY (v.reloptions))), false)) AND (EXISTS ( SELECT
                   FROM ((pg_rewrite w
                     JOIN pg_depend d ON (((d.classid = ('pg_rewrite'::regclass)::oid) AND (d.objid = w.oid) AND (d.refclassid = ('pg_class'::regclass)::oid))))
                     JOIN pg_class c ON ((c.oid = d.refobjid)))
                  WHERE ((w.ev_class = v.oid) AND (c.relnamespace = ('pyretrieve'::regnamespace)::oid)))) AND (has_table_privilege('public'::name, v.oid, 'SELECT'::text) OR has_table_privilege('pyretrieve_reader'::name, v.oid, 'SELECT'::text) OR has_table_privilege('pyretrieve_writer'::name, v.oid, 'SELECT'::text) OR has_table_privilege('pyretrieve_admin'::name, v.oid, 'SELECT'::text)))
        UNION ALL
         SELECT
                CASE
                    WHEN (cardinality(k.writable_by) > 0) THEN 'warning'::text
                    ELSE 'info'::text
                END AS "case",
            'unique_key_not_workspace_first'::text,
            'index'::text,
            k.index_name,
                CASE
                    WHEN (cardinality(k.writable_by) > 0) THEN format('%s (%s) on %s does not start with workspace_id and %s may write its columns: a unique violation reveals that another workspace holds the key'::text, k.kind, array_to_string(k.key_columns, ', '::text), k.table_name, array_to_string(k.writable_by, ', '::text))
                    ELSE format('%s (%s) on %s does not start with workspace_id, but no role other than the owner can write its columns (their values come from defaults), so no caller can provoke a violation'::text, k.kind, array_to_string(k.key_columns, ', '::text), k.table_name)
                END AS format,
                CASE
                    WHEN (cardinality(k.writable_by) > 0) THEN format('recreate the key as (workspace_id, %s)'::text, array_to_string(array_remove(k.key_columns, 'workspace_id'::text), ', '::text))
                    ELSE 'none while its columns stay unwritable; lead it with workspace_id if they ever become writable'::text
                END AS "case"
           FROM pyretrieve.audit_keys k
          WHERE (k.table_has_workspace_id AND (NOT k.leads_with_workspace_id))
        UNION ALL
         SELECT 'error'::text,
            'definer_without_search_path'::text,
            'function'::text,
            fn.function_name,
            format('SECURITY DEFINER (runs as %s) without a pinned search_path: the caller''s search_path resolves its names'::text, fn.owner) AS format,
            format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp;'::text, fn.function_name) AS format
           FROM pyretrieve.audit_functions fn
          WHERE (fn.security_definer AND (fn.search_path IS NULL))
        UNION ALL
         SELECT 'warning'::text,
            'definer_search_path_unsafe'::text,
            'function'::text,
            fn.function_name,
            format('SECURITY DEFINER with search_path = %s, which does not end with pg_temp: temporary objects are searched first'::text, fn.search_path) AS format,
            format('ALTER FUNCTION %s SET search_path = <trusted schemas>, pg_temp;'::text, fn.function_name) AS format
           FROM pyretrieve.audit_functions fn
          WHERE (fn.security_definer AND (fn.search_path IS NOT NULL) AND (fn.search_path !~ '(^|,)\s*"?pg_temp"?\s*$'::text))
        UNION ALL
         SELECT 'error'::text,
            'definer_public_execute'::text,
            'function'::text,
            fn.function_name,
            format('SECURITY DEFINER (runs as %s) and executable by PUBLIC, that is by every role'::text, fn.owner) AS format,
            format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC; then GRANT EXECUTE to the roles that need it'::text, fn.function_name) AS format
           FROM pyretrieve.audit_functions fn
          WHERE (fn.security_definer AND fn.public_execute)
        UNION ALL
         SELECT 'info'::text,
            'security_definer'::text,
            'function'::text,
            fn.function_name,
            format('SECURITY DEFINER: runs as %s, search_path = %s, executable by %s. Reason: %s'::text, fn.owner, COALESCE(fn.search_path, '(none)'::text), array_to_string(fn.executable_by, ', '::text), COALESCE(fn.description, '(no COMMENT ON FUNCTION states one)'::text)) AS format,
            'none while the reason holds; keep EXECUTE limited to the roles listed'::text
           FROM pyretrieve.audit_functions fn
          WHERE fn.security_definer
        UNION ALL
         SELECT 'warning'::text,
            'leakproof_function'::text,
            'function'::text,
            fn.function_name,
            'LEAKPROOF: the planner may run it on rows before the policies filter them'::text,
            format('ALTER FUNCTION %s NOT LEAKPROOF; unless it provably cannot raise an error or reveal its arguments'::text, fn.function_name) AS format
           FROM pyretrieve.audit_functions fn
          WHERE fn.leakproof
        UNION ALL
         SELECT 'error'::text,
            'view_without_security_invoker'::text,
            'view'::text,
            v.view_name,
            format('the view reads its tables as its owner %s, with the owner''s privileges and policies, not the caller''s'::text, v.owner) AS format,
            format('ALTER VIEW %s SET (security_invoker = true);'::text, v.view_name) AS format
           FROM pyretrieve.audit_views v
          WHERE (NOT v.security_invoker)
        UNION ALL
         SELECT 'error'::text,
            'truncate_granted'::text,
            pr.object_type,
            pr.object,
            format('%s holds TRUNCATE, which ignores row-level security: it can empty every workspace at once'::text, pr.grantee) AS format,
            format('REVOKE TRUNCATE ON %s FROM %s;'::text, pr.object, pr.grantee) AS format
           FROM pyretrieve.audit_privileges pr
          WHERE ((pr.privilege = 'TRUNCATE'::text) AND (NOT pr.grantee_is_owner))
        UNION ALL
         SELECT 'warning'::text,
            'references_granted'::text,
            pr.object_type,
            (pr.object || COALESCE(('.'::text || quote_ident(pr.column_name)), ''::text)),
            format('%s holds REFERENCES: a foreign key it creates can probe which keys exist in every workspace (foreign-key checks ignore row-level security)'::text, pr.grantee) AS format,
            format('REVOKE REFERENCES%s ON %s FROM %s;'::text, COALESCE(((' ('::text || quote_ident(pr.column_name)) || ')'::text), ''::text), pr.object, pr.grantee) AS format
           FROM pyretrieve.audit_privileges pr
          WHERE ((pr.privilege = 'REFERENCES'::text) AND (NOT pr.grantee_is_owner))
        UNION ALL
         SELECT 'warning'::text,
            'public_privilege'::text,
            pr.object_type,
            (pr.object || COALESCE(('.'::text || quote_ident(pr.column_name)), ''::text)),
            format('PUBLIC (every role) holds %s'::text, pr.privilege) AS format,
            format('REVOKE %s%s ON %s%s FROM PUBLIC;'::text, pr.privilege, COALESCE(((' ('::text || quote_ident(pr.column_name)) || ')'::text), ''::text),
                CASE
                    WHEN (pr.object_type = 'schema'::text) THEN 'SCHEMA '::text
                    ELSE ''::text
                END, pr.object) AS format
           FROM pyretrieve.audit_privileges pr
          WHERE (pr.grantee = 'PUBLIC'::text)
        UNION ALL
         SELECT 'warning'::text,
            'schema_create_granted'::text,
            'schema'::text,
            pr.object,
            format('%s may create objects in the schema'::text, pr.grantee) AS format,
            format('REVOKE CREATE ON SCHEMA %s FROM %s;'::text, pr.object, pr.grantee) AS format
           FROM pyretrieve.audit_privileges pr
          WHERE ((pr.object_type = 'schema'::text) AND (pr.privilege = 'CREATE'::text) AND (NOT pr.grantee_is_owner) AND (pr.grantee <> 'PUBLIC'::text))
        UNION ALL
         SELECT 'error'::text,
            'app_role_superuser'::text,
            'role'::text,
            r.role_name,
                CASE
                    WHEN r.superuser THEN format('%s (%s) is SUPERUSER and bypasses every policy'::text, r.role_name, COALESCE(array_to_string(r.app_groups, ', '::text), ''::text))
                    ELSE format('%s reaches SUPERUSER through %s and can SET ROLE past every policy'::text, r.role_name, r.superuser_via)
                END AS format,
                CASE
                    WHEN r.superuser THEN format('ALTER ROLE %I NOSUPERUSER;'::text, r.role_name)
                    ELSE format('REVOKE %I FROM %I; (the first membership of %s)'::text, split_part(r.superuser_via, ' -> '::text, 2), r.role_name, r.superuser_via)
                END AS format
           FROM pyretrieve.audit_roles r
          WHERE (r.bound_by_rls AND r.reaches_superuser)
        UNION ALL
         SELECT 'error'::text,
            'app_role_bypassrls'::text,
            'role'::text,
            r.role_name,
                CASE
                    WHEN r.bypassrls THEN format('%s has BYPASSRLS and ignores every policy'::text, r.role_name)
                    ELSE format('%s reaches BYPASSRLS through %s and can SET ROLE past every policy'::text, r.role_name, r.bypassrls_via)
                END AS format,
                CASE
                    WHEN r.bypassrls THEN format('ALTER ROLE %I NOBYPASSRLS;'::text, r.role_name)
                    ELSE format('REVOKE %I FROM %I; (the first membership of %s)'::text, split_part(r.bypassrls_via, ' -> '::text, 2), r.role_name, r.bypassrls_via)
                END AS format
           FROM pyretrieve.audit_roles r
          WHERE (r.bound_by_rls AND r.reaches_bypassrls)
        UNION ALL
         SELECT 'info'::text,
            'login_can_become_owner'::text,
            'role'::text,
            r.role_name,
            format('%s can log in and SET ROLE pyretrieve_owner (%s): as the owner it can alter or drop every table, policy and function'::text, r.role_name, COALESCE(r.owner_via, 'superuser'::text)) AS format,
            'keep this to the deployment (migration) role; otherwise REVOKE pyretrieve_owner FROM it'::text
           FROM pyretrieve.audit_roles r
          WHERE (r.can_login AND r.can_become_owner AND (NOT r.superuser))
        UNION ALL
         SELECT 'error'::text,
            'app_role_owns_objects'::text,
            o.object_type,
            o.object,
            format('owned by %s, a member of %s: as owner it can alter its policies and grants'::text, o.owner, array_to_string(r.app_groups, ', '::text)) AS format,
            format('ALTER %s %s OWNER TO pyretrieve_owner;'::text, upper(o.object_type), o.object) AS format
           FROM (pyretrieve.audit_objects o
             JOIN pyretrieve.audit_roles r ON ((r.role_name = o.owner)))
          WHERE ((cardinality(r.app_groups) > 0) AND (o.object_type <> 'index'::text))
        UNION ALL
         SELECT 'error'::text,
            'owned_by_login_role'::text,
            o.object_type,
            o.object,
            format('owned by %s, a role that can log in: its sessions are the owner, which may alter or drop the object and its policies'::text, o.owner) AS format,
            format('ALTER %s %s OWNER TO pyretrieve_owner;'::text, upper(o.object_type), o.object) AS format
           FROM pyretrieve.audit_objects o
          WHERE (o.owner_can_login AND (o.object_type <> 'index'::text))
        UNION ALL
         SELECT 'warning'::text,
            'unexpected_owner'::text,
            o.object_type,
            o.object,
            format('owned by %s, not by pyretrieve_owner'::text, o.owner) AS format,
            format('ALTER %s %s OWNER TO pyretrieve_owner;'::text, upper(o.object_type), o.object) AS format
           FROM pyretrieve.audit_objects o
          WHERE ((o.owner <> 'pyretrieve_owner'::text) AND (NOT o.owner_can_login) AND (o.object_type <> 'index'::text) AND (NOT ((o.owner = 'pyretrieve_api'::text) AND (o.object_type = 'function'::text))) AND (NOT (EXISTS ( SELECT
                   FROM pyretrieve.audit_roles r
                  WHERE ((r.role_name = o.owner) AND (cardinality(r.app_groups) > 0))))))
        UNION ALL
         SELECT 'warning'::text,
            'grant_to_dropped_role'::text,
            'grant'::text,
            format('%s/%s purpose %s'::text, g.workspace_id, g.project_id, g.purpose) AS format,
            format('grant %s names role OID %s, which no longer exists: a role created later with the same OID would hold it'::text, g.grant_id, (g.principal)::oid) AS format,
            format('DELETE FROM pyretrieve.grants WHERE workspace_id = %L AND grant_id = %L;'::text, g.workspace_id, g.grant_id) AS format
           FROM pyretrieve.grants g
          WHERE (NOT (EXISTS ( SELECT
                   FROM pg_roles r
                  WHERE (r.oid = (g.principal)::oid))))
        UNION ALL
         SELECT 'warning'::text,
            'server_version_below_minimum'::text,
            'server'::text,
            s.server_version,
            format('PostgreSQL %s is below %s, the first %s.x release with the fixes for %s'::text, s.server_version, COALESCE(s.minimum_version, '(a supported major version)'::text), s.major, s.fixes) AS format,
            format('upgrade to %s or later (a minor upgrade: replace the binaries and restart)'::text, COALESCE(s.minimum_version, '18'::text)) AS format
           FROM pyretrieve.audit_server s
          WHERE (NOT s.meets_minimum)
        )
 SELECT severity,
    code,
    object_type,
    object,
    evidence,
    fix
   FROM f
  ORDER BY
        CASE severity
            WHEN 'error'::text THEN 1
            WHEN 'warning'::text THEN 2
            ELSE 3
        END, code, object, evidence;
COMMENT ON VIEW pyretrieve.audit_findings IS 'Every finding that weakens isolation, derived from the other audit views: severity (error | warning | info), a stable code, the object, the evidence and a fix. The shipped schema has no error or warning. `pyretrieve audit --fail-on error|warning` exits 1 when one exists.';

-- =============================================================================================
-- Hand-written (the drafter sees no column change): pyretrieve.decisions becomes a table
-- partitioned by month of evaluated_at (UTC), its rows moved into monthly partitions. This is
-- a data move: the down script moves them back.
-- =============================================================================================
-- Statements that replay, unchanged, what DROP TABLE pyretrieve.decisions CASCADE takes with
-- it: the functions typed by its row (bound_decision, require_decision) with their comments
-- and grants, the table's own policies and grants, and every policy that calls one of those
-- functions. They are read from the catalog here, so this section restates none of them.
CREATE TABLE pyretrieve.decisions_replay (ord integer, statement text);
INSERT INTO pyretrieve.decisions_replay
SELECT 1, s.statement
  FROM pg_catalog.pg_proc p,
       LATERAL (SELECT pg_catalog.pg_get_functiondef(p.oid) AS statement
                UNION ALL
                SELECT pg_catalog.format('COMMENT ON FUNCTION %s IS %L', p.oid::regprocedure,
                                         pg_catalog.obj_description(p.oid, 'pg_proc'))
                 WHERE pg_catalog.obj_description(p.oid, 'pg_proc') IS NOT NULL
                UNION ALL
                SELECT pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', p.oid::regprocedure)
                UNION ALL
                SELECT pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', p.oid::regprocedure,
                                         pg_catalog.pg_get_userbyid(a.grantee))
                  FROM pg_catalog.aclexplode(p.proacl) a
                 WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner) s
 WHERE p.oid IN ('pyretrieve.bound_decision()'::regprocedure, 'pyretrieve.require_decision(uuid)'::regprocedure);
INSERT INTO pyretrieve.decisions_replay
SELECT 2, pg_catalog.format('CREATE POLICY %I ON %s%s FOR %s TO %s%s%s', pol.polname, pol.polrelid::regclass,
              CASE WHEN pol.polpermissive THEN '' ELSE ' AS RESTRICTIVE' END,
              CASE pol.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'
                              WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
              (SELECT pg_catalog.string_agg(CASE WHEN r.oid = 0 THEN 'PUBLIC'
                                                 ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r.oid)) END, ', ')
                 FROM pg_catalog.unnest(pol.polroles) AS r(oid)),
              ' USING (' || pg_catalog.pg_get_expr(pol.polqual, pol.polrelid) || ')',
              ' WITH CHECK (' || pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid) || ')')
  FROM pg_catalog.pg_policy pol
 WHERE pol.polrelid = 'pyretrieve.decisions'::regclass
    OR EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                WHERE d.classid = 'pg_catalog.pg_policy'::regclass AND d.objid = pol.oid
                  AND d.refclassid = 'pg_catalog.pg_proc'::regclass
                  AND d.refobjid IN ('pyretrieve.bound_decision()'::regprocedure,
                                     'pyretrieve.require_decision(uuid)'::regprocedure));
INSERT INTO pyretrieve.decisions_replay
SELECT 3, pg_catalog.format('GRANT %s%s ON pyretrieve.decisions TO %I', a.privilege_type,
              CASE WHEN g.attname IS NULL THEN '' ELSE ' (' || pg_catalog.quote_ident(g.attname) || ')' END,
              pg_catalog.pg_get_userbyid(a.grantee))
  FROM (SELECT NULL::name AS attname, c.relacl AS acl, c.relowner AS owner FROM pg_catalog.pg_class c
         WHERE c.oid = 'pyretrieve.decisions'::regclass
        UNION ALL
        SELECT at.attname, at.attacl, c.relowner FROM pg_catalog.pg_attribute at
          JOIN pg_catalog.pg_class c ON c.oid = at.attrelid
         WHERE at.attrelid = 'pyretrieve.decisions'::regclass AND at.attacl IS NOT NULL) g,
       LATERAL pg_catalog.aclexplode(g.acl) a
 WHERE a.grantee <> g.owner AND a.grantee <> 0;

-- The old table steps aside with its indexes and constraints (their names are unique in the
-- schema); its rows are copied into the new one, then it is dropped with what depends on it.
ALTER TABLE pyretrieve.decisions NO FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.decisions RENAME TO decisions_moving;
DO $rename$
DECLARE
    i record;
BEGIN
    FOR i IN SELECT c.relname FROM pg_catalog.pg_index x JOIN pg_catalog.pg_class c ON c.oid = x.indexrelid
              WHERE x.indrelid = 'pyretrieve.decisions_moving'::regclass LOOP
        EXECUTE pg_catalog.format('ALTER INDEX pyretrieve.%I RENAME TO %I', i.relname, 'moving_' || i.relname);
    END LOOP;
    -- Constraint names are chosen unique in the schema: the new table's must be free.
    FOR i IN SELECT co.conname FROM pg_catalog.pg_constraint co
              WHERE co.conrelid = 'pyretrieve.decisions_moving'::regclass AND co.contype NOT IN ('p', 'u') LOOP
        EXECUTE pg_catalog.format('ALTER TABLE pyretrieve.decisions_moving RENAME CONSTRAINT %I TO %I',
                                  i.conname, 'moving_' || i.conname);
    END LOOP;
END
$rename$;
CREATE TABLE pyretrieve.decisions (
    workspace_id      pyretrieve.identifier NOT NULL,
    decision_id       uuid NOT NULL DEFAULT gen_random_uuid(),
    principal         name NOT NULL,
    project_id        pyretrieve.identifier NOT NULL,
    purpose           pyretrieve.identifier NOT NULL,
    grant_id          uuid NOT NULL,
    evaluated_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    ceiling           pyretrieve.classification NOT NULL,
    max_age           interval,
    semantic_policy   pyretrieve.semantic_policy NOT NULL,
    requested_limit   integer NOT NULL,
    candidate_limit   integer NOT NULL,
    query_digest      bytea NOT NULL CHECK (pg_catalog.length(query_digest) = 32),
    semantic_intent   text NOT NULL CHECK (semantic_intent IN ('disabled', 'optional', 'required')),
    embedding_digest  bytea CHECK (pg_catalog.length(embedding_digest) = 32),
    xact_id           xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
    PRIMARY KEY (workspace_id, decision_id, evaluated_at)
) PARTITION BY RANGE (evaluated_at);
CREATE INDEX decisions_xact_idx ON pyretrieve.decisions (xact_id);
CREATE INDEX decisions_scope_time_idx ON pyretrieve.decisions (workspace_id, project_id, evaluated_at);
CREATE INDEX decisions_principal_time_idx ON pyretrieve.decisions (principal, evaluated_at);
COMMENT ON TABLE pyretrieve.decisions IS
    'Audit log of authorisation decisions: digests and intent only, never query text, embedding values or content. At most one per transaction: the read binding of that transaction. Partitioned by month of evaluated_at (UTC); partitions are created ahead by pyretrieve.ensure_decision_partitions and whole months older than a retention are dropped by pyretrieve.prune_decisions (admins).';
-- A partition for every month that holds a decision, and for the next two.
SELECT pg_catalog.count(*) AS decision_partitions
  FROM pyretrieve.ensure_decision_partitions(
           p_from => (SELECT pg_catalog.min(m.evaluated_at) FROM pyretrieve.decisions_moving m));
INSERT INTO pyretrieve.decisions SELECT * FROM pyretrieve.decisions_moving;
DROP TABLE pyretrieve.decisions_moving CASCADE;
ALTER TABLE pyretrieve.decisions ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
DO $replay$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT statement FROM pyretrieve.decisions_replay ORDER BY ord LOOP
        EXECUTE r.statement;
    END LOOP;
END
$replay$;
DROP TABLE pyretrieve.decisions_replay;
-- ====================================================================== end of hand-written

UPDATE pyretrieve.installation SET schema_version = '0010';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
