-- ---------------------------------------------------------------------------------------------
-- Identity and bindings. STABLE and SECURITY INVOKER: called inside the API functions (which
-- run as pyretrieve_api) and by the policies as (select ...), so once per query.
--
-- A transaction reads under one decision (authorize) or writes under write scopes
-- (bind_write_scope), never both. A binding is found by the transaction id, not by any
-- setting. The decision cannot change while the transaction lives, so every sub-select of a
-- policy that reads it reads the same row, however lazily PostgreSQL evaluates them. A write
-- scope changes only when a write function binds another one before its own statements run,
-- never during a statement.
-- ---------------------------------------------------------------------------------------------

-- The principal a request runs as. Inside a SECURITY DEFINER function current_user is the
-- function's owner, so the caller is read from the role the session switched to with SET ROLE
-- (the `role` parameter, which PostgreSQL lets a session set only to roles its login role may
-- become) or, without SET ROLE, the login role itself. Neither is a custom setting.
CREATE FUNCTION pyretrieve.caller()
RETURNS name
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT CASE WHEN pg_catalog.current_setting('role') = 'none' THEN SESSION_USER
                ELSE pg_catalog.current_setting('role')::name END;
END;
COMMENT ON FUNCTION pyretrieve.caller() IS
    'The principal the request runs as: the role set with SET ROLE, else the login role. Inside the SQL API this is the caller''s identity; no custom setting can change it.';

-- Whether the caller reaches a group role (pyretrieve_reader, _writer, _admin).
CREATE FUNCTION pyretrieve.caller_in(p_group name)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT pg_catalog.pg_has_role(pyretrieve.caller(), p_group, 'USAGE');
END;

-- The read decision of this transaction, if one was made.
-- Through the xact_id index, whatever the statistics say (enable_seqscan): a month's partition
-- of the decisions log starts empty and is analysed so, and until autovacuum analyses it again
-- the planner takes it for tiny and scans it whole, at every look-up (a search makes about 30):
-- 36 us per look-up at 500 rows and 109 at 2,000 in a scratch run, against 8 by the index.
CREATE FUNCTION pyretrieve.bound_decision()
RETURNS SETOF pyretrieve.decisions
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
BEGIN ATOMIC
    SELECT d.*
      FROM pyretrieve.decisions d
     WHERE d.xact_id = pg_catalog.pg_current_xact_id_if_assigned()
       AND d.evaluated_at = pg_catalog.now()
     LIMIT 1;
END;
COMMENT ON FUNCTION pyretrieve.bound_decision() IS
    'The one read decision of this transaction (found by transaction id, never by a setting), or no row.';

-- The write scope of this transaction, if one was bound.
-- Through the xact_id index, whatever the statistics say, as bound_decision.
CREATE FUNCTION pyretrieve.bound_write()
RETURNS SETOF pyretrieve.write_bindings
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
BEGIN ATOMIC
    SELECT w.*
      FROM pyretrieve.write_bindings w
     WHERE w.xact_id = pg_catalog.pg_current_xact_id_if_assigned()
       AND w.bound_at = pg_catalog.now()
     ORDER BY w.position DESC
     LIMIT 1;
END;
COMMENT ON FUNCTION pyretrieve.bound_write() IS
    'The write scope in force in this transaction (its latest binding, found by transaction id, never by a setting), or no row.';

-- What the second wall admits in this transaction, as one row: the read decision's scope,
-- ceiling and oldest observation time (reading), else the write scope's, with the writer's
-- ceiling and no time bound (not reading: writes see every state and time up to the writer's
-- ceiling); no row without a binding. Every read policy reads it, the scope as one row
-- comparison. The decision comes from read_bindings, this process's row written in this
-- transaction (found by the process's index): the decisions log itself, partitioned by month and
-- under its own policy, cost the policies about 0.1 ms a search more. The write arm is read
-- only when the transaction holds no read decision (a forged write binding beside a decision
-- widens nothing). PARALLEL RESTRICTED: the key is the leader's process id.
CREATE FUNCTION pyretrieve.bound_filter()
RETURNS TABLE (workspace_id pyretrieve.identifier, project_id pyretrieve.identifier,
               ceiling pyretrieve.classification, oldest timestamptz, reading boolean)
LANGUAGE sql STABLE PARALLEL RESTRICTED SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
BEGIN ATOMIC
    (SELECT r.workspace_id, r.project_id, r.ceiling,
            coalesce(r.evaluated_at - r.max_age, '-infinity'::timestamptz), true
       FROM pyretrieve.read_bindings r
      WHERE r.session_pid = pg_catalog.pg_backend_pid()
        AND r.xact_id = pg_catalog.pg_current_xact_id_if_assigned()
        AND r.evaluated_at = pg_catalog.now()
     UNION ALL
     SELECT w.workspace_id, w.project_id, w.ceiling, '-infinity'::timestamptz, false
       FROM pyretrieve.bound_write() w
      WHERE NOT EXISTS (SELECT 1 FROM pyretrieve.read_bindings r
                         WHERE r.session_pid = pg_catalog.pg_backend_pid()
                           AND r.xact_id = pg_catalog.pg_current_xact_id_if_assigned()
                           AND r.evaluated_at = pg_catalog.now()))
    LIMIT 1;
END;
COMMENT ON FUNCTION pyretrieve.bound_filter() IS
    'What the row-level security policies admit in this transaction, as one row: the read decision''s workspace, project, ceiling and oldest observation time (reading = true), else the write scope''s with the writer''s ceiling (reading = false); no row without a binding. Found by process and transaction, never by a setting.';

-- Whether a read binding's fields are those of this transaction's decision: the check the
-- read bindings' insert and update policies make of every row written.
CREATE FUNCTION pyretrieve.copies_bound_decision(
    p_decision uuid, p_workspace text, p_project text, p_ceiling pyretrieve.classification,
    p_evaluated_at timestamptz, p_max_age interval)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT EXISTS (SELECT 1 FROM pyretrieve.bound_decision() d
                    WHERE d.decision_id = p_decision
                      AND d.workspace_id = p_workspace
                      AND d.project_id = p_project
                      AND d.ceiling = p_ceiling
                      AND d.evaluated_at = p_evaluated_at
                      AND d.max_age IS NOT DISTINCT FROM p_max_age);
END;
COMMENT ON FUNCTION pyretrieve.copies_bound_decision(uuid, text, text, pyretrieve.classification, timestamptz, interval) IS
    'Whether the given decision id, scope, ceiling, evaluation time and max_age are exactly those of this transaction''s decision (bound_decision()): the check the read bindings'' policies make of every row written.';

-- Every role the caller is a member of, directly or through other roles (pg_has_role ...
-- MEMBER), itself included: found by walking up its own memberships, so that what it costs
-- follows the caller's memberships, not the roles the cluster holds.
CREATE FUNCTION pyretrieve.caller_memberships()
RETURNS oid[]
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH RECURSIVE up(role_id) AS (
        SELECT pg_catalog.to_regrole(pg_catalog.quote_ident((SELECT pyretrieve.caller())))::oid
        UNION
        SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN up ON m.member = up.role_id
    )
    SELECT coalesce(pg_catalog.array_agg(up.role_id ORDER BY up.role_id), '{}') FROM up;
END;
COMMENT ON FUNCTION pyretrieve.caller_memberships() IS
    'Every role the caller is a member of, directly or through other roles, itself included (pg_has_role MEMBER), from its own memberships.';

-- The roles whose grants apply to the caller: its memberships that pass privileges on
-- (pg_has_role ... USAGE). A grant look-up probes the grants' key once per such role, where it
-- read every principal's grants of the scope and kept the caller's: with 5,000 principals
-- granted one project, an authorize read 10,000 grant rows, until 0044.
CREATE FUNCTION pyretrieve.caller_roles()
RETURNS oid[]
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(pg_catalog.array_agg(m.role_id ORDER BY m.role_id), '{}')
      FROM pg_catalog.unnest(pyretrieve.caller_memberships()) AS m(role_id)
     WHERE pg_catalog.pg_has_role((SELECT pyretrieve.caller()), m.role_id, 'USAGE');
END;
COMMENT ON FUNCTION pyretrieve.caller_roles() IS
    'The roles whose grants apply to the caller: itself and the roles it inherits the privileges of (pg_has_role USAGE), from its own memberships, so that a grant look-up probes the key once per role.';

-- The caller's writer ceiling in a scope: the highest ceiling among its live grants there,
-- NULL when it holds none or is not a writer.
CREATE FUNCTION pyretrieve.writer_ceiling(p_workspace text, p_project text)
RETURNS pyretrieve.classification
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT max(g.ceiling)
      FROM pyretrieve.grants g
     WHERE g.workspace_id = p_workspace
       AND g.project_id = p_project
       AND g.principal::oid = ANY ((SELECT pyretrieve.caller_roles())::oid[])
       AND pg_catalog.pg_has_role(pyretrieve.caller(), g.principal, 'USAGE')
       AND pyretrieve.caller_in('pyretrieve_writer')
       AND (g.expires_at IS NULL OR g.expires_at > pg_catalog.now());
END;

-- Whether an active fragment with this id is visible in this scope to the bound write scope.
-- A policy may not query its own table directly (PostgreSQL refuses the recursion); a function
-- may, and its query still runs under RLS.
CREATE FUNCTION pyretrieve.visible_successor(p_workspace text, p_project text, p_fragment_id uuid)
RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM pyretrieve.fragments s
                    WHERE s.workspace_id = p_workspace AND s.project_id = p_project
                      AND s.fragment_id = p_fragment_id AND s.state = 'active');
END;
$$;

-- The grant a decision for this scope and purpose must copy: among the live grants that apply
-- to the caller, the caller's own before a group's, then the widest. The caller's own is one
-- probe of the key, and when it holds one no group's is looked at; otherwise the key is probed
-- once per role the caller inherits (caller_roles), which costs about 20 us more. The caller
-- is read once (a sub-select): with few roles, or a caller's enable_indexscan off, the planner
-- scans pg_authid, and a bare caller() ran once per role.
CREATE FUNCTION pyretrieve.effective_grant(p_workspace text, p_project text, p_purpose text)
RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(
        (SELECT gr.grant_id
           FROM pyretrieve.grants gr
          WHERE gr.workspace_id = p_workspace
            AND gr.project_id = p_project
            AND gr.principal::oid = pg_catalog.to_regrole(
                    pg_catalog.quote_ident((SELECT pyretrieve.caller())))::oid
            AND gr.purpose = p_purpose
            AND (gr.expires_at IS NULL OR gr.expires_at > pg_catalog.now())),
        (SELECT gr.grant_id
           FROM pyretrieve.grants gr
          WHERE gr.workspace_id = p_workspace
            AND gr.project_id = p_project
            AND gr.principal::oid = ANY ((SELECT pyretrieve.caller_roles())::oid[])
            AND gr.purpose = p_purpose
            AND pg_catalog.pg_has_role((SELECT pyretrieve.caller()), gr.principal, 'USAGE')
            AND (gr.expires_at IS NULL OR gr.expires_at > pg_catalog.now())
          ORDER BY gr.ceiling DESC, gr.max_age DESC NULLS FIRST, gr.grant_id
          LIMIT 1));
END;

-- Superusers and BYPASSRLS roles pass every policy; a caller that is one (or reaches one
-- through membership) is refused, so no request runs with the widest grant of every role.
CREATE FUNCTION pyretrieve.check_caller()
RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

-- A request that set no timeouts of its own gets bounded ones for the rest of its transaction:
-- a lock held by another writer, a runaway statement or a client that stops half-way can then
-- hold a scope only for a while, and fails with a typed error (57014, 55P03, 25P03).
-- SET ROLE does not apply role-level settings, so the groups cannot carry these.
CREATE FUNCTION pyretrieve.apply_request_timeouts()
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.current_setting('lock_timeout') = '0' THEN
        PERFORM pg_catalog.set_config('lock_timeout', '10s', true);
    END IF;
    IF pg_catalog.current_setting('statement_timeout') = '0' THEN
        PERFORM pg_catalog.set_config('statement_timeout', '60s', true);
    END IF;
    IF pg_catalog.current_setting('idle_in_transaction_session_timeout') = '0' THEN
        PERFORM pg_catalog.set_config('idle_in_transaction_session_timeout', '60s', true);
    END IF;
END;
$$;

-- Text-search configurations come from pg_catalog or this schema only: a configuration in a
-- session's pg_temp would vanish with the session and leave every later search of the scope
-- failing on a dangling reference.
CREATE FUNCTION pyretrieve.check_ts_config(p_config regconfig)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_config IS NULL OR NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_ts_config c
         WHERE c.oid = p_config
           AND c.cfgnamespace IN ('pg_catalog'::regnamespace, 'pyretrieve'::regnamespace)) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR015',
            MESSAGE = 'text-search configuration must be one of pg_catalog or pyretrieve';
    END IF;
END;
$$;
