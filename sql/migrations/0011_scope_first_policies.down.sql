-- pyretrieve migration 0011, downgrade: back to 0010
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP POLICY embeddings_read ON pyretrieve.embeddings;
DROP POLICY fragments_read ON pyretrieve.fragments;
DROP POLICY generation_log_read ON pyretrieve.generation_log;
DROP POLICY postings_read ON pyretrieve.postings;
DROP POLICY projects_read ON pyretrieve.projects;
DROP POLICY scope_configs_read ON pyretrieve.scope_configs;
DROP POLICY workspaces_read ON pyretrieve.workspaces;
CREATE POLICY embeddings_read ON pyretrieve.embeddings FOR SELECT TO pyretrieve_api USING (((((workspace_id)::text = (( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND ((project_id)::text = (( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND (fragment_state = 'active'::pyretrieve.fragment_state) AND (classification <= ( SELECT d.ceiling
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at <= ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at >= COALESCE(( SELECT (d.evaluated_at - d.max_age)
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), '-infinity'::timestamp with time zone)) AND ((expires_at IS NULL) OR (expires_at > ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))))) OR (((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))));
CREATE POLICY fragments_read ON pyretrieve.fragments FOR SELECT TO pyretrieve_api USING (((((workspace_id)::text = (( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND ((project_id)::text = (( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND (state = 'active'::pyretrieve.fragment_state) AND (classification <= ( SELECT d.ceiling
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at <= ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at >= COALESCE(( SELECT (d.evaluated_at - d.max_age)
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), '-infinity'::timestamp with time zone)) AND ((expires_at IS NULL) OR (expires_at > ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))))) OR (((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))));
CREATE POLICY generation_log_read ON pyretrieve.generation_log FOR SELECT TO pyretrieve_api USING (((((workspace_id)::text = (( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND ((project_id)::text = (( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text)) OR (((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text)) OR ( SELECT pyretrieve.caller_in('pyretrieve_admin'::name) AS caller_in)));
CREATE POLICY postings_read ON pyretrieve.postings FOR SELECT TO pyretrieve_api USING (((((workspace_id)::text = (( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND ((project_id)::text = (( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND (classification <= ( SELECT d.ceiling
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at <= ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at >= COALESCE(( SELECT (d.evaluated_at - d.max_age)
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), '-infinity'::timestamp with time zone)) AND ((expires_at IS NULL) OR (expires_at > ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))))) OR (((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))));
CREATE POLICY projects_read ON pyretrieve.projects FOR SELECT TO pyretrieve_api USING (((((workspace_id)::text = (( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND ((project_id)::text = (( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text)) OR (((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text)) OR ( SELECT pyretrieve.caller_in('pyretrieve_admin'::name) AS caller_in)));
CREATE POLICY scope_configs_read ON pyretrieve.scope_configs FOR SELECT TO pyretrieve_api USING (((((workspace_id)::text = (( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) AND ((project_id)::text = (( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text)) OR (((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text)) OR ( SELECT pyretrieve.caller_in('pyretrieve_admin'::name) AS caller_in)));
CREATE POLICY workspaces_read ON pyretrieve.workspaces FOR SELECT TO pyretrieve_api USING ((((workspace_id)::text = (( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))::text) OR ((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) OR ( SELECT pyretrieve.caller_in('pyretrieve_admin'::name) AS caller_in)));

UPDATE pyretrieve.installation SET schema_version = '0010';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
