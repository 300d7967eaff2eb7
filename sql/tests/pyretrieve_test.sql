-- pgTAP: the pyretrieve policy layer is as shipped.
--
-- A DBA runs this against a database where pyretrieve is installed, with pgTAP available in a
-- schema on the search_path (CREATE EXTENSION pgtap), as a superuser or a member of
-- pyretrieve_admin:
--
--   pg_prove -d <database> sql/tests/pyretrieve_test.sql
--   (pgTAP in another schema: PGOPTIONS='-c search_path=tap,public' pg_prove ...)
--
-- It asserts the roles and their attributes, that every table has row-level security enabled
-- and forced, every policy's command and roles, the SECURITY DEFINER functions and their
-- search_path, the table, column and function privileges (no TRUNCATE or REFERENCES for
-- anyone but the owner), the views' security_invoker, and that pyretrieve.audit_findings
-- reports no error or warning. Everything runs in one transaction that is rolled back.
-- Update it with the schema: a failure names what differs from the shipped state.

\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
SELECT plan(155);

-- The installation.
SELECT has_schema('pyretrieve');
SELECT schema_owner_is('pyretrieve', 'pyretrieve_owner');
SELECT is((SELECT schema_version FROM pyretrieve.installation), '0002', 'pyretrieve schema version is 0002');

-- Roles: the owner and three groups, none of which can log in or bypass row-level security;
-- the owner does not inherit; a writer is a reader.
SELECT has_role('pyretrieve_owner');
SELECT has_role('pyretrieve_reader');
SELECT has_role('pyretrieve_writer');
SELECT has_role('pyretrieve_admin');
SELECT results_eq(
    $$SELECT rolname::text COLLATE "default", rolcanlogin, rolsuper, rolbypassrls, rolinherit, rolcreaterole, rolcreatedb
        FROM pg_catalog.pg_roles
       WHERE rolname IN ('pyretrieve_owner', 'pyretrieve_reader', 'pyretrieve_writer', 'pyretrieve_admin')
       ORDER BY 1$$,
    $$VALUES ('pyretrieve_admin', false, false, false, true, false, false),
             ('pyretrieve_owner', false, false, false, false, false, false),
             ('pyretrieve_reader', false, false, false, true, false, false),
             ('pyretrieve_writer', false, false, false, true, false, false)$$,
    'the pyretrieve roles cannot log in, are not superusers, do not bypass RLS; only the owner is NOINHERIT');
SELECT is_member_of('pyretrieve_reader', ARRAY['pyretrieve_writer'], 'pyretrieve_writer is a member of pyretrieve_reader');
SELECT is_empty(
    $$SELECT pg_catalog.pg_get_userbyid(m.member)::text, pg_catalog.pg_get_userbyid(m.roleid)::text
        FROM pg_catalog.pg_auth_members m
       WHERE pg_catalog.pg_get_userbyid(m.member) IN ('pyretrieve_owner', 'pyretrieve_reader', 'pyretrieve_writer', 'pyretrieve_admin')
         AND NOT (pg_catalog.pg_get_userbyid(m.member) = 'pyretrieve_writer'
                  AND pg_catalog.pg_get_userbyid(m.roleid) = 'pyretrieve_reader')$$,
    'the pyretrieve roles are members of no other role');

-- Tables: exactly these, owned by the owner, with row-level security enabled and forced.
SELECT tables_are('pyretrieve', ARRAY['decisions', 'embedding_models', 'embeddings', 'fragments', 'grants', 'installation', 'projects', 'scope_generations', 'workspaces']);
SELECT table_owner_is('pyretrieve', 'decisions', 'pyretrieve_owner', 'pyretrieve.decisions is owned by pyretrieve_owner');
SELECT table_owner_is('pyretrieve', 'embedding_models', 'pyretrieve_owner', 'pyretrieve.embedding_models is owned by pyretrieve_owner');
SELECT table_owner_is('pyretrieve', 'embeddings', 'pyretrieve_owner', 'pyretrieve.embeddings is owned by pyretrieve_owner');
SELECT table_owner_is('pyretrieve', 'fragments', 'pyretrieve_owner', 'pyretrieve.fragments is owned by pyretrieve_owner');
SELECT table_owner_is('pyretrieve', 'grants', 'pyretrieve_owner', 'pyretrieve.grants is owned by pyretrieve_owner');
SELECT table_owner_is('pyretrieve', 'installation', 'pyretrieve_owner', 'pyretrieve.installation is owned by pyretrieve_owner');
SELECT table_owner_is('pyretrieve', 'projects', 'pyretrieve_owner', 'pyretrieve.projects is owned by pyretrieve_owner');
SELECT table_owner_is('pyretrieve', 'scope_generations', 'pyretrieve_owner', 'pyretrieve.scope_generations is owned by pyretrieve_owner');
SELECT table_owner_is('pyretrieve', 'workspaces', 'pyretrieve_owner', 'pyretrieve.workspaces is owned by pyretrieve_owner');
SELECT is((SELECT relrowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.decisions'::regclass), true, 'row-level security is enabled on pyretrieve.decisions');
SELECT is((SELECT relforcerowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.decisions'::regclass), true, 'row-level security is forced on pyretrieve.decisions');
SELECT is((SELECT relrowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.embedding_models'::regclass), true, 'row-level security is enabled on pyretrieve.embedding_models');
SELECT is((SELECT relforcerowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.embedding_models'::regclass), true, 'row-level security is forced on pyretrieve.embedding_models');
SELECT is((SELECT relrowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.embeddings'::regclass), true, 'row-level security is enabled on pyretrieve.embeddings');
SELECT is((SELECT relforcerowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.embeddings'::regclass), true, 'row-level security is forced on pyretrieve.embeddings');
SELECT is((SELECT relrowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.fragments'::regclass), true, 'row-level security is enabled on pyretrieve.fragments');
SELECT is((SELECT relforcerowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.fragments'::regclass), true, 'row-level security is forced on pyretrieve.fragments');
SELECT is((SELECT relrowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.grants'::regclass), true, 'row-level security is enabled on pyretrieve.grants');
SELECT is((SELECT relforcerowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.grants'::regclass), true, 'row-level security is forced on pyretrieve.grants');
SELECT is((SELECT relrowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.installation'::regclass), true, 'row-level security is enabled on pyretrieve.installation');
SELECT is((SELECT relforcerowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.installation'::regclass), true, 'row-level security is forced on pyretrieve.installation');
SELECT is((SELECT relrowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.projects'::regclass), true, 'row-level security is enabled on pyretrieve.projects');
SELECT is((SELECT relforcerowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.projects'::regclass), true, 'row-level security is forced on pyretrieve.projects');
SELECT is((SELECT relrowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.scope_generations'::regclass), true, 'row-level security is enabled on pyretrieve.scope_generations');
SELECT is((SELECT relforcerowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.scope_generations'::regclass), true, 'row-level security is forced on pyretrieve.scope_generations');
SELECT is((SELECT relrowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.workspaces'::regclass), true, 'row-level security is enabled on pyretrieve.workspaces');
SELECT is((SELECT relforcerowsecurity FROM pg_catalog.pg_class WHERE oid = 'pyretrieve.workspaces'::regclass), true, 'row-level security is forced on pyretrieve.workspaces');

-- Policies: exactly these per table, all permissive, each with its command and roles.
SELECT policies_are('pyretrieve', 'decisions', ARRAY['decisions_admin', 'decisions_insert', 'decisions_own']);
SELECT policies_are('pyretrieve', 'embedding_models', ARRAY['embedding_models_admin', 'embedding_models_read']);
SELECT policies_are('pyretrieve', 'embeddings', ARRAY['embeddings_insert', 'embeddings_read', 'embeddings_update']);
SELECT policies_are('pyretrieve', 'fragments', ARRAY['fragments_insert', 'fragments_read', 'fragments_update', 'fragments_write_read']);
SELECT policies_are('pyretrieve', 'grants', ARRAY['grants_admin', 'grants_own']);
SELECT policies_are('pyretrieve', 'installation', ARRAY['installation_install', 'installation_read']);
SELECT policies_are('pyretrieve', 'projects', ARRAY['projects_admin', 'projects_read']);
SELECT policies_are('pyretrieve', 'scope_generations', ARRAY['scope_generations_admin', 'scope_generations_read', 'scope_generations_write']);
SELECT policies_are('pyretrieve', 'workspaces', ARRAY['workspaces_admin', 'workspaces_read']);
SELECT is_empty(
    $$SELECT p.polname FROM pg_catalog.pg_policy p JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
       WHERE c.relnamespace = 'pyretrieve'::regnamespace AND NOT p.polpermissive$$,
    'every pyretrieve policy is permissive (as shipped)');
SELECT policy_cmd_is('pyretrieve', 'decisions', 'decisions_admin', 'SELECT', 'policy decisions_admin on pyretrieve.decisions is for SELECT');
SELECT policy_roles_are('pyretrieve', 'decisions', 'decisions_admin', ARRAY['pyretrieve_admin']);
SELECT policy_cmd_is('pyretrieve', 'decisions', 'decisions_insert', 'INSERT', 'policy decisions_insert on pyretrieve.decisions is for INSERT');
SELECT policy_roles_are('pyretrieve', 'decisions', 'decisions_insert', ARRAY['pyretrieve_reader']);
SELECT policy_cmd_is('pyretrieve', 'decisions', 'decisions_own', 'SELECT', 'policy decisions_own on pyretrieve.decisions is for SELECT');
SELECT policy_roles_are('pyretrieve', 'decisions', 'decisions_own', ARRAY['pyretrieve_reader']);
SELECT policy_cmd_is('pyretrieve', 'embedding_models', 'embedding_models_admin', 'INSERT', 'policy embedding_models_admin on pyretrieve.embedding_models is for INSERT');
SELECT policy_roles_are('pyretrieve', 'embedding_models', 'embedding_models_admin', ARRAY['pyretrieve_admin']);
SELECT policy_cmd_is('pyretrieve', 'embedding_models', 'embedding_models_read', 'SELECT', 'policy embedding_models_read on pyretrieve.embedding_models is for SELECT');
SELECT policy_roles_are('pyretrieve', 'embedding_models', 'embedding_models_read', ARRAY['pyretrieve_admin', 'pyretrieve_owner', 'pyretrieve_reader', 'pyretrieve_writer']);
SELECT policy_cmd_is('pyretrieve', 'embeddings', 'embeddings_insert', 'INSERT', 'policy embeddings_insert on pyretrieve.embeddings is for INSERT');
SELECT policy_roles_are('pyretrieve', 'embeddings', 'embeddings_insert', ARRAY['pyretrieve_writer']);
SELECT policy_cmd_is('pyretrieve', 'embeddings', 'embeddings_read', 'SELECT', 'policy embeddings_read on pyretrieve.embeddings is for SELECT');
SELECT policy_roles_are('pyretrieve', 'embeddings', 'embeddings_read', ARRAY['pyretrieve_reader']);
SELECT policy_cmd_is('pyretrieve', 'embeddings', 'embeddings_update', 'UPDATE', 'policy embeddings_update on pyretrieve.embeddings is for UPDATE');
SELECT policy_roles_are('pyretrieve', 'embeddings', 'embeddings_update', ARRAY['pyretrieve_writer']);
SELECT policy_cmd_is('pyretrieve', 'fragments', 'fragments_insert', 'INSERT', 'policy fragments_insert on pyretrieve.fragments is for INSERT');
SELECT policy_roles_are('pyretrieve', 'fragments', 'fragments_insert', ARRAY['pyretrieve_writer']);
SELECT policy_cmd_is('pyretrieve', 'fragments', 'fragments_read', 'SELECT', 'policy fragments_read on pyretrieve.fragments is for SELECT');
SELECT policy_roles_are('pyretrieve', 'fragments', 'fragments_read', ARRAY['pyretrieve_reader']);
SELECT policy_cmd_is('pyretrieve', 'fragments', 'fragments_update', 'UPDATE', 'policy fragments_update on pyretrieve.fragments is for UPDATE');
SELECT policy_roles_are('pyretrieve', 'fragments', 'fragments_update', ARRAY['pyretrieve_writer']);
SELECT policy_cmd_is('pyretrieve', 'fragments', 'fragments_write_read', 'SELECT', 'policy fragments_write_read on pyretrieve.fragments is for SELECT');
SELECT policy_roles_are('pyretrieve', 'fragments', 'fragments_write_read', ARRAY['pyretrieve_writer']);
SELECT policy_cmd_is('pyretrieve', 'grants', 'grants_admin', 'ALL', 'policy grants_admin on pyretrieve.grants is for ALL');
SELECT policy_roles_are('pyretrieve', 'grants', 'grants_admin', ARRAY['pyretrieve_admin']);
SELECT policy_cmd_is('pyretrieve', 'grants', 'grants_own', 'SELECT', 'policy grants_own on pyretrieve.grants is for SELECT');
SELECT policy_roles_are('pyretrieve', 'grants', 'grants_own', ARRAY['pyretrieve_reader']);
SELECT policy_cmd_is('pyretrieve', 'installation', 'installation_install', 'ALL', 'policy installation_install on pyretrieve.installation is for ALL');
SELECT policy_roles_are('pyretrieve', 'installation', 'installation_install', ARRAY['pyretrieve_owner']);
SELECT policy_cmd_is('pyretrieve', 'installation', 'installation_read', 'SELECT', 'policy installation_read on pyretrieve.installation is for SELECT');
SELECT policy_roles_are('pyretrieve', 'installation', 'installation_read', ARRAY['pyretrieve_admin', 'pyretrieve_reader', 'pyretrieve_writer']);
SELECT policy_cmd_is('pyretrieve', 'projects', 'projects_admin', 'ALL', 'policy projects_admin on pyretrieve.projects is for ALL');
SELECT policy_roles_are('pyretrieve', 'projects', 'projects_admin', ARRAY['pyretrieve_admin']);
SELECT policy_cmd_is('pyretrieve', 'projects', 'projects_read', 'SELECT', 'policy projects_read on pyretrieve.projects is for SELECT');
SELECT policy_roles_are('pyretrieve', 'projects', 'projects_read', ARRAY['pyretrieve_reader']);
SELECT policy_cmd_is('pyretrieve', 'scope_generations', 'scope_generations_admin', 'ALL', 'policy scope_generations_admin on pyretrieve.scope_generations is for ALL');
SELECT policy_roles_are('pyretrieve', 'scope_generations', 'scope_generations_admin', ARRAY['pyretrieve_admin']);
SELECT policy_cmd_is('pyretrieve', 'scope_generations', 'scope_generations_read', 'SELECT', 'policy scope_generations_read on pyretrieve.scope_generations is for SELECT');
SELECT policy_roles_are('pyretrieve', 'scope_generations', 'scope_generations_read', ARRAY['pyretrieve_reader']);
SELECT policy_cmd_is('pyretrieve', 'scope_generations', 'scope_generations_write', 'UPDATE', 'policy scope_generations_write on pyretrieve.scope_generations is for UPDATE');
SELECT policy_roles_are('pyretrieve', 'scope_generations', 'scope_generations_write', ARRAY['pyretrieve_writer']);
SELECT policy_cmd_is('pyretrieve', 'workspaces', 'workspaces_admin', 'ALL', 'policy workspaces_admin on pyretrieve.workspaces is for ALL');
SELECT policy_roles_are('pyretrieve', 'workspaces', 'workspaces_admin', ARRAY['pyretrieve_admin']);
SELECT policy_cmd_is('pyretrieve', 'workspaces', 'workspaces_read', 'SELECT', 'policy workspaces_read on pyretrieve.workspaces is for SELECT');
SELECT policy_roles_are('pyretrieve', 'workspaces', 'workspaces_read', ARRAY['pyretrieve_reader']);

-- Functions: exactly these; only create_model_index is SECURITY DEFINER, every function pins
-- search_path = pg_catalog, pg_temp, and none is LEAKPROOF.
SELECT functions_are('pyretrieve', ARRAY['audit_expression_calls', 'authorize', 'bind_write_scope', 'bound_decision', 'bump_scope_lexical', 'bump_scope_vector', 'check_embedding', 'check_identifier', 'content_digest', 'create_model_index', 'create_project', 'create_workspace', 'effective_grant', 'embedding_digest', 'fragments', 'grant_access', 'lexical_candidates', 'or_tsquery', 'put_embedding', 'put_fragment', 'register_model', 'require_decision', 'retract_fragment', 'revoke_access', 'scope_generations_forward', 'search', 'setting_uuid', 'stamp_lexical_generation', 'stamp_vector_generation', 'supersede_fragment', 'vector_candidates', 'visible_successor', 'write_scope']);
SELECT is_definer('pyretrieve', 'create_model_index', ARRAY['text'], 'pyretrieve.create_model_index(text) is SECURITY DEFINER');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
       WHERE p.pronamespace = 'pyretrieve'::regnamespace AND p.prosecdef
         AND p.oid <> 'pyretrieve.create_model_index(text)'::regprocedure$$,
    'no other pyretrieve function is SECURITY DEFINER');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
       WHERE p.pronamespace = 'pyretrieve'::regnamespace
         AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)$$,
    'every pyretrieve function pins search_path = pg_catalog, pg_temp');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
       WHERE p.pronamespace = 'pyretrieve'::regnamespace AND p.proleakproof$$,
    'no pyretrieve function is LEAKPROOF');
SELECT function_privs_are('pyretrieve', 'create_model_index', ARRAY['text'], 'pyretrieve_admin', ARRAY['EXECUTE']);
SELECT function_privs_are('pyretrieve', 'create_model_index', ARRAY['text'], 'pyretrieve_reader', ARRAY[]::text[]);
SELECT function_privs_are('pyretrieve', 'create_model_index', ARRAY['text'], 'pyretrieve_writer', ARRAY[]::text[]);
SELECT function_privs_are('pyretrieve', 'create_model_index', ARRAY['text'], 'public', ARRAY[]::text[]);
SELECT function_privs_are('pyretrieve', 'audit_expression_calls', ARRAY['pg_node_tree'], 'pyretrieve_admin', ARRAY['EXECUTE']);
SELECT function_privs_are('pyretrieve', 'audit_expression_calls', ARRAY['pg_node_tree'], 'public', ARRAY[]::text[]);
-- Who may execute what, granted explicitly (the owner aside); no function for PUBLIC.
SELECT results_eq(
    $$SELECT p.oid::regprocedure::text, pg_catalog.pg_get_userbyid(a.grantee)::text COLLATE "default"
        FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
       WHERE p.pronamespace = 'pyretrieve'::regnamespace AND a.privilege_type = 'EXECUTE'
         AND a.grantee <> p.proowner
       ORDER BY 1, 2$$,
    $$SELECT pg_catalog.to_regprocedure(v.f)::text, v.r
        FROM (VALUES
    ('pyretrieve.audit_expression_calls(pg_node_tree)', 'pyretrieve_admin'),
    ('pyretrieve.authorize(text, text, text, bytea, text, bytea, integer)', 'pyretrieve_reader'),
    ('pyretrieve.bind_write_scope(text, text)', 'pyretrieve_writer'),
    ('pyretrieve.bound_decision()', 'pyretrieve_admin'),
    ('pyretrieve.bound_decision()', 'pyretrieve_reader'),
    ('pyretrieve.bound_decision()', 'pyretrieve_writer'),
    ('pyretrieve.bump_scope_lexical()', 'pyretrieve_writer'),
    ('pyretrieve.bump_scope_vector()', 'pyretrieve_writer'),
    ('pyretrieve.check_embedding(text, public.vector)', 'pyretrieve_reader'),
    ('pyretrieve.check_embedding(text, public.vector)', 'pyretrieve_writer'),
    ('pyretrieve.check_identifier(text, text)', 'pyretrieve_admin'),
    ('pyretrieve.check_identifier(text, text)', 'pyretrieve_reader'),
    ('pyretrieve.check_identifier(text, text)', 'pyretrieve_writer'),
    ('pyretrieve.content_digest(text)', 'pyretrieve_admin'),
    ('pyretrieve.content_digest(text)', 'pyretrieve_reader'),
    ('pyretrieve.content_digest(text)', 'pyretrieve_writer'),
    ('pyretrieve.create_model_index(text)', 'pyretrieve_admin'),
    ('pyretrieve.create_project(text, text, regconfig)', 'pyretrieve_admin'),
    ('pyretrieve.create_workspace(text, text)', 'pyretrieve_admin'),
    ('pyretrieve.effective_grant(text, text, text)', 'pyretrieve_admin'),
    ('pyretrieve.effective_grant(text, text, text)', 'pyretrieve_reader'),
    ('pyretrieve.effective_grant(text, text, text)', 'pyretrieve_writer'),
    ('pyretrieve.embedding_digest(public.vector)', 'pyretrieve_reader'),
    ('pyretrieve.fragments(uuid, uuid[])', 'pyretrieve_reader'),
    ('pyretrieve.grant_access(regrole, text, text, text, pyretrieve.classification, interval, pyretrieve.semantic_policy, timestamp with time zone)', 'pyretrieve_admin'),
    ('pyretrieve.lexical_candidates(uuid, text, integer)', 'pyretrieve_reader'),
    ('pyretrieve.or_tsquery(regconfig, text)', 'pyretrieve_reader'),
    ('pyretrieve.put_embedding(text, text, uuid, text, public.vector, bytea)', 'pyretrieve_writer'),
    ('pyretrieve.put_fragment(text, text, text, pyretrieve.classification, timestamp with time zone, timestamp with time zone, text, text, text, regconfig)', 'pyretrieve_writer'),
    ('pyretrieve.register_model(text, integer)', 'pyretrieve_admin'),
    ('pyretrieve.require_decision(uuid)', 'pyretrieve_reader'),
    ('pyretrieve.retract_fragment(text, text, uuid)', 'pyretrieve_writer'),
    ('pyretrieve.revoke_access(regrole, text, text, text)', 'pyretrieve_admin'),
    ('pyretrieve.scope_generations_forward()', 'pyretrieve_writer'),
    ('pyretrieve.search(text, text, text, text, public.vector, text, integer, text)', 'pyretrieve_reader'),
    ('pyretrieve.setting_uuid(text)', 'pyretrieve_admin'),
    ('pyretrieve.setting_uuid(text)', 'pyretrieve_reader'),
    ('pyretrieve.setting_uuid(text)', 'pyretrieve_writer'),
    ('pyretrieve.stamp_lexical_generation()', 'pyretrieve_writer'),
    ('pyretrieve.stamp_vector_generation()', 'pyretrieve_writer'),
    ('pyretrieve.supersede_fragment(text, text, uuid, text, pyretrieve.classification, timestamp with time zone, timestamp with time zone, text, text, text)', 'pyretrieve_writer'),
    ('pyretrieve.vector_candidates(uuid, text, public.vector, integer)', 'pyretrieve_reader'),
    ('pyretrieve.visible_successor(text, text, uuid)', 'pyretrieve_writer'),
    ('pyretrieve.write_scope()', 'pyretrieve_admin'),
    ('pyretrieve.write_scope()', 'pyretrieve_reader'),
    ('pyretrieve.write_scope()', 'pyretrieve_writer')
        ) AS v(f, r)
       ORDER BY 1, 2$$,
    'EXECUTE on the pyretrieve functions is granted as shipped');

-- Table privileges per group (inherited ones included: a writer has a reader's) and PUBLIC.
SELECT table_privs_are('pyretrieve', 'decisions', 'public', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'decisions', 'pyretrieve_admin', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'decisions', 'pyretrieve_reader', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'decisions', 'pyretrieve_writer', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'embedding_models', 'public', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'embedding_models', 'pyretrieve_admin', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'embedding_models', 'pyretrieve_reader', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'embedding_models', 'pyretrieve_writer', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'embeddings', 'public', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'embeddings', 'pyretrieve_admin', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'embeddings', 'pyretrieve_reader', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'embeddings', 'pyretrieve_writer', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'fragments', 'public', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'fragments', 'pyretrieve_admin', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'fragments', 'pyretrieve_reader', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'fragments', 'pyretrieve_writer', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'grants', 'public', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'grants', 'pyretrieve_admin', ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']);
SELECT table_privs_are('pyretrieve', 'grants', 'pyretrieve_reader', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'grants', 'pyretrieve_writer', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'installation', 'public', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'installation', 'pyretrieve_admin', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'installation', 'pyretrieve_reader', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'installation', 'pyretrieve_writer', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'projects', 'public', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'projects', 'pyretrieve_admin', ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']);
SELECT table_privs_are('pyretrieve', 'projects', 'pyretrieve_reader', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'projects', 'pyretrieve_writer', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'scope_generations', 'public', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'scope_generations', 'pyretrieve_admin', ARRAY['SELECT', 'INSERT']);
SELECT table_privs_are('pyretrieve', 'scope_generations', 'pyretrieve_reader', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'scope_generations', 'pyretrieve_writer', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'workspaces', 'public', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'workspaces', 'pyretrieve_admin', ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']);
SELECT table_privs_are('pyretrieve', 'workspaces', 'pyretrieve_reader', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'workspaces', 'pyretrieve_writer', ARRAY['SELECT']);
-- Column privileges, granted explicitly.
SELECT results_eq(
    $$SELECT c.relname::text COLLATE "default", a.attname::text COLLATE "default",
             pg_catalog.pg_get_userbyid(x.grantee)::text COLLATE "default", x.privilege_type
        FROM pg_catalog.pg_attribute a
        JOIN pg_catalog.pg_class c ON c.oid = a.attrelid,
             LATERAL pg_catalog.aclexplode(a.attacl) x
       WHERE c.relnamespace = 'pyretrieve'::regnamespace AND a.attacl IS NOT NULL
       ORDER BY 1, 2, 3, 4$$,
    $$VALUES
    ('decisions', 'candidate_limit', 'pyretrieve_reader', 'INSERT'),
    ('decisions', 'ceiling', 'pyretrieve_reader', 'INSERT'),
    ('decisions', 'embedding_digest', 'pyretrieve_reader', 'INSERT'),
    ('decisions', 'grant_id', 'pyretrieve_reader', 'INSERT'),
    ('decisions', 'max_age', 'pyretrieve_reader', 'INSERT'),
    ('decisions', 'project_id', 'pyretrieve_reader', 'INSERT'),
    ('decisions', 'purpose', 'pyretrieve_reader', 'INSERT'),
    ('decisions', 'query_digest', 'pyretrieve_reader', 'INSERT'),
    ('decisions', 'requested_limit', 'pyretrieve_reader', 'INSERT'),
    ('decisions', 'semantic_intent', 'pyretrieve_reader', 'INSERT'),
    ('decisions', 'semantic_policy', 'pyretrieve_reader', 'INSERT'),
    ('decisions', 'workspace_id', 'pyretrieve_reader', 'INSERT'),
    ('embedding_models', 'dimension', 'pyretrieve_admin', 'INSERT'),
    ('embedding_models', 'model_id', 'pyretrieve_admin', 'INSERT'),
    ('embeddings', 'embedding', 'pyretrieve_writer', 'INSERT'),
    ('embeddings', 'embedding', 'pyretrieve_writer', 'UPDATE'),
    ('embeddings', 'fragment_id', 'pyretrieve_writer', 'INSERT'),
    ('embeddings', 'model_id', 'pyretrieve_writer', 'INSERT'),
    ('embeddings', 'project_id', 'pyretrieve_writer', 'INSERT'),
    ('embeddings', 'source_digest', 'pyretrieve_writer', 'INSERT'),
    ('embeddings', 'source_digest', 'pyretrieve_writer', 'UPDATE'),
    ('embeddings', 'workspace_id', 'pyretrieve_writer', 'INSERT'),
    ('fragments', 'body', 'pyretrieve_writer', 'INSERT'),
    ('fragments', 'classification', 'pyretrieve_writer', 'INSERT'),
    ('fragments', 'expires_at', 'pyretrieve_writer', 'INSERT'),
    ('fragments', 'manifest_id', 'pyretrieve_writer', 'INSERT'),
    ('fragments', 'observed_at', 'pyretrieve_writer', 'INSERT'),
    ('fragments', 'project_id', 'pyretrieve_writer', 'INSERT'),
    ('fragments', 'source_revision', 'pyretrieve_writer', 'INSERT'),
    ('fragments', 'source_uri', 'pyretrieve_writer', 'INSERT'),
    ('fragments', 'state', 'pyretrieve_writer', 'UPDATE'),
    ('fragments', 'superseded_by', 'pyretrieve_writer', 'UPDATE'),
    ('fragments', 'ts_config', 'pyretrieve_writer', 'INSERT'),
    ('fragments', 'workspace_id', 'pyretrieve_writer', 'INSERT'),
    ('scope_generations', 'lexical_generation', 'pyretrieve_writer', 'UPDATE'),
    ('scope_generations', 'ts_configs', 'pyretrieve_writer', 'UPDATE'),
    ('scope_generations', 'vector_generation', 'pyretrieve_writer', 'UPDATE')$$,
    'column privileges on the pyretrieve tables are granted as shipped');
-- Row-level security governs neither TRUNCATE nor REFERENCES: only the owner holds them.
SELECT is_empty(
    $$SELECT c.relname, pg_catalog.pg_get_userbyid(x.grantee), x.privilege_type
        FROM pg_catalog.pg_class c,
             LATERAL pg_catalog.aclexplode(coalesce(c.relacl, pg_catalog.acldefault('r', c.relowner))) x
       WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind IN ('r', 'p')
         AND x.privilege_type IN ('TRUNCATE', 'REFERENCES') AND x.grantee <> c.relowner
      UNION ALL
      SELECT c.relname || '.' || a.attname, pg_catalog.pg_get_userbyid(x.grantee), x.privilege_type
        FROM pg_catalog.pg_attribute a
        JOIN pg_catalog.pg_class c ON c.oid = a.attrelid,
             LATERAL pg_catalog.aclexplode(a.attacl) x
       WHERE c.relnamespace = 'pyretrieve'::regnamespace AND a.attacl IS NOT NULL
         AND x.privilege_type = 'REFERENCES'$$,
    'no role but the owner holds TRUNCATE or REFERENCES on a pyretrieve table');
SELECT schema_privs_are('pyretrieve', 'pyretrieve_reader', ARRAY['USAGE']);
SELECT schema_privs_are('pyretrieve', 'pyretrieve_writer', ARRAY['USAGE']);
SELECT schema_privs_are('pyretrieve', 'pyretrieve_admin', ARRAY['USAGE']);
SELECT schema_privs_are('pyretrieve', 'public', ARRAY[]::text[]);

-- Views: the audit views, each security_invoker, readable by admins only.
SELECT views_are('pyretrieve', ARRAY['audit_access', 'audit_findings', 'audit_functions', 'audit_keys', 'audit_objects', 'audit_policies', 'audit_privileges', 'audit_roles', 'audit_server', 'audit_tables', 'audit_views']);
SELECT is_empty(
    $$SELECT c.relname FROM pg_catalog.pg_class c
       WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind = 'v'
         AND NOT coalesce(c.reloptions @> ARRAY['security_invoker=true'], false)$$,
    'every pyretrieve view is security_invoker');
SELECT table_privs_are('pyretrieve', 'audit_findings', 'pyretrieve_admin', ARRAY['SELECT']);
SELECT table_privs_are('pyretrieve', 'audit_findings', 'pyretrieve_reader', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'audit_findings', 'pyretrieve_writer', ARRAY[]::text[]);
SELECT table_privs_are('pyretrieve', 'audit_findings', 'public', ARRAY[]::text[]);

-- And the audit itself: no error or warning (the server version included).
SELECT is_empty(
    $$SELECT severity, code, object, evidence FROM pyretrieve.audit_findings
       WHERE severity IN ('error', 'warning')$$,
    'pyretrieve.audit_findings reports no error or warning');

SELECT * FROM finish();
ROLLBACK;
