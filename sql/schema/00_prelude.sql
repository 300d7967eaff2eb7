-- pyretrieve: policy-filtered hybrid retrieval inside PostgreSQL.
--
-- The canonical install script: it creates the whole current schema in one transaction.
-- Versioned deltas live in sql/migrations/ and are executed by the Alembic revisions; a test
-- checks that a database built from this file and one built by `alembic upgrade head` have
-- identical catalogs.
--
-- Requires PostgreSQL 15+ and pgvector 0.7+. Run as a role that may create roles and the
-- `vector` extension (a superuser, or the managed service's admin role), in one transaction:
--   psql -v ON_ERROR_STOP=1 --single-transaction -f sql/pyretrieve.sql

-- ---------------------------------------------------------------------------------------------
-- Roles. Roles are cluster-wide, so they are created only when missing.
--   pyretrieve_owner   NOLOGIN; owns the tables, types and sequences, and the few functions
--                      that need ownership (index and sequence DDL); bound by FORCE ROW LEVEL
--                      SECURITY too.
--   pyretrieve_api     NOLOGIN, NOINHERIT; owns the SECURITY DEFINER functions of the SQL API
--                      and holds exactly the table privileges they need. Row-level security
--                      binds it: its policies admit only what the transaction's one binding
--                      (a read decision or a write scope) admits.
--   pyretrieve_reader  principals that search.
--   pyretrieve_writer  principals that ingest (inherits reader).
--   pyretrieve_admin   principals that manage workspaces, projects, grants and models.
-- A principal is an ordinary role that is a member of one of the group roles. The groups hold
-- no privilege on any table, view or sequence: the functions are the only door. A principal's
-- identity is the role the request runs as (SET ROLE from an authenticator, or the login
-- role itself), which pyretrieve.caller() reads; nothing a caller can set changes it.
-- ---------------------------------------------------------------------------------------------
DO $roles$
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        RAISE EXCEPTION 'pyretrieve needs a UTF8 database (this one is %)', pg_catalog.getdatabaseencoding();
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pyretrieve_owner') THEN
        CREATE ROLE pyretrieve_owner NOLOGIN NOINHERIT NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pyretrieve_api') THEN
        CREATE ROLE pyretrieve_api NOLOGIN NOINHERIT NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pyretrieve_reader') THEN
        CREATE ROLE pyretrieve_reader NOLOGIN NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pyretrieve_writer') THEN
        CREATE ROLE pyretrieve_writer NOLOGIN NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pyretrieve_admin') THEN
        CREATE ROLE pyretrieve_admin NOLOGIN NOBYPASSRLS;
    END IF;
END
$roles$;

-- A writer may also search; an admin is not implicitly a reader of content.
GRANT pyretrieve_reader TO pyretrieve_writer;

-- Remember whether this installer creates the extension, so an uninstall removes only that.
SELECT pg_catalog.set_config('pyretrieve.install_creates_vector',
    (NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'vector'))::text, true);
CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;
-- pgvector's type, operators and functions are referenced as public.*; a pgvector installed in
-- another schema is refused here rather than half-working later.
DO $vector$
BEGIN
    IF (SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
         WHERE e.extname = 'vector') <> 'public' THEN
        RAISE EXCEPTION 'pyretrieve needs the vector extension in schema public';
    END IF;
END
$vector$;

CREATE SCHEMA pyretrieve AUTHORIZATION pyretrieve_owner;
REVOKE ALL ON SCHEMA pyretrieve FROM PUBLIC;
COMMENT ON SCHEMA pyretrieve IS
    'pyretrieve: policy-filtered hybrid retrieval. Access through the functions; RLS is forced on every table.';

-- The API functions are created by pyretrieve_api itself (50_writers and the read API switch
-- to it); it may create objects in the schema only while the installer runs (the epilogue
-- revokes CREATE again).
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;

-- Everything below is created by, and so owned by, the NOLOGIN owner role unless a section
-- switches to pyretrieve_api.
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;
