-- pyretrieve migration 0045: compaction_plans
-- compact_lexical_index plans for each call (force_custom_plan): its statements join the
-- scope's blocks to arrays built in the call, and the generic plans 0043 gave it took them for
-- ten elements and joined by nested loops (compacting a 4,000-fragment scope after a bulk
-- batch took 39 s against 1 s). The audit's plan-mode check becomes
-- definer_plan_cache_mode_unpinned: a function pins its plan cache mode, either way, rather
-- than follow the caller's.
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.compact_lexical_index(p_workspace text, p_project text, p_min_share double precision DEFAULT 0)
 RETURNS TABLE(rows_read integer, rows_written integer, postings integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
 SET plan_cache_mode TO 'force_custom_plan'
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
            'definer_plan_cache_mode_unpinned'::text,
            'function'::text,
            fn.function_name,
            'SECURITY DEFINER, executable by a principal group, and planned as the caller''s plan_cache_mode and the plan cache decide: for each call''s values at first, whose statistics lag a growing scope (planned for a scope they take for one row, a look-up of one key read the scope whole), then generically'::text,
            format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan; (or force_custom_plan, with the reason in a comment)'::text, fn.function_name) AS format
           FROM (pyretrieve.audit_functions fn
             JOIN pg_proc p ON ((p.oid = (to_regprocedure(fn.function_name))::oid)))
          WHERE (fn.security_definer AND (has_function_privilege('pyretrieve_reader'::name, p.oid, 'EXECUTE'::text) OR has_function_privilege('pyretrieve_writer'::name, p.oid, 'EXECUTE'::text)) AND (NOT (EXISTS ( SELECT 1
                   FROM unnest(p.proconfig) c(setting)
                  WHERE (c.setting ~~ 'plan\_cache\_mode=force\_%'::text)))))
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

UPDATE pyretrieve.installation SET schema_version = '0045';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
