-- pyretrieve migration 0051, downgrade: back to 0050
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP POLICY embeddings_read ON pyretrieve.embeddings;
DROP POLICY fragments_read ON pyretrieve.fragments;
DROP POLICY generation_log_read ON pyretrieve.generation_log;
DROP POLICY lexical_blocks_read ON pyretrieve.lexical_blocks;
DROP POLICY lexical_pages_read ON pyretrieve.lexical_pages;
DROP POLICY lexical_tombstones_read ON pyretrieve.lexical_tombstones;
DROP POLICY projects_read ON pyretrieve.projects;
DROP POLICY read_bindings_insert ON pyretrieve.read_bindings;
DROP POLICY read_bindings_read ON pyretrieve.read_bindings;
DROP POLICY read_bindings_replace ON pyretrieve.read_bindings;
DROP POLICY scope_configs_read ON pyretrieve.scope_configs;
DROP POLICY statistics_log_read ON pyretrieve.statistics_log;
DROP POLICY tool_rollouts_read ON pyretrieve.tool_rollouts;
DROP POLICY tools_read ON pyretrieve.tools;
DROP POLICY workspaces_read ON pyretrieve.workspaces;
DROP FUNCTION pyretrieve.bound_filter();
DROP TABLE pyretrieve.read_bindings;
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
    v_grant uuid;
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
    -- once, before the grant is read: compared row by row, a caller's enable_indexscan off made
    -- a scan of the grants choose it again for every grant. The grant is then read by its whole
    -- key: compared with a sub-select's value, the plan read the workspace's grants and kept one.
    v_grant := pyretrieve.effective_grant(p_workspace, p_project, p_purpose);
    SELECT gr.* INTO g
      FROM pyretrieve.grants gr
     WHERE gr.workspace_id = p_workspace
       AND gr.grant_id = v_grant;
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
CREATE POLICY embeddings_read ON pyretrieve.embeddings FOR SELECT TO pyretrieve_api USING ((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((project_id)::text = (COALESCE(( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND (((fragment_state = 'active'::pyretrieve.fragment_state) AND (classification <= ( SELECT d.ceiling
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at <= ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at >= COALESCE(( SELECT (d.evaluated_at - d.max_age)
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), '-infinity'::timestamp with time zone)) AND ((expires_at IS NULL) OR (expires_at > ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))))) OR ((classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")
  WHERE (NOT (EXISTS ( SELECT 1
           FROM pyretrieve.bound_decision() bound_decision(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))))) IS TRUE))));
CREATE POLICY fragments_read ON pyretrieve.fragments FOR SELECT TO pyretrieve_api USING ((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((project_id)::text = (COALESCE(( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND (((state = 'active'::pyretrieve.fragment_state) AND (classification <= ( SELECT d.ceiling
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at <= ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at >= COALESCE(( SELECT (d.evaluated_at - d.max_age)
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), '-infinity'::timestamp with time zone)) AND ((expires_at IS NULL) OR (expires_at > ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))))) OR ((classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")
  WHERE (NOT (EXISTS ( SELECT 1
           FROM pyretrieve.bound_decision() bound_decision(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))))) IS TRUE))));
CREATE POLICY generation_log_read ON pyretrieve.generation_log FOR SELECT TO pyretrieve_api USING (((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((project_id)::text = (COALESCE(( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text)) OR ( SELECT pyretrieve.caller_in('pyretrieve_admin'::name) AS caller_in)));
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
CREATE POLICY lexical_pages_read ON pyretrieve.lexical_pages FOR SELECT TO pyretrieve_api USING ((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
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
CREATE POLICY lexical_tombstones_read ON pyretrieve.lexical_tombstones FOR SELECT TO pyretrieve_api USING ((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((project_id)::text = (COALESCE(( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((classification <= ( SELECT d.ceiling
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) OR ((classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")
  WHERE (NOT (EXISTS ( SELECT 1
           FROM pyretrieve.bound_decision() bound_decision(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))))) IS TRUE))));
CREATE POLICY projects_read ON pyretrieve.projects FOR SELECT TO pyretrieve_api USING (((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((project_id)::text = (COALESCE(( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text)) OR ( SELECT pyretrieve.caller_in('pyretrieve_admin'::name) AS caller_in)));
CREATE POLICY scope_configs_read ON pyretrieve.scope_configs FOR SELECT TO pyretrieve_api USING (((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((project_id)::text = (COALESCE(( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text)) OR ( SELECT pyretrieve.caller_in('pyretrieve_admin'::name) AS caller_in)));
CREATE POLICY statistics_log_read ON pyretrieve.statistics_log FOR SELECT TO pyretrieve_api USING ((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((project_id)::text = (COALESCE(( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND (((classification <= ( SELECT d.ceiling
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at <= ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at >= COALESCE(( SELECT (d.evaluated_at - d.max_age)
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), '-infinity'::timestamp with time zone)) AND ((expires_at IS NULL) OR (expires_at > ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))))) OR ((classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")
  WHERE (NOT (EXISTS ( SELECT 1
           FROM pyretrieve.bound_decision() bound_decision(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))))) IS TRUE))));
CREATE POLICY tool_rollouts_read ON pyretrieve.tool_rollouts FOR SELECT TO pyretrieve_api USING (((((workspace_id)::text = (( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND ((project_id)::text = (( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text)) OR ( SELECT pyretrieve.caller_in('pyretrieve_admin'::name) AS caller_in)));
CREATE POLICY tools_read ON pyretrieve.tools FOR SELECT TO pyretrieve_api USING (((((workspace_id)::text = (( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND ((project_id)::text = (( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND (classification <= ( SELECT d.ceiling
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at <= ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at >= COALESCE(( SELECT (d.evaluated_at - d.max_age)
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), '-infinity'::timestamp with time zone)) AND ((expires_at IS NULL) OR (expires_at > ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))))) OR (((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))));
CREATE POLICY workspaces_read ON pyretrieve.workspaces FOR SELECT TO pyretrieve_api USING ((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) OR ( SELECT pyretrieve.caller_in('pyretrieve_admin'::name) AS caller_in)));

UPDATE pyretrieve.installation SET schema_version = '0050';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
