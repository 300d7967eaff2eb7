-- ---------------------------------------------------------------------------------------------
-- Privileges. Nothing for PUBLIC. The principal groups hold no privilege on any table, view or
-- sequence: they may only execute the SQL API. pyretrieve_api, which the API functions run as,
-- holds exactly the table privileges those functions need, and RLS decides its rows.
-- ---------------------------------------------------------------------------------------------
REVOKE ALL ON ALL TABLES IN SCHEMA pyretrieve FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA pyretrieve FROM PUBLIC;
DO $revoke$
DECLARE
    f regprocedure;
BEGIN
    -- Each role revokes PUBLIC's default EXECUTE on the functions it owns.
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'pyretrieve'::regnamespace
                AND p.proowner = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER)
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$revoke$;
REVOKE ALL ON TYPE pyretrieve.classification, pyretrieve.fragment_state, pyretrieve.semantic_policy,
    pyretrieve.identifier, pyretrieve.ingest_row, pyretrieve.statistics_delta,
    pyretrieve.lexical_list FROM PUBLIC;

GRANT USAGE ON SCHEMA pyretrieve TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin, pyretrieve_api;
GRANT USAGE ON TYPE pyretrieve.classification, pyretrieve.fragment_state, pyretrieve.semantic_policy,
    pyretrieve.identifier TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin, pyretrieve_api;
-- Writers build bulk batches of this type (a staging table of their own, one array value).
GRANT USAGE ON TYPE pyretrieve.ingest_row TO pyretrieve_writer, pyretrieve_api;
-- The statistics log's triggers pass their rows to log_statistics as this type.
GRANT USAGE ON TYPE pyretrieve.statistics_delta TO pyretrieve_api;
-- The lexical index's triggers and compaction pass postings to write_lexical_lists as this type.
GRANT USAGE ON TYPE pyretrieve.lexical_list TO pyretrieve_api;

-- What the API functions (and the triggers they fire) read and write, as pyretrieve_api.
GRANT SELECT ON pyretrieve.installation, pyretrieve.workspaces, pyretrieve.projects,
    pyretrieve.fragments, pyretrieve.embedding_models, pyretrieve.embeddings, pyretrieve.grants,
    pyretrieve.decisions, pyretrieve.write_bindings, pyretrieve.lexical_blocks,
    pyretrieve.lexical_pages, pyretrieve.lexical_tombstones,
    pyretrieve.generation_log, pyretrieve.scope_configs, pyretrieve.statistics_log,
    pyretrieve.embedding_count_log
    TO pyretrieve_api;
GRANT INSERT (workspace_id, principal, project_id, purpose, grant_id, ceiling, max_age, semantic_policy,
              requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest)
    ON pyretrieve.decisions TO pyretrieve_api;
GRANT INSERT (workspace_id, principal, project_id, ceiling, position) ON pyretrieve.write_bindings TO pyretrieve_api;
GRANT SELECT, INSERT (xact_id, decision_id, workspace_id, project_id, ceiling, evaluated_at, max_age),
      UPDATE (xact_id, decision_id, project_id, ceiling, evaluated_at, max_age)
    ON pyretrieve.read_bindings TO pyretrieve_api;
GRANT INSERT (workspace_id, project_id, body, classification, observed_at, expires_at,
              source_uri, source_revision, manifest_id, ts_config)
    ON pyretrieve.fragments TO pyretrieve_api;
GRANT UPDATE (state, superseded_by) ON pyretrieve.fragments TO pyretrieve_api;
GRANT INSERT (workspace_id, project_id, fragment_id, model_id, embedding, source_digest),
      UPDATE (embedding, source_digest, fragment_state)
    ON pyretrieve.embeddings TO pyretrieve_api;
GRANT INSERT, DELETE ON pyretrieve.lexical_blocks, pyretrieve.lexical_pages,
    pyretrieve.lexical_tombstones TO pyretrieve_api;
-- The triggers and compaction lock blocks and pages (SELECT ... FOR UPDATE SKIP LOCKED) before
-- they rewrite them, which takes UPDATE on a column; the update policy's check admits no new
-- row, so none is updated.
GRANT UPDATE (postings) ON pyretrieve.lexical_blocks, pyretrieve.lexical_pages TO pyretrieve_api;
-- A new page draws its number.
GRANT USAGE ON SEQUENCE pyretrieve.lexical_page_seq TO pyretrieve_api;
GRANT INSERT ON pyretrieve.generation_log, pyretrieve.scope_configs, pyretrieve.statistics_log,
    pyretrieve.embedding_count_log
    TO pyretrieve_api;
-- create_project's insert draws the new scope's serial (the column's default).
GRANT USAGE ON SEQUENCE pyretrieve.scope_serial_seq TO pyretrieve_api;
GRANT INSERT (workspace_id, display_name) ON pyretrieve.workspaces TO pyretrieve_api;
GRANT INSERT (workspace_id, project_id, ts_config, generation_seq),
      UPDATE (bm25_k1, bm25_b) ON pyretrieve.projects TO pyretrieve_api;
GRANT INSERT (workspace_id, project_id, principal, purpose, ceiling, max_age, semantic_policy,
              expires_at, granted_by),
      UPDATE (ceiling, max_age, semantic_policy, expires_at, granted_by, granted_at),
      DELETE ON pyretrieve.grants TO pyretrieve_api;
GRANT INSERT (model_id, dimension, lexical_weight, vector_weight, fusion),
      UPDATE (lexical_weight, vector_weight, fusion) ON pyretrieve.embedding_models TO pyretrieve_api;

-- Helpers the API functions, the policies and the triggers call (as pyretrieve_api).
GRANT EXECUTE ON FUNCTION pyretrieve.caller(), pyretrieve.caller_in(name), pyretrieve.caller_memberships(),
    pyretrieve.caller_roles(),
    pyretrieve.bound_decision(), pyretrieve.bound_write(), pyretrieve.bound_filter(),
    pyretrieve.copies_bound_decision(uuid, text, text, pyretrieve.classification, timestamptz, interval),
    pyretrieve.writer_ceiling(text, text), pyretrieve.visible_successor(text, text, uuid),
    pyretrieve.effective_grant(text, text, text), pyretrieve.check_caller(),
    pyretrieve.apply_request_timeouts(), pyretrieve.check_ts_config(regconfig),
    pyretrieve.check_identifier(text, text), pyretrieve.require_decision(uuid),
    pyretrieve.check_embedding(text, public.vector), pyretrieve.require_admin(),
    pyretrieve.scope_sequence(text, text), pyretrieve.tsvector_length(tsvector),
    pyretrieve.log_statistics(pyretrieve.statistics_delta[]),
    pyretrieve.write_lexical_postings(text, text, text[], pyretrieve.classification[], bigint[],
        timestamptz[], timestamptz[]),
    pyretrieve.lexeme_bucket(text),
    pyretrieve.write_lexical_lists(text, text, pyretrieve.lexical_list[], boolean, boolean),
    pyretrieve.overlapping_pages(text, text, pyretrieve.classification),
    pyretrieve.compact_lexical_postings(text, text, pyretrieve.classification),
    pyretrieve.create_scope_sequence(text, text),
    pyretrieve.create_scope_vector_index(integer, text), pyretrieve.drop_scope_vector_index(integer, text),
    pyretrieve.vector_index_options(),
    pyretrieve.take_first_statistics(),
    pyretrieve.decision_partition_ranges(), pyretrieve.ensure_decision_partitions(integer, timestamptz),
    pyretrieve.drop_decision_partition(text)
    TO pyretrieve_api;

-- Pure helpers for everyone in a group (digests, the OR query, the caller's identity).
GRANT EXECUTE ON FUNCTION pyretrieve.content_digest(text), pyretrieve.or_tsquery(regconfig, text),
    pyretrieve.embedding_digest(public.vector), pyretrieve.caller()
    TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin, pyretrieve_api;
-- The explanation's renderings (a double as a float, a time in UTC), which search() calls.
GRANT EXECUTE ON FUNCTION pyretrieve.json_double(double precision), pyretrieve.iso_utc(timestamptz),
    pyretrieve.dbsf_distribution(double precision[]), pyretrieve.error_code(text, text)
    TO pyretrieve_reader;
-- search() runs as its caller and calls the API functions in order.
GRANT EXECUTE ON FUNCTION
    pyretrieve.search(text, text, text, text, public.vector, text, integer, text, double precision, double precision, text, text, integer, text)
    TO pyretrieve_reader;
-- create_model_index is an owner function that admins may call directly (nothing else does).
GRANT EXECUTE ON FUNCTION pyretrieve.create_model_index(text) TO pyretrieve_admin;
-- So is creating the decisions log's partitions ahead (a maintenance job run as an admin).
GRANT EXECUTE ON FUNCTION pyretrieve.ensure_decision_partitions(integer, timestamptz) TO pyretrieve_admin;

-- The SQL API, granted by its owner pyretrieve_api.
SET LOCAL ROLE pyretrieve_api;
DO $revoke$
DECLARE
    f regprocedure;
BEGIN
    -- Each role revokes PUBLIC's default EXECUTE on the functions it owns.
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'pyretrieve'::regnamespace
                AND p.proowner = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER)
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$revoke$;
GRANT EXECUTE ON FUNCTION pyretrieve.schema_version(), pyretrieve.list_models(),
    pyretrieve.model_defaults(text)
    TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin;
GRANT EXECUTE ON FUNCTION
    pyretrieve.authorize(text, text, text, bytea, text, bytea, integer),
    pyretrieve.lexical_candidates(uuid, text, integer, text),
    pyretrieve.vector_candidates(uuid, text, public.vector, integer),
    pyretrieve.fragments(uuid, uuid[])
    TO pyretrieve_reader;
GRANT EXECUTE ON FUNCTION
    pyretrieve.bind_write_scope(text, text),
    pyretrieve.put_fragment(text, text, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text, regconfig),
    pyretrieve.supersede_fragment(text, text, uuid, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text),
    pyretrieve.retract_fragment(text, text, uuid),
    pyretrieve.compact_lexical_index(text, text, double precision),
    pyretrieve.put_embedding(text, text, uuid, text, public.vector, bytea),
    pyretrieve.active_sources(text, text, text[]),
    pyretrieve.active_sources_like(text, text, text[]),
    pyretrieve.created_now(text, text, uuid[]),
    pyretrieve.embeddings_needed(text, text, text, uuid[]),
    pyretrieve.stale_embeddings(text, text, text, uuid, integer),
    pyretrieve.ingest_state(text, text, text[], text),
    pyretrieve.ingest_batch(text, text, pyretrieve.ingest_row[], text)
    TO pyretrieve_writer;
GRANT EXECUTE ON FUNCTION
    pyretrieve.create_workspace(text, text),
    pyretrieve.create_project(text, text, regconfig),
    pyretrieve.grant_access(regrole, text, text, text, pyretrieve.classification, interval, pyretrieve.semantic_policy, timestamptz),
    pyretrieve.revoke_access(regrole, text, text, text),
    pyretrieve.register_model(text, integer, double precision, double precision, text),
    pyretrieve.set_bm25(text, text, double precision, double precision),
    pyretrieve.create_vector_index(text, text, text),
    pyretrieve.drop_vector_index(text, text, text),
    pyretrieve.maintain_vector_indexes(integer, boolean),
    pyretrieve.list_projects(),
    pyretrieve.list_grants(),
    pyretrieve.decision_partitions(),
    pyretrieve.prune_decisions(interval, boolean),
    pyretrieve.list_decisions(timestamptz, timestamptz, text, text, text, integer)
    TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;
