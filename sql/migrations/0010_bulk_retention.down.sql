-- pyretrieve migration 0010, downgrade: back to 0009
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.
-- What is not drafted is marked "Hand-written" (blocks with an end marker) or "Hand-edited"
-- (a drafted statement moved): carry these parts over when the migration is re-drafted.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- =============================================================================================
-- Hand-written (the drafter sees no column change): pyretrieve.decisions becomes one plain
-- table again, with every row of every partition moved back.
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
    PRIMARY KEY (workspace_id, decision_id)
);
CREATE UNIQUE INDEX decisions_id_key ON pyretrieve.decisions (decision_id, workspace_id);
CREATE INDEX decisions_xact_idx ON pyretrieve.decisions (xact_id);
COMMENT ON TABLE pyretrieve.decisions IS
    'Audit log of authorisation decisions: digests and intent only, never query text, embedding values or content. At most one per transaction: the read binding of that transaction.';
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

DROP FUNCTION pyretrieve.decision_partition_ranges() CASCADE;
DROP FUNCTION pyretrieve.decision_partitions() CASCADE;
DROP FUNCTION pyretrieve.drop_decision_partition(text) CASCADE;
DROP FUNCTION pyretrieve.ensure_decision_partitions(integer,timestamp with time zone) CASCADE;
DROP FUNCTION pyretrieve.ingest_batch(text,text,pyretrieve.ingest_row[],text) CASCADE;
DROP FUNCTION pyretrieve.ingest_state(text,text,text[],text) CASCADE;
DROP FUNCTION pyretrieve.list_decisions(timestamp with time zone,timestamp with time zone,text,text,text,integer) CASCADE;
DROP FUNCTION pyretrieve.prune_decisions(interval,boolean) CASCADE;
DROP VIEW pyretrieve.audit_findings CASCADE;
DROP VIEW pyretrieve.audit_tables CASCADE;
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

    INSERT INTO pyretrieve.decisions AS dn (
        workspace_id, principal, project_id, purpose, grant_id, ceiling, max_age, semantic_policy,
        requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest)
    VALUES (
        g.workspace_id, pyretrieve.caller(), g.project_id, g.purpose, g.grant_id, g.ceiling,
        g.max_age, g.semantic_policy,
        p_requested_limit, least(greatest(p_requested_limit, 100), 1000),
        p_query_digest, p_semantic_intent, p_embedding_digest)
    RETURNING dn.* INTO d;

    RETURN QUERY SELECT d.decision_id, d.principal, d.workspace_id::text, d.project_id::text,
                        d.purpose::text, d.evaluated_at, d.ceiling, d.max_age, d.semantic_policy,
                        d.candidate_limit, d.grant_id;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.authorize(text,text,text,bytea,text,bytea,integer) IS 'Authorise the caller (pyretrieve.caller(): the role the request runs as) for one workspace/project and purpose. Checks the caller''s live grants, records the decision (digests and intent only: never query text, embedding values or content), binds this transaction to that scope (one decision per transaction: a second authorize, or one after a write, raises PR003) and returns the decision with its evaluation time, ceiling, max_age, semantic policy and bounded candidate limit. Raises SQLSTATE PR001 (access denied) alike for an absent scope and a scope without a grant, and PR004 for a superuser or BYPASSRLS caller. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.authorize(text,text,text,bytea,text,bytea,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.authorize(text,text,text,bytea,text,bytea,integer) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;

-- Hand-edited: audit_findings reads audit_tables, so audit_tables is created before it (the
-- drafter creates it near the end, after the functions).
CREATE VIEW pyretrieve.audit_tables WITH (security_invoker=true) AS
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
          WHERE ((a.attrelid = c.oid) AND (a.attname = 'workspace_id'::name) AND (NOT a.attisdropped)))) AS has_workspace_id
   FROM (pg_class c
     JOIN pg_namespace n ON ((n.oid = c.relnamespace)))
  WHERE ((n.nspname = 'pyretrieve'::name) AND (c.relkind = ANY (ARRAY['r'::"char", 'p'::"char"])));
COMMENT ON VIEW pyretrieve.audit_tables IS 'Each table of the pyretrieve schema: owner, row-level security enabled and forced (so the owner is bound too), its policies (permissive and restrictive) and whether it has a workspace_id column.';
CREATE VIEW pyretrieve.audit_findings WITH (security_invoker=true) AS
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
          WHERE (t.policies = 0)
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
          WHERE ((pr.object = ANY (ARRAY['pyretrieve.decisions'::text, 'pyretrieve.write_bindings'::text])) AND (pr.privilege = ANY (ARRAY['UPDATE'::text, 'DELETE'::text, 'TRUNCATE'::text])) AND (NOT pr.grantee_is_owner))
        UNION ALL
         SELECT 'error'::text,
            'decisions_mutable'::text,
            'policy'::text,
            format('%s on %s'::text, p.policy_name, p.table_name) AS format,
            format('a %s policy on an audit log that must be append-only'::text, p.command) AS format,
            format('DROP POLICY %I ON %s;'::text, p.policy_name, p.table_name) AS format
           FROM pyretrieve.audit_policies p
          WHERE ((p.table_name = ANY (ARRAY['pyretrieve.decisions'::text, 'pyretrieve.write_bindings'::text])) AND (p.command = ANY (ARRAY['UPDATE'::text, 'DELETE'::text, 'ALL'::text])))
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
-- Hand-written: DROP VIEW ... CASCADE above took the functions returning those views' rows
-- and the views' grants with it; they are created again as before this migration.
-- =============================================================================================
REVOKE ALL ON pyretrieve.audit_tables, pyretrieve.audit_findings FROM PUBLIC;
GRANT SELECT ON pyretrieve.audit_tables, pyretrieve.audit_findings TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_api;
CREATE FUNCTION pyretrieve.audit_tables()
RETURNS SETOF pyretrieve.audit_tables
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_tables;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_tables() IS
    'The rows of the view pyretrieve.audit_tables, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_findings()
RETURNS SETOF pyretrieve.audit_findings
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_findings;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_findings() IS
    'The rows of the view pyretrieve.audit_findings, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
REVOKE ALL ON FUNCTION pyretrieve.audit_tables(), pyretrieve.audit_findings() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.audit_tables(), pyretrieve.audit_findings() TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;
-- The bulk batch's row type, once ingest_batch (dropped above) no longer uses it.
DROP TYPE pyretrieve.ingest_row;
-- ====================================================================== end of hand-written

UPDATE pyretrieve.installation SET schema_version = '0009';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
