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
--   pyretrieve_owner   NOLOGIN; owns every object; bound by FORCE ROW LEVEL SECURITY too.
--   pyretrieve_reader  principals that search.
--   pyretrieve_writer  principals that ingest (inherits reader).
--   pyretrieve_admin   principals that manage workspaces, projects, grants and models.
-- A principal is an ordinary role that is a member of one of the group roles. Identity is
-- current_user; applications switch with SET LOCAL ROLE inside a transaction.
-- ---------------------------------------------------------------------------------------------
DO $roles$
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        RAISE EXCEPTION 'pyretrieve needs a UTF8 database (this one is %)', pg_catalog.getdatabaseencoding();
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pyretrieve_owner') THEN
        CREATE ROLE pyretrieve_owner NOLOGIN NOINHERIT NOBYPASSRLS;
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

-- Everything below is created by, and so owned by, the NOLOGIN owner role.
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------------------------
-- Types
-- ---------------------------------------------------------------------------------------------
CREATE TYPE pyretrieve.classification AS ENUM ('public', 'internal', 'confidential', 'restricted');
CREATE TYPE pyretrieve.fragment_state AS ENUM ('active', 'superseded', 'retracted');
CREATE TYPE pyretrieve.semantic_policy AS ENUM ('disabled', 'optional', 'required');

CREATE DOMAIN pyretrieve.identifier AS text
    CHECK (VALUE ~ '^[a-z0-9][a-z0-9_.-]{0,62}$');
COMMENT ON DOMAIN pyretrieve.identifier IS
    'Workspace, project and purpose names: lower-case ASCII, digits, _ . -, at most 63 characters.';

-- sha256 of the UTF-8 bytes of a text. convert_to() is only STABLE because conversions can be
-- redefined; in a UTF8 database the conversion to UTF8 is the identity, which the installer
-- checks above, so the digest is truly immutable and may back a generated column.
CREATE FUNCTION pyretrieve.content_digest(p_body text)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
RETURN pg_catalog.sha256(pg_catalog.convert_to(p_body, 'UTF8'));
COMMENT ON FUNCTION pyretrieve.content_digest(text) IS
    'sha256 of the UTF-8 bytes of a text: the content digest of a fragment body.';

-- ---------------------------------------------------------------------------------------------
-- Tables. Every primary and unique key starts with workspace_id: no key can act as an existence
-- oracle across workspaces, and the tables are ready to shard by workspace.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE pyretrieve.installation (
    singleton       boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    schema_version  text NOT NULL,
    created_vector  boolean NOT NULL,
    installed_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE pyretrieve.installation IS
    'One row: the installed schema version and whether the installer created the vector extension (so an uninstall removes only what it created).';

CREATE TABLE pyretrieve.workspaces (
    workspace_id  pyretrieve.identifier NOT NULL,
    display_name  text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (workspace_id)
);

CREATE TABLE pyretrieve.projects (
    workspace_id  pyretrieve.identifier NOT NULL REFERENCES pyretrieve.workspaces,
    project_id    pyretrieve.identifier NOT NULL,
    ts_config     regconfig NOT NULL DEFAULT 'pg_catalog.english',
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (workspace_id, project_id)
);

-- Per-scope index generations: every write that changes what the lexical or vector leg can
-- return bumps the scope's counter, and the rows written carry it. The text-search
-- configurations used in the scope are kept here so a query is parsed once per configuration.
CREATE TABLE pyretrieve.scope_generations (
    workspace_id        pyretrieve.identifier NOT NULL,
    project_id          pyretrieve.identifier NOT NULL,
    lexical_generation  bigint NOT NULL DEFAULT 0,
    vector_generation   bigint NOT NULL DEFAULT 0,
    ts_configs          regconfig[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (workspace_id, project_id),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects
);

CREATE TABLE pyretrieve.fragments (
    workspace_id        pyretrieve.identifier NOT NULL,
    project_id          pyretrieve.identifier NOT NULL,
    fragment_id         uuid NOT NULL DEFAULT gen_random_uuid(),
    body                text NOT NULL CHECK (pg_catalog.length(body) <= 1000000),
    content_digest      bytea GENERATED ALWAYS AS (pyretrieve.content_digest(body)) STORED,
    classification      pyretrieve.classification NOT NULL DEFAULT 'internal',
    state               pyretrieve.fragment_state NOT NULL DEFAULT 'active',
    superseded_by       uuid,
    observed_at         timestamptz NOT NULL DEFAULT pg_catalog.now(),
    expires_at          timestamptz,
    ingested_at         timestamptz NOT NULL DEFAULT pg_catalog.now(),
    source_uri          text CHECK (pg_catalog.length(source_uri) <= 2048),
    source_revision     text CHECK (pg_catalog.length(source_revision) <= 256),
    manifest_id         text CHECK (pg_catalog.length(manifest_id) <= 256),
    ts_config           regconfig NOT NULL DEFAULT 'pg_catalog.english',
    tsv                 tsvector GENERATED ALWAYS AS (pg_catalog.to_tsvector(ts_config, body)) STORED,
    lexical_generation  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace_id, fragment_id),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects,
    FOREIGN KEY (workspace_id, superseded_by) REFERENCES pyretrieve.fragments (workspace_id, fragment_id),
    CHECK ((state = 'superseded') = (superseded_by IS NOT NULL)),
    CHECK (expires_at IS NULL OR expires_at > observed_at)
);
-- Idempotency by content: one active fragment per scope, classification and body. The
-- classification is part of the key so that a writer whose ceiling is below an identical
-- fragment's classification gets its own row instead of a unique violation that would reveal
-- the hidden one.
CREATE UNIQUE INDEX fragments_active_content_key
    ON pyretrieve.fragments (workspace_id, project_id, classification, content_digest)
    WHERE state = 'active';
-- The scope index every candidate query starts from.
CREATE INDEX fragments_scope_idx
    ON pyretrieve.fragments (workspace_id, project_id, state, classification);
-- Used by callers that bypass RLS legitimately (none today) and by a later lexical design; kept
-- so the GIN cost is paid now rather than in a rebuild.
CREATE INDEX fragments_tsv_idx ON pyretrieve.fragments USING gin (tsv);
-- Re-ingestion finds the active fragment of a source (file, record id) to supersede it.
CREATE INDEX fragments_source_idx
    ON pyretrieve.fragments (workspace_id, project_id, source_uri)
    WHERE state = 'active' AND source_uri IS NOT NULL;

CREATE TABLE pyretrieve.embedding_models (
    model_id      text NOT NULL CHECK (model_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$'),
    dimension     integer NOT NULL CHECK (dimension BETWEEN 1 AND 2000),
    model_serial  integer GENERATED ALWAYS AS IDENTITY,
    registered_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (model_id),
    UNIQUE (model_serial)
);
COMMENT ON TABLE pyretrieve.embedding_models IS
    'Registered embedding models. Global, not per workspace: a model id and dimension are configuration, not tenant data.';

CREATE TABLE pyretrieve.embeddings (
    workspace_id       pyretrieve.identifier NOT NULL,
    project_id         pyretrieve.identifier NOT NULL,
    fragment_id        uuid NOT NULL,
    model_id           text NOT NULL REFERENCES pyretrieve.embedding_models,
    embedding          public.vector NOT NULL,
    source_digest      bytea NOT NULL CHECK (pg_catalog.length(source_digest) = 32),
    vector_generation  bigint NOT NULL DEFAULT 0,
    embedded_at        timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (workspace_id, fragment_id, model_id),
    FOREIGN KEY (workspace_id, fragment_id) REFERENCES pyretrieve.fragments
);
-- Exact scans of a scope read this index and then the compact embedding rows; the vector is
-- kept in line (MAIN) so a scan does not chase TOAST pointers for common dimensions.
CREATE INDEX embeddings_scope_idx ON pyretrieve.embeddings (workspace_id, project_id, model_id);
ALTER TABLE pyretrieve.embeddings ALTER COLUMN embedding SET STORAGE MAIN;

CREATE TABLE pyretrieve.grants (
    workspace_id     pyretrieve.identifier NOT NULL,
    grant_id         uuid NOT NULL DEFAULT gen_random_uuid(),
    principal        regrole NOT NULL,
    project_id       pyretrieve.identifier NOT NULL,
    purpose          pyretrieve.identifier NOT NULL,
    ceiling          pyretrieve.classification NOT NULL,
    max_age          interval,
    semantic_policy  pyretrieve.semantic_policy NOT NULL DEFAULT 'optional',
    expires_at       timestamptz,
    granted_by       name NOT NULL DEFAULT CURRENT_USER,
    granted_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (workspace_id, grant_id),
    UNIQUE (workspace_id, project_id, principal, purpose),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects,
    -- Stored as clock time only: months and years have no fixed length, and a day is 23 or 25
    -- hours across a daylight-saving change, so only hours/seconds make the window the same
    -- number in SQL and in the Python ranker (grant_access converts days to hours).
    CHECK (max_age IS NULL OR (max_age > interval '0'
           AND pg_catalog.date_part('month', max_age) = 0 AND pg_catalog.date_part('year', max_age) = 0
           AND pg_catalog.date_part('day', max_age) = 0))
);

CREATE TABLE pyretrieve.decisions (
    workspace_id      pyretrieve.identifier NOT NULL,
    decision_id       uuid NOT NULL DEFAULT gen_random_uuid(),
    principal         name NOT NULL DEFAULT CURRENT_USER,
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
COMMENT ON TABLE pyretrieve.decisions IS
    'Audit log of authorisation decisions: digests and intent only, never query text, embedding values or content.';

-- ---------------------------------------------------------------------------------------------
-- Helpers used by the policies. STABLE and SECURITY INVOKER: each reads only rows the caller
-- may read, and the policies call them as (select ...) so they run once per query.
-- ---------------------------------------------------------------------------------------------

-- Parse a custom setting as a uuid; anything malformed reads as "not set".
CREATE FUNCTION pyretrieve.setting_uuid(p_name text)
RETURNS uuid
LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v text := pg_catalog.current_setting(p_name, true);
BEGIN
    IF v IS NULL OR v !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RETURN NULL;
    END IF;
    RETURN v::uuid;
END;
$$;

-- The decision bound to this transaction: the one named by the pyretrieve.decision setting, if
-- and only if it belongs to current_user and was made in this transaction. Anyone can set the
-- setting; it can only select one of the caller's own decisions, which copy the caller's grants.
CREATE FUNCTION pyretrieve.bound_decision()
RETURNS SETOF pyretrieve.decisions
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT d.*
      FROM pyretrieve.decisions d
     WHERE d.decision_id = pyretrieve.setting_uuid('pyretrieve.decision')
       AND d.principal = CURRENT_USER
       AND d.xact_id = pg_catalog.pg_current_xact_id_if_assigned()
     LIMIT 1;
END;


-- The write scope of this transaction: the workspace/project named by the
-- pyretrieve.write_scope setting ('workspace/project'), if and only if current_user is a
-- writer holding a live grant there; the ceiling is the highest of those grants. The setting
-- selects among the caller's own grants and can never widen them.
CREATE FUNCTION pyretrieve.write_scope()
RETURNS TABLE (workspace_id text, project_id text, ceiling pyretrieve.classification)
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT g.workspace_id, g.project_id, max(g.ceiling)
      FROM pyretrieve.grants g
     WHERE g.workspace_id = split_part(current_setting('pyretrieve.write_scope', true), '/', 1)
       AND g.project_id = split_part(current_setting('pyretrieve.write_scope', true), '/', 2)
       AND pg_has_role(g.principal, 'USAGE')
       AND pg_has_role('pyretrieve_writer', 'USAGE')
       AND (g.expires_at IS NULL OR g.expires_at > now())
     GROUP BY g.workspace_id, g.project_id;
END;

-- Whether an active fragment with this id is visible to the caller in this scope. A policy may
-- not query its own table directly (PostgreSQL refuses the recursion); a function may, and its
-- query still runs as the caller under RLS.
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
-- to current_user, the caller's own before a group's, then the widest. authorize() and the
-- decisions INSERT policy both use it, so a hand-written decision can never be wider.
CREATE FUNCTION pyretrieve.effective_grant(p_workspace text, p_project text, p_purpose text)
RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT gr.grant_id
      FROM pyretrieve.grants gr
     WHERE gr.workspace_id = p_workspace
       AND gr.project_id = p_project
       AND gr.purpose = p_purpose
       AND pg_has_role(gr.principal, 'USAGE')
       AND (gr.expires_at IS NULL OR gr.expires_at > now())
     ORDER BY (gr.principal = CURRENT_USER::regrole) DESC, gr.ceiling DESC,
              gr.max_age DESC NULLS FIRST, gr.grant_id
     LIMIT 1;
END;

-- ---------------------------------------------------------------------------------------------
-- Generations. Every fragment and embedding row is stamped from one sequence by a trigger
-- (callers cannot choose the number); the scope's counters follow with one update per
-- statement, not per row.
-- ---------------------------------------------------------------------------------------------
CREATE SEQUENCE pyretrieve.generation_seq AS bigint;

CREATE FUNCTION pyretrieve.stamp_lexical_generation()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.lexical_generation := nextval('pyretrieve.generation_seq');
    RETURN NEW;
END;
$$;

CREATE FUNCTION pyretrieve.stamp_vector_generation()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.vector_generation := nextval('pyretrieve.generation_seq');
    NEW.embedded_at := now();
    RETURN NEW;
END;
$$;

CREATE FUNCTION pyretrieve.bump_scope_lexical()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE pyretrieve.scope_generations sg
       SET lexical_generation = greatest(sg.lexical_generation, n.generation),
           ts_configs = ARRAY(SELECT DISTINCT c FROM unnest(sg.ts_configs || n.configs) AS c ORDER BY c)
      FROM (SELECT r.workspace_id, r.project_id,
                   max(r.lexical_generation) AS generation,
                   array_agg(DISTINCT r.ts_config) AS configs
              FROM changed r
             GROUP BY r.workspace_id, r.project_id) n
     WHERE sg.workspace_id = n.workspace_id AND sg.project_id = n.project_id;
    RETURN NULL;
END;
$$;

CREATE FUNCTION pyretrieve.bump_scope_vector()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE pyretrieve.scope_generations sg
       SET vector_generation = greatest(sg.vector_generation, n.generation)
      FROM (SELECT r.workspace_id, r.project_id, max(r.vector_generation) AS generation
              FROM changed r
             GROUP BY r.workspace_id, r.project_id) n
     WHERE sg.workspace_id = n.workspace_id AND sg.project_id = n.project_id;
    RETURN NULL;
END;
$$;

-- Writers update the scope counters through the triggers above, so they hold UPDATE on them;
-- this guard keeps a hand-written UPDATE from rewinding a counter or dropping a configuration.
CREATE FUNCTION pyretrieve.scope_generations_forward()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.lexical_generation < OLD.lexical_generation
       OR NEW.vector_generation < OLD.vector_generation
       OR NOT (NEW.ts_configs @> OLD.ts_configs) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'scope generations only move forward';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER scope_generations_forward BEFORE UPDATE ON pyretrieve.scope_generations
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.scope_generations_forward();

CREATE TRIGGER fragments_stamp BEFORE INSERT OR UPDATE ON pyretrieve.fragments
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.stamp_lexical_generation();
CREATE TRIGGER fragments_bump_insert AFTER INSERT ON pyretrieve.fragments
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_lexical();
CREATE TRIGGER fragments_bump_update AFTER UPDATE ON pyretrieve.fragments
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_lexical();
CREATE TRIGGER embeddings_stamp BEFORE INSERT OR UPDATE ON pyretrieve.embeddings
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.stamp_vector_generation();
CREATE TRIGGER embeddings_bump_insert AFTER INSERT ON pyretrieve.embeddings
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_vector();
CREATE TRIGGER embeddings_bump_update AFTER UPDATE ON pyretrieve.embeddings
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_vector();

-- ---------------------------------------------------------------------------------------------
-- Row-level security, forced on every table so the owner is bound too. Setting and grant
-- look-ups are written as (select ...) so they are evaluated once per query (InitPlans).
-- ---------------------------------------------------------------------------------------------
ALTER TABLE pyretrieve.installation      ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.workspaces        ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.projects          ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.scope_generations ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.fragments         ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.embedding_models  ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.embeddings        ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.grants            ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.decisions         ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;

-- installation: readable by the three groups (it holds only a version), written only by the
-- installer, which runs as the owner.
CREATE POLICY installation_read ON pyretrieve.installation FOR SELECT
    TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin USING (true);
CREATE POLICY installation_install ON pyretrieve.installation FOR ALL
    TO pyretrieve_owner USING (true) WITH CHECK (true);

-- Tenant tables, read side: only the scope bound by this transaction's decision (readers) or
-- by its write scope (writers). Without a binding every query returns zero rows.
CREATE POLICY workspaces_read ON pyretrieve.workspaces FOR SELECT TO pyretrieve_reader
    USING (workspace_id = (SELECT d.workspace_id FROM pyretrieve.bound_decision() d)
        OR workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w));
CREATE POLICY workspaces_admin ON pyretrieve.workspaces FOR ALL TO pyretrieve_admin
    USING (true) WITH CHECK (true);

CREATE POLICY projects_read ON pyretrieve.projects FOR SELECT TO pyretrieve_reader
    USING ((workspace_id = (SELECT d.workspace_id FROM pyretrieve.bound_decision() d)
            AND project_id = (SELECT d.project_id FROM pyretrieve.bound_decision() d))
        OR (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
            AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)));
CREATE POLICY projects_admin ON pyretrieve.projects FOR ALL TO pyretrieve_admin
    USING (true) WITH CHECK (true);

CREATE POLICY scope_generations_read ON pyretrieve.scope_generations FOR SELECT TO pyretrieve_reader
    USING ((workspace_id = (SELECT d.workspace_id FROM pyretrieve.bound_decision() d)
            AND project_id = (SELECT d.project_id FROM pyretrieve.bound_decision() d))
        OR (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
            AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)));
CREATE POLICY scope_generations_write ON pyretrieve.scope_generations FOR UPDATE TO pyretrieve_writer
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w))
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w));
CREATE POLICY scope_generations_admin ON pyretrieve.scope_generations FOR ALL TO pyretrieve_admin
    USING (true) WITH CHECK (true);

-- Fragments: the decision's whole filter (scope, ceiling, state, evaluation time, max_age,
-- expiry) is the policy, so no query can see more than the decision allows.
CREATE POLICY fragments_read ON pyretrieve.fragments FOR SELECT TO pyretrieve_reader
    USING (workspace_id = (SELECT d.workspace_id FROM pyretrieve.bound_decision() d)
       AND project_id = (SELECT d.project_id FROM pyretrieve.bound_decision() d)
       AND state = 'active'
       AND classification <= (SELECT d.ceiling FROM pyretrieve.bound_decision() d)
       AND observed_at <= (SELECT d.evaluated_at FROM pyretrieve.bound_decision() d)
       AND observed_at >= coalesce((SELECT d.evaluated_at - d.max_age FROM pyretrieve.bound_decision() d),
                                   '-infinity'::timestamptz)
       AND (expires_at IS NULL OR expires_at > (SELECT d.evaluated_at FROM pyretrieve.bound_decision() d)));
-- Writers see every state in their write scope up to their ceiling: they need the superseded
-- and retracted rows to keep writes idempotent.
CREATE POLICY fragments_write_read ON pyretrieve.fragments FOR SELECT TO pyretrieve_writer
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.write_scope() w));
CREATE POLICY fragments_insert ON pyretrieve.fragments FOR INSERT TO pyretrieve_writer
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.write_scope() w)
       AND state = 'active' AND superseded_by IS NULL);
CREATE POLICY fragments_update ON pyretrieve.fragments FOR UPDATE TO pyretrieve_writer
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.write_scope() w))
    -- A successor must itself be visible in the same scope; checked before the foreign key so
    -- a guessed id cannot probe for rows the writer may not see.
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.write_scope() w)
       AND (superseded_by IS NULL
            OR pyretrieve.visible_successor(workspace_id, project_id, superseded_by)));

-- Embeddings are visible exactly when their fragment is (the sub-select runs under the
-- fragments policies as the caller).
CREATE POLICY embeddings_read ON pyretrieve.embeddings FOR SELECT TO pyretrieve_reader
    USING (EXISTS (SELECT 1 FROM pyretrieve.fragments f
                    WHERE f.workspace_id = embeddings.workspace_id
                      AND f.fragment_id = embeddings.fragment_id
                      AND f.project_id = embeddings.project_id));
CREATE POLICY embeddings_insert ON pyretrieve.embeddings FOR INSERT TO pyretrieve_writer
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND EXISTS (SELECT 1 FROM pyretrieve.fragments f
                    WHERE f.workspace_id = embeddings.workspace_id
                      AND f.fragment_id = embeddings.fragment_id
                      AND f.project_id = embeddings.project_id));
CREATE POLICY embeddings_update ON pyretrieve.embeddings FOR UPDATE TO pyretrieve_writer
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w))
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w));

-- Models are configuration, not tenant data.
CREATE POLICY embedding_models_read ON pyretrieve.embedding_models FOR SELECT
    TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin, pyretrieve_owner USING (true);
CREATE POLICY embedding_models_admin ON pyretrieve.embedding_models FOR INSERT TO pyretrieve_admin
    WITH CHECK (true);

-- Grants: a principal sees the grants that apply to it (its own authority, never another
-- principal's); admins manage all of them.
CREATE POLICY grants_own ON pyretrieve.grants FOR SELECT TO pyretrieve_reader
    USING (pg_has_role(principal, 'USAGE'));
CREATE POLICY grants_admin ON pyretrieve.grants FOR ALL TO pyretrieve_admin
    USING (true) WITH CHECK (true);

-- Decisions: a principal reads its own; it may insert one only as an exact copy of one of its
-- live grants, in this transaction, at this transaction's time (so a hand-written INSERT can
-- never produce a wider decision than authorize() would).
CREATE POLICY decisions_own ON pyretrieve.decisions FOR SELECT TO pyretrieve_reader
    USING (principal = CURRENT_USER);
CREATE POLICY decisions_insert ON pyretrieve.decisions FOR INSERT TO pyretrieve_reader
    WITH CHECK (principal = CURRENT_USER
        AND xact_id = pg_current_xact_id()
        AND evaluated_at = now()
        AND candidate_limit BETWEEN 1 AND 1000
        AND grant_id = pyretrieve.effective_grant(workspace_id, project_id, purpose)
        AND EXISTS (SELECT 1 FROM pyretrieve.grants g
                     WHERE g.workspace_id = decisions.workspace_id
                       AND g.grant_id = decisions.grant_id
                       AND g.project_id = decisions.project_id
                       AND g.purpose = decisions.purpose
                       AND g.ceiling = decisions.ceiling
                       AND g.max_age IS NOT DISTINCT FROM decisions.max_age
                       AND g.semantic_policy = decisions.semantic_policy
                       AND pg_has_role(g.principal, 'USAGE')
                       AND (g.expires_at IS NULL OR g.expires_at > now())));
CREATE POLICY decisions_admin ON pyretrieve.decisions FOR SELECT TO pyretrieve_admin
    USING (true);

-- ---------------------------------------------------------------------------------------------
-- Errors. Every error raised here has its own SQLSTATE in class PR, a fixed message that names
-- no row, id or content, and is mapped to a typed Python error in one place.
--   PR001 access denied (no grant, scope absent, not a reader/writer/admin)   same for all
--   PR002 decision not valid for this request (not the caller's, not this transaction,
--         not the bound one)
--   PR003 transaction already bound to another scope
--   PR010 invalid input (limits, lengths, identifiers, digests)
--   PR011 invalid embedding (dimension, NaN/Inf, zero norm)
--   PR012 unknown embedding model
--   PR013 conflict (a model registered with another dimension)
--   PR020 not found (a fragment absent or not visible to the caller: the same error)
--   PR030 semantic retrieval required but not available
-- ---------------------------------------------------------------------------------------------

CREATE FUNCTION pyretrieve.check_identifier(p_value text, p_what text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NULL OR p_value !~ '^[a-z0-9][a-z0-9_.-]{0,62}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid ' || p_what;
    END IF;
END;
$$;

-- The decision of this request: the bound decision, and only if it is the one named.
CREATE FUNCTION pyretrieve.require_decision(p_decision uuid)
RETURNS pyretrieve.decisions
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d pyretrieve.decisions;
BEGIN
    SELECT * INTO d FROM pyretrieve.bound_decision();
    IF NOT FOUND OR p_decision IS NULL OR d.decision_id <> p_decision THEN
        RAISE EXCEPTION USING ERRCODE = 'PR002', MESSAGE = 'decision not valid for this request';
    END IF;
    RETURN d;
END;
$$;

CREATE FUNCTION pyretrieve.authorize(
    p_workspace text,
    p_project text,
    p_purpose text,
    p_query_digest bytea,
    p_semantic_intent text,
    p_embedding_digest bytea,
    p_requested_limit integer)
RETURNS TABLE (
    decision_id uuid, principal name, workspace_id text, project_id text, purpose text,
    evaluated_at timestamptz, ceiling pyretrieve.classification, max_age interval,
    semantic_policy pyretrieve.semantic_policy, candidate_limit integer, grant_id uuid)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    g pyretrieve.grants;
    bound pyretrieve.decisions;
    d pyretrieve.decisions;
BEGIN
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

    -- One transaction serves one scope and purpose.
    SELECT * INTO bound FROM pyretrieve.bound_decision();
    IF FOUND AND (bound.workspace_id, bound.project_id, bound.purpose)
                 IS DISTINCT FROM (p_workspace, p_project, p_purpose) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR003', MESSAGE = 'transaction already bound to another scope';
    END IF;

    -- The grants policy shows only grants that apply to current_user, so an absent scope and
    -- a scope without a grant look the same here: both are denied with the same error. The most
    -- specific grant wins (the caller's own before a group's), then the widest.
    SELECT gr.* INTO g
      FROM pyretrieve.grants gr
     WHERE gr.workspace_id = p_workspace
       AND gr.grant_id = pyretrieve.effective_grant(p_workspace, p_project, p_purpose);
    IF NOT FOUND OR NOT pg_has_role('pyretrieve_reader', 'USAGE') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;

    INSERT INTO pyretrieve.decisions AS dn (
        workspace_id, project_id, purpose, grant_id, ceiling, max_age, semantic_policy,
        requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest)
    VALUES (
        g.workspace_id, g.project_id, g.purpose, g.grant_id, g.ceiling, g.max_age, g.semantic_policy,
        p_requested_limit, least(greatest(p_requested_limit, 100), 1000),
        p_query_digest, p_semantic_intent, p_embedding_digest)
    RETURNING dn.* INTO d;

    PERFORM set_config('pyretrieve.decision', d.decision_id::text, true);

    RETURN QUERY SELECT d.decision_id, d.principal, d.workspace_id::text, d.project_id::text,
                        d.purpose::text, d.evaluated_at, d.ceiling, d.max_age, d.semantic_policy,
                        d.candidate_limit, d.grant_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.authorize(text, text, text, bytea, text, bytea, integer) IS
    'Authorise current_user for one workspace/project and purpose. Checks the caller''s live grants, records the decision (digests and intent only: never query text, embedding values or content), binds this transaction to that scope and returns the decision with its evaluation time, ceiling, max_age, semantic policy and bounded candidate limit. Raises SQLSTATE PR001 (access denied) alike for an absent scope and a scope without a grant.';

-- Lexical query: OR over the lexemes of the text in one configuration. AND semantics
-- (plainto/websearch) matched nothing for most natural-language questions when measured.
CREATE FUNCTION pyretrieve.or_tsquery(p_config regconfig, p_query text)
RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
BEGIN ATOMIC
    SELECT replace(plainto_tsquery(p_config, p_query)::text, ' & ', ' | ')::tsquery;
END;
COMMENT ON FUNCTION pyretrieve.or_tsquery(regconfig, text) IS
    'The OR of the query''s lexemes in one text-search configuration (phrases from compound words stay phrases).';

CREATE FUNCTION pyretrieve.lexical_candidates(p_decision uuid, p_query text, p_limit integer)
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, score double precision,
               lexical_generation bigint)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_query IS NULL OR length(p_query) NOT BETWEEN 1 AND 4096 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query must be 1 to 4096 characters';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'candidate limit out of range for this decision';
    END IF;

    -- The decision's filters are stated explicitly (with the scope as parameters the planner
    -- can use for the scope index) and RLS applies them again as the caller: both must pass.
    -- Scoring is the replaceable part: ts_rank with length normalisation 1.
    RETURN QUERY
    WITH q AS MATERIALIZED (
        SELECT c.cfg, pyretrieve.or_tsquery(c.cfg, p_query) AS tsq
          FROM pyretrieve.scope_generations sg
         CROSS JOIN LATERAL unnest(sg.ts_configs) AS c(cfg)
         WHERE sg.workspace_id = d.workspace_id AND sg.project_id = d.project_id
    ), top AS (
        SELECT f.fragment_id, f.content_digest,
               ts_rank(f.tsv, q.tsq, 1)::double precision AS score, f.lexical_generation
          FROM pyretrieve.fragments f
          JOIN q ON f.ts_config = q.cfg
         WHERE f.workspace_id = d.workspace_id
           AND f.project_id = d.project_id
           AND f.state = 'active'
           AND f.classification <= d.ceiling
           AND f.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
           AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
           AND numnode(q.tsq) > 0
           AND f.tsv @@ q.tsq
         ORDER BY score DESC, f.content_digest, f.fragment_id
         LIMIT p_limit
    )
    SELECT (row_number() OVER (ORDER BY t.score DESC, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.score, t.lexical_generation
      FROM top t
     ORDER BY 1;
END;
$$;
COMMENT ON FUNCTION pyretrieve.lexical_candidates(uuid, text, integer) IS
    'Lexical candidates for the bound decision: OR over the query''s lexemes, scored with ts_rank (normalisation 1), 1-based ranks in a total order (score desc, then content digest, then fragment id). Returns rank, fragment_id, content_digest, score, lexical_generation. Raises PR002 for a decision that is not the caller''s bound decision of this transaction.';

CREATE FUNCTION pyretrieve.check_embedding(p_model text, p_embedding public.vector)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_dimension integer;
    v_norm double precision;
BEGIN
    SELECT m.dimension INTO v_dimension FROM pyretrieve.embedding_models m WHERE m.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    IF p_embedding IS NULL OR public.vector_dims(p_embedding) <> v_dimension THEN
        RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding dimension does not match the model';
    END IF;
    v_norm := public.vector_norm(p_embedding);
    IF NOT (v_norm > 0 AND v_norm < 'Infinity'::double precision) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding must be finite and non-zero';
    END IF;
END;
$$;

CREATE FUNCTION pyretrieve.vector_candidates(p_decision uuid, p_model text, p_embedding public.vector, p_limit integer)
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, distance double precision,
               source_digest bytea, vector_generation bigint, lexical_generation bigint)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    PERFORM pyretrieve.check_embedding(p_model, p_embedding);
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'candidate limit out of range for this decision';
    END IF;

    -- Exact cosine distance over the scope's rows, reached through the scope index: under RLS
    -- the distance operator is not leakproof, so a global HNSW index would filter after the
    -- scan and lose recall on small scopes. Exact search has recall 1.
    RETURN QUERY
    WITH top AS (
        SELECT e.fragment_id, f.content_digest,
               (e.embedding OPERATOR(public.<=>) p_embedding)::double precision AS distance,
               e.source_digest, e.vector_generation, f.lexical_generation
          FROM pyretrieve.embeddings e
          JOIN pyretrieve.fragments f
            ON f.workspace_id = e.workspace_id AND f.fragment_id = e.fragment_id
         WHERE e.workspace_id = d.workspace_id
           AND e.project_id = d.project_id
           AND e.model_id = p_model
           AND f.workspace_id = d.workspace_id
           AND f.project_id = d.project_id
           AND f.state = 'active'
           AND f.classification <= d.ceiling
           AND f.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
           AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
         ORDER BY distance, f.content_digest, f.fragment_id
         LIMIT p_limit
    )
    SELECT (row_number() OVER (ORDER BY t.distance, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.distance, t.source_digest, t.vector_generation,
           t.lexical_generation
      FROM top t
     ORDER BY 1;
END;
$$;
COMMENT ON FUNCTION pyretrieve.vector_candidates(uuid, text, public.vector, integer) IS
    'Vector candidates for the bound decision: exact cosine distance to p_embedding over the scope''s embeddings of model p_model, 1-based ranks in a total order (distance, then content digest, then fragment id). Returns rank, fragment_id, content_digest, distance, source_digest (digest of the text the embedding was computed from), vector_generation, lexical_generation. Raises PR011 for a wrong dimension, NaN/Inf or zero public.vector, PR012 for an unknown model.';

CREATE FUNCTION pyretrieve.fragments(p_decision uuid, p_ids uuid[])
RETURNS TABLE (
    workspace_id text, project_id text, fragment_id uuid, body text, content_digest bytea,
    classification pyretrieve.classification, state pyretrieve.fragment_state, superseded_by uuid,
    observed_at timestamptz, expires_at timestamptz, ingested_at timestamptz, source_uri text,
    source_revision text, manifest_id text, ts_config regconfig, lexical_generation bigint)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 2 * d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'too many ids for this decision';
    END IF;
    RETURN QUERY
    SELECT f.workspace_id::text, f.project_id::text, f.fragment_id, f.body, f.content_digest,
           f.classification, f.state, f.superseded_by, f.observed_at, f.expires_at, f.ingested_at,
           f.source_uri, f.source_revision, f.manifest_id, f.ts_config, f.lexical_generation
      FROM pyretrieve.fragments f
     WHERE f.workspace_id = d.workspace_id
       AND f.project_id = d.project_id
       AND f.fragment_id = ANY (p_ids)
       AND f.state = 'active'
       AND f.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY f.fragment_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.fragments(uuid, uuid[]) IS
    'The authoritative records (body, digest, classification, state, times, provenance, generation) for the given ids, only those visible under the bound decision; ids that are absent or not visible are silently left out, alike.';

-- ---------------------------------------------------------------------------------------------
-- Writers
-- ---------------------------------------------------------------------------------------------

-- Bind this transaction's write scope and return the writer's ceiling there; access denied
-- (PR001) alike for an absent scope, a scope without a grant and a caller who is not a writer.
CREATE FUNCTION pyretrieve.bind_write_scope(p_workspace text, p_project text)
RETURNS pyretrieve.classification
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ceiling pyretrieve.classification;
BEGIN
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM set_config('pyretrieve.write_scope', p_workspace || '/' || p_project, true);
    SELECT w.ceiling INTO v_ceiling FROM pyretrieve.write_scope() w;
    IF v_ceiling IS NULL THEN
        PERFORM set_config('pyretrieve.write_scope', '', true);
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    RETURN v_ceiling;
END;
$$;
COMMENT ON FUNCTION pyretrieve.bind_write_scope(text, text) IS
    'Bind this transaction''s write scope to one workspace/project where current_user is a writer with a live grant; returns the writer''s classification ceiling there. Raises PR001 otherwise. The write functions call it; it never widens access.';

CREATE FUNCTION pyretrieve.put_fragment(
    p_workspace text,
    p_project text,
    p_body text,
    p_classification pyretrieve.classification DEFAULT 'internal',
    p_observed_at timestamptz DEFAULT NULL,
    p_expires_at timestamptz DEFAULT NULL,
    p_source_uri text DEFAULT NULL,
    p_source_revision text DEFAULT NULL,
    p_manifest_id text DEFAULT NULL,
    p_ts_config regconfig DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_ceiling pyretrieve.classification := pyretrieve.bind_write_scope(p_workspace, p_project);
    v_id uuid;
    v_config regconfig;
    v_observed timestamptz := coalesce(p_observed_at, now());
BEGIN
    IF p_classification IS NULL OR p_classification > v_ceiling THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    IF p_body IS NULL OR length(p_body) NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'body must be 1 to 1000000 characters';
    END IF;
    IF v_observed = 'infinity' OR v_observed = '-infinity' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'observed_at must be finite';
    END IF;
    IF p_expires_at IS NOT NULL AND p_expires_at <= v_observed THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'expires_at must be after observed_at';
    END IF;
    IF length(p_source_uri) > 2048 OR length(p_source_revision) > 256 OR length(p_manifest_id) > 256 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'provenance field too long';
    END IF;
    SELECT coalesce(p_ts_config, p.ts_config) INTO v_config
      FROM pyretrieve.projects p
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project;

    INSERT INTO pyretrieve.fragments AS f (
        workspace_id, project_id, body, classification, observed_at, expires_at,
        source_uri, source_revision, manifest_id, ts_config)
    VALUES (p_workspace, p_project, p_body, p_classification, v_observed, p_expires_at,
            p_source_uri, p_source_revision, p_manifest_id, v_config)
    ON CONFLICT (workspace_id, project_id, classification, content_digest) WHERE state = 'active'
    DO NOTHING
    RETURNING f.fragment_id INTO v_id;

    IF v_id IS NULL THEN
        -- Idempotent: the same body at the same classification is already active here.
        SELECT f.fragment_id INTO STRICT v_id
          FROM pyretrieve.fragments f
         WHERE f.workspace_id = p_workspace AND f.project_id = p_project
           AND f.classification = p_classification AND f.state = 'active'
           AND f.content_digest = pyretrieve.content_digest(p_body);
    END IF;
    RETURN v_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.put_fragment(text, text, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text, regconfig) IS
    'Store a fragment in a workspace/project where current_user is a writer, at or below the writer''s ceiling; returns its id. Idempotent by content: the same body at the same classification returns the existing active fragment. The database computes content_digest (sha256 of the body), the tsvector and the lexical generation. observed_at defaults to now().';

CREATE FUNCTION pyretrieve.supersede_fragment(
    p_workspace text,
    p_project text,
    p_fragment_id uuid,
    p_body text,
    p_classification pyretrieve.classification DEFAULT NULL,
    p_observed_at timestamptz DEFAULT NULL,
    p_expires_at timestamptz DEFAULT NULL,
    p_source_uri text DEFAULT NULL,
    p_source_revision text DEFAULT NULL,
    p_manifest_id text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    old pyretrieve.fragments;
    v_new uuid;
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    SELECT f.* INTO old
      FROM pyretrieve.fragments f
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project
       AND f.fragment_id = p_fragment_id AND f.state = 'active'
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
    v_new := pyretrieve.put_fragment(
        p_workspace := p_workspace, p_project := p_project, p_body := p_body,
        p_classification := coalesce(p_classification, old.classification),
        p_observed_at := p_observed_at, p_expires_at := p_expires_at,
        p_source_uri := coalesce(p_source_uri, old.source_uri),
        p_source_revision := p_source_revision,
        p_manifest_id := coalesce(p_manifest_id, old.manifest_id),
        p_ts_config := old.ts_config);
    IF v_new = old.fragment_id THEN
        RETURN v_new;
    END IF;
    UPDATE pyretrieve.fragments f
       SET state = 'superseded', superseded_by = v_new
     WHERE f.workspace_id = p_workspace AND f.fragment_id = p_fragment_id;
    RETURN v_new;
END;
$$;
COMMENT ON FUNCTION pyretrieve.supersede_fragment(text, text, uuid, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text) IS
    'Replace an active fragment with new content: stores the new fragment (as put_fragment) and marks the old one superseded by it; returns the new id (the old id when the content and classification are unchanged). Raises PR020 alike for an absent fragment and one the writer may not see.';

CREATE FUNCTION pyretrieve.retract_fragment(p_workspace text, p_project text, p_fragment_id uuid)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    UPDATE pyretrieve.fragments f
       SET state = 'retracted'
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project
       AND f.fragment_id = p_fragment_id AND f.state = 'active';
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
END;
$$;
COMMENT ON FUNCTION pyretrieve.retract_fragment(text, text, uuid) IS
    'Retract an active fragment: it disappears from every search at once. Raises PR020 alike for an absent fragment and one the writer may not see.';

CREATE FUNCTION pyretrieve.put_embedding(
    p_workspace text,
    p_project text,
    p_fragment_id uuid,
    p_model text,
    p_embedding public.vector,
    p_source_digest bytea)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_generation bigint;
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    PERFORM pyretrieve.check_embedding(p_model, p_embedding);
    IF p_source_digest IS NULL OR length(p_source_digest) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'source digest must be 32 bytes (sha256)';
    END IF;
    PERFORM 1 FROM pyretrieve.fragments f
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.fragment_id = p_fragment_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
    INSERT INTO pyretrieve.embeddings AS e (
        workspace_id, project_id, fragment_id, model_id, embedding, source_digest)
    VALUES (p_workspace, p_project, p_fragment_id, p_model, p_embedding, p_source_digest)
    ON CONFLICT (workspace_id, fragment_id, model_id)
    DO UPDATE SET embedding = EXCLUDED.embedding, source_digest = EXCLUDED.source_digest
    RETURNING e.vector_generation INTO v_generation;
    RETURN v_generation;
END;
$$;
COMMENT ON FUNCTION pyretrieve.put_embedding(text, text, uuid, text, public.vector, bytea) IS
    'Store (or replace) the embedding of one fragment for one registered model, with the sha256 digest of the text it was computed from; returns its vector generation. An embedding whose source digest differs from the fragment''s content digest is stale. Raises PR011/PR012 for a bad vector or model and PR020 alike for an absent fragment and one the writer may not see.';

-- ---------------------------------------------------------------------------------------------
-- Admins
-- ---------------------------------------------------------------------------------------------
CREATE FUNCTION pyretrieve.create_workspace(p_workspace text, p_display_name text DEFAULT '')
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    INSERT INTO pyretrieve.workspaces (workspace_id, display_name)
    VALUES (p_workspace, coalesce(p_display_name, ''))
    ON CONFLICT (workspace_id) DO NOTHING;
    RETURN p_workspace;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_workspace(text, text) IS
    'Create a workspace (idempotent); returns its id. Admins only.';

CREATE FUNCTION pyretrieve.create_project(
    p_workspace text, p_project text, p_ts_config regconfig DEFAULT 'pg_catalog.english')
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM 1 FROM pyretrieve.workspaces w WHERE w.workspace_id = p_workspace;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'workspace not found';
    END IF;
    INSERT INTO pyretrieve.projects (workspace_id, project_id, ts_config)
    VALUES (p_workspace, p_project, coalesce(p_ts_config, 'pg_catalog.english'))
    ON CONFLICT (workspace_id, project_id) DO NOTHING;
    INSERT INTO pyretrieve.scope_generations (workspace_id, project_id, ts_configs)
    VALUES (p_workspace, p_project, ARRAY[coalesce(p_ts_config, 'pg_catalog.english')]::regconfig[])
    ON CONFLICT (workspace_id, project_id) DO NOTHING;
    RETURN p_project;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_project(text, text, regconfig) IS
    'Create a project in a workspace (idempotent) with its default text-search configuration; returns its id. Admins only.';

CREATE FUNCTION pyretrieve.grant_access(
    p_principal regrole,
    p_workspace text,
    p_project text,
    p_purpose text,
    p_ceiling pyretrieve.classification,
    p_max_age interval DEFAULT NULL,
    p_semantic_policy pyretrieve.semantic_policy DEFAULT 'optional',
    p_expires_at timestamptz DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_id uuid;
BEGIN
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM pyretrieve.check_identifier(p_purpose, 'purpose');
    IF p_principal IS NULL OR p_ceiling IS NULL OR p_semantic_policy IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'principal, ceiling and semantic policy are required';
    END IF;
    IF p_max_age IS NOT NULL AND (p_max_age <= interval '0'
        OR date_part('month', p_max_age) <> 0 OR date_part('year', p_max_age) <> 0) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'max_age must be positive days/hours (no months or years)';
    END IF;
    -- Days become 24-hour spans (see the CHECK on grants.max_age).
    p_max_age := make_interval(secs => extract(epoch FROM p_max_age));
    PERFORM 1 FROM pyretrieve.projects p WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'project not found';
    END IF;
    INSERT INTO pyretrieve.grants AS g (
        workspace_id, project_id, principal, purpose, ceiling, max_age, semantic_policy, expires_at)
    VALUES (p_workspace, p_project, p_principal, p_purpose, p_ceiling, p_max_age, p_semantic_policy, p_expires_at)
    ON CONFLICT (workspace_id, project_id, principal, purpose) DO UPDATE
       SET ceiling = EXCLUDED.ceiling, max_age = EXCLUDED.max_age,
           semantic_policy = EXCLUDED.semantic_policy, expires_at = EXCLUDED.expires_at,
           granted_by = CURRENT_USER, granted_at = now()
    RETURNING g.grant_id INTO v_id;
    RETURN v_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.grant_access(regrole, text, text, text, pyretrieve.classification, interval, pyretrieve.semantic_policy, timestamptz) IS
    'Grant a principal (a role; members that inherit it are covered too) read access to a workspace/project for a purpose, with a classification ceiling, an optional max_age (freshness window), a semantic policy (disabled | optional | required) and an optional expiry. Writers write where they hold a grant, up to its ceiling. Replaces an existing grant for the same principal, scope and purpose; returns the grant id. Admins only.';

CREATE FUNCTION pyretrieve.revoke_access(p_principal regrole, p_workspace text, p_project text, p_purpose text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM pyretrieve.grants g
     WHERE g.workspace_id = p_workspace AND g.project_id = p_project
       AND g.principal = p_principal AND g.purpose = p_purpose;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION pyretrieve.revoke_access(regrole, text, text, text) IS
    'Remove a principal''s grant for a workspace/project and purpose; returns whether one existed. Decisions already made keep their record; new requests are denied. Admins only.';

-- SECURITY DEFINER, written reason: creating an index on pyretrieve.embeddings requires owning
-- the table, and admins must not own it. The function reads the model from the registry
-- (never from its arguments' text), quotes every identifier, and only admins may execute it.
CREATE FUNCTION pyretrieve.create_model_index(p_model text)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m pyretrieve.embedding_models;
    v_name text;
BEGIN
    SELECT * INTO m FROM pyretrieve.embedding_models em WHERE em.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    v_name := format('embeddings_hnsw_m%s', m.model_serial);
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON pyretrieve.embeddings USING hnsw ((embedding::public.vector(%s)) public.vector_cosine_ops) WHERE model_id = %L',
        v_name, m.dimension, m.model_id);
    RETURN v_name;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_model_index(text) IS
    'Create the per-model HNSW index (cosine, on the embedding cast to the model''s dimension, partial on the model). SECURITY DEFINER because index creation needs the table owner; executable by admins only.';

CREATE FUNCTION pyretrieve.register_model(p_model text, p_dimension integer)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_dimension integer;
BEGIN
    IF p_model IS NULL OR p_model !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid model id';
    END IF;
    IF p_dimension IS NULL OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'dimension must be between 1 and 2000';
    END IF;
    INSERT INTO pyretrieve.embedding_models (model_id, dimension) VALUES (p_model, p_dimension)
    ON CONFLICT (model_id) DO NOTHING;
    SELECT m.dimension INTO v_dimension FROM pyretrieve.embedding_models m WHERE m.model_id = p_model;
    IF v_dimension <> p_dimension THEN
        RAISE EXCEPTION USING ERRCODE = 'PR013', MESSAGE = 'model already registered with another dimension';
    END IF;
    PERFORM pyretrieve.create_model_index(p_model);
    RETURN p_model;
END;
$$;
COMMENT ON FUNCTION pyretrieve.register_model(text, integer) IS
    'Register an embedding model and its dimension (idempotent) and create its HNSW index; returns the model id. Raises PR013 if the model exists with another dimension. Admins only.';

-- ---------------------------------------------------------------------------------------------
-- One fused, explained search for SQL callers. The same steps, in the same order and with the
-- same float arithmetic, as the Python client and its pure ranker (a test compares them):
--   rrf        = (0.0 + w_lex / (60 + lexical_rank)) + w_vec / (60 + vector_rank)
--   freshness  = least(1.0, greatest(0.5, 1.0 - 0.5 * (age_us / max_age_us)))   (1.0 without max_age)
--   final      = rrf * freshness; order by final desc, rrf desc, content_digest, fragment_id
--   confidence = least(1, greatest(0, (rrf / ideal) * freshness * (61 / (60 + rank)) * semantic_factor))
-- ---------------------------------------------------------------------------------------------

-- sha256 of the embedding as float32 little-endian bytes, the digest the client records.
-- vector_send() writes a 4-byte header then big-endian float4 values.
CREATE FUNCTION pyretrieve.embedding_digest(p_embedding public.vector)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT pg_catalog.sha256(pg_catalog.string_agg(
               pg_catalog.substr(b.raw, 5 + 4 * i + 3, 1)
            || pg_catalog.substr(b.raw, 5 + 4 * i + 2, 1)
            || pg_catalog.substr(b.raw, 5 + 4 * i + 1, 1)
            || pg_catalog.substr(b.raw, 5 + 4 * i, 1), ''::bytea ORDER BY i))
      FROM (SELECT public.vector_send(p_embedding) AS raw) b,
           pg_catalog.generate_series(0, public.vector_dims(p_embedding) - 1) AS i;
END;
COMMENT ON FUNCTION pyretrieve.embedding_digest(public.vector) IS
    'sha256 of an embedding as float32 little-endian bytes: the embedding digest that authorize() records instead of the values.';

CREATE FUNCTION pyretrieve.search(
    p_workspace text,
    p_project text,
    p_purpose text,
    p_query text,
    p_embedding public.vector DEFAULT NULL,
    p_model text DEFAULT NULL,
    p_limit integer DEFAULT 10,
    p_mode text DEFAULT 'hybrid')
RETURNS TABLE (
    rank integer, fragment_id uuid, content_digest bytea, body text, final_score double precision,
    rrf_score double precision, freshness double precision, confidence double precision,
    explanation jsonb)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    d record;
    v_wants_vector boolean;
    v_required boolean;
    v_intent text;
    v_embedding_digest bytea;
    v_lexical jsonb;
    v_vector jsonb;
    v_status text;
    v_reason text;
    v_evidence jsonb := '{}'::jsonb;
    v_ideal double precision := 0.0;
    v_factor double precision;
    v_stale integer;
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('hybrid', 'lexical', 'vector') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'mode must be hybrid, lexical or vector';
    END IF;
    IF p_query IS NULL OR length(p_query) NOT BETWEEN 1 AND 4096 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query must be 1 to 4096 characters';
    END IF;
    v_wants_vector := p_mode <> 'lexical';
    IF v_wants_vector AND p_embedding IS NOT NULL THEN
        v_embedding_digest := pyretrieve.embedding_digest(p_embedding);
    END IF;
    v_intent := CASE WHEN NOT v_wants_vector THEN 'disabled'
                     WHEN p_mode = 'vector' THEN 'required' ELSE 'optional' END;

    -- 1. Policy.
    SELECT * INTO d FROM pyretrieve.authorize(
        p_workspace => p_workspace, p_project => p_project, p_purpose => p_purpose,
        p_query_digest => pyretrieve.content_digest(p_query), p_semantic_intent => v_intent,
        p_embedding_digest => v_embedding_digest, p_requested_limit => p_limit);
    v_required := p_mode = 'vector' OR d.semantic_policy = 'required';

    -- 2. Lexical candidates (a failure here is a hard error).
    IF p_mode <> 'vector' THEN
        SELECT coalesce(jsonb_agg(to_jsonb(c) ORDER BY c.rank), '[]'::jsonb) INTO v_lexical
          FROM pyretrieve.lexical_candidates(d.decision_id, p_query, d.candidate_limit) c;
        v_ideal := v_ideal + 1.0::double precision / 61.0::double precision;
    END IF;

    -- 3. Vector candidates, when mode, intent and policy allow and an embedding exists.
    IF NOT v_wants_vector THEN
        v_status := 'not_requested';
    ELSIF d.semantic_policy = 'disabled' THEN
        v_status := 'degraded';
        v_reason := 'disabled';
        v_evidence := jsonb_build_object('policy', 'disabled');
    ELSIF p_embedding IS NULL OR p_model IS NULL THEN
        v_status := 'degraded';
        v_reason := 'missing_embedding';
        v_evidence := jsonb_build_object('model', p_model);
    ELSE
        BEGIN
            SELECT coalesce(jsonb_agg(to_jsonb(c) ORDER BY c.rank), '[]'::jsonb),
                   count(*) FILTER (WHERE c.source_digest <> c.content_digest
                                       OR c.vector_generation < c.lexical_generation)
              INTO v_vector, v_stale
              FROM pyretrieve.vector_candidates(d.decision_id, p_model, p_embedding, d.candidate_limit) c;
            IF v_stale > 0 THEN
                v_status := 'degraded';
                v_reason := 'stale';
                v_evidence := jsonb_build_object('model', p_model, 'stale_candidates', v_stale,
                                                 'candidates', jsonb_array_length(v_vector));
                v_vector := NULL;
            ELSE
                v_status := 'used';
                v_evidence := jsonb_build_object('model', p_model);
                v_ideal := v_ideal + 1.0::double precision / 61.0::double precision;
            END IF;
        EXCEPTION
            WHEN SQLSTATE 'PR012' THEN
                v_status := 'degraded'; v_reason := 'unavailable';
                v_evidence := jsonb_build_object('model', p_model, 'cause', 'unknown_model');
            WHEN SQLSTATE 'PR011' THEN
                v_status := 'degraded'; v_reason := 'corrupt';
                v_evidence := jsonb_build_object('model', p_model, 'cause', 'invalid_embedding');
        END;
    END IF;
    IF v_required AND v_status IS DISTINCT FROM 'used' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR030', MESSAGE = 'semantic retrieval is required but was not available';
    END IF;
    v_factor := CASE WHEN v_status = 'degraded' THEN 0.75::double precision ELSE 1.0::double precision END;

    -- 4. Authoritative records, fusion, freshness, total order, confidence, explanation.
    RETURN QUERY
    WITH lex AS (
        SELECT (x->>'rank')::integer AS rank, (x->>'fragment_id')::uuid AS fragment_id,
               (x->>'score')::double precision AS score
          FROM jsonb_array_elements(coalesce(v_lexical, '[]'::jsonb)) x
    ), vec AS (
        SELECT (x->>'rank')::integer AS rank, (x->>'fragment_id')::uuid AS fragment_id,
               (x->>'distance')::double precision AS distance,
               (x->>'vector_generation')::bigint AS vector_generation
          FROM jsonb_array_elements(coalesce(v_vector, '[]'::jsonb)) x
    ), rec AS (
        SELECT r.*
          FROM pyretrieve.fragments(d.decision_id, ARRAY(
                   SELECT l.fragment_id FROM lex l UNION SELECT v.fragment_id FROM vec v)) r
    ), fused AS (
        SELECT r.*, l.rank AS lexical_rank, l.score AS lexical_score,
               v.rank AS vector_rank, v.distance, v.vector_generation,
               1.0::double precision / (60 + l.rank)::double precision AS lexical_contribution,
               1.0::double precision / (60 + v.rank)::double precision AS vector_contribution,
               (extract(epoch FROM d.evaluated_at - r.observed_at) * 1000000)::bigint AS age_us,
               (extract(epoch FROM d.max_age) * 1000000)::bigint AS max_age_us
          FROM rec r
          LEFT JOIN lex l ON l.fragment_id = r.fragment_id
          LEFT JOIN vec v ON v.fragment_id = r.fragment_id
    ), scored AS (
        SELECT f.*,
               (0.0::double precision + coalesce(f.lexical_contribution, 0.0::double precision))
                   + coalesce(f.vector_contribution, 0.0::double precision) AS rrf,
               CASE WHEN f.max_age_us IS NULL THEN 1.0::double precision
                    ELSE least(1.0::double precision, greatest(0.5::double precision,
                         1.0::double precision - 0.5::double precision
                             * (f.age_us::double precision / f.max_age_us::double precision)))
               END AS fresh
          FROM fused f
    ), ordered AS (
        SELECT s.*, s.rrf * s.fresh AS final,
               (row_number() OVER (ORDER BY s.rrf * s.fresh DESC, s.rrf DESC,
                                            s.content_digest, s.fragment_id))::integer AS fused_rank
          FROM scored s
    ), top AS (
        SELECT o.*,
               least(1.0::double precision, greatest(0.0::double precision,
                   (o.rrf / v_ideal) * o.fresh * (61.0::double precision / (60.0::double precision + o.fused_rank))
                   * v_factor)) AS conf
          FROM ordered o
         WHERE o.fused_rank <= p_limit
    )
    SELECT t.fused_rank, t.fragment_id, t.content_digest, t.body, t.final, t.rrf, t.fresh, t.conf,
           jsonb_build_object(
               'fragment', jsonb_build_object('workspace_id', t.workspace_id, 'project_id', t.project_id,
                                              'fragment_id', t.fragment_id),
               'content', jsonb_build_object('text', t.body, 'trust', 'untrusted-data'),
               'provenance', jsonb_build_object(
                   'source_uri', t.source_uri, 'source_revision', t.source_revision,
                   'manifest_id', t.manifest_id, 'observed_at', t.observed_at,
                   'retrieved_at', d.evaluated_at, 'expires_at', t.expires_at,
                   'ingested_at', t.ingested_at, 'content_digest', encode(t.content_digest, 'hex')),
               'lexical', CASE WHEN t.lexical_rank IS NULL THEN NULL ELSE jsonb_build_object(
                   'rank', t.lexical_rank, 'score', t.lexical_score,
                   'contribution', t.lexical_contribution, 'weight', 1.0) END,
               'vector', CASE WHEN t.vector_rank IS NULL THEN NULL ELSE jsonb_build_object(
                   'rank', t.vector_rank, 'distance', t.distance, 'metric', 'cosine_distance',
                   'contribution', t.vector_contribution, 'weight', 1.0) END,
               'rrf', jsonb_build_object('k', 60, 'rank_base', 1, 'score', t.rrf,
                   'formula', 'sum over modalities of w/(60+rank), 1-based ranks, a missing modality contributes 0'),
               'freshness', jsonb_build_object('factor', t.fresh, 'age_us', t.age_us, 'max_age_us', t.max_age_us),
               'final_score', t.final,
               'confidence', t.conf,
               'tie_break', encode(t.content_digest, 'hex') || ':' || t.fragment_id::text,
               'generations', jsonb_build_object('lexical', t.lexical_generation, 'vector', t.vector_generation),
               'semantic', jsonb_build_object('status', v_status, 'reason', v_reason, 'evidence', v_evidence,
                                              'lowers_confidence', v_status = 'degraded'),
               'semantic_query_digest', encode(v_embedding_digest, 'hex'),
               'decision_id', d.decision_id)
      FROM top t
     ORDER BY t.fused_rank;
END;
$$;
COMMENT ON FUNCTION pyretrieve.search(text, text, text, text, public.vector, text, integer, text) IS
    'One fused, explained search: authorize, lexical candidates, vector candidates (when the mode and the grant''s semantic policy allow and an embedding and model are given), then Reciprocal Rank Fusion (1-based ranks, k = 60, a missing modality contributes 0), a freshness factor within the grant''s max_age, a total order (final score, RRF score, content digest, fragment id), confidence and a jsonb explanation per result. Same order as the Python client. Raises PR001 on deny and PR030 when semantic retrieval is required but unavailable.';

-- ---------------------------------------------------------------------------------------------
-- Privileges. Nothing for PUBLIC; each group gets what its functions need, and RLS decides rows.
-- ---------------------------------------------------------------------------------------------
REVOKE ALL ON ALL TABLES IN SCHEMA pyretrieve FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA pyretrieve FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pyretrieve FROM PUBLIC;
REVOKE ALL ON TYPE pyretrieve.classification, pyretrieve.fragment_state, pyretrieve.semantic_policy,
    pyretrieve.identifier FROM PUBLIC;

GRANT USAGE ON SCHEMA pyretrieve TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin;
GRANT USAGE ON TYPE pyretrieve.classification, pyretrieve.fragment_state, pyretrieve.semantic_policy,
    pyretrieve.identifier TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin;

GRANT SELECT ON pyretrieve.installation, pyretrieve.workspaces, pyretrieve.projects,
    pyretrieve.scope_generations, pyretrieve.fragments, pyretrieve.embedding_models,
    pyretrieve.embeddings, pyretrieve.grants, pyretrieve.decisions
    TO pyretrieve_reader;
GRANT INSERT (workspace_id, project_id, purpose, grant_id, ceiling, max_age, semantic_policy,
              requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest)
    ON pyretrieve.decisions TO pyretrieve_reader;

GRANT INSERT (workspace_id, project_id, body, classification, observed_at, expires_at,
              source_uri, source_revision, manifest_id, ts_config)
    ON pyretrieve.fragments TO pyretrieve_writer;
GRANT UPDATE (state, superseded_by) ON pyretrieve.fragments TO pyretrieve_writer;
GRANT INSERT (workspace_id, project_id, fragment_id, model_id, embedding, source_digest),
      UPDATE (embedding, source_digest)
    ON pyretrieve.embeddings TO pyretrieve_writer;
GRANT UPDATE (lexical_generation, vector_generation, ts_configs)
    ON pyretrieve.scope_generations TO pyretrieve_writer;
GRANT USAGE ON SEQUENCE pyretrieve.generation_seq TO pyretrieve_writer;

GRANT SELECT ON pyretrieve.installation, pyretrieve.embedding_models, pyretrieve.decisions
    TO pyretrieve_admin;
GRANT SELECT, INSERT, UPDATE, DELETE ON pyretrieve.workspaces, pyretrieve.projects, pyretrieve.grants
    TO pyretrieve_admin;
GRANT SELECT, INSERT ON pyretrieve.scope_generations TO pyretrieve_admin;
GRANT INSERT (model_id, dimension) ON pyretrieve.embedding_models TO pyretrieve_admin;

-- Helpers called inside policies run as the caller, so every group needs them.
GRANT EXECUTE ON FUNCTION pyretrieve.setting_uuid(text), pyretrieve.bound_decision(),
    pyretrieve.effective_grant(text, text, text),
    pyretrieve.content_digest(text),
    pyretrieve.write_scope(), pyretrieve.check_identifier(text, text)
    TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin;
GRANT EXECUTE ON FUNCTION
    pyretrieve.authorize(text, text, text, bytea, text, bytea, integer),
    pyretrieve.require_decision(uuid),
    pyretrieve.or_tsquery(regconfig, text),
    pyretrieve.check_embedding(text, public.vector),
    pyretrieve.lexical_candidates(uuid, text, integer),
    pyretrieve.vector_candidates(uuid, text, public.vector, integer),
    pyretrieve.fragments(uuid, uuid[]),
    pyretrieve.embedding_digest(public.vector),
    pyretrieve.search(text, text, text, text, public.vector, text, integer, text)
    TO pyretrieve_reader;
GRANT EXECUTE ON FUNCTION
    pyretrieve.bind_write_scope(text, text),
    pyretrieve.put_fragment(text, text, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text, regconfig),
    pyretrieve.supersede_fragment(text, text, uuid, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text),
    pyretrieve.retract_fragment(text, text, uuid),
    pyretrieve.put_embedding(text, text, uuid, text, public.vector, bytea),
    pyretrieve.check_embedding(text, public.vector),
    pyretrieve.stamp_lexical_generation(), pyretrieve.stamp_vector_generation(),
    pyretrieve.bump_scope_lexical(), pyretrieve.bump_scope_vector(),
    pyretrieve.visible_successor(text, text, uuid), pyretrieve.scope_generations_forward()
    TO pyretrieve_writer;
GRANT EXECUTE ON FUNCTION
    pyretrieve.create_workspace(text, text),
    pyretrieve.create_project(text, text, regconfig),
    pyretrieve.grant_access(regrole, text, text, text, pyretrieve.classification, interval, pyretrieve.semantic_policy, timestamptz),
    pyretrieve.revoke_access(regrole, text, text, text),
    pyretrieve.register_model(text, integer),
    pyretrieve.create_model_index(text)
    TO pyretrieve_admin;

INSERT INTO pyretrieve.installation (schema_version, created_vector)
VALUES ('0001', pg_catalog.current_setting('pyretrieve.install_creates_vector')::boolean);

RESET ROLE;
