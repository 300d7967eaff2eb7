-- ---------------------------------------------------------------------------------------------
-- Audit (0002). Views a DBA queries (and `pyretrieve audit` reads) to see every table's RLS
-- state, every policy, privilege, function, view and key, the roles that reach SUPERUSER or
-- BYPASSRLS, who may read or write what, and every finding that weakens isolation with a fix.
-- They run as the caller (security_invoker) and read pg_catalog, which RLS does not govern,
-- plus pyretrieve.grants, where only admins (and superusers) see every grant: query them as a
-- member of pyretrieve_admin or as a superuser. The owner keeps only what ownership implies and,
-- having no policy on pyretrieve.grants, would see an empty access matrix.
-- ---------------------------------------------------------------------------------------------

-- The function calls in a stored expression (a policy's USING or WITH CHECK), read from its
-- node tree: for each call, whether it sits inside a sub-select and whether its arguments read
-- a column (a Var anywhere below it, counted conservatively). A call outside any sub-select
-- that reads no column returns the same value for every row and is evaluated once per row;
-- written as (SELECT f(...)) it becomes an InitPlan evaluated once per query.
CREATE FUNCTION pyretrieve.audit_expression_calls(p_expression pg_node_tree)
RETURNS TABLE (function_oid oid, in_subquery boolean, reads_row boolean)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_token text;
    v_kinds text[] := '{}';
    v_funcs oid[] := '{}';
    v_reads boolean[] := '{}';
    v_depth integer := 0;
    v_sublinks integer := 0;
BEGIN
    -- Tokens: an escaped character (node output backslash-escapes braces inside names, so it
    -- is skipped whole), a node opening "{NAME", a node closing "}", and a call's ":funcid N".
    FOR v_token IN
        SELECT m[1]
          FROM pg_catalog.regexp_matches(p_expression::text, '(\\.|\{[A-Z_]+|\}|:funcid [0-9]+)', 'g') AS m
    LOOP
        IF v_token LIKE '{%' THEN
            v_depth := v_depth + 1;
            v_kinds[v_depth] := substr(v_token, 2);
            v_funcs[v_depth] := NULL;
            v_reads[v_depth] := v_kinds[v_depth] = 'VAR';
            IF v_kinds[v_depth] = 'SUBLINK' THEN
                v_sublinks := v_sublinks + 1;
            END IF;
        ELSIF v_token = '}' THEN
            CONTINUE WHEN v_depth = 0;
            IF v_kinds[v_depth] = 'SUBLINK' THEN
                v_sublinks := v_sublinks - 1;
            END IF;
            IF v_kinds[v_depth] = 'FUNCEXPR' AND v_funcs[v_depth] IS NOT NULL THEN
                function_oid := v_funcs[v_depth];
                in_subquery := v_sublinks > 0;
                reads_row := v_reads[v_depth];
                RETURN NEXT;
            END IF;
            IF v_depth > 1 AND v_reads[v_depth] THEN
                v_reads[v_depth - 1] := true;
            END IF;
            v_depth := v_depth - 1;
        ELSIF v_token LIKE ':funcid %' AND v_depth > 0 AND v_kinds[v_depth] = 'FUNCEXPR' THEN
            v_funcs[v_depth] := substr(v_token, 9)::oid;
        END IF;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_expression_calls(pg_node_tree) IS
    'The function calls in a stored expression (a policy''s USING or WITH CHECK node tree): function oid, whether the call sits inside a sub-select, and whether its arguments read a column. pyretrieve.audit_policies uses it to find per-row calls that (SELECT ...) would evaluate once per query.';

CREATE VIEW pyretrieve.audit_server WITH (security_invoker = true) AS
SELECT v.server_version,
       v.server_version_num,
       v.server_version_num / 10000 AS major,
       m.minimum_version,
       CASE WHEN v.server_version_num >= 180000 THEN true
            WHEN m.minimum_num IS NULL THEN false
            ELSE v.server_version_num >= m.minimum_num END AS meets_minimum,
       'CVE-2023-2455, CVE-2024-10976, CVE-2025-8713'::text AS fixes
  FROM (SELECT pg_catalog.current_setting('server_version'),
               pg_catalog.current_setting('server_version_num')::integer) AS v(server_version, server_version_num)
  LEFT JOIN (VALUES (17, '17.6', 170006), (16, '16.10', 160010), (15, '15.14', 150014),
                    (14, '14.19', 140019), (13, '13.22', 130022)) AS m(major, minimum_version, minimum_num)
    ON m.major = v.server_version_num / 10000;
COMMENT ON VIEW pyretrieve.audit_server IS
    'The server version against the first minor release of its major version that carries the fixes for the recent row-level security CVEs (CVE-2023-2455, CVE-2024-10976, CVE-2025-8713): 17.6, 16.10, 15.14, 14.19, 13.22; every 18.x does.';

CREATE VIEW pyretrieve.audit_objects WITH (security_invoker = true) AS
WITH objects (classid, objid, owner) AS (
    SELECT 'pg_catalog.pg_namespace'::regclass, n.oid, n.nspowner
      FROM pg_catalog.pg_namespace n WHERE n.nspname = 'pyretrieve'
    UNION ALL
    SELECT 'pg_catalog.pg_class'::regclass, c.oid, c.relowner
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'pyretrieve'
    UNION ALL
    SELECT 'pg_catalog.pg_proc'::regclass, p.oid, p.proowner
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'pyretrieve'
    UNION ALL
    SELECT 'pg_catalog.pg_type'::regclass, t.oid, t.typowner
      FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
     WHERE n.nspname = 'pyretrieve' AND t.typrelid = 0 AND t.typcategory <> 'A'
)
SELECT o.type AS object_type,
       o.identity AS object,
       pg_catalog.pg_get_userbyid(x.owner)::text AS owner,
       coalesce(r.rolcanlogin, false) AS owner_can_login,
       coalesce(r.rolsuper, false) AS owner_is_superuser
  FROM objects x
  LEFT JOIN pg_catalog.pg_roles r ON r.oid = x.owner,
       LATERAL pg_catalog.pg_identify_object(x.classid, x.objid, 0) o;
COMMENT ON VIEW pyretrieve.audit_objects IS
    'Every object of the pyretrieve schema (the schema, relations, indexes, sequences, functions, types) with its owner and whether the owner can log in or is a superuser. Everything should be owned by the NOLOGIN pyretrieve_owner.';

CREATE VIEW pyretrieve.audit_tables WITH (security_invoker = true) AS
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) AS table_name,
       pg_catalog.pg_get_userbyid(c.relowner)::text AS owner,
       c.relrowsecurity AS rls_enabled,
       c.relforcerowsecurity AS rls_forced,
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid)::integer AS policies,
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_policy p
         WHERE p.polrelid = c.oid AND p.polpermissive)::integer AS permissive_policies,
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_policy p
         WHERE p.polrelid = c.oid AND NOT p.polpermissive)::integer AS restrictive_policies,
       EXISTS (SELECT FROM pg_catalog.pg_attribute a
                WHERE a.attrelid = c.oid AND a.attname = 'workspace_id' AND NOT a.attisdropped) AS has_workspace_id,
       (SELECT pg_catalog.format('%I.%I', pn.nspname, p.relname)
          FROM pg_catalog.pg_inherits i
          JOIN pg_catalog.pg_class p ON p.oid = i.inhparent
          JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace
         WHERE c.relispartition AND i.inhrelid = c.oid) AS partition_of
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'pyretrieve' AND c.relkind IN ('r', 'p');
COMMENT ON VIEW pyretrieve.audit_tables IS
    'Each table of the pyretrieve schema: owner, row-level security enabled and forced (so the owner is bound too), its policies (permissive and restrictive), whether it has a workspace_id column and, for a partition, the table it is a partition of (read through that table, under its policies; its own row-level security, with no policy, refuses every direct read).';

-- The top-level OR branches of a deparsed expression (one element when it has none): each
-- branch admits rows on its own, so each must carry its own identity check.
CREATE FUNCTION pyretrieve.audit_disjuncts(p_expression text)
RETURNS SETOF text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v text := btrim(p_expression);
    v_depth integer;
    v_quote boolean;
    v_start integer;
    v_outer boolean;
    i integer;
    c text;
BEGIN
    -- Strip parentheses that enclose the whole expression.
    LOOP
        EXIT WHEN left(v, 1) <> '(' OR right(v, 1) <> ')';
        v_depth := 0; v_quote := false; v_outer := true;
        FOR i IN 1 .. length(v) LOOP
            c := substr(v, i, 1);
            IF c = '''' THEN v_quote := NOT v_quote;
            ELSIF NOT v_quote AND c = '(' THEN v_depth := v_depth + 1;
            ELSIF NOT v_quote AND c = ')' THEN
                v_depth := v_depth - 1;
                IF v_depth = 0 AND i < length(v) THEN v_outer := false; EXIT; END IF;
            END IF;
        END LOOP;
        EXIT WHEN NOT v_outer;
        v := btrim(substr(v, 2, length(v) - 2));
    END LOOP;
    v_depth := 0; v_quote := false; v_start := 1;
    FOR i IN 1 .. length(v) LOOP
        c := substr(v, i, 1);
        IF c = '''' THEN v_quote := NOT v_quote;
        ELSIF NOT v_quote AND c = '(' THEN v_depth := v_depth + 1;
        ELSIF NOT v_quote AND c = ')' THEN v_depth := v_depth - 1;
        ELSIF NOT v_quote AND v_depth = 0 AND substr(v, i, 4) = ' OR ' THEN
            RETURN NEXT btrim(substr(v, v_start, i - v_start));
            v_start := i + 4;
        END IF;
    END LOOP;
    RETURN NEXT btrim(substr(v, v_start));
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_disjuncts(text) IS
    'The top-level OR branches of a deparsed expression (one element when it has none). pyretrieve.audit_policies checks each branch of a policy for its own identity check.';

-- Every function a function reaches through the calls it makes (pg_depend for SQL-standard
-- bodies, the pyretrieve.name( calls in any other body), up to six calls deep, with what each
-- reached body does: reads a custom setting (current_setting of anything but role, which
-- only names roles the login role may become), or checks an identity the caller cannot set.
CREATE VIEW pyretrieve.audit_function_reach WITH (security_invoker = true) AS
WITH RECURSIVE fn AS (
    SELECT p.oid, p.proname, p.pronamespace,
           CASE WHEN p.prosqlbody IS NOT NULL THEN pg_catalog.pg_get_functiondef(p.oid)
                ELSE coalesce(p.prosrc, '') END AS src
      FROM pg_catalog.pg_proc p
     WHERE p.pronamespace <> 'pg_catalog'::regnamespace
       AND p.pronamespace <> 'information_schema'::regnamespace
       AND p.prokind IN ('f', 'p')
), edge AS (
    SELECT d.objid AS caller, d.refobjid AS callee
      FROM pg_catalog.pg_depend d
     WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.refclassid = 'pg_catalog.pg_proc'::regclass
       AND d.objid <> d.refobjid
    UNION
    SELECT f.oid, g.oid
      FROM fn f
     CROSS JOIN LATERAL pg_catalog.regexp_matches(f.src, 'pyretrieve\.([a-z_][a-z0-9_]*)\s*\(', 'gi') AS m
      JOIN fn g ON g.pronamespace = 'pyretrieve'::regnamespace AND g.proname = pg_catalog.lower(m[1])
     WHERE g.oid <> f.oid
), reach (root, reached, depth, path) AS (
    SELECT f.oid, f.oid, 0, ARRAY[f.oid] FROM fn f
    UNION ALL
    SELECT r.root, e.callee, r.depth + 1, r.path || e.callee
      FROM reach r JOIN edge e ON e.caller = r.reached
     WHERE r.depth < 6 AND e.callee <> ALL (r.path)
)
SELECT r.root AS function_oid, r.reached AS reached_oid, min(r.depth) AS depth,
       bool_or(f.src ~* 'current_setting\s*\(\s*(?!''role''(::text)?\s*[,)])') AS reads_setting,
       bool_or(f.src ~* '\m(current_user|session_user|current_role|pg_has_role)\M|pyretrieve\.caller\s*\(') AS checks_identity
  FROM reach r JOIN fn f ON f.oid = r.reached
 GROUP BY r.root, r.reached;
COMMENT ON VIEW pyretrieve.audit_function_reach IS
    'For each function outside pg_catalog, every function it reaches through its calls (itself at depth 0, up to six calls deep), and whether each reached body reads a custom setting (current_setting of anything but role) or checks an identity the caller cannot set (current_user, session_user, current_role, pg_has_role, pyretrieve.caller()).';

CREATE VIEW pyretrieve.audit_policies WITH (security_invoker = true) AS
WITH pol AS (
    SELECT p.oid, p.polname, p.polcmd, p.polpermissive, p.polroles, p.polqual, p.polwithcheck,
           pg_catalog.format('%I.%I', n.nspname, c.relname) AS table_name,
           pg_catalog.pg_get_expr(p.polqual, p.polrelid) AS using_expr,
           pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid) AS with_check_expr
      FROM pg_catalog.pg_policy p
      JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'pyretrieve'
)
SELECT pol.table_name,
       pol.polname::text AS policy_name,
       CASE pol.polcmd WHEN '*' THEN 'ALL' WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT'
                       WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' END AS command,
       pol.polpermissive AS permissive,
       ARRAY(SELECT CASE WHEN r.oid = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(r.oid)::text END
               FROM pg_catalog.unnest(pol.polroles) AS r(oid) ORDER BY 1) AS roles,
       pol.using_expr,
       pol.with_check_expr,
       -- Calls evaluated once per row that (SELECT ...) would evaluate once per query: outside
       -- every sub-select, reading no column, not IMMUTABLE (those are folded at planning), and
       -- either a function of another schema (a SQL or PL function runs per row) or one of the
       -- look-ups pg_catalog does not cache per statement.
       ARRAY(SELECT DISTINCT pg_catalog.format('%I.%I(%s)', fn.nspname, f.proname,
                                                pg_catalog.oidvectortypes(f.proargtypes))
               FROM (SELECT * FROM pyretrieve.audit_expression_calls(pol.polqual)
                     UNION ALL
                     SELECT * FROM pyretrieve.audit_expression_calls(pol.polwithcheck)) x
               JOIN pg_catalog.pg_proc f ON f.oid = x.function_oid
               JOIN pg_catalog.pg_namespace fn ON fn.oid = f.pronamespace
              WHERE NOT x.in_subquery AND NOT x.reads_row AND f.provolatile <> 'i'
                AND (f.pronamespace <> 'pg_catalog'::regnamespace
                     OR f.proname = ANY (ARRAY['current_setting', 'pg_has_role', 'has_table_privilege',
                                               'has_column_privilege', 'has_any_column_privilege',
                                               'has_schema_privilege', 'has_function_privilege',
                                               'has_database_privilege', 'row_security_active']::name[]))
              ORDER BY 1) AS per_row_calls,
       -- The branches of the policy that read a custom setting (directly or through the
       -- functions they call, however deep) while neither the branch nor those functions
       -- check an identity the caller cannot set: each branch admits rows on its own, so a
       -- sound branch beside it (OR current_user IS NULL, say) cannot make up for it. Empty
       -- when every branch is sound.
       ARRAY(SELECT DISTINCT pg_catalog.format('%s branch %s', b.kind, b.n)
               FROM (SELECT 'USING' AS kind, d.n, d.branch
                       FROM pg_catalog.unnest(ARRAY(SELECT pyretrieve.audit_disjuncts(pol.using_expr)))
                            WITH ORDINALITY AS d(branch, n)
                     UNION ALL
                     SELECT 'WITH CHECK', d.n, d.branch
                       FROM pg_catalog.unnest(ARRAY(SELECT pyretrieve.audit_disjuncts(pol.with_check_expr)))
                            WITH ORDINALITY AS d(branch, n)) b
              CROSS JOIN LATERAL (
                    SELECT (b.branch ~* 'current_setting\s*\(\s*(?!''role''(::text)?\s*[,)])'
                            OR coalesce(bool_or(r.reads_setting), false)) AS reads,
                           (b.branch ~* '\m(current_user|session_user|current_role|pg_has_role)\M'
                            OR coalesce(bool_or(r.checks_identity), false)) AS checks
                      FROM pg_catalog.pg_proc f
                      JOIN pyretrieve.audit_function_reach r ON r.function_oid = f.oid
                     WHERE f.pronamespace = 'pyretrieve'::regnamespace
                       AND b.branch ~* ('(^|[^a-z0-9_.])(pyretrieve\.)?' || f.proname || '\s*\(')) x
              WHERE x.reads AND NOT x.checks
              ORDER BY 1) AS trusts_settings_in,
       -- Functions whose result depends on a custom setting (through any call) and that the
       -- policy reads in more than one sub-select: PostgreSQL evaluates each sub-select (an
       -- InitPlan) lazily, when a qual first needs it, so a caller that changes the setting
       -- part-way through a scan mixes two answers in one row's check.
       ARRAY(SELECT pg_catalog.format('%I.%I(%s)', fn.nspname, f.proname, pg_catalog.oidvectortypes(f.proargtypes))
               FROM (SELECT x.function_oid
                       FROM (SELECT * FROM pyretrieve.audit_expression_calls(pol.polqual)
                             UNION ALL
                             SELECT * FROM pyretrieve.audit_expression_calls(pol.polwithcheck)) x
                      WHERE x.in_subquery
                      GROUP BY x.function_oid
                     HAVING pg_catalog.count(*) > 1) twice
               JOIN pg_catalog.pg_proc f ON f.oid = twice.function_oid
               JOIN pg_catalog.pg_namespace fn ON fn.oid = f.pronamespace
              WHERE f.pronamespace <> 'pg_catalog'::regnamespace
                AND EXISTS (SELECT FROM pyretrieve.audit_function_reach r
                             WHERE r.function_oid = f.oid AND r.reads_setting)
              ORDER BY 1) AS reads_binding_twice
  FROM pol;
COMMENT ON VIEW pyretrieve.audit_policies IS
    'Each row-level security policy of the pyretrieve schema: command, roles, permissive or restrictive, USING and WITH CHECK text, the calls it evaluates once per row where (SELECT ...) would evaluate them once per query (per_row_calls), where a branch trusts a custom setting without an identity check the caller cannot set (trusts_settings_in: each top-level OR branch and every function it reaches are searched for current_setting and for current_user, session_user, current_role, pg_has_role or pyretrieve.caller()), and the setting-dependent functions it reads in more than one sub-select (reads_binding_twice).';

CREATE VIEW pyretrieve.audit_privileges WITH (security_invoker = true) AS
SELECT 'schema'::text AS object_type,
       pg_catalog.quote_ident(n.nspname) AS object,
       NULL::text AS column_name,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END AS grantee,
       a.privilege_type AS privilege,
       a.is_grantable AS grantable,
       pg_catalog.pg_get_userbyid(a.grantor)::text AS grantor,
       a.grantee = n.nspowner AS grantee_is_owner
  FROM pg_catalog.pg_namespace n,
       LATERAL pg_catalog.aclexplode(coalesce(n.nspacl, pg_catalog.acldefault('n', n.nspowner))) a
 WHERE n.nspname = 'pyretrieve'
UNION ALL
SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view'
                      WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence'
                      ELSE 'foreign table' END,
       pg_catalog.format('%I.%I', n.nspname, c.relname),
       NULL::text,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END,
       a.privilege_type,
       a.is_grantable,
       pg_catalog.pg_get_userbyid(a.grantor)::text,
       a.grantee = c.relowner
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace,
       LATERAL pg_catalog.aclexplode(coalesce(c.relacl, pg_catalog.acldefault(
           CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char", c.relowner))) a
 WHERE n.nspname = 'pyretrieve' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
UNION ALL
SELECT 'column',
       pg_catalog.format('%I.%I', n.nspname, c.relname),
       t.attname::text,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END,
       a.privilege_type,
       a.is_grantable,
       pg_catalog.pg_get_userbyid(a.grantor)::text,
       a.grantee = c.relowner
  FROM pg_catalog.pg_attribute t
  JOIN pg_catalog.pg_class c ON c.oid = t.attrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace,
       LATERAL pg_catalog.aclexplode(t.attacl) a
 WHERE n.nspname = 'pyretrieve' AND t.attacl IS NOT NULL AND NOT t.attisdropped;
COMMENT ON VIEW pyretrieve.audit_privileges IS
    'Privileges on the pyretrieve schema, its relations and their columns, one row per grantee and privilege (PUBLIC for every role), the owner''s implicit ones included (grantee_is_owner). TRUNCATE and REFERENCES matter most: row-level security governs neither.';

CREATE VIEW pyretrieve.audit_functions WITH (security_invoker = true) AS
SELECT pg_catalog.format('%I.%I(%s)', n.nspname, p.proname,
                         pg_catalog.oidvectortypes(p.proargtypes)) AS function_name,
       CASE p.prokind WHEN 'f' THEN 'function' WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate'
                      ELSE 'window' END AS kind,
       pg_catalog.pg_get_userbyid(p.proowner)::text AS owner,
       l.lanname::text AS language,
       CASE p.provolatile WHEN 'i' THEN 'IMMUTABLE' WHEN 's' THEN 'STABLE' ELSE 'VOLATILE' END AS volatility,
       p.prosecdef AS security_definer,
       (SELECT pg_catalog.substr(s, 13) FROM pg_catalog.unnest(p.proconfig) AS s
         WHERE s LIKE 'search_path=%' LIMIT 1) AS search_path,
       p.proleakproof AS leakproof,
       ARRAY(SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                                  ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END
               FROM pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
              WHERE a.privilege_type = 'EXECUTE'
              ORDER BY 1) AS executable_by,
       EXISTS (SELECT FROM pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
                WHERE a.privilege_type = 'EXECUTE' AND a.grantee = 0) AS public_execute,
       pg_catalog.obj_description(p.oid, 'pg_proc') AS description
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
  JOIN pg_catalog.pg_language l ON l.oid = p.prolang
 WHERE n.nspname = 'pyretrieve';
COMMENT ON VIEW pyretrieve.audit_functions IS
    'Each function of the pyretrieve schema: owner, SECURITY DEFINER, the search_path pinned in its configuration (NULL when none), LEAKPROOF, volatility, who may execute it (PUBLIC for every role) and its description, which states the reason for a SECURITY DEFINER.';

CREATE VIEW pyretrieve.audit_views WITH (security_invoker = true) AS
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) AS view_name,
       pg_catalog.pg_get_userbyid(c.relowner)::text AS owner,
       EXISTS (SELECT FROM pg_catalog.unnest(c.reloptions) AS o
                WHERE pg_catalog.lower(o) ~ '^security_invoker=(t|tr|tru|true|y|ye|yes|on|1)$') AS security_invoker,
       EXISTS (SELECT FROM pg_catalog.unnest(c.reloptions) AS o
                WHERE pg_catalog.lower(o) ~ '^security_barrier=(t|tr|tru|true|y|ye|yes|on|1)$') AS security_barrier
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'pyretrieve' AND c.relkind = 'v';
COMMENT ON VIEW pyretrieve.audit_views IS
    'Each view of the pyretrieve schema with its owner and security_invoker (without it a view reads its tables with the owner''s rights and policies) and security_barrier options.';

CREATE VIEW pyretrieve.audit_keys WITH (security_invoker = true) AS
WITH k AS (
    SELECT i.indexrelid, t.oid AS relid, t.relowner, t.relacl, i.indisprimary,
           pg_catalog.format('%I.%I', n.nspname, t.relname) AS table_name,
           pg_catalog.format('%I.%I', n.nspname, ic.relname) AS index_name,
           EXISTS (SELECT FROM pg_catalog.pg_constraint co WHERE co.conindid = i.indexrelid
                      AND co.contype IN ('p', 'u')) AS is_constraint,
           ARRAY(SELECT i.indkey[g.pos] FROM pg_catalog.generate_series(0, i.indnkeyatts - 1) AS g(pos)
                  ORDER BY g.pos) AS attnums
      FROM pg_catalog.pg_index i
      JOIN pg_catalog.pg_class t ON t.oid = i.indrelid
      JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
      JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace
     WHERE n.nspname = 'pyretrieve' AND i.indisunique AND t.relkind IN ('r', 'p')
)
SELECT k.table_name,
       k.index_name,
       CASE WHEN k.indisprimary THEN 'PRIMARY KEY' WHEN k.is_constraint THEN 'UNIQUE'
            ELSE 'UNIQUE INDEX' END AS kind,
       ARRAY(SELECT coalesce(a.attname::text, '(expression)')
               FROM pg_catalog.unnest(k.attnums) WITH ORDINALITY AS u(attnum, ord)
               LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = k.relid AND a.attnum = u.attnum
              ORDER BY u.ord) AS key_columns,
       EXISTS (SELECT FROM pg_catalog.pg_attribute a
                WHERE a.attrelid = k.relid AND a.attname = 'workspace_id' AND NOT a.attisdropped) AS table_has_workspace_id,
       coalesce((SELECT a.attname = 'workspace_id' FROM pg_catalog.pg_attribute a
                  WHERE a.attrelid = k.relid AND a.attnum = k.attnums[1]), false) AS leads_with_workspace_id,
       -- Roles other than the owner that may choose a value of the key (other than
       -- workspace_id): INSERT or UPDATE on the table, or on one of those columns.
       ARRAY(SELECT DISTINCT CASE WHEN x.grantee = 0 THEN 'PUBLIC'
                                  ELSE pg_catalog.pg_get_userbyid(x.grantee)::text END
               FROM (SELECT a.grantee, a.privilege_type
                       FROM pg_catalog.aclexplode(coalesce(k.relacl, pg_catalog.acldefault('r', k.relowner))) a
                     UNION ALL
                     SELECT a.grantee, a.privilege_type
                       FROM pg_catalog.pg_attribute t,
                            LATERAL pg_catalog.aclexplode(t.attacl) a
                      WHERE t.attrelid = k.relid AND t.attacl IS NOT NULL
                        AND t.attnum = ANY (k.attnums) AND t.attname <> 'workspace_id') x
              WHERE x.privilege_type IN ('INSERT', 'UPDATE') AND x.grantee <> k.relowner
              ORDER BY 1) AS writable_by
  FROM k;
COMMENT ON VIEW pyretrieve.audit_keys IS
    'Each primary key and unique index on a pyretrieve table: its key columns, whether it leads with workspace_id (so a unique violation cannot reveal another workspace''s key), and which roles other than the owner can choose a value of its other columns (writable_by).';

CREATE VIEW pyretrieve.audit_roles WITH (security_invoker = true) AS
WITH RECURSIVE edge AS (
    SELECT DISTINCT m.member, m.roleid FROM pg_catalog.pg_auth_members m
), reach (member, target, path) AS (
    SELECT e.member, e.roleid, ARRAY[e.member, e.roleid] FROM edge e
    UNION ALL
    SELECT r.member, e.roleid, r.path || e.roleid
      FROM reach r JOIN edge e ON e.member = r.target
     WHERE e.roleid <> ALL (r.path)
), named AS (
    SELECT r.member, r.target, t.rolname AS target_name, t.rolsuper, t.rolbypassrls,
           pg_catalog.cardinality(r.path) AS hops,
           pg_catalog.array_to_string(ARRAY(SELECT pg_catalog.pg_get_userbyid(u.oid)::text
                                              FROM pg_catalog.unnest(r.path) WITH ORDINALITY AS u(oid, ord)
                                             ORDER BY u.ord), ' -> ') AS path_text
      FROM reach r JOIN pg_catalog.pg_roles t ON t.oid = r.target
), per_role AS (
    SELECT r.oid, r.rolname::text AS role_name, r.rolcanlogin, r.rolsuper, r.rolbypassrls,
           ARRAY(SELECT g.g FROM pg_catalog.unnest(ARRAY['pyretrieve_admin', 'pyretrieve_reader',
                                                         'pyretrieve_writer']) AS g(g)
                  WHERE g.g = r.rolname
                     OR EXISTS (SELECT FROM named x WHERE x.member = r.oid AND x.target_name = g.g)
                  ORDER BY 1) AS app_groups,
           (SELECT x.path_text FROM named x WHERE x.member = r.oid AND x.rolsuper
             ORDER BY x.hops, x.path_text LIMIT 1) AS superuser_via,
           (SELECT x.path_text FROM named x WHERE x.member = r.oid AND x.rolbypassrls
             ORDER BY x.hops, x.path_text LIMIT 1) AS bypassrls_via,
           (SELECT x.path_text FROM named x
             WHERE x.member = r.oid AND x.target_name IN ('pyretrieve_owner', 'pyretrieve_api')
             ORDER BY x.hops, x.path_text LIMIT 1) AS owner_via
      FROM pg_catalog.pg_roles r
     WHERE r.rolname !~ '^pg_'
)
SELECT p.role_name,
       p.rolcanlogin AS can_login,
       p.rolsuper AS superuser,
       p.rolbypassrls AS bypassrls,
       p.rolsuper OR p.superuser_via IS NOT NULL AS reaches_superuser,
       p.superuser_via,
       p.rolbypassrls OR p.bypassrls_via IS NOT NULL AS reaches_bypassrls,
       p.bypassrls_via,
       p.app_groups,
       p.role_name = 'pyretrieve_owner' OR pg_catalog.cardinality(p.app_groups) > 0 AS bound_by_rls,
       p.role_name <> 'pyretrieve_owner'
           AND (p.rolsuper OR p.superuser_via IS NOT NULL OR p.owner_via IS NOT NULL) AS can_become_owner,
       p.owner_via,
       (SELECT pg_catalog.count(*) FROM pyretrieve.audit_objects o WHERE o.owner = p.role_name)::integer AS owned_objects
  FROM per_role p
 WHERE p.role_name IN ('pyretrieve_owner', 'pyretrieve_reader', 'pyretrieve_writer', 'pyretrieve_admin')
    OR pg_catalog.cardinality(p.app_groups) > 0
    OR p.rolsuper OR p.superuser_via IS NOT NULL
    OR p.rolbypassrls OR p.bypassrls_via IS NOT NULL
    OR p.owner_via IS NOT NULL
    OR EXISTS (SELECT FROM pyretrieve.audit_objects o WHERE o.owner = p.role_name);
COMMENT ON VIEW pyretrieve.audit_roles IS
    'The roles that matter to pyretrieve: the owner and group roles, every member of a group (app_groups, through any chain of memberships), every role that reaches SUPERUSER or BYPASSRLS directly or through memberships (the shortest chain in superuser_via / bypassrls_via), the roles that can SET ROLE to pyretrieve_owner or pyretrieve_api (owner_via), and the owners of schema objects. Memberships are followed over pg_auth_members whatever their INHERIT and SET options, so a reach may be overstated, never missed.';

CREATE VIEW pyretrieve.audit_access WITH (security_invoker = true) AS
SELECT p.rolname::text AS principal,
       h.rolname::text AS granted_to,
       p.oid <> h.oid AS through_membership,
       g.workspace_id::text AS workspace_id,
       g.project_id::text AS project_id,
       g.purpose::text AS purpose,
       pg_catalog.pg_has_role(p.oid, 'pyretrieve_reader', 'USAGE') AS can_read,
       pg_catalog.pg_has_role(p.oid, 'pyretrieve_writer', 'USAGE') AS can_write,
       g.ceiling,
       g.max_age,
       g.semantic_policy,
       g.expires_at,
       g.expires_at IS NULL OR g.expires_at > pg_catalog.now() AS live,
       g.grant_id
  FROM pyretrieve.grants g
  JOIN pg_catalog.pg_roles h ON h.oid = g.principal
  JOIN pg_catalog.pg_roles p
    ON p.rolname !~ '^pg_' AND NOT p.rolsuper AND pg_catalog.pg_has_role(p.oid, h.oid, 'USAGE');
COMMENT ON VIEW pyretrieve.audit_access IS
    'The access matrix: for each principal (a role that holds a grant or inherits one, resolved with pg_has_role(..., ''USAGE'') exactly as the policies resolve it), each workspace/project and purpose it is granted, whether it may read (member of pyretrieve_reader) and write (member of pyretrieve_writer), the ceiling, max_age, semantic policy, expiry and whether the grant is live now. Superusers are left out: they bypass every policy (see audit_roles). Complete only for admins and superusers, who see every grant.';

CREATE VIEW pyretrieve.audit_findings WITH (security_invoker = true) AS
WITH f (severity, code, object_type, object, evidence, fix) AS (
    -- Row-level security on every table, forced, with policies.
    SELECT 'error', 'rls_disabled', 'table', t.table_name,
           'row-level security is disabled: every role with a table privilege reads and writes all rows',
           pg_catalog.format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;', t.table_name)
      FROM pyretrieve.audit_tables t WHERE NOT t.rls_enabled
    UNION ALL
    SELECT 'error', 'rls_not_forced', 'table', t.table_name,
           pg_catalog.format('row-level security is not forced: the owner %s, and every SECURITY DEFINER function it owns, bypasses the policies', t.owner),
           pg_catalog.format('ALTER TABLE %s FORCE ROW LEVEL SECURITY;', t.table_name)
      FROM pyretrieve.audit_tables t WHERE t.rls_enabled AND NOT t.rls_forced
    UNION ALL
    SELECT 'warning', 'table_without_policy', 'table', t.table_name,
           CASE WHEN t.rls_enabled THEN 'no policy: every query by a role other than the owner returns no rows'
                ELSE 'no policy, and row-level security is disabled' END,
           pg_catalog.format('CREATE POLICY ... ON %s TO <the group roles that use it> USING (...); or drop the table', t.table_name)
      FROM pyretrieve.audit_tables t WHERE t.policies = 0 AND t.partition_of IS NULL
    UNION ALL
    -- Policies.
    SELECT 'warning', 'overlapping_permissive_policies', 'table', a.table_name,
           pg_catalog.format('policies %s (%s) and %s (%s) are both permissive for %s: a row either one allows is allowed',
                             a.policy_name, a.command, b.policy_name, b.command,
                             pg_catalog.array_to_string(
                                 CASE WHEN 'PUBLIC' = ANY (a.roles) THEN b.roles
                                      WHEN 'PUBLIC' = ANY (b.roles) THEN a.roles
                                      ELSE ARRAY(SELECT r FROM pg_catalog.unnest(a.roles) AS r
                                                  WHERE r = ANY (b.roles) ORDER BY 1) END, ', ')),
           pg_catalog.format('merge %s and %s into one policy, or recreate the narrower condition AS RESTRICTIVE so that both must pass', a.policy_name, b.policy_name)
      FROM pyretrieve.audit_policies a
      JOIN pyretrieve.audit_policies b
        ON b.table_name = a.table_name AND a.policy_name < b.policy_name
     WHERE a.permissive AND b.permissive
       AND (a.command = b.command OR a.command = 'ALL' OR b.command = 'ALL')
       AND (a.roles && b.roles OR 'PUBLIC' = ANY (a.roles) OR 'PUBLIC' = ANY (b.roles))
    UNION ALL
    SELECT 'error', 'policy_trusts_setting', 'policy',
           pg_catalog.format('%s on %s', p.policy_name, p.table_name),
           pg_catalog.format('reads current_setting() (in %s) and checks no identity the caller cannot set (current_user, session_user, pg_has_role): any role can change a custom setting with set_config()',
                             pg_catalog.array_to_string(p.trusts_settings_in, ', ')),
           'take the identity from current_user (SET ROLE from an authenticator) and let the setting only select among what that identity was granted, e.g. add AND pg_has_role(<the role granted this row>, ''USAGE'')'
      FROM pyretrieve.audit_policies p WHERE pg_catalog.cardinality(p.trusts_settings_in) > 0
    UNION ALL
    SELECT 'warning', 'policy_per_row_call', 'policy',
           pg_catalog.format('%s on %s', p.policy_name, p.table_name),
           pg_catalog.format('calls %s once per row: outside a sub-select and independent of the row',
                             pg_catalog.array_to_string(p.per_row_calls, ', ')),
           'write each such call as a sub-select, (SELECT f(...)), so the planner evaluates it once per query (an InitPlan)'
      FROM pyretrieve.audit_policies p WHERE pg_catalog.cardinality(p.per_row_calls) > 0
    UNION ALL
    SELECT 'error', 'policy_reads_binding_twice', 'policy',
           pg_catalog.format('%s on %s', p.policy_name, p.table_name),
           pg_catalog.format('reads %s, whose result depends on a custom setting, in more than one sub-select: each sub-select is an InitPlan that PostgreSQL evaluates when a qual first needs it, so a caller that changes the setting part-way through a scan (set_config in a LATERAL, or between FETCHes of a cursor) checks one row against two bindings',
                             pg_catalog.array_to_string(p.reads_binding_twice, ', ')),
           'bind one decision per transaction in a table keyed by the transaction (never by a setting) and read it there; or read every field of the binding in one sub-select'
      FROM pyretrieve.audit_policies p WHERE pg_catalog.cardinality(p.reads_binding_twice) > 0
    UNION ALL
    SELECT 'error', 'policy_true_for_principals', 'policy',
           pg_catalog.format('%s on %s', p.policy_name, p.table_name),
           pg_catalog.format('%s is %s for %s: every row of every workspace',
                             CASE WHEN p.using_expr = 'true' THEN 'USING' ELSE 'WITH CHECK' END,
                             'true', pg_catalog.array_to_string(p.roles, ', ')),
           pg_catalog.format('DROP POLICY %I ON %s; principals reach the tables only through the SQL API (pyretrieve_api)', p.policy_name, p.table_name)
      FROM pyretrieve.audit_policies p
     WHERE (p.using_expr = 'true' OR p.with_check_expr = 'true')
       AND EXISTS (SELECT FROM pg_catalog.unnest(p.roles) AS x(r)
                    WHERE x.r = 'PUBLIC'
                       OR x.r IN (SELECT ar.role_name FROM pyretrieve.audit_roles ar
                                   WHERE pg_catalog.cardinality(ar.app_groups) > 0))
    UNION ALL
    -- The function-only door: principals hold no privilege on any table, view or sequence.
    SELECT 'error', 'principal_table_privilege', pr.object_type,
           pr.object || coalesce('.' || pg_catalog.quote_ident(pr.column_name), ''),
           pg_catalog.format('%s holds %s: principals must reach the data only through the SQL API, with row-level security as the second wall', pr.grantee, pr.privilege),
           pg_catalog.format('REVOKE %s%s ON %s FROM %s;', pr.privilege,
                             coalesce(' (' || pg_catalog.quote_ident(pr.column_name) || ')', ''), pr.object,
                             CASE WHEN pr.grantee = 'PUBLIC' THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pr.grantee) END)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.object_type IN ('table', 'view', 'materialized view', 'sequence', 'foreign table', 'column')
       AND NOT pr.grantee_is_owner
       AND (pr.grantee = 'PUBLIC'
            OR pr.grantee IN (SELECT ar.role_name FROM pyretrieve.audit_roles ar
                               WHERE pg_catalog.cardinality(ar.app_groups) > 0))
    UNION ALL
    SELECT 'error', 'decisions_mutable', pr.object_type, pr.object,
           pg_catalog.format('%s holds %s on an audit log that must be append-only', pr.grantee, pr.privilege),
           pg_catalog.format('REVOKE %s ON %s FROM %s;', pr.privilege, pr.object,
                             CASE WHEN pr.grantee = 'PUBLIC' THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pr.grantee) END)
      FROM pyretrieve.audit_privileges pr
     WHERE (pr.object IN ('pyretrieve.decisions', 'pyretrieve.write_bindings')
            OR pr.object IN (SELECT t.table_name FROM pyretrieve.audit_tables t
                              WHERE t.partition_of IN ('pyretrieve.decisions', 'pyretrieve.write_bindings')))
       AND pr.privilege IN ('UPDATE', 'DELETE', 'TRUNCATE') AND NOT pr.grantee_is_owner
    UNION ALL
    SELECT 'error', 'decisions_mutable', 'policy',
           pg_catalog.format('%s on %s', p.policy_name, p.table_name),
           pg_catalog.format('a %s policy on an audit log that must be append-only', p.command),
           pg_catalog.format('DROP POLICY %I ON %s;', p.policy_name, p.table_name)
      FROM pyretrieve.audit_policies p
     WHERE (p.table_name IN ('pyretrieve.decisions', 'pyretrieve.write_bindings')
            OR p.table_name IN (SELECT t.table_name FROM pyretrieve.audit_tables t
                                 WHERE t.partition_of IN ('pyretrieve.decisions', 'pyretrieve.write_bindings')))
       AND p.command IN ('UPDATE', 'DELETE', 'ALL')
    UNION ALL
    SELECT 'error', 'content_updatable', pr.object_type,
           pr.object || coalesce('.' || pg_catalog.quote_ident(pr.column_name), ''),
           pg_catalog.format('%s may UPDATE %s: a fragment''s body and classification are fixed once written (new content supersedes), and its digest, postings and embeddings are derived from them',
                             pr.grantee, coalesce(pr.column_name, 'every column')),
           pg_catalog.format('REVOKE UPDATE%s ON %s FROM %s;',
                             coalesce(' (' || pg_catalog.quote_ident(pr.column_name) || ')', ''), pr.object,
                             CASE WHEN pr.grantee = 'PUBLIC' THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pr.grantee) END)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.object = 'pyretrieve.fragments' AND pr.privilege = 'UPDATE' AND NOT pr.grantee_is_owner
       AND (pr.column_name IS NULL OR pr.column_name IN ('body', 'classification', 'workspace_id', 'project_id'))
    UNION ALL
    SELECT 'error', 'principal_can_become_owner', 'role', r.role_name,
           pg_catalog.format('%s (%s) can SET ROLE to %s: as that role it reaches the tables past the SQL API',
                             r.role_name, pg_catalog.array_to_string(r.app_groups, ', '), r.owner_via),
           pg_catalog.format('REVOKE %I FROM %I; (the first membership of %s)',
                             pg_catalog.split_part(r.owner_via, ' -> ', 2), r.role_name, r.owner_via)
      FROM pyretrieve.audit_roles r
     WHERE pg_catalog.cardinality(r.app_groups) > 0 AND NOT r.can_login AND r.owner_via IS NOT NULL
       AND r.role_name NOT IN ('pyretrieve_owner', 'pyretrieve_api')
    UNION ALL
    -- Doors outside the schema: a definer function or an owner-rights view elsewhere that
    -- reads pyretrieve's tables and that principals may use.
    SELECT 'error', 'definer_outside_schema', 'function',
           pg_catalog.format('%I.%I(%s)', n.nspname, f.proname, pg_catalog.oidvectortypes(f.proargtypes)),
           pg_catalog.format('SECURITY DEFINER (runs as %s) outside the pyretrieve schema, reads pyretrieve objects and is executable by %s',
                             pg_catalog.pg_get_userbyid(f.proowner),
                             CASE WHEN pg_catalog.has_function_privilege('public', f.oid, 'EXECUTE') THEN 'PUBLIC'
                                  ELSE 'a principal group' END),
           pg_catalog.format('DROP FUNCTION %I.%I(%s); or REVOKE EXECUTE ON it FROM PUBLIC and the principals: the SQL API is the only door',
                             n.nspname, f.proname, pg_catalog.oidvectortypes(f.proargtypes))
      FROM pg_catalog.pg_proc f
      JOIN pg_catalog.pg_namespace n ON n.oid = f.pronamespace
     WHERE f.prosecdef AND n.nspname NOT IN ('pyretrieve', 'pg_catalog', 'information_schema')
       AND (coalesce(f.prosrc, '') ~* '\mpyretrieve\.'
            OR EXISTS (SELECT FROM pg_catalog.pg_depend d
                        JOIN pg_catalog.pg_class c ON c.oid = d.refobjid
                       WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = f.oid
                         AND d.refclassid = 'pg_catalog.pg_class'::regclass
                         AND c.relnamespace = 'pyretrieve'::regnamespace))
       AND (pg_catalog.has_function_privilege('public', f.oid, 'EXECUTE')
            OR pg_catalog.has_function_privilege('pyretrieve_reader', f.oid, 'EXECUTE')
            OR pg_catalog.has_function_privilege('pyretrieve_writer', f.oid, 'EXECUTE')
            OR pg_catalog.has_function_privilege('pyretrieve_admin', f.oid, 'EXECUTE'))
    UNION ALL
    SELECT 'error', 'view_outside_schema', 'view',
           pg_catalog.format('%I.%I', n.nspname, v.relname),
           pg_catalog.format('a view outside the pyretrieve schema reads pyretrieve tables with its owner''s (%s) rights and policies, not the caller''s, and principals may read it',
                             pg_catalog.pg_get_userbyid(v.relowner)),
           pg_catalog.format('ALTER VIEW %I.%I SET (security_invoker = true); or DROP VIEW it',
                             n.nspname, v.relname)
      FROM pg_catalog.pg_class v
      JOIN pg_catalog.pg_namespace n ON n.oid = v.relnamespace
     WHERE v.relkind = 'v' AND n.nspname NOT IN ('pyretrieve', 'pg_catalog', 'information_schema')
       AND NOT coalesce('security_invoker=true' = ANY (v.reloptions)
                        OR 'security_invoker=on' = ANY (v.reloptions), false)
       AND EXISTS (SELECT FROM pg_catalog.pg_rewrite w
                     JOIN pg_catalog.pg_depend d
                       ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = w.oid
                      AND d.refclassid = 'pg_catalog.pg_class'::regclass
                     JOIN pg_catalog.pg_class c ON c.oid = d.refobjid
                    WHERE w.ev_class = v.oid AND c.relnamespace = 'pyretrieve'::regnamespace)
       AND (pg_catalog.has_table_privilege('public', v.oid, 'SELECT')
            OR pg_catalog.has_table_privilege('pyretrieve_reader', v.oid, 'SELECT')
            OR pg_catalog.has_table_privilege('pyretrieve_writer', v.oid, 'SELECT')
            OR pg_catalog.has_table_privilege('pyretrieve_admin', v.oid, 'SELECT'))
    UNION ALL
    -- Keys.
    SELECT CASE WHEN pg_catalog.cardinality(k.writable_by) > 0 THEN 'warning' ELSE 'info' END,
           'unique_key_not_workspace_first', 'index', k.index_name,
           CASE WHEN pg_catalog.cardinality(k.writable_by) > 0
                THEN pg_catalog.format('%s (%s) on %s does not start with workspace_id and %s may write its columns: a unique violation reveals that another workspace holds the key',
                                       k.kind, pg_catalog.array_to_string(k.key_columns, ', '), k.table_name,
                                       pg_catalog.array_to_string(k.writable_by, ', '))
                ELSE pg_catalog.format('%s (%s) on %s does not start with workspace_id, but no role other than the owner can write its columns (their values come from defaults), so no caller can provoke a violation',
                                       k.kind, pg_catalog.array_to_string(k.key_columns, ', '), k.table_name) END,
           CASE WHEN pg_catalog.cardinality(k.writable_by) > 0
                THEN pg_catalog.format('recreate the key as (workspace_id, %s)',
                                       pg_catalog.array_to_string(pg_catalog.array_remove(k.key_columns, 'workspace_id'), ', '))
                ELSE 'none while its columns stay unwritable; lead it with workspace_id if they ever become writable' END
      FROM pyretrieve.audit_keys k
     WHERE k.table_has_workspace_id AND NOT k.leads_with_workspace_id
    UNION ALL
    -- Functions.
    SELECT 'error', 'definer_without_search_path', 'function', fn.function_name,
           pg_catalog.format('SECURITY DEFINER (runs as %s) without a pinned search_path: the caller''s search_path resolves its names', fn.owner),
           pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp;', fn.function_name)
      FROM pyretrieve.audit_functions fn WHERE fn.security_definer AND fn.search_path IS NULL
    UNION ALL
    -- A principal may turn index scans off (or make sequential scans look cheap) before it
    -- calls: a function that plans with the caller's settings then reads every tenant's rows.
    SELECT 'warning', 'definer_follows_caller_planner', 'function', fn.function_name,
           'SECURITY DEFINER, executable by a principal group, and planned with the caller''s settings: a caller that turns index scans off makes its statements scan every tenant''s rows whole, a time that grows with what the other tenants hold',
           pg_catalog.format('ALTER FUNCTION %1$s SET enable_seqscan = off; ALTER FUNCTION %1$s SET enable_indexscan = on; ALTER FUNCTION %1$s SET enable_bitmapscan = on;', fn.function_name)
      FROM pyretrieve.audit_functions fn
      JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure(fn.function_name)
     WHERE fn.security_definer
       AND (pg_catalog.has_function_privilege('pyretrieve_reader', p.oid, 'EXECUTE')
            OR pg_catalog.has_function_privilege('pyretrieve_writer', p.oid, 'EXECUTE'))
       AND NOT coalesce(p.proconfig, '{}') @> ARRAY['enable_seqscan=off', 'enable_indexscan=on',
                                                    'enable_bitmapscan=on']
    UNION ALL
    -- How a function's statements are planned is its own choice, never the caller's or the
    -- plan cache's: planned for the values at hand they follow statistics that lag a growing
    -- scope, planned generically they keep a plan made when the table was small.
    SELECT 'warning', 'definer_plan_cache_mode_unpinned', 'function', fn.function_name,
           'SECURITY DEFINER, executable by a principal group, and planned as the caller''s plan_cache_mode and the plan cache decide: for each call''s values at first, whose statistics lag a growing scope (planned for a scope they take for one row, a look-up of one key read the scope whole), then generically',
           pg_catalog.format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan; (or force_custom_plan, with the reason in a comment)', fn.function_name)
      FROM pyretrieve.audit_functions fn
      JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure(fn.function_name)
     WHERE fn.security_definer
       AND (pg_catalog.has_function_privilege('pyretrieve_reader', p.oid, 'EXECUTE')
            OR pg_catalog.has_function_privilege('pyretrieve_writer', p.oid, 'EXECUTE'))
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proconfig) AS c(setting)
                        WHERE c.setting LIKE 'plan\_cache\_mode=force\_%')
    UNION ALL
    SELECT 'warning', 'definer_search_path_unsafe', 'function', fn.function_name,
           pg_catalog.format('SECURITY DEFINER with search_path = %s, which does not end with pg_temp: temporary objects are searched first', fn.search_path),
           pg_catalog.format('ALTER FUNCTION %s SET search_path = <trusted schemas>, pg_temp;', fn.function_name)
      FROM pyretrieve.audit_functions fn
     WHERE fn.security_definer AND fn.search_path IS NOT NULL
       AND fn.search_path !~ '(^|,)\s*"?pg_temp"?\s*$'
    UNION ALL
    SELECT 'error', 'definer_public_execute', 'function', fn.function_name,
           pg_catalog.format('SECURITY DEFINER (runs as %s) and executable by PUBLIC, that is by every role', fn.owner),
           pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC; then GRANT EXECUTE to the roles that need it', fn.function_name)
      FROM pyretrieve.audit_functions fn WHERE fn.security_definer AND fn.public_execute
    UNION ALL
    SELECT 'info', 'security_definer', 'function', fn.function_name,
           pg_catalog.format('SECURITY DEFINER: runs as %s, search_path = %s, executable by %s. Reason: %s',
                             fn.owner, coalesce(fn.search_path, '(none)'),
                             pg_catalog.array_to_string(fn.executable_by, ', '),
                             coalesce(fn.description, '(no COMMENT ON FUNCTION states one)')),
           'none while the reason holds; keep EXECUTE limited to the roles listed'
      FROM pyretrieve.audit_functions fn WHERE fn.security_definer
    UNION ALL
    SELECT 'warning', 'leakproof_function', 'function', fn.function_name,
           'LEAKPROOF: the planner may run it on rows before the policies filter them',
           pg_catalog.format('ALTER FUNCTION %s NOT LEAKPROOF; unless it provably cannot raise an error or reveal its arguments', fn.function_name)
      FROM pyretrieve.audit_functions fn WHERE fn.leakproof
    UNION ALL
    -- Views.
    SELECT 'error', 'view_without_security_invoker', 'view', v.view_name,
           pg_catalog.format('the view reads its tables as its owner %s, with the owner''s privileges and policies, not the caller''s', v.owner),
           pg_catalog.format('ALTER VIEW %s SET (security_invoker = true);', v.view_name)
      FROM pyretrieve.audit_views v WHERE NOT v.security_invoker
    UNION ALL
    -- Privileges RLS does not govern, and PUBLIC.
    SELECT 'error', 'truncate_granted', pr.object_type, pr.object,
           pg_catalog.format('%s holds TRUNCATE, which ignores row-level security: it can empty every workspace at once', pr.grantee),
           pg_catalog.format('REVOKE TRUNCATE ON %s FROM %s;', pr.object, pr.grantee)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.privilege = 'TRUNCATE' AND NOT pr.grantee_is_owner
    UNION ALL
    SELECT 'warning', 'references_granted', pr.object_type,
           pr.object || coalesce('.' || pg_catalog.quote_ident(pr.column_name), ''),
           pg_catalog.format('%s holds REFERENCES: a foreign key it creates can probe which keys exist in every workspace (foreign-key checks ignore row-level security)', pr.grantee),
           pg_catalog.format('REVOKE REFERENCES%s ON %s FROM %s;',
                             coalesce(' (' || pg_catalog.quote_ident(pr.column_name) || ')', ''), pr.object, pr.grantee)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.privilege = 'REFERENCES' AND NOT pr.grantee_is_owner
    UNION ALL
    SELECT 'warning', 'public_privilege', pr.object_type,
           pr.object || coalesce('.' || pg_catalog.quote_ident(pr.column_name), ''),
           pg_catalog.format('PUBLIC (every role) holds %s', pr.privilege),
           pg_catalog.format('REVOKE %s%s ON %s%s FROM PUBLIC;', pr.privilege,
                             coalesce(' (' || pg_catalog.quote_ident(pr.column_name) || ')', ''),
                             CASE WHEN pr.object_type = 'schema' THEN 'SCHEMA ' ELSE '' END, pr.object)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.grantee = 'PUBLIC'
    UNION ALL
    SELECT 'warning', 'schema_create_granted', 'schema', pr.object,
           pg_catalog.format('%s may create objects in the schema', pr.grantee),
           pg_catalog.format('REVOKE CREATE ON SCHEMA %s FROM %s;', pr.object, pr.grantee)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.object_type = 'schema' AND pr.privilege = 'CREATE' AND NOT pr.grantee_is_owner
       AND pr.grantee <> 'PUBLIC'
    UNION ALL
    -- Roles.
    SELECT 'error', 'app_role_superuser', 'role', r.role_name,
           CASE WHEN r.superuser
                THEN pg_catalog.format('%s (%s) is SUPERUSER and bypasses every policy', r.role_name,
                                       coalesce(pg_catalog.array_to_string(r.app_groups, ', '), ''))
                ELSE pg_catalog.format('%s reaches SUPERUSER through %s and can SET ROLE past every policy', r.role_name, r.superuser_via) END,
           CASE WHEN r.superuser THEN pg_catalog.format('ALTER ROLE %I NOSUPERUSER;', r.role_name)
                ELSE pg_catalog.format('REVOKE %I FROM %I; (the first membership of %s)',
                                       pg_catalog.split_part(r.superuser_via, ' -> ', 2), r.role_name, r.superuser_via) END
      FROM pyretrieve.audit_roles r WHERE r.bound_by_rls AND r.reaches_superuser
    UNION ALL
    SELECT 'error', 'app_role_bypassrls', 'role', r.role_name,
           CASE WHEN r.bypassrls
                THEN pg_catalog.format('%s has BYPASSRLS and ignores every policy', r.role_name)
                ELSE pg_catalog.format('%s reaches BYPASSRLS through %s and can SET ROLE past every policy', r.role_name, r.bypassrls_via) END,
           CASE WHEN r.bypassrls THEN pg_catalog.format('ALTER ROLE %I NOBYPASSRLS;', r.role_name)
                ELSE pg_catalog.format('REVOKE %I FROM %I; (the first membership of %s)',
                                       pg_catalog.split_part(r.bypassrls_via, ' -> ', 2), r.role_name, r.bypassrls_via) END
      FROM pyretrieve.audit_roles r WHERE r.bound_by_rls AND r.reaches_bypassrls
    UNION ALL
    SELECT 'info', 'login_can_become_owner', 'role', r.role_name,
           pg_catalog.format('%s can log in and SET ROLE pyretrieve_owner (%s): as the owner it can alter or drop every table, policy and function',
                             r.role_name, coalesce(r.owner_via, 'superuser')),
           'keep this to the deployment (migration) role; otherwise REVOKE pyretrieve_owner FROM it'
      FROM pyretrieve.audit_roles r WHERE r.can_login AND r.can_become_owner AND NOT r.superuser
    -- Ownership.
    UNION ALL
    SELECT 'error', 'app_role_owns_objects', o.object_type, o.object,
           pg_catalog.format('owned by %s, a member of %s: as owner it can alter its policies and grants', o.owner,
                             pg_catalog.array_to_string(r.app_groups, ', ')),
           pg_catalog.format('ALTER %s %s OWNER TO pyretrieve_owner;', pg_catalog.upper(o.object_type), o.object)
      FROM pyretrieve.audit_objects o
      JOIN pyretrieve.audit_roles r ON r.role_name = o.owner
     WHERE pg_catalog.cardinality(r.app_groups) > 0 AND o.object_type <> 'index'
    UNION ALL
    SELECT 'error', 'owned_by_login_role', o.object_type, o.object,
           pg_catalog.format('owned by %s, a role that can log in: its sessions are the owner, which may alter or drop the object and its policies', o.owner),
           pg_catalog.format('ALTER %s %s OWNER TO pyretrieve_owner;', pg_catalog.upper(o.object_type), o.object)
      FROM pyretrieve.audit_objects o WHERE o.owner_can_login AND o.object_type <> 'index'
    UNION ALL
    SELECT 'warning', 'unexpected_owner', o.object_type, o.object,
           pg_catalog.format('owned by %s, not by pyretrieve_owner', o.owner),
           pg_catalog.format('ALTER %s %s OWNER TO pyretrieve_owner;', pg_catalog.upper(o.object_type), o.object)
      FROM pyretrieve.audit_objects o
     WHERE o.owner <> 'pyretrieve_owner' AND NOT o.owner_can_login AND o.object_type <> 'index'
       -- The SQL API's SECURITY DEFINER functions are owned by pyretrieve_api by design.
       AND NOT (o.owner = 'pyretrieve_api' AND o.object_type = 'function')
       AND NOT EXISTS (SELECT FROM pyretrieve.audit_roles r
                        WHERE r.role_name = o.owner AND pg_catalog.cardinality(r.app_groups) > 0)
    UNION ALL
    -- Grants naming a role that no longer exists.
    SELECT 'warning', 'grant_to_dropped_role', 'grant',
           pg_catalog.format('%s/%s purpose %s', g.workspace_id, g.project_id, g.purpose),
           pg_catalog.format('grant %s names role OID %s, which no longer exists: a role created later with the same OID would hold it',
                             g.grant_id, g.principal::oid),
           pg_catalog.format('DELETE FROM pyretrieve.grants WHERE workspace_id = %L AND grant_id = %L;', g.workspace_id, g.grant_id)
      FROM pyretrieve.grants g
     WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid = g.principal::oid)
    UNION ALL
    -- The server.
    SELECT 'warning', 'server_version_below_minimum', 'server', s.server_version,
           pg_catalog.format('PostgreSQL %s is below %s, the first %s.x release with the fixes for %s',
                             s.server_version, coalesce(s.minimum_version, '(a supported major version)'), s.major, s.fixes),
           pg_catalog.format('upgrade to %s or later (a minor upgrade: replace the binaries and restart)',
                             coalesce(s.minimum_version, '18'))
      FROM pyretrieve.audit_server s WHERE NOT s.meets_minimum
)
SELECT f.severity::text, f.code::text, f.object_type::text, f.object::text, f.evidence::text, f.fix::text
  FROM f
 ORDER BY CASE f.severity WHEN 'error' THEN 1 WHEN 'warning' THEN 2 ELSE 3 END, f.code, f.object, f.evidence;
COMMENT ON VIEW pyretrieve.audit_findings IS
    'Every finding that weakens isolation, derived from the other audit views: severity (error | warning | info), a stable code, the object, the evidence and a fix. The shipped schema has no error or warning. `pyretrieve audit --fail-on error|warning` exits 1 when one exists.';

REVOKE ALL ON pyretrieve.audit_server, pyretrieve.audit_objects, pyretrieve.audit_tables,
    pyretrieve.audit_policies, pyretrieve.audit_privileges, pyretrieve.audit_functions,
    pyretrieve.audit_views, pyretrieve.audit_keys, pyretrieve.audit_roles, pyretrieve.audit_access,
    pyretrieve.audit_findings FROM PUBLIC;
REVOKE ALL ON FUNCTION pyretrieve.audit_expression_calls(pg_node_tree), pyretrieve.audit_disjuncts(text) FROM PUBLIC;
REVOKE ALL ON pyretrieve.audit_function_reach FROM PUBLIC;
GRANT SELECT ON pyretrieve.audit_function_reach TO pyretrieve_api;
GRANT EXECUTE ON FUNCTION pyretrieve.audit_disjuncts(text) TO pyretrieve_api;
-- The views run as their caller; admins reach them through the functions below (principals hold
-- no privilege on any view), which run as pyretrieve_api.
GRANT SELECT ON pyretrieve.audit_server, pyretrieve.audit_objects, pyretrieve.audit_tables,
    pyretrieve.audit_policies, pyretrieve.audit_privileges, pyretrieve.audit_functions,
    pyretrieve.audit_views, pyretrieve.audit_keys, pyretrieve.audit_roles, pyretrieve.audit_access,
    pyretrieve.audit_findings TO pyretrieve_api;
GRANT EXECUTE ON FUNCTION pyretrieve.audit_expression_calls(pg_node_tree) TO pyretrieve_api;

-- SECURITY DEFINER, written reason: principals hold no privilege on any view, and the access
-- matrix reads pyretrieve.grants; each function checks that the caller is an admin and returns
-- its view's rows, computed as pyretrieve_api (whose grants policy shows admins every grant).
SET LOCAL ROLE pyretrieve_api;
CREATE FUNCTION pyretrieve.audit_server()
RETURNS SETOF pyretrieve.audit_server
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_server;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_server() IS
    'The rows of the view pyretrieve.audit_server, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_objects()
RETURNS SETOF pyretrieve.audit_objects
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_objects;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_objects() IS
    'The rows of the view pyretrieve.audit_objects, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
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
CREATE FUNCTION pyretrieve.audit_policies()
RETURNS SETOF pyretrieve.audit_policies
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_policies;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_policies() IS
    'The rows of the view pyretrieve.audit_policies, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_privileges()
RETURNS SETOF pyretrieve.audit_privileges
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_privileges;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_privileges() IS
    'The rows of the view pyretrieve.audit_privileges, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_functions()
RETURNS SETOF pyretrieve.audit_functions
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_functions;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_functions() IS
    'The rows of the view pyretrieve.audit_functions, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_views()
RETURNS SETOF pyretrieve.audit_views
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_views;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_views() IS
    'The rows of the view pyretrieve.audit_views, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_keys()
RETURNS SETOF pyretrieve.audit_keys
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_keys;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_keys() IS
    'The rows of the view pyretrieve.audit_keys, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_roles()
RETURNS SETOF pyretrieve.audit_roles
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_roles;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_roles() IS
    'The rows of the view pyretrieve.audit_roles, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_access()
RETURNS SETOF pyretrieve.audit_access
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_access;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_access() IS
    'The rows of the view pyretrieve.audit_access, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
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
REVOKE ALL ON FUNCTION pyretrieve.audit_server(), pyretrieve.audit_objects(), pyretrieve.audit_tables(), pyretrieve.audit_policies(), pyretrieve.audit_privileges(), pyretrieve.audit_functions(), pyretrieve.audit_views(), pyretrieve.audit_keys(), pyretrieve.audit_roles(), pyretrieve.audit_access(), pyretrieve.audit_findings()
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.audit_server(), pyretrieve.audit_objects(), pyretrieve.audit_tables(), pyretrieve.audit_policies(), pyretrieve.audit_privileges(), pyretrieve.audit_functions(), pyretrieve.audit_views(), pyretrieve.audit_keys(), pyretrieve.audit_roles(), pyretrieve.audit_access(), pyretrieve.audit_findings()
    TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;
