"""Every SQL statement the Python package runs, each under one name.

A statement is a constant (its parameters are ``%s`` placeholders, in the order the comment
above it gives) or, where an identifier must be composed, a small builder returning a
:class:`psycopg.sql.Composed`. Callers import a name from here and never write SQL inline:
``tests/test_queries.py`` fails when a module outside this one holds an SQL statement, and when
a name here is used nowhere. The SQL API's functions are called with named arguments, so a
reordered or added parameter in the schema cannot silently shift a value.

(``pyretrieve/db/draft.py`` writes migration scripts, whose text is output, not statements
run.)
"""

from __future__ import annotations

from typing import Final

from psycopg import sql

__all__ = [
    "AUDIT_INSTALLED",
    "AUDIT_SERVER",
    "AUTHORIZE",
    "CATALOG_COLUMNS",
    "CATALOG_FUNCTIONS",
    "CATALOG_POLICIES",
    "CATALOG_TRIGGERS",
    "CATALOG_VIEWS",
    "CREATE_PROJECT",
    "CREATE_PROJECT_WITH_CONFIG",
    "CREATE_VECTOR_INDEX",
    "CREATE_WORKSPACE",
    "DATABASE_EXISTS",
    "DECISIONS_ENSURE",
    "DECISIONS_LIST",
    "DECISIONS_PARTITIONS",
    "DECISIONS_PRUNE",
    "DECISIONS_RELATIVE",
    "DECISIONS_TIMESTAMP",
    "DROP_VECTOR_INDEX",
    "DROP_VERSION_TABLE",
    "EMBEDDINGS_NEEDED",
    "FRAGMENTS",
    "GRANT_ACCESS",
    "INGEST_ACTIVE_LIKE",
    "INGEST_ACTIVE_SOURCES",
    "INGEST_BATCH",
    "INGEST_BIND_WRITE_SCOPE",
    "INGEST_COMPACT",
    "INGEST_COUNT_STALE",
    "INGEST_CREATED_NOW",
    "INGEST_EMBEDDINGS_NEEDED",
    "INGEST_MODEL_DIMENSION",
    "INGEST_PUT_EMBEDDINGS",
    "INGEST_RETRACT",
    "INGEST_STAGING_COPY",
    "INGEST_STAGING_CREATE",
    "INGEST_STALE",
    "INGEST_STATE",
    "INGEST_WRITE_ROWS",
    "INSTALLATION_EXISTS",
    "INSTALLED_SCHEMA_VERSION",
    "LEXICAL_CANDIDATES",
    "LIST_GRANTS",
    "LIST_MODELS",
    "LIST_PROJECTS",
    "MAINTAIN_VECTOR_INDEXES",
    "MAY_ACT_AS",
    "MODEL_DEFAULTS",
    "PIN_SEARCH_PATH",
    "PIN_SEARCH_PATH_LOCAL",
    "PUT_EMBEDDING",
    "PUT_TOOL",
    "REGISTER_MODEL",
    "RELOAD_CONF",
    "REQUEST_TEXT_SETTINGS",
    "RESET_ROLE",
    "RESET_SEARCH_PATH",
    "REVOKE_ACCESS",
    "ROLE_EXISTS",
    "ROLE_OTHER_GROUPS",
    "ROLE_POWERS",
    "SAVEPOINT",
    "SAVEPOINT_RELEASE",
    "SAVEPOINT_ROLLBACK",
    "SERVER_VERSION",
    "SET_TOOL_ROLLOUT",
    "SHARED_BUFFERS_PENDING_RESTART",
    "TOOL_BY_NAME",
    "TOOL_ENTRIES",
    "TOOL_ROLLOUT",
    "TOOL_SCHEMAS",
    "TOOL_TEXT",
    "TX_BEGIN",
    "TX_COMMIT",
    "TX_ROLLBACK",
    "VECTOR_CANDIDATES",
    "VERSION_NUM",
    "VERSION_TABLE",
    "VERSION_TABLE_EXISTS",
    "VERSION_TABLE_ROWS",
    "alter_role_set",
    "alter_system_set",
    "audit_view",
    "cast_value",
    "create_database",
    "create_login_role",
    "create_nologin_role",
    "drop_database",
    "grant_role",
    "grant_role_to_current_user",
    "set_local_role",
    "set_local_role_quoted",
    "show_setting",
]

# ---------------------------------------------------------------------------------------------
# Identity: the session boundary and every place that acts as a principal
# ---------------------------------------------------------------------------------------------


def set_local_role(principal: str) -> sql.Composed:
    """``SET LOCAL ROLE``: act as ``principal`` until the transaction ends."""
    return sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(principal))


def set_local_role_quoted(quoted: str) -> str:
    """``SET LOCAL ROLE`` for a role name another library has already quoted (SQLAlchemy's
    dialect quoting, for a statement it runs as text)."""
    return f"SET LOCAL ROLE {quoted}"


# Values reach the client as text the server writes by the session's settings: floats at its
# extra_float_digits (rounded at 0 or below: 15 significant digits at 0), so a score or a
# distance read back would differ from the one the database ranked by; dates and intervals in
# its DateStyle and IntervalStyle, some of which the driver cannot read. Every request's
# transaction sets all three, after its role, whatever the session set: floats as the shortest
# text that reads back as the same double, dates and intervals as the driver reads them.
REQUEST_TEXT_SETTINGS: Final = (
    "SELECT pg_catalog.set_config('extra_float_digits', '1', true),"
    " pg_catalog.set_config('DateStyle', 'ISO', true),"
    " pg_catalog.set_config('IntervalStyle', 'postgres', true)"
)

# A request in pipeline mode states its transaction and its savepoint itself: psycopg's
# transaction blocks wait for the server at each boundary, which is what the pipeline saves.
TX_BEGIN: Final = "BEGIN"
TX_COMMIT: Final = "COMMIT"
TX_ROLLBACK: Final = "ROLLBACK"
# The savepoint of a call whose failure must not abort the request (the vector leg).
SAVEPOINT: Final = "SAVEPOINT pyretrieve_call"
SAVEPOINT_RELEASE: Final = "RELEASE SAVEPOINT pyretrieve_call"
SAVEPOINT_ROLLBACK: Final = "ROLLBACK TO SAVEPOINT pyretrieve_call"


def cast_value(type_name: str) -> sql.Composed:
    """Whether a value reads as the named SQL type (an option checked before any write)."""
    return sql.SQL("SELECT %s::{}").format(sql.Identifier(type_name))


# Pins the search path for the transaction (audit: stable renderings of policies and functions).
PIN_SEARCH_PATH_LOCAL: Final = "SET LOCAL search_path = pg_catalog, pg_temp"
# Pins the search path for the session (the migration drafter's catalog reads).
PIN_SEARCH_PATH: Final = "SET search_path = pg_catalog, pg_temp"

# ---------------------------------------------------------------------------------------------
# The read path: pyretrieve.authorize, the two legs and the authoritative records
# ---------------------------------------------------------------------------------------------

# authorize(workspace, project, purpose, query digest, semantic intent, embedding digest,
# requested limit): the transaction's one decision.
AUTHORIZE: Final = (
    "SELECT * FROM pyretrieve.authorize(p_workspace => %s, p_project => %s,"
    " p_purpose => %s, p_query_digest => %s, p_semantic_intent => %s,"
    " p_embedding_digest => %s, p_requested_limit => %s)"
)
# lexical_candidates(decision, query text, limit, ranking): the lexical leg.
LEXICAL_CANDIDATES: Final = (
    "SELECT * FROM pyretrieve.lexical_candidates(p_decision => %s, p_query => %s,"
    " p_limit => %s, p_ranking => %s)"
)
# vector_candidates(decision, model, embedding as pgvector text, limit): the vector leg.
VECTOR_CANDIDATES: Final = (
    "SELECT * FROM pyretrieve.vector_candidates(p_decision => %s, p_model => %s,"
    " p_embedding => %s::public.vector, p_limit => %s)"
)
# fragments(decision, ids): the authoritative records of the candidates.
FRAGMENTS: Final = "SELECT * FROM pyretrieve.fragments(p_decision => %s, p_ids => %s)"
# model_defaults(model): the fusion and weights registered with the model a search names
# (no row for a model not registered), read when the request gives no fusion or no weights.
MODEL_DEFAULTS: Final = "SELECT * FROM pyretrieve.model_defaults(p_model => %s)"

# ---------------------------------------------------------------------------------------------
# Tools: discovery under a decision, registration as a writer, rollout as an admin
# ---------------------------------------------------------------------------------------------

# tool_entries(decision, ids): metadata of the tools among the ids the decision admits.
TOOL_ENTRIES: Final = "SELECT * FROM pyretrieve.tool_entries(p_decision => %s, p_ids => %s)"
# tool_rollout(decision): the project's rollout stage, as column s.
TOOL_ROLLOUT: Final = "SELECT pyretrieve.tool_rollout(p_decision => %s) AS s"
# tool_schemas(decision, ids): the schemas of the chosen tools.
TOOL_SCHEMAS: Final = "SELECT * FROM pyretrieve.tool_schemas(p_decision => %s, p_ids => %s)"
# tool_by_name(decision, name): one tool the decision admits, by name (rediscovery).
TOOL_BY_NAME: Final = "SELECT * FROM pyretrieve.tool_by_name(p_decision => %s, p_name => %s)"
# put_tool(workspace, project, schema, operation, tags, server, classification, expires_at,
# observed_at): a tool's fragment and row.
PUT_TOOL: Final = (
    "SELECT * FROM pyretrieve.put_tool(p_workspace => %s, p_project => %s,"
    " p_schema => %s, p_operation => %s, p_tags => %s, p_server => %s,"
    " p_classification => %s::pyretrieve.classification, p_expires_at => %s,"
    " p_observed_at => %s)"
)
# tool_text(schema): the text a tool's fragment holds, as column t.
TOOL_TEXT: Final = "SELECT pyretrieve.tool_text(p_schema => %s) AS t"
# set_tool_rollout(workspace, project, stage).
SET_TOOL_ROLLOUT: Final = (
    "SELECT pyretrieve.set_tool_rollout(p_workspace => %s, p_project => %s, p_stage => %s)"
)
# embeddings_needed(workspace, project, model, ids): the ids still without a current embedding.
EMBEDDINGS_NEEDED: Final = (
    "SELECT fragment_id FROM pyretrieve.embeddings_needed(p_workspace => %s, p_project => %s,"
    " p_model => %s, p_ids => %s)"
)
# put_embedding(workspace, project, fragment id, model, embedding as pgvector text, digest of
# the text embedded).
PUT_EMBEDDING: Final = (
    "SELECT pyretrieve.put_embedding(p_workspace => %s, p_project => %s, p_fragment_id => %s,"
    " p_model => %s, p_embedding => %s::public.vector, p_source_digest => %s)"
)

# ---------------------------------------------------------------------------------------------
# Administration: workspaces, projects, models, grants
# ---------------------------------------------------------------------------------------------

# register_model(model id, dimension, default lexical weight, default vector weight, default
# fusion): NULL weights and fusion keep a registered model's defaults (RRF and 1.0 each for a
# new one); pyretrieve.embedders.registry.register_params gives the shipped defaults.
REGISTER_MODEL: Final = (
    "SELECT pyretrieve.register_model(p_model => %s, p_dimension => %s,"
    " p_lexical_weight => %s, p_vector_weight => %s, p_fusion => %s)"
)
# create_vector_index(workspace, project, model): the scope's own HNSW index, as column name.
CREATE_VECTOR_INDEX: Final = (
    "SELECT pyretrieve.create_vector_index(p_workspace => %s, p_project => %s, p_model => %s)"
    " AS name"
)
# drop_vector_index(workspace, project, model), as column dropped.
DROP_VECTOR_INDEX: Final = (
    "SELECT pyretrieve.drop_vector_index(p_workspace => %s, p_project => %s, p_model => %s)"
    " AS dropped"
)
# maintain_vector_indexes(min_rows, dry_run): each scope's index where its size puts it, one
# row per scope and model with an index or due one.
MAINTAIN_VECTOR_INDEXES: Final = (
    "SELECT workspace_id, project_id, model_id, embeddings, action, applied"
    " FROM pyretrieve.maintain_vector_indexes(p_min_rows => %s, p_dry_run => %s)"
)
# create_workspace(workspace).
CREATE_WORKSPACE: Final = "SELECT pyretrieve.create_workspace(p_workspace => %s)"
# create_project(workspace, project) with the schema's default text-search configuration.
CREATE_PROJECT: Final = "SELECT pyretrieve.create_project(p_workspace => %s, p_project => %s)"
# create_project(workspace, project, text-search configuration).
CREATE_PROJECT_WITH_CONFIG: Final = (
    "SELECT pyretrieve.create_project(p_workspace => %s, p_project => %s,"
    " p_ts_config => %s::regconfig)"
)
# grant_access(principal, workspace, project, purpose, ceiling, max_age, semantic policy,
# expires_at), as column grant_id.
GRANT_ACCESS: Final = (
    "SELECT pyretrieve.grant_access(p_principal => %s::regrole, p_workspace => %s,"
    " p_project => %s, p_purpose => %s,"
    " p_ceiling => %s::pyretrieve.classification, p_max_age => %s::interval,"
    " p_semantic_policy => %s::pyretrieve.semantic_policy,"
    " p_expires_at => %s::timestamptz) AS grant_id"
)
# revoke_access(principal, workspace, project, purpose), as column found.
REVOKE_ACCESS: Final = (
    "SELECT pyretrieve.revoke_access(p_principal => %s::regrole, p_workspace => %s,"
    " p_project => %s, p_purpose => %s) AS found"
)
# list_projects(): workspace, project, ts_config.
LIST_PROJECTS: Final = (
    "SELECT workspace_id AS workspace, project_id AS project, ts_config::text AS ts_config"
    "  FROM pyretrieve.list_projects() ORDER BY 1, 2"
)
# list_models(): model, dimension, default fusion and weights, registered_at.
LIST_MODELS: Final = (
    "SELECT model_id AS model, dimension, fusion, lexical_weight, vector_weight,"
    " registered_at FROM pyretrieve.list_models() ORDER BY model_id"
)
# list_grants() with each principal's pyretrieve groups.
LIST_GRANTS: Final = (
    "SELECT g.principal,"
    "       (SELECT string_agg(r.rolname, ',' ORDER BY r.rolname)"
    "          FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid"
    "         WHERE m.member = g.principal::regrole::oid"
    "           AND r.rolname LIKE 'pyretrieve\\_%%') AS groups,"
    "       g.workspace_id AS workspace, g.project_id AS project, g.purpose,"
    "       g.ceiling::text AS ceiling, g.max_age::text AS max_age,"
    "       g.semantic_policy::text AS semantic, g.expires_at"
    "  FROM pyretrieve.list_grants() g ORDER BY 1, 3, 4, 5"
)

# ---------------------------------------------------------------------------------------------
# Roles and databases (the installer, the embedded server, the demo)
# ---------------------------------------------------------------------------------------------

# A role by name: one row when it exists.
ROLE_EXISTS: Final = "SELECT 1 FROM pg_roles WHERE rolname = %s"
# What keeps an existing role from being taken over as a principal: its attributes (superuser,
# bypassrls, createrole, createdb, replication, login) and whether it is a member of any role
# but the three groups; no row when the role does not exist.
ROLE_POWERS: Final = """
SELECT r.rolsuper, r.rolbypassrls, r.rolcreaterole, r.rolcreatedb, r.rolreplication,
       r.rolcanlogin,
       EXISTS (SELECT 1 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                WHERE m.member = r.oid
                  AND g.rolname NOT IN ('pyretrieve_reader', 'pyretrieve_writer',
                                        'pyretrieve_admin')) AS other_memberships
  FROM pg_roles r WHERE r.rolname = %s
"""
# The other groups a principal is in (taking over an existing principal says so).
ROLE_OTHER_GROUPS: Final = """
SELECT g.rolname FROM pg_auth_members m
  JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles r ON r.oid = m.member
 WHERE r.rolname = %s AND g.rolname <> %s ORDER BY 1
"""
# Whether the session's login role may act as the named role: one boolean when the role exists.
MAY_ACT_AS: Final = (
    "SELECT pg_has_role(current_user, r.oid, 'MEMBER') FROM pg_roles r WHERE r.rolname = %s"
)
# Reread the server's configuration files (after ALTER SYSTEM).
RELOAD_CONF: Final = "SELECT pg_catalog.pg_reload_conf()"
# Whether shared_buffers waits for a restart to take a value written with ALTER SYSTEM.
SHARED_BUFFERS_PENDING_RESTART: Final = (
    "SELECT pending_restart FROM pg_catalog.pg_settings WHERE name = 'shared_buffers'"
)


def alter_system_set(setting: str, value: str) -> sql.Composed:
    """A server setting written to postgresql.auto.conf (the embedded server's memory plan)."""
    return sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(setting), sql.Literal(value))


def show_setting(setting: str) -> sql.Composed:
    """A setting's current value, as the server shows it."""
    return sql.SQL("SHOW {}").format(sql.Identifier(setting))


# A database by name: one row when it exists.
DATABASE_EXISTS: Final = "SELECT 1 FROM pg_database WHERE datname = %s"
# The server's version string.
SERVER_VERSION: Final = "SHOW server_version"


def create_nologin_role(name: str) -> sql.Composed:
    """A principal: a role nobody logs in as, reached with SET ROLE."""
    return sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(name))


def create_login_role(name: str) -> sql.Composed:
    """The application's login role: no privilege of its own beyond acting as principals."""
    return sql.SQL(
        "CREATE ROLE {} LOGIN NOINHERIT NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB"
    ).format(sql.Identifier(name))


def alter_role_set(role: str, setting: str, value: str) -> sql.Composed:
    """A role's default for a setting (the login role's timeouts)."""
    return sql.SQL("ALTER ROLE {} SET {} = {}").format(
        sql.Identifier(role), sql.Identifier(setting), sql.Literal(value)
    )


def grant_role(role: str, member: str) -> sql.Composed:
    """Make ``member`` a member of ``role`` (a group to a principal, a principal to a login)."""
    return sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), sql.Identifier(member))


def grant_role_to_current_user(role: str) -> sql.Composed:
    """Let the connected role act as ``role`` (the demo's installer acts as its principals)."""
    return sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(role))


def create_database(name: str) -> sql.Composed:
    """A new database (the embedded server's, the drafter's scratch databases)."""
    return sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))


def drop_database(name: str) -> sql.Composed:
    """Drop a scratch database, ending its sessions."""
    return sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name))


# ---------------------------------------------------------------------------------------------
# Audit
# ---------------------------------------------------------------------------------------------

# Whether the pyretrieve schema and its audit views (0002) are installed: columns schema, audit.
AUDIT_INSTALLED: Final = """
SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'pyretrieve') AS schema,
       EXISTS (SELECT FROM pg_catalog.pg_class c
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'pyretrieve' AND c.relname = 'audit_findings') AS audit
"""
# audit_server(): the server's version and whether it carries the security fixes.
AUDIT_SERVER: Final = "SELECT * FROM pyretrieve.audit_server()"


def audit_view(function: str, order: str) -> sql.Composed:
    """Every row of one audit function (``audit_tables``, ...), ordered by ``order``: a fixed
    column list of the audit module, never input."""
    return sql.SQL("SELECT * FROM pyretrieve.{}() ORDER BY {}").format(
        sql.Identifier(function), sql.SQL(order)
    )


# ---------------------------------------------------------------------------------------------
# Migrations (Alembic's connection takes these as SQLAlchemy text, the others as they are)
# ---------------------------------------------------------------------------------------------

# pyretrieve's Alembic version table, in schema public (alembic/env.py names it too).
VERSION_TABLE: Final = "pyretrieve_alembic_version"

# After a migration file: back to the installer's own role and search path.
RESET_ROLE: Final = "RESET ROLE"
RESET_SEARCH_PATH: Final = "RESET search_path"
# Whether a schema installed from the SQL script is there (its installation table).
INSTALLATION_EXISTS: Final = "SELECT to_regclass('pyretrieve.installation') IS NOT NULL"
# The schema version the installation table records.
INSTALLED_SCHEMA_VERSION: Final = "SELECT schema_version FROM pyretrieve.installation"
# Whether the version table exists, how many rows it holds, its revision, and dropping it.
VERSION_TABLE_EXISTS: Final = f"SELECT to_regclass('public.{VERSION_TABLE}') IS NOT NULL"
VERSION_TABLE_ROWS: Final = f"SELECT count(*) FROM public.{VERSION_TABLE}"
VERSION_NUM: Final = f"SELECT version_num FROM public.{VERSION_TABLE}"
DROP_VERSION_TABLE: Final = f"DROP TABLE public.{VERSION_TABLE}"

# The catalog the migration drafter compares: functions, policies, views, triggers, columns.
CATALOG_FUNCTIONS: Final = """
SELECT p.oid::regprocedure::text AS signature, pg_get_userbyid(p.proowner)::text AS owner,
       pg_get_functiondef(p.oid) AS definition, pg_get_function_result(p.oid) AS result,
       obj_description(p.oid, 'pg_proc') AS comment,
       ARRAY(SELECT pg_get_userbyid(a.grantee)::text FROM aclexplode(p.proacl) a
              WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner
              ORDER BY 1) AS executors,
       p.oid AS oid
  FROM pg_proc p WHERE p.pronamespace = 'pyretrieve'::regnamespace
"""
CATALOG_POLICIES: Final = """
SELECT c.relname::text AS tbl, p.polname::text AS name, pg_get_expr(p.polqual, p.polrelid) AS qual,
       pg_get_expr(p.polwithcheck, p.polrelid) AS check, p.polcmd::text AS cmd,
       p.polpermissive AS permissive,
       ARRAY(SELECT CASE WHEN r = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(r)) END
               FROM unnest(p.polroles) r ORDER BY 1) AS roles
  FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
 WHERE c.relnamespace = 'pyretrieve'::regnamespace
"""
# A view's definition as compared between two catalogs: pg_get_viewdef without the select-list
# aliases. A view created from a deparsed definition deparses with aliases its source did not
# write ('x'::text AS text in the later branches of a UNION), which name nothing (the output
# columns are the first branch's, and are compared as columns), so they are not a difference.
_VIEW_DEFINITION_COMPARED: Final = (
    "pg_catalog.regexp_replace(pg_catalog.pg_get_viewdef(c.oid),"
    " '\\s+AS\\s+(\"[^\"]+\"|\\w+)(?=,|\\n|;|$)', '', 'g')"
)
CATALOG_VIEWS: Final = f"""
SELECT c.relname::text AS name, pg_get_viewdef(c.oid) AS definition, c.reloptions AS options,
       {_VIEW_DEFINITION_COMPARED} AS compared,
       obj_description(c.oid, 'pg_class') AS comment
  FROM pg_class c WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind = 'v'
"""
CATALOG_TRIGGERS: Final = """
SELECT c.relname::text AS tbl, t.tgname::text AS name, pg_get_triggerdef(t.oid) AS definition
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = 'pyretrieve'::regnamespace AND NOT t.tgisinternal
"""
CATALOG_COLUMNS: Final = """
SELECT c.relname::text AS tbl, a.attname::text AS name, format_type(a.atttypid, a.atttypmod) AS type,
       a.attnotnull AS notnull, pg_get_expr(d.adbin, d.adrelid) AS default
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind IN ('r', 'p')
   AND a.attnum > 0 AND NOT a.attisdropped
"""


# ---------------------------------------------------------------------------------------------
# Ingestion (pyretrieve.ingest): the writer's look-ups, the row-by-row path (one function call
# per record) and the bulk path (COPY into a staging table of the writer's own, then one
# set-based call per batch).
# ---------------------------------------------------------------------------------------------

# Bind this transaction's write scope; returns the writer's ceiling there.
INGEST_BIND_WRITE_SCOPE: Final = (
    "SELECT pyretrieve.bind_write_scope(p_workspace => %s, p_project => %s)::text"
)

INGEST_MODEL_DIMENSION: Final = (
    "SELECT m.dimension FROM pyretrieve.list_models() m WHERE m.model_id = %s"
)

# The active fragments of the given source uris (one index probe per key).
INGEST_ACTIVE_SOURCES: Final = """
SELECT source_uri, fragment_id, content_digest, classification::text
  FROM pyretrieve.active_sources(p_workspace => %s, p_project => %s, p_uris => %s::text[])
"""

# One statement per batch. The functions run once per row in the order of the arrays; each
# binds the write scope and checks the writer's grant itself.
INGEST_WRITE_ROWS: Final = """
SELECT t.i,
       CASE WHEN t.old IS NULL THEN
           pyretrieve.put_fragment(
               p_workspace => %(ws)s, p_project => %(pj)s, p_body => t.body,
               p_classification => t.cls::pyretrieve.classification,
               p_observed_at => t.obs, p_expires_at => t.exp, p_source_uri => t.uri,
               p_source_revision => t.rev, p_manifest_id => t.man)
       ELSE
           pyretrieve.supersede_fragment(
               p_workspace => %(ws)s, p_project => %(pj)s, p_fragment_id => t.old,
               p_body => t.body, p_classification => t.cls::pyretrieve.classification,
               p_observed_at => t.obs, p_expires_at => t.exp, p_source_uri => t.uri,
               p_source_revision => t.rev, p_manifest_id => t.man)
       END
  FROM unnest(%(i)s::integer[], %(old)s::uuid[], %(body)s::text[], %(cls)s::text[],
              %(obs)s::timestamptz[], %(exp)s::timestamptz[], %(uri)s::text[],
              %(rev)s::text[], %(man)s::text[])
       AS t(i, old, body, cls, obs, exp, uri, rev, man)
"""

# Fragments created by this transaction (rather than found active with the same content).
INGEST_CREATED_NOW: Final = """
SELECT fragment_id
  FROM pyretrieve.created_now(p_workspace => %s, p_project => %s, p_ids => %s::uuid[])
"""

INGEST_EMBEDDINGS_NEEDED: Final = """
SELECT fragment_id, content_digest, missing
  FROM pyretrieve.embeddings_needed(p_workspace => %s, p_project => %s, p_model => %s,
                                    p_ids => %s::uuid[])
"""

INGEST_PUT_EMBEDDINGS: Final = """
SELECT pyretrieve.put_embedding(
           p_workspace => %s, p_project => %s, p_fragment_id => t.id, p_model => %s,
           p_embedding => t.v, p_source_digest => t.d)
  FROM unnest(%s::uuid[], %s::public.vector[], %s::bytea[]) AS t(id, v, d)
"""

INGEST_STALE: Final = """
SELECT fragment_id, body, content_digest, missing
  FROM pyretrieve.stale_embeddings(p_workspace => %s, p_project => %s, p_model => %s,
                                   p_after => %s, p_limit => %s)
"""

INGEST_COUNT_STALE: Final = "SELECT count(*) FROM (" + INGEST_STALE + ") s"

INGEST_ACTIVE_LIKE: Final = """
SELECT fragment_id, source_uri
  FROM pyretrieve.active_sources_like(p_workspace => %s, p_project => %s,
                                      p_patterns => %s::text[])
"""

# Compaction of the write scope's lexical index (small lists into pages), after a run.
INGEST_COMPACT: Final = """
SELECT rows_read, rows_written, postings
  FROM pyretrieve.compact_lexical_index(p_workspace => %s, p_project => %s, p_min_share => %s)
"""

INGEST_RETRACT: Final = """
SELECT pyretrieve.retract_fragment(p_workspace => %s, p_project => %s, p_fragment_id => t.id)
  FROM unnest(%s::uuid[]) AS t(id)
"""

# The active fragments of the given source uris, with whether each embedding for the model
# (or NULL) is current: what a bulk batch is planned from.
INGEST_STATE: Final = """
SELECT source_uri, fragment_id, content_digest, classification::text, embedding_current
  FROM pyretrieve.ingest_state(p_workspace => %s, p_project => %s, p_uris => %s::text[],
                               p_model => %s)
"""

# The staging table is the writer's own (created in its transaction, dropped at commit); the
# rows reach ingest_batch as one array value built here, in the writer's context.
INGEST_STAGING_CREATE: Final = """
CREATE TEMPORARY TABLE pyretrieve_ingest_staging (
    ord integer, source_uri text, body text, classification text, observed_at timestamptz,
    expires_at timestamptz, source_revision text, manifest_id text, replaces uuid[],
    keep uuid, embedding public.vector
) ON COMMIT DROP
"""

INGEST_STAGING_COPY: Final = """
COPY pg_temp.pyretrieve_ingest_staging (ord, source_uri, body, classification, observed_at,
    expires_at, source_revision, manifest_id, replaces, keep, embedding)
FROM STDIN (FORMAT BINARY)
"""

INGEST_BATCH: Final = """
SELECT b.ord, b.fragment_id, b.created, b.embedded
  FROM pyretrieve.ingest_batch(
           p_workspace => %s, p_project => %s,
           p_rows => ARRAY(
               SELECT ROW(s.ord, s.source_uri, s.body,
                          s.classification::pyretrieve.classification, s.observed_at,
                          s.expires_at, s.source_revision, s.manifest_id, s.replaces, s.keep,
                          s.embedding)::pyretrieve.ingest_row
                 FROM pg_temp.pyretrieve_ingest_staging s
                ORDER BY s.ord),
           p_model => %s) AS b
"""

# ---------------------------------------------------------------------------------------------
# Decisions (pyretrieve.cli.decisions): the decisions log's retention and the audit's
# questions (admins).
# ---------------------------------------------------------------------------------------------

DECISIONS_LIST: Final = """
SELECT evaluated_at, principal::text AS principal, workspace_id, project_id, purpose,
       decision_id, ceiling::text AS ceiling, semantic_intent, requested_limit
  FROM pyretrieve.list_decisions(p_since => %s::timestamptz, p_until => %s::timestamptz,
                                 p_workspace => %s, p_project => %s, p_principal => %s,
                                 p_limit => %s)
"""

DECISIONS_PARTITIONS: Final = """
SELECT partition_name, range_start, range_end, decisions FROM pyretrieve.decision_partitions()
"""

DECISIONS_PRUNE: Final = """
SELECT partition_name, range_start, range_end, decisions
  FROM pyretrieve.prune_decisions(p_older_than => %s::interval, p_dry_run => %s)
"""

DECISIONS_ENSURE: Final = """
SELECT name FROM pyretrieve.ensure_decision_partitions(p_months_ahead => %s) AS name
"""

DECISIONS_TIMESTAMP: Final = "SELECT %s::timestamptz AS t"
DECISIONS_RELATIVE: Final = "SELECT now() + %s::interval AS t"
