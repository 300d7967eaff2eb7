-- pyretrieve migration 0044: grant_probes
-- What a request reads of the grants and of the cluster's roles follows the caller, not the
-- other principals. Its grant look-ups probe the grants' key, where they read every
-- principal's grants of the scope and kept the caller's: authorize's choice of the grant (and
-- the decision's check of it) probes the caller's own grant, then, when it holds none, once
-- per role it inherits (caller_roles()); a writer's ceiling probes once per such role; and
-- authorize reads the chosen grant by its whole key. check_caller reads the caller's own
-- memberships by their keys (caller_memberships()), where it scanned every role of the
-- cluster for superusers.
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION pyretrieve.caller_memberships()
 RETURNS oid[]
 LANGUAGE sql
 STABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 WITH RECURSIVE up(role_id) AS (
          SELECT (to_regrole(quote_ident((( SELECT pyretrieve.caller() AS caller))::text)))::oid AS to_regrole
         UNION
          SELECT m.roleid
            FROM (pg_auth_members m
              JOIN up up_1 ON ((m.member = up_1.role_id)))
         )
  SELECT COALESCE(array_agg(up.role_id ORDER BY up.role_id), '{}'::oid[]) AS "coalesce"
    FROM up;
END;
COMMENT ON FUNCTION pyretrieve.caller_memberships() IS 'Every role the caller is a member of, directly or through other roles, itself included (pg_has_role MEMBER), from its own memberships.';
REVOKE ALL ON FUNCTION pyretrieve.caller_memberships() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.caller_memberships() TO pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.caller_roles()
 RETURNS oid[]
 LANGUAGE sql
 STABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT COALESCE(array_agg(m.role_id ORDER BY m.role_id), '{}'::oid[]) AS "coalesce"
    FROM unnest(pyretrieve.caller_memberships()) m(role_id)
   WHERE pg_has_role(( SELECT pyretrieve.caller() AS caller), m.role_id, 'USAGE'::text);
END;
COMMENT ON FUNCTION pyretrieve.caller_roles() IS 'The roles whose grants apply to the caller: itself and the roles it inherits the privileges of (pg_has_role USAGE), from its own memberships, so that a grant look-up probes the key once per role.';
REVOKE ALL ON FUNCTION pyretrieve.caller_roles() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.caller_roles() TO pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.writer_ceiling(p_workspace text, p_project text)
 RETURNS pyretrieve.classification
 LANGUAGE sql
 STABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT max(g.ceiling) AS max
    FROM pyretrieve.grants g
   WHERE (((g.workspace_id)::text = writer_ceiling.p_workspace) AND ((g.project_id)::text = writer_ceiling.p_project) AND ((g.principal)::oid = ANY (( SELECT pyretrieve.caller_roles() AS caller_roles)::oid[])) AND pg_has_role(pyretrieve.caller(), (g.principal)::oid, 'USAGE'::text) AND pyretrieve.caller_in('pyretrieve_writer'::name) AND ((g.expires_at IS NULL) OR (g.expires_at > now())));
END;
COMMENT ON FUNCTION pyretrieve.writer_ceiling(text,text) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.writer_ceiling(text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.writer_ceiling(text,text) TO pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.effective_grant(p_workspace text, p_project text, p_purpose text)
 RETURNS uuid
 LANGUAGE sql
 STABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT COALESCE(( SELECT gr.grant_id
            FROM pyretrieve.grants gr
           WHERE (((gr.workspace_id)::text = effective_grant.p_workspace) AND ((gr.project_id)::text = effective_grant.p_project) AND ((gr.principal)::oid = (to_regrole(quote_ident((( SELECT pyretrieve.caller() AS caller))::text)))::oid) AND ((gr.purpose)::text = effective_grant.p_purpose) AND ((gr.expires_at IS NULL) OR (gr.expires_at > now())))), ( SELECT gr.grant_id
            FROM pyretrieve.grants gr
           WHERE (((gr.workspace_id)::text = effective_grant.p_workspace) AND ((gr.project_id)::text = effective_grant.p_project) AND ((gr.principal)::oid = ANY (( SELECT pyretrieve.caller_roles() AS caller_roles)::oid[])) AND ((gr.purpose)::text = effective_grant.p_purpose) AND pg_has_role(( SELECT pyretrieve.caller() AS caller), (gr.principal)::oid, 'USAGE'::text) AND ((gr.expires_at IS NULL) OR (gr.expires_at > now())))
           ORDER BY gr.ceiling DESC, gr.max_age DESC, gr.grant_id
          LIMIT 1)) AS "coalesce";
END;
COMMENT ON FUNCTION pyretrieve.effective_grant(text,text,text) IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.effective_grant(text,text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.effective_grant(text,text,text) TO pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.check_caller()
 RETURNS void
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_roles oid[] := pyretrieve.caller_memberships();
BEGIN
    -- The caller's memberships, each read by its key: a scan of the cluster's roles for the
    -- superusers read every role at every request (5,024 at 5,000 roles, until 0044).
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                WHERE r.oid = ANY (v_roles) AND (r.rolsuper OR r.rolbypassrls)) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR004',
            MESSAGE = 'the principal is a superuser or bypasses row-level security; act as an ordinary principal role';
    END IF;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.check_caller() IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.check_caller() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.check_caller() TO pyretrieve_api;
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

UPDATE pyretrieve.installation SET schema_version = '0044';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
