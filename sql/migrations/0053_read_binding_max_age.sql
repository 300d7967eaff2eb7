-- pyretrieve migration 0053: read_binding_max_age
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.
-- A read binding keeps the decision's max_age, not the oldest observation time derived from it
-- (bound_filter derives it), and its two write policies make one check, copies_bound_decision().

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- The table is made again in its new shape (its rows live only in the transactions that wrote
-- them; none is carried over). bound_filter(), which every read policy reads, depends on it:
-- until the end of this transaction it admits nothing, and then reads the new table.
CREATE OR REPLACE FUNCTION pyretrieve.bound_filter()
RETURNS TABLE (workspace_id pyretrieve.identifier, project_id pyretrieve.identifier,
               ceiling pyretrieve.classification, oldest timestamptz, reading boolean)
LANGUAGE sql STABLE PARALLEL RESTRICTED SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
BEGIN ATOMIC
    SELECT NULL::pyretrieve.identifier, NULL::pyretrieve.identifier,
           NULL::pyretrieve.classification, NULL::timestamptz, NULL::boolean
     WHERE false;
END;
DROP TABLE pyretrieve.read_bindings;
-- The read binding as the second wall reads it: what the policies need of this transaction's
-- decision, per server process (session_pid) and workspace, which authorize() rewrites with
-- each decision. A row binds only the transaction that wrote it (xact_id, evaluated_at = now()), so
-- an earlier transaction's row is inert, and the table holds a row per process and workspace that
-- ever authorized (no log to prune). The decisions log is the record; this is its cheap shadow: a
-- policy reads one row of a small table by its key, where the log is partitioned by month
-- and every look-up there pruned, locked and scanned partitions (about 30 look-ups a search).
CREATE TABLE pyretrieve.read_bindings (
    workspace_id  pyretrieve.identifier NOT NULL,
    -- From the default alone: no role writes it.
    session_pid   integer NOT NULL DEFAULT pg_catalog.pg_backend_pid(),
    xact_id       xid8 NOT NULL,
    decision_id   uuid NOT NULL,
    project_id    pyretrieve.identifier NOT NULL,
    ceiling       pyretrieve.classification NOT NULL,
    evaluated_at  timestamptz NOT NULL,
    max_age       interval,
    -- A process keeps a row per workspace it decided in, and a decision rewrites its own: the
    -- key leads with the workspace as every key of a workspace table does.
    PRIMARY KEY (workspace_id, session_pid)
-- Half of each page free: each authorize() rewrites a row in place of the process's earlier
-- one, a HOT update when the new version fits on the row's page (no indexed column changes).
) WITH (fillfactor = 50);
-- The look-up: the process's rows, by this index (a row per workspace it decided in).
CREATE INDEX read_bindings_session_idx ON pyretrieve.read_bindings (session_pid);
COMMENT ON TABLE pyretrieve.read_bindings IS
    'This transaction''s read decision as the row-level security policies read it (scope, ceiling, evaluation time, max_age), one row per server process and workspace, rewritten by each authorize(); a row binds only the transaction that wrote it. No principal reads or writes it.';
ALTER TABLE pyretrieve.read_bindings ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
REVOKE ALL ON pyretrieve.read_bindings FROM PUBLIC;
GRANT SELECT, INSERT (xact_id, decision_id, workspace_id, project_id, ceiling, evaluated_at, max_age),
      UPDATE (xact_id, decision_id, project_id, ceiling, evaluated_at, max_age)
    ON pyretrieve.read_bindings TO pyretrieve_api;
CREATE POLICY read_bindings_read ON pyretrieve.read_bindings FOR SELECT TO pyretrieve_api
    USING (session_pid = pg_catalog.pg_backend_pid());
CREATE OR REPLACE FUNCTION pyretrieve.bound_filter()
 RETURNS TABLE(workspace_id pyretrieve.identifier, project_id pyretrieve.identifier, ceiling pyretrieve.classification, oldest timestamp with time zone, reading boolean)
 LANGUAGE sql
 STABLE PARALLEL RESTRICTED
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
BEGIN ATOMIC
 SELECT r.workspace_id,
     r.project_id,
     r.ceiling,
     COALESCE((r.evaluated_at - r.max_age), '-infinity'::timestamp with time zone) AS "coalesce",
     true
    FROM pyretrieve.read_bindings r
   WHERE ((r.session_pid = pg_backend_pid()) AND (r.xact_id = pg_current_xact_id_if_assigned()) AND (r.evaluated_at = now()))
 UNION ALL
  SELECT w.workspace_id,
     w.project_id,
     w.ceiling,
     '-infinity'::timestamp with time zone AS timestamptz,
     false
    FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")
   WHERE (NOT (EXISTS ( SELECT 1
            FROM pyretrieve.read_bindings r
           WHERE ((r.session_pid = pg_backend_pid()) AND (r.xact_id = pg_current_xact_id_if_assigned()) AND (r.evaluated_at = now())))))
 LIMIT 1;
END;
COMMENT ON FUNCTION pyretrieve.bound_filter() IS 'What the row-level security policies admit in this transaction, as one row: the read decision''s workspace, project, ceiling and oldest observation time (reading = true), else the write scope''s with the writer''s ceiling (reading = false); no row without a binding. Found by process and transaction, never by a setting.';
REVOKE ALL ON FUNCTION pyretrieve.bound_filter() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.bound_filter() TO pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.copies_bound_decision(p_decision uuid, p_workspace text, p_project text, p_ceiling pyretrieve.classification, p_evaluated_at timestamp with time zone, p_max_age interval)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT (EXISTS ( SELECT 1
            FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)
           WHERE ((d.decision_id = copies_bound_decision.p_decision) AND ((d.workspace_id)::text = copies_bound_decision.p_workspace) AND ((d.project_id)::text = copies_bound_decision.p_project) AND (d.ceiling = copies_bound_decision.p_ceiling) AND (d.evaluated_at = copies_bound_decision.p_evaluated_at) AND (NOT (d.max_age IS DISTINCT FROM copies_bound_decision.p_max_age))))) AS "exists";
END;
COMMENT ON FUNCTION pyretrieve.copies_bound_decision(uuid,text,text,pyretrieve.classification,timestamp with time zone,interval) IS 'Whether the given decision id, scope, ceiling, evaluation time and max_age are exactly those of this transaction''s decision (bound_decision()): the check the read bindings'' policies make of every row written.';
REVOKE ALL ON FUNCTION pyretrieve.copies_bound_decision(uuid,text,text,pyretrieve.classification,timestamp with time zone,interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.copies_bound_decision(uuid,text,text,pyretrieve.classification,timestamp with time zone,interval) TO pyretrieve_api;
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

    -- The binding the second wall reads (bound_filter): this process's row in the workspace.
    INSERT INTO pyretrieve.read_bindings AS r (
        xact_id, decision_id, workspace_id, project_id, ceiling, evaluated_at, max_age)
    VALUES (
        d.xact_id, d.decision_id, d.workspace_id, d.project_id, d.ceiling, d.evaluated_at,
        d.max_age)
    ON CONFLICT (workspace_id, session_pid) DO UPDATE
       SET xact_id = excluded.xact_id, decision_id = excluded.decision_id,
           project_id = excluded.project_id,
           ceiling = excluded.ceiling, evaluated_at = excluded.evaluated_at,
           max_age = excluded.max_age;

    RETURN QUERY SELECT d.decision_id, d.principal, d.workspace_id::text, d.project_id::text,
                        d.purpose::text, d.evaluated_at, d.ceiling, d.max_age, d.semantic_policy,
                        d.candidate_limit, d.grant_id;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.authorize(text,text,text,bytea,text,bytea,integer) IS 'Authorise the caller (pyretrieve.caller(): the role the request runs as) for one workspace/project and purpose. Checks the caller''s live grants, records the decision (digests and intent only: never query text, embedding values or content), binds this transaction to that scope (one decision per transaction: a second authorize, or one after a write, raises PR003) and returns the decision with its evaluation time, ceiling, max_age, semantic policy and bounded candidate limit. Raises SQLSTATE PR001 (access denied) alike for an absent scope and a scope without a grant, and PR004 for a superuser or BYPASSRLS caller. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.authorize(text,text,text,bytea,text,bytea,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.authorize(text,text,text,bytea,text,bytea,integer) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
CREATE POLICY read_bindings_insert ON pyretrieve.read_bindings FOR INSERT TO pyretrieve_api WITH CHECK (((session_pid = pg_backend_pid()) AND (xact_id = pg_current_xact_id()) AND (evaluated_at = now()) AND pyretrieve.copies_bound_decision(decision_id, (workspace_id)::text, (project_id)::text, ceiling, evaluated_at, max_age)));
CREATE POLICY read_bindings_replace ON pyretrieve.read_bindings FOR UPDATE TO pyretrieve_api USING (((session_pid = pg_backend_pid()) AND (xact_id <> pg_current_xact_id()))) WITH CHECK (((session_pid = pg_backend_pid()) AND (xact_id = pg_current_xact_id()) AND (evaluated_at = now()) AND pyretrieve.copies_bound_decision(decision_id, (workspace_id)::text, (project_id)::text, ceiling, evaluated_at, max_age)));

UPDATE pyretrieve.installation SET schema_version = '0053';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
