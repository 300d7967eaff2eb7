-- pyretrieve migration 0043: generic_plans
-- Every function a reader or writer may execute plans generically (plan_cache_mode), as
-- search, the legs, fragments() and ingest_batch already did: a plan made for the values at
-- hand follows their statistics, which lag a growing scope, and planned for a scope they took
-- for one row, the writers' probes of one key (put, supersede, retract, put_embedding, the
-- ingest helpers) read the scope whole. The audit flags any such function that does not pin
-- it (definer_plans_for_the_values_at_hand). Bodies, comments and privileges are unchanged.
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.authorize(p_workspace text, p_project text, p_purpose text, p_query_digest bytea, p_semantic_intent text, p_embedding_digest bytea, p_requested_limit integer)
 RETURNS TABLE(decision_id uuid, principal name, workspace_id text, project_id text, purpose text, evaluated_at timestamp with time zone, ceiling pyretrieve.classification, max_age interval, semantic_policy pyretrieve.semantic_policy, candidate_limit integer, grant_id uuid)
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
    -- specific grant wins (the caller's own before a group's), then the widest. It is chosen
    -- once (a sub-select): compared row by row, a caller's enable_indexscan off made a scan of
    -- the grants choose it again for every grant.
    SELECT gr.* INTO g
      FROM pyretrieve.grants gr
     WHERE gr.workspace_id = p_workspace
       AND gr.grant_id = (SELECT pyretrieve.effective_grant(p_workspace, p_project, p_purpose));
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
CREATE OR REPLACE FUNCTION pyretrieve.bind_write_scope(p_workspace text, p_project text)
 RETURNS pyretrieve.classification
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.bind_write_scope(text,text) IS 'Bind this transaction''s write scope to a workspace/project where the caller is a writer with a live grant, recording who wrote where (write_bindings); returns the writer''s classification ceiling there (the highest of its grants). The latest binding is in force. Raises PR001 otherwise, PR003 when the transaction holds a read decision, PR004 for a superuser or BYPASSRLS caller. The write functions call it themselves; it never widens access. SECURITY DEFINER (runs as pyretrieve_api).';
REVOKE ALL ON FUNCTION pyretrieve.bind_write_scope(text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.bind_write_scope(text,text) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
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
CREATE OR REPLACE FUNCTION pyretrieve.supersede_fragment(p_workspace text, p_project text, p_fragment_id uuid, p_body text, p_classification pyretrieve.classification DEFAULT NULL::pyretrieve.classification, p_observed_at timestamp with time zone DEFAULT NULL::timestamp with time zone, p_expires_at timestamp with time zone DEFAULT NULL::timestamp with time zone, p_source_uri text DEFAULT NULL::text, p_source_revision text DEFAULT NULL::text, p_manifest_id text DEFAULT NULL::text)
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
$function$;
COMMENT ON FUNCTION pyretrieve.supersede_fragment(text,text,uuid,text,pyretrieve.classification,timestamp with time zone,timestamp with time zone,text,text,text) IS 'Replace an active fragment with new content: stores the new fragment (as put_fragment) and marks the old one superseded by it; returns the new id (the old id when the content and classification are unchanged). Raises PR020 alike for an absent fragment and one the writer may not see. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.supersede_fragment(text,text,uuid,text,pyretrieve.classification,timestamp with time zone,timestamp with time zone,text,text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.supersede_fragment(text,text,uuid,text,pyretrieve.classification,timestamp with time zone,timestamp with time zone,text,text,text) TO pyretrieve_writer;
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
CREATE OR REPLACE FUNCTION pyretrieve.compact_lexical_index(p_workspace text, p_project text, p_min_share double precision DEFAULT 0)
 RETURNS TABLE(rows_read integer, rows_written integer, postings integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
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
CREATE OR REPLACE FUNCTION pyretrieve.active_sources(p_workspace text, p_project text, p_uris text[])
 RETURNS TABLE(source_uri text, fragment_id uuid, content_digest bytea, classification pyretrieve.classification)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.active_sources(text,text,text[]) IS 'The active fragments (source_uri, fragment_id, content_digest, classification) of the given source uris in the caller''s write scope, up to the writer''s ceiling: what ingestion compares against to stay idempotent. Binds the write scope (PR001 without a writer grant). SECURITY DEFINER (runs as pyretrieve_api).';
REVOKE ALL ON FUNCTION pyretrieve.active_sources(text,text,text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.active_sources(text,text,text[]) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.active_sources_like(p_workspace text, p_project text, p_patterns text[])
 RETURNS TABLE(source_uri text, fragment_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.active_sources_like(text,text,text[]) IS 'The active fragments of the caller''s write scope (up to the writer''s ceiling) whose source_uri matches one of the LIKE patterns: how ingestion finds what a shorter file, or a deleted one, no longer holds. SECURITY DEFINER (runs as pyretrieve_api).';
REVOKE ALL ON FUNCTION pyretrieve.active_sources_like(text,text,text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.active_sources_like(text,text,text[]) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.created_now(p_workspace text, p_project text, p_ids uuid[])
 RETURNS TABLE(fragment_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.created_now(text,text,uuid[]) IS 'Which of the given fragments this transaction created (as opposed to found already active with the same content). SECURITY DEFINER (runs as pyretrieve_api).';
REVOKE ALL ON FUNCTION pyretrieve.created_now(text,text,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.created_now(text,text,uuid[]) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.embeddings_needed(p_workspace text, p_project text, p_model text, p_ids uuid[])
 RETURNS TABLE(fragment_id uuid, content_digest bytea, missing boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.embeddings_needed(text,text,text,uuid[]) IS 'Of the given fragments in the caller''s write scope, those whose embedding for p_model is missing or stale (computed from other text, or older than the fragment), with missing true for the first kind. SECURITY DEFINER (runs as pyretrieve_api).';
REVOKE ALL ON FUNCTION pyretrieve.embeddings_needed(text,text,text,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.embeddings_needed(text,text,text,uuid[]) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.stale_embeddings(p_workspace text, p_project text, p_model text, p_after uuid DEFAULT NULL::uuid, p_limit integer DEFAULT NULL::integer)
 RETURNS TABLE(fragment_id uuid, body text, content_digest bytea, missing boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.stale_embeddings(text,text,text,uuid,integer) IS 'Active fragments of the caller''s write scope whose embedding for p_model is missing or stale, in fragment-id order after p_after (keyset pagination), at most p_limit (all when NULL), with their bodies so they can be embedded again. SECURITY DEFINER (runs as pyretrieve_api).';
REVOKE ALL ON FUNCTION pyretrieve.stale_embeddings(text,text,text,uuid,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.stale_embeddings(text,text,text,uuid,integer) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.ingest_state(p_workspace text, p_project text, p_uris text[], p_model text DEFAULT NULL::text)
 RETURNS TABLE(source_uri text, fragment_id uuid, content_digest bytea, classification pyretrieve.classification, embedding_current boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
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
CREATE OR REPLACE FUNCTION pyretrieve.list_models()
 RETURNS TABLE(model_id text, dimension integer, registered_at timestamp with time zone, fusion text, lexical_weight double precision, vector_weight double precision)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
BEGIN
    IF NOT (pyretrieve.caller_in('pyretrieve_reader') OR pyretrieve.caller_in('pyretrieve_admin')) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    RETURN QUERY
    SELECT m.model_id, m.dimension, m.registered_at, m.fusion, m.lexical_weight, m.vector_weight
      FROM pyretrieve.embedding_models m ORDER BY 1;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.list_models() IS 'The registered embedding models, their dimensions, default fusions and default weights (configuration, not tenant data). Readers, writers and admins. SECURITY DEFINER (runs as pyretrieve_api).';
REVOKE ALL ON FUNCTION pyretrieve.list_models() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.list_models() TO pyretrieve_admin, pyretrieve_reader, pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.model_defaults(p_model text)
 RETURNS TABLE(fusion text, lexical_weight double precision, vector_weight double precision)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
BEGIN
    IF NOT (pyretrieve.caller_in('pyretrieve_reader') OR pyretrieve.caller_in('pyretrieve_admin')) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    RETURN QUERY
    SELECT m.fusion, m.lexical_weight, m.vector_weight FROM pyretrieve.embedding_models m
     WHERE m.model_id = p_model;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.model_defaults(text) IS 'A registered model''s default fusion and weights (lexical, vector), or no row for a model that is not registered: what a search naming the model uses when it gives none. Configuration, not tenant data. Readers, writers and admins. SECURITY DEFINER (runs as pyretrieve_api) because principals hold no table privilege.';
REVOKE ALL ON FUNCTION pyretrieve.model_defaults(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.model_defaults(text) TO pyretrieve_admin, pyretrieve_reader, pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.schema_version()
 RETURNS text
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
BEGIN ATOMIC
 SELECT i.schema_version
    FROM pyretrieve.installation i;
END;
COMMENT ON FUNCTION pyretrieve.schema_version() IS 'The installed schema version. SECURITY DEFINER (runs as pyretrieve_api) so that principals, who hold no table privilege, can read it.';
REVOKE ALL ON FUNCTION pyretrieve.schema_version() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.schema_version() TO pyretrieve_admin, pyretrieve_reader, pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.put_tool(p_workspace text, p_project text, p_schema jsonb, p_operation text DEFAULT 'other'::text, p_tags text[] DEFAULT '{}'::text[], p_server text DEFAULT NULL::text, p_classification pyretrieve.classification DEFAULT 'internal'::pyretrieve.classification, p_expires_at timestamp with time zone DEFAULT NULL::timestamp with time zone, p_observed_at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(fragment_id uuid, schema_version integer, status text)
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
    v_name text;
    v_body text;
    v_tags text[] := coalesce(p_tags, '{}');
    old record;
    v_new uuid;
    v_version integer := 1;
    v_found boolean;
    f pyretrieve.fragments;
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_schema IS NULL OR jsonb_typeof(p_schema) <> 'object' OR jsonb_typeof(p_schema -> 'name') <> 'string'
       OR (p_schema ->> 'name') !~ '^[A-Za-z0-9_.:/-]{1,128}$'
       OR (p_schema ? 'description' AND jsonb_typeof(p_schema -> 'description') <> 'string')
       OR (p_schema ? 'parameters' AND jsonb_typeof(p_schema -> 'parameters') <> 'object')
       OR octet_length(p_schema::text) > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid tool schema';
    END IF;
    IF p_operation IS NULL OR p_operation NOT IN ('delete', 'update', 'create', 'get', 'search', 'list', 'other') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid operation family';
    END IF;
    IF cardinality(v_tags) > 32 OR EXISTS (SELECT 1 FROM unnest(v_tags) t WHERE t IS NULL OR length(t) NOT BETWEEN 1 AND 64)
       OR length(p_server) > 256 OR p_classification IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid tool tags, server or classification';
    END IF;
    v_name := p_schema ->> 'name';
    v_body := pyretrieve.tool_text(p_schema);

    -- The active version of this name the writer may see (up to its ceiling). A hidden one
    -- above the ceiling is not found, and the writer gets its own row: no existence oracle.
    SELECT t.fragment_id, t.schema, t.schema_version, t.operation, t.tags, t.server,
           fr.classification, fr.expires_at
      INTO old
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments fr ON fr.workspace_id = t.workspace_id AND fr.fragment_id = t.fragment_id
     WHERE t.workspace_id = p_workspace AND t.project_id = p_project AND t.name = v_name
       AND fr.project_id = p_project AND fr.state = 'active'
     ORDER BY t.schema_version DESC, fr.classification DESC, t.fragment_id
     LIMIT 1;

    v_found := FOUND;
    IF v_found AND old.classification = p_classification AND old.schema = p_schema THEN
        IF old.operation = p_operation AND old.tags = v_tags AND old.server IS NOT DISTINCT FROM p_server THEN
            RETURN QUERY SELECT old.fragment_id, old.schema_version, 'unchanged'::text;
            RETURN;
        END IF;
        UPDATE pyretrieve.tools t SET operation = p_operation, tags = v_tags, server = p_server
         WHERE t.workspace_id = p_workspace AND t.fragment_id = old.fragment_id;
        RETURN QUERY SELECT old.fragment_id, old.schema_version, 'updated'::text;
        RETURN;
    END IF;
    IF v_found THEN
        v_new := pyretrieve.supersede_fragment(
            p_workspace := p_workspace, p_project := p_project, p_fragment_id := old.fragment_id,
            p_body := v_body, p_classification := p_classification, p_observed_at := p_observed_at,
            p_expires_at := p_expires_at, p_source_uri := 'tool:' || v_name);
        v_version := old.schema_version + CASE WHEN old.schema = p_schema THEN 0 ELSE 1 END;
        IF v_new = old.fragment_id THEN
            -- The searchable text is the same (the change is in defaults, required arguments
            -- or other constraints): the fragment stays, the tool row records the new schema.
            UPDATE pyretrieve.tools t
               SET schema = p_schema, schema_version = v_version, operation = p_operation,
                   tags = v_tags, server = p_server
             WHERE t.workspace_id = p_workspace AND t.fragment_id = old.fragment_id;
            RETURN QUERY SELECT old.fragment_id, v_version, 'updated'::text;
            RETURN;
        END IF;
    ELSE
        v_new := pyretrieve.put_fragment(
            p_workspace := p_workspace, p_project := p_project, p_body := v_body,
            p_classification := p_classification, p_observed_at := p_observed_at,
            p_expires_at := p_expires_at, p_source_uri := 'tool:' || v_name);
    END IF;

    SELECT fr.* INTO STRICT f FROM pyretrieve.fragments fr
     WHERE fr.workspace_id = p_workspace AND fr.fragment_id = v_new;
    INSERT INTO pyretrieve.tools AS t (
        workspace_id, project_id, fragment_id, name, schema, schema_version, operation, tags, server,
        classification, observed_at, expires_at)
    VALUES (p_workspace, p_project, v_new, v_name, p_schema, v_version, p_operation, v_tags, p_server,
            f.classification, f.observed_at, f.expires_at)
    ON CONFLICT (workspace_id, fragment_id) DO NOTHING;
    RETURN QUERY SELECT v_new, v_version, CASE WHEN v_found THEN 'superseded' ELSE 'created' END;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.put_tool(text,text,jsonb,text,text[],text,pyretrieve.classification,timestamp with time zone,timestamp with time zone) IS 'Register a tool (a JSON schema with name, description and parameters) in a workspace/project where the caller is a writer: stores a fragment whose body is pyretrieve.tool_text(schema) and a tools row. Re-registering an unchanged tool writes nothing (status unchanged); a changed schema supersedes the active version''s fragment and bumps schema_version (status superseded; when the searchable text is unchanged, e.g. only defaults or required arguments differ, the same fragment keeps the new schema: status updated); changed tags, server or operation alone update the row (status updated). Raises PR010 for an invalid schema, operation family, tags or server. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.put_tool(text,text,jsonb,text,text[],text,pyretrieve.classification,timestamp with time zone,timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.put_tool(text,text,jsonb,text,text[],text,pyretrieve.classification,timestamp with time zone,timestamp with time zone) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.tool_entries(p_decision uuid, p_ids uuid[])
 RETURNS TABLE(fragment_id uuid, name text, schema_version integer, operation text, tags text[], server text, schema_chars integer, entities text[])
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 1000 ids';
    END IF;
    RETURN QUERY
    -- The ids as an index condition (= ANY): one key look-up per id, whatever the size of the
    -- scope's catalog (a join with unnest() let the planner read the whole scope).
    SELECT t.fragment_id, t.name, t.schema_version, t.operation, t.tags, t.server,
           length(t.schema::text), t.entities
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND f.workspace_id = d.workspace_id
       AND t.fragment_id = ANY (p_ids)
       AND t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) IS 'The tool metadata (name, schema version, operation family, tags, server, schema size in characters, entity words of the name and description; not the schema) of the given fragment ids that are tools the transaction''s decision admits; absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.tool_schemas(p_decision uuid, p_ids uuid[])
 RETURNS TABLE(fragment_id uuid, name text, schema_version integer, schema jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 1000 ids';
    END IF;
    RETURN QUERY
    SELECT t.fragment_id, t.name, t.schema_version, t.schema
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND f.workspace_id = d.workspace_id
       AND t.fragment_id = ANY (p_ids)
       AND t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.tool_schemas(uuid,uuid[]) IS 'The JSON schemas of the given fragment ids that are tools the transaction''s decision admits (active, in scope, at or below the ceiling, fresh, not expired); absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.tool_schemas(uuid,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_schemas(uuid,uuid[]) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.tool_by_name(p_decision uuid, p_name text)
 RETURNS TABLE(fragment_id uuid, name text, schema_version integer, operation text, schema jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_name IS NULL OR length(p_name) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'tool name must be 1 to 128 characters';
    END IF;
    RETURN QUERY
    SELECT t.fragment_id, t.name, t.schema_version, t.operation, t.schema
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND t.project_id = d.project_id AND t.name = p_name
       AND f.project_id = d.project_id AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.schema_version DESC, f.classification DESC, t.fragment_id
     LIMIT 1;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.tool_by_name(uuid,text) IS 'The active tool of this exact name that the transaction''s decision admits (its newest schema version), or no row: an absent tool and one the decision does not admit look the same. For rediscovery, when a model names a tool it was not offered. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.tool_by_name(uuid,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_by_name(uuid,text) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.tool_rollout(p_decision uuid)
 RETURNS text
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
    v_stage text;
BEGIN
    SELECT r.stage INTO v_stage FROM pyretrieve.tool_rollouts r
     WHERE r.workspace_id = d.workspace_id AND r.project_id = d.project_id;
    RETURN coalesce(v_stage, 'off');
END;
$function$;
COMMENT ON FUNCTION pyretrieve.tool_rollout(uuid) IS 'The rollout stage of adaptive tool selection for the decision''s project (off when none was set). SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.tool_rollout(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_rollout(uuid) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.discover_tools(p_workspace text, p_project text, p_purpose text, p_query text, p_embedding public.vector DEFAULT NULL::public.vector, p_model text DEFAULT NULL::text, p_policy text DEFAULT NULL::text, p_mode text DEFAULT 'hybrid'::text, p_lexical_weight double precision DEFAULT 1.0, p_vector_weight double precision DEFAULT 1.0, p_protect boolean DEFAULT true, p_adaptive boolean DEFAULT NULL::boolean, p_master boolean DEFAULT true)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET extra_float_digits TO '1'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    c_pool constant integer := 48;
    c_candidates constant integer := 100;
    c_formula constant text := 'normalized = fused / ideal fused score (1-based RRF, k = 60); '
                               'adjusted = normalized * product of penalty factors';
    v_policy text := coalesce(p_policy, 'near');
    d pyretrieve.decisions;
    v_hits jsonb;
    v_ideal double precision := 0.0;
    v_asked text[];
    v_query_entities text[];
    v_scored jsonb;
    v_n integer;
    v_s1 double precision;
    v_s2 double precision;
    v_level text;
    v_reason text;
    v_recommended integer;
    v_baseline integer;
    v_stage text;
    v_applied boolean;
    v_k integer;
    v_schemas jsonb;
    v_tools jsonb;
    v_omissions jsonb;
    v_fingerprint text;
BEGIN
    IF v_policy NOT IN ('fixed-10', 'fixed-15', 'fixed-20', 'fixed-48', 'tight', 'gap', 'wide', 'near') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010',
            MESSAGE = 'policy must be one of fixed-10, fixed-15, fixed-20, fixed-48, tight, gap, wide, near';
    END IF;
    IF p_protect IS NULL OR p_master IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'protect and master must not be null';
    END IF;

    -- 1. The search path (it authorizes: one decision for the transaction) for a pool of 48.
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'fragment_id', s.fragment_id, 'fused_rank', s.rank, 'score', s.final_score,
               'lexical_rank', s.explanation -> 'modalities' -> 'lexical' -> 'rank',
               'vector_rank', s.explanation -> 'modalities' -> 'vector' -> 'rank',
               'lexical_score', s.explanation -> 'modalities' -> 'lexical' -> 'score',
               'vector_distance', s.explanation -> 'modalities' -> 'vector' -> 'distance',
               'vector_used', s.explanation -> 'semantic' ->> 'status' = 'used') ORDER BY s.rank),
           '[]'::jsonb)
      INTO v_hits
      FROM pyretrieve.search(p_workspace => p_workspace, p_project => p_project,
                             p_purpose => p_purpose, p_query => p_query,
                             p_embedding => p_embedding, p_model => p_model, p_limit => c_pool,
                             p_mode => p_mode, p_lexical_weight => p_lexical_weight,
                             p_vector_weight => p_vector_weight,
                             p_candidate_limit => c_candidates,
                             -- K is calibrated on RRF scores, whatever the model's default.
                             p_fusion => 'rrf') s;
    SELECT * INTO STRICT d FROM pyretrieve.bound_decision();
    d := pyretrieve.require_decision(d.decision_id);

    -- The fused score of a tool ranked first by every leg that ran.
    IF p_mode <> 'vector' THEN
        v_ideal := v_ideal + p_lexical_weight / 61.0::double precision;
    END IF;
    IF coalesce((v_hits -> 0 ->> 'vector_used')::boolean, false) THEN
        v_ideal := v_ideal + p_vector_weight / 61.0::double precision;
    END IF;

    -- 2. The tools among them the decision admits; penalties; the order by adjusted score.
    v_asked := CASE WHEN p_protect THEN pyretrieve.tool_query_operations(p_query) ELSE '{}' END;
    v_query_entities := pyretrieve.tool_entity_words(p_query);
    WITH hit AS (
        SELECT (h ->> 'fragment_id')::uuid AS fragment_id, (h ->> 'fused_rank')::integer AS fused_rank,
               (h ->> 'score')::double precision AS score, h -> 'lexical_rank' AS lexical_rank,
               h -> 'vector_rank' AS vector_rank, h -> 'lexical_score' AS lexical_score,
               h -> 'vector_distance' AS vector_distance
          FROM jsonb_array_elements(v_hits) AS h
    ), tool AS (
        SELECT h.*, e.name, e.schema_version, e.operation, e.entities,
               CASE WHEN v_ideal > 0 THEN h.score / v_ideal ELSE 0.0::double precision END AS normalized,
               CASE
                 WHEN cardinality(v_asked) = 0 OR e.operation NOT IN ('delete', 'update', 'create') THEN NULL
                 WHEN NOT e.operation = ANY (v_asked) THEN jsonb_build_object(
                     'code', 'operation_contradiction', 'factor', pyretrieve.json_double(0.5),
                     'asked', to_jsonb(v_asked), 'tool_family', e.operation)
                 WHEN NOT e.entities && v_query_entities THEN jsonb_build_object(
                     'code', 'no_shared_entity', 'factor', pyretrieve.json_double(0.8),
                     'tool_family', e.operation)
               END AS penalty
          FROM hit h
          JOIN pyretrieve.tool_entries(p_decision => d.decision_id,
                                       p_ids => ARRAY(SELECT x.fragment_id FROM hit x)) e
            ON e.fragment_id = h.fragment_id
    ), adjusted AS (
        SELECT t.*, t.normalized * coalesce((t.penalty ->> 'factor')::double precision,
                                            1.0::double precision) AS adjusted
          FROM tool t
    )
    SELECT coalesce(jsonb_agg(to_jsonb(a) || jsonb_build_object('rank', a.rank)
                              ORDER BY a.rank), '[]'::jsonb)
      INTO v_scored
      FROM (SELECT x.*, (row_number() OVER (ORDER BY x.adjusted DESC, x.fused_rank))::integer AS rank
              FROM adjusted x) a;
    v_n := jsonb_array_length(v_scored);

    -- 3. Confidence from the top adjusted score, the second and the gap.
    IF v_n = 0 THEN
        v_level := 'none';
        v_reason := 'no authorised tool matched';
    ELSE
        v_s1 := (v_scored -> 0 ->> 'adjusted')::double precision;
        v_s2 := CASE WHEN v_n > 1 THEN (v_scored -> 1 ->> 'adjusted')::double precision
                     ELSE 0.0::double precision END;
        IF v_s1 >= 0.9 AND v_s1 - v_s2 >= 0.1 THEN
            v_level := 'high';
            v_reason := 'top tool ranked first by every leg, clear gap to the next';
        ELSIF v_s1 >= 0.6 THEN
            v_level := 'normal';
            v_reason := 'top tool ranked high by the legs that ran';
        ELSIF v_s1 >= 0.4 THEN
            v_level := 'low';
            v_reason := 'top tool found by one leg only or ranked low';
        ELSE
            v_level := 'fail';
            v_reason := 'no tool ranked high by any leg';
        END IF;
    END IF;

    -- 4. K: the policy's, applied by the rollout stage (or the caller's choice), never more than
    --    the baseline K of 48 or the candidates.
    v_recommended := pyretrieve.tool_recommended_k(v_policy, v_level,
        ARRAY(SELECT (x ->> 'adjusted')::double precision FROM jsonb_array_elements(v_scored) AS x),
        ARRAY(SELECT (x ->> 'lexical_score')::double precision FROM jsonb_array_elements(v_scored) AS x),
        ARRAY(SELECT (x ->> 'vector_distance')::double precision FROM jsonb_array_elements(v_scored) AS x));
    v_baseline := least(48, v_n);
    v_stage := pyretrieve.tool_rollout(d.decision_id);
    v_applied := CASE
        WHEN v_policy IN ('fixed-10', 'fixed-15', 'fixed-20', 'fixed-48') THEN true
        WHEN p_adaptive IS NOT NULL THEN p_adaptive AND p_master
        ELSE p_master AND pyretrieve.tool_rollout_bucket(d.workspace_id, d.principal)
                 < CASE v_stage WHEN 'canary' THEN 5 WHEN 'majority' THEN 50 WHEN 'full' THEN 100 ELSE 0 END
    END;
    v_k := CASE WHEN v_applied THEN least(v_recommended, v_baseline) ELSE v_baseline END;

    -- 5. Schemas of the chosen K only, under the same decision.
    SELECT coalesce(jsonb_object_agg(s.fragment_id::text, s.schema), '{}'::jsonb)
      INTO v_schemas
      FROM pyretrieve.tool_schemas(p_decision => d.decision_id, p_ids => ARRAY(
               SELECT (x ->> 'fragment_id')::uuid FROM jsonb_array_elements(v_scored) AS x
                WHERE (x ->> 'rank')::integer <= v_k)) s;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'name', x ->> 'name', 'schema_version', (x ->> 'schema_version')::integer,
               'rank', (x ->> 'rank')::integer, 'fused_rank', (x ->> 'fused_rank')::integer,
               'lexical_rank', x -> 'lexical_rank', 'vector_rank', x -> 'vector_rank',
               'lexical_score', x -> 'lexical_score', 'vector_distance', x -> 'vector_distance',
               'operation', x ->> 'operation',
               'fused_score', pyretrieve.json_double((x ->> 'score')::double precision),
               'normalized_score', pyretrieve.json_double((x ->> 'normalized')::double precision),
               'adjusted_score', pyretrieve.json_double((x ->> 'adjusted')::double precision),
               'penalties', CASE WHEN x -> 'penalty' = 'null'::jsonb THEN '[]'::jsonb
                                 ELSE jsonb_build_array(x -> 'penalty') END,
               'chosen', (x ->> 'rank')::integer <= v_k,
               'cut', CASE WHEN (x ->> 'rank')::integer <= v_k THEN NULL
                           WHEN v_applied OR v_k = v_recommended THEN 'cut_by_k'
                           ELSE 'cut_by_baseline_k' END,
               'formula', c_formula) ORDER BY (x ->> 'rank')::integer), '[]'::jsonb),
           coalesce(jsonb_agg(jsonb_build_object(
               'name', x ->> 'name', 'fragment_id', x ->> 'fragment_id',
               'position', (x ->> 'rank')::integer, 'reason', 'cut_by_k',
               'score', pyretrieve.json_double((x ->> 'adjusted')::double precision))
               ORDER BY (x ->> 'rank')::integer) FILTER (WHERE (x ->> 'rank')::integer > v_k), '[]'::jsonb)
      INTO v_tools, v_omissions
      FROM jsonb_array_elements(v_scored) AS x;

    -- The context fingerprint: sha256 over the sorted "name NUL version" lines of the chosen.
    SELECT pg_catalog.encode(pg_catalog.sha256(coalesce(pg_catalog.string_agg(l.line, '\x0a'::bytea ORDER BY l.line),
                                                        ''::bytea)), 'hex')
      INTO v_fingerprint
      FROM (SELECT pg_catalog.convert_to(x ->> 'name', 'UTF8') || '\x00'::bytea
                   || pg_catalog.convert_to(x ->> 'schema_version', 'UTF8') AS line
              FROM jsonb_array_elements(v_scored) AS x
             WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')) l;

    RETURN jsonb_build_object(
        'decision_id', d.decision_id,
        'query_digest', pg_catalog.encode(pyretrieve.content_digest(p_query), 'hex'),
        'policy', v_policy,
        'stage', v_stage,
        'applied', v_applied,
        'confidence', jsonb_build_object(
            'level', v_level,
            'score', pyretrieve.json_double(coalesce(v_s1, 0.0::double precision)),
            'reason', v_reason,
            'recommended_k', v_recommended,
            'top_score', pyretrieve.json_double(v_s1),
            'second_score', pyretrieve.json_double(v_s2),
            'gap', pyretrieve.json_double(v_s1 - v_s2)),
        'k', (SELECT count(*) FROM jsonb_array_elements(v_scored) AS x
               WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')),
        'fingerprint', v_fingerprint,
        'tools', v_tools,
        'omissions', v_omissions,
        'schemas', (SELECT coalesce(jsonb_agg(v_schemas -> (x ->> 'fragment_id') ORDER BY (x ->> 'rank')::integer),
                                    '[]'::jsonb)
                      FROM jsonb_array_elements(v_scored) AS x
                     WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')));
END;
$function$;
COMMENT ON FUNCTION pyretrieve.discover_tools(text,text,text,text,public.vector,text,text,text,double precision,double precision,boolean,boolean,boolean) IS 'Tool discovery for an agent request, as one jsonb document: the ranked tools the caller may use (search''s authorization, legs, fusion and freshness for a pool of 48, then only tools the decision admits), each with its explanation (fused, lexical and vector ranks, fused, normalised and adjusted scores, similar-tool penalties, chosen, why cut), the confidence (level none/high/normal/low/fail, score, reason, recommended K, top and second score, gap), K, omissions for authorised tools cut by K, the context fingerprint and the schemas of the chosen K only. p_policy: fixed-10, fixed-15, fixed-20, fixed-48, tight, gap, wide or near (default near, the evaluated default); adaptive K only truncates and is applied by the project''s rollout stage unless p_adaptive says otherwise; p_master false turns it off. Byte-identical, as canonical JSON, to the Python client''s Discovery.document() for the same request and decision. Raises what search raises (PR001 on deny, PR010 on bad input, PR030). SECURITY DEFINER (runs as pyretrieve_api): it calls helpers that principals are not granted (the bound decision, the word lists, the rollout bucket) and principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.discover_tools(text,text,text,text,public.vector,text,text,text,double precision,double precision,boolean,boolean,boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.discover_tools(text,text,text,text,public.vector,text,text,text,double precision,double precision,boolean,boolean,boolean) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
-- Hand-edited: replaced in place (the same columns), so the function returning its rows and
-- its grants stay.
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
            'definer_follows_caller_planner'::text,
            'function'::text,
            fn.function_name,
            'SECURITY DEFINER, executable by a principal group, and planned with the caller''s settings: a caller that turns index scans off makes its statements scan every tenant''s rows whole, a time that grows with what the other tenants hold'::text,
            format('ALTER FUNCTION %1$s SET enable_seqscan = off; ALTER FUNCTION %1$s SET enable_indexscan = on; ALTER FUNCTION %1$s SET enable_bitmapscan = on;'::text, fn.function_name) AS format
           FROM (pyretrieve.audit_functions fn
             JOIN pg_proc p ON ((p.oid = (to_regprocedure(fn.function_name))::oid)))
          WHERE (fn.security_definer AND (has_function_privilege('pyretrieve_reader'::name, p.oid, 'EXECUTE'::text) OR has_function_privilege('pyretrieve_writer'::name, p.oid, 'EXECUTE'::text)) AND (NOT (COALESCE(p.proconfig, '{}'::text[]) @> ARRAY['enable_seqscan=off'::text, 'enable_indexscan=on'::text, 'enable_bitmapscan=on'::text])))
        UNION ALL
         SELECT 'warning'::text,
            'definer_plans_for_the_values_at_hand'::text,
            'function'::text,
            fn.function_name,
            'SECURITY DEFINER, executable by a principal group, and planned for the values of each call: the plans follow the statistics of those values, which lag a growing scope, and planned for a scope they take for one row, a look-up of one key reads the scope whole'::text,
            format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan;'::text, fn.function_name) AS format
           FROM (pyretrieve.audit_functions fn
             JOIN pg_proc p ON ((p.oid = (to_regprocedure(fn.function_name))::oid)))
          WHERE (fn.security_definer AND (has_function_privilege('pyretrieve_reader'::name, p.oid, 'EXECUTE'::text) OR has_function_privilege('pyretrieve_writer'::name, p.oid, 'EXECUTE'::text)) AND (NOT (COALESCE(p.proconfig, '{}'::text[]) @> ARRAY['plan_cache_mode=force_generic_plan'::text])))
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

UPDATE pyretrieve.installation SET schema_version = '0043';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
