-- pyretrieve migration 0006: tools for LLM agents.
--
-- Self-contained: creates the tools and tool_rollouts tables, their policies and privileges,
-- and the tool functions of the SQL API (sql/schema/65_tools.sql as of this migration); the
-- down script drops exactly these.

GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------------------------
-- Tools for LLM agents. A tool IS a fragment: its body is searchable text built from the name,
-- the description and the arguments' names and descriptions (never raw JSON), so grants, RLS,
-- BM25, vectors, freshness, supersession, classification and embedding staleness all apply
-- unchanged. pyretrieve.tools holds one row per tool fragment (one per schema version): the
-- name, the schema, its version, the operation family, tags and server. Its rows carry the
-- fragment's classification and times (copied when the row is written, never by the caller);
-- every function also joins the fragment, so a tool row is returned only when both the tools
-- policy and the fragments policy admit it.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE pyretrieve.tools (
    workspace_id    pyretrieve.identifier NOT NULL,
    project_id      pyretrieve.identifier NOT NULL,
    fragment_id     uuid NOT NULL,
    name            text NOT NULL CHECK (name ~ '^[A-Za-z0-9_.:/-]{1,128}$'),
    schema          jsonb NOT NULL CHECK (pg_catalog.jsonb_typeof(schema) = 'object'),
    schema_version  integer NOT NULL CHECK (schema_version >= 1),
    operation       text NOT NULL
                    CHECK (operation IN ('delete', 'update', 'create', 'get', 'search', 'list', 'other')),
    tags            text[] NOT NULL DEFAULT '{}' CHECK (pg_catalog.cardinality(tags) <= 32),
    server          text CHECK (pg_catalog.length(server) <= 256),
    classification  pyretrieve.classification NOT NULL,
    observed_at     timestamptz NOT NULL,
    expires_at      timestamptz,
    registered_at   timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (workspace_id, fragment_id),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects,
    FOREIGN KEY (workspace_id, fragment_id) REFERENCES pyretrieve.fragments (workspace_id, fragment_id)
);
-- Not unique: a writer whose ceiling is below a same-named hidden tool registers its own row
-- rather than colliding with (and so detecting) the hidden one.
CREATE INDEX tools_name_idx ON pyretrieve.tools (workspace_id, project_id, name);
COMMENT ON TABLE pyretrieve.tools IS
    'Tools for LLM agents: one row per tool fragment (schema version) with its name, JSON schema, operation family, tags and server, and the fragment''s classification and times. The fragment is the searchable text; supersession keeps one active version per name.';

-- Adaptive tool selection is rolled out per project: off, eval (computed and logged, not
-- applied), canary (5% of principals), majority (50%), full.
CREATE TABLE pyretrieve.tool_rollouts (
    workspace_id  pyretrieve.identifier NOT NULL,
    project_id    pyretrieve.identifier NOT NULL,
    stage         text NOT NULL CHECK (stage IN ('off', 'eval', 'canary', 'majority', 'full')),
    updated_by    name NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (workspace_id, project_id),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects
);
COMMENT ON TABLE pyretrieve.tool_rollouts IS
    'Per-project rollout stage of adaptive tool selection (off | eval | canary | majority | full). It changes how many authorised tools are offered, never which tools are authorised.';

ALTER TABLE pyretrieve.tools          ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.tool_rollouts  ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;

-- Tools: the fragments' filters on the columns each tool row carries (the functions join the
-- fragment for its state, so a row must pass both policies).
CREATE POLICY tools_read ON pyretrieve.tools FOR SELECT TO pyretrieve_api
    USING ((workspace_id = (SELECT d.workspace_id FROM pyretrieve.bound_decision() d)
       AND project_id = (SELECT d.project_id FROM pyretrieve.bound_decision() d)
       AND classification <= (SELECT d.ceiling FROM pyretrieve.bound_decision() d)
       AND observed_at <= (SELECT d.evaluated_at FROM pyretrieve.bound_decision() d)
       AND observed_at >= coalesce((SELECT d.evaluated_at - d.max_age FROM pyretrieve.bound_decision() d),
                                   '-infinity'::timestamptz)
       AND (expires_at IS NULL OR expires_at > (SELECT d.evaluated_at FROM pyretrieve.bound_decision() d)))
        OR (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w)));
CREATE POLICY tools_insert ON pyretrieve.tools FOR INSERT TO pyretrieve_api
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));
CREATE POLICY tools_update ON pyretrieve.tools FOR UPDATE TO pyretrieve_api
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w))
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));

-- Rollout stages: the decision's own scope for readers, everything for admins.
CREATE POLICY tool_rollouts_read ON pyretrieve.tool_rollouts FOR SELECT TO pyretrieve_api
    USING ((workspace_id = (SELECT d.workspace_id FROM pyretrieve.bound_decision() d)
            AND project_id = (SELECT d.project_id FROM pyretrieve.bound_decision() d))
        OR (SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY tool_rollouts_admin_insert ON pyretrieve.tool_rollouts FOR INSERT TO pyretrieve_api
    WITH CHECK ((SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY tool_rollouts_admin_update ON pyretrieve.tool_rollouts FOR UPDATE TO pyretrieve_api
    USING ((SELECT pyretrieve.caller_in('pyretrieve_admin')))
    WITH CHECK ((SELECT pyretrieve.caller_in('pyretrieve_admin')));

GRANT SELECT, INSERT (workspace_id, project_id, fragment_id, name, schema, schema_version, operation,
                      tags, server, classification, observed_at, expires_at),
      UPDATE (schema, schema_version, operation, tags, server)
    ON pyretrieve.tools TO pyretrieve_api;
GRANT SELECT, INSERT (workspace_id, project_id, stage, updated_by),
      UPDATE (stage, updated_by, updated_at)
    ON pyretrieve.tool_rollouts TO pyretrieve_api;

-- The searchable text of a tool: the name split into words (snake_case, camelCase, dots), the
-- description, then one line per argument "- name (type): description One of: a, b." with
-- nested fields flattened as parent.child (list items parent[].child). Never raw JSON.
CREATE FUNCTION pyretrieve.tool_argument_lines(p_properties jsonb, p_prefix text)
RETURNS SETOF text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    v_path text;
    v_line text;
    v_enum text;
BEGIN
    IF p_properties IS NULL OR jsonb_typeof(p_properties) <> 'object' THEN
        RETURN;
    END IF;
    FOR r IN SELECT e.key, e.value FROM jsonb_each(p_properties) AS e ORDER BY e.key COLLATE "C" LOOP
        v_path := p_prefix || r.key;
        IF jsonb_typeof(r.value) <> 'object' THEN
            RETURN NEXT '- ' || v_path;
            CONTINUE;
        END IF;
        v_line := '- ' || v_path;
        IF jsonb_typeof(r.value -> 'type') = 'string' THEN
            v_line := v_line || ' (' || (r.value ->> 'type') || ')';
        END IF;
        IF jsonb_typeof(r.value -> 'description') = 'string' THEN
            v_line := v_line || ': ' || (r.value ->> 'description');
        END IF;
        IF jsonb_typeof(r.value -> 'enum') = 'array' THEN
            SELECT string_agg(x.v #>> '{}', ', ' ORDER BY x.n) INTO v_enum
              FROM jsonb_array_elements(r.value -> 'enum') WITH ORDINALITY AS x(v, n)
             WHERE x.n <= 10;
            IF v_enum IS NOT NULL THEN
                v_line := v_line || ' One of: ' || v_enum || '.';
            END IF;
        END IF;
        RETURN NEXT v_line;
        RETURN QUERY SELECT * FROM pyretrieve.tool_argument_lines(r.value -> 'properties', v_path || '.');
        IF jsonb_typeof(r.value -> 'items') = 'object' THEN
            RETURN QUERY SELECT * FROM pyretrieve.tool_argument_lines(r.value -> 'items' -> 'properties', v_path || '[].');
        END IF;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_argument_lines(jsonb, text) IS
    'One line per argument of a JSON-schema properties object ("- name (type): description One of: ..."), nested fields flattened as parent.child and parent[].child, in bytewise key order.';

CREATE FUNCTION pyretrieve.tool_text(p_schema jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name text := p_schema ->> 'name';
    v_words text;
    v_text text;
    v_args text;
BEGIN
    v_words := regexp_replace(regexp_replace(v_name, '([a-z0-9])([A-Z])', '\1 \2', 'g'), '[_.:/-]+', ' ', 'g');
    v_text := v_name || E'\n' || lower(v_words);
    IF jsonb_typeof(p_schema -> 'description') = 'string' THEN
        v_text := v_text || E'\n' || (p_schema ->> 'description');
    END IF;
    SELECT string_agg(l, E'\n') INTO v_args
      FROM pyretrieve.tool_argument_lines(p_schema -> 'parameters' -> 'properties', '') AS l;
    IF v_args IS NOT NULL THEN
        v_text := v_text || E'\nParameters:\n' || v_args;
    END IF;
    RETURN v_text;
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_text(jsonb) IS
    'The searchable body of a tool fragment, built from its schema: the name, the name split into words, the description and one line per argument (never raw JSON).';

SET LOCAL ROLE pyretrieve_api;

CREATE FUNCTION pyretrieve.put_tool(
    p_workspace text,
    p_project text,
    p_schema jsonb,
    p_operation text DEFAULT 'other',
    p_tags text[] DEFAULT '{}',
    p_server text DEFAULT NULL,
    p_classification pyretrieve.classification DEFAULT 'internal',
    p_expires_at timestamptz DEFAULT NULL,
    p_observed_at timestamptz DEFAULT NULL)
RETURNS TABLE (fragment_id uuid, schema_version integer, status text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_name text;
    v_body text;
    v_tags text[] := coalesce(p_tags, '{}');
    old record;
    v_new uuid;
    v_version integer := 1;
    v_found boolean;
    f pyretrieve.fragments;
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_schema IS NULL OR jsonb_typeof(p_schema) <> 'object' OR jsonb_typeof(p_schema -> 'name') <> 'string'
       OR (p_schema ->> 'name') !~ '^[A-Za-z0-9_.:/-]{1,128}$'
       OR (p_schema ? 'description' AND jsonb_typeof(p_schema -> 'description') <> 'string')
       OR (p_schema ? 'parameters' AND jsonb_typeof(p_schema -> 'parameters') <> 'object')
       OR octet_length(p_schema::text) > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid tool schema';
    END IF;
    IF p_operation IS NULL OR p_operation NOT IN ('delete', 'update', 'create', 'get', 'search', 'list', 'other') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid operation family';
    END IF;
    IF cardinality(v_tags) > 32 OR EXISTS (SELECT 1 FROM unnest(v_tags) t WHERE t IS NULL OR length(t) NOT BETWEEN 1 AND 64)
       OR length(p_server) > 256 OR p_classification IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid tool tags, server or classification';
    END IF;
    v_name := p_schema ->> 'name';
    v_body := pyretrieve.tool_text(p_schema);

    -- The active version of this name the writer may see (up to its ceiling). A hidden one
    -- above the ceiling is not found, and the writer gets its own row: no existence oracle.
    SELECT t.fragment_id, t.schema, t.schema_version, t.operation, t.tags, t.server,
           fr.classification, fr.expires_at
      INTO old
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments fr ON fr.workspace_id = t.workspace_id AND fr.fragment_id = t.fragment_id
     WHERE t.workspace_id = p_workspace AND t.project_id = p_project AND t.name = v_name
       AND fr.project_id = p_project AND fr.state = 'active'
     ORDER BY t.schema_version DESC, fr.classification DESC, t.fragment_id
     LIMIT 1;

    v_found := FOUND;
    IF v_found AND old.classification = p_classification AND old.schema = p_schema THEN
        IF old.operation = p_operation AND old.tags = v_tags AND old.server IS NOT DISTINCT FROM p_server THEN
            RETURN QUERY SELECT old.fragment_id, old.schema_version, 'unchanged'::text;
            RETURN;
        END IF;
        UPDATE pyretrieve.tools t SET operation = p_operation, tags = v_tags, server = p_server
         WHERE t.workspace_id = p_workspace AND t.fragment_id = old.fragment_id;
        RETURN QUERY SELECT old.fragment_id, old.schema_version, 'updated'::text;
        RETURN;
    END IF;
    IF v_found THEN
        v_new := pyretrieve.supersede_fragment(
            p_workspace := p_workspace, p_project := p_project, p_fragment_id := old.fragment_id,
            p_body := v_body, p_classification := p_classification, p_observed_at := p_observed_at,
            p_expires_at := p_expires_at, p_source_uri := 'tool:' || v_name);
        v_version := old.schema_version + CASE WHEN old.schema = p_schema THEN 0 ELSE 1 END;
        IF v_new = old.fragment_id THEN
            -- The searchable text is the same (the change is in defaults, required arguments
            -- or other constraints): the fragment stays, the tool row records the new schema.
            UPDATE pyretrieve.tools t
               SET schema = p_schema, schema_version = v_version, operation = p_operation,
                   tags = v_tags, server = p_server
             WHERE t.workspace_id = p_workspace AND t.fragment_id = old.fragment_id;
            RETURN QUERY SELECT old.fragment_id, v_version, 'updated'::text;
            RETURN;
        END IF;
    ELSE
        v_new := pyretrieve.put_fragment(
            p_workspace := p_workspace, p_project := p_project, p_body := v_body,
            p_classification := p_classification, p_observed_at := p_observed_at,
            p_expires_at := p_expires_at, p_source_uri := 'tool:' || v_name);
    END IF;

    SELECT fr.* INTO STRICT f FROM pyretrieve.fragments fr
     WHERE fr.workspace_id = p_workspace AND fr.fragment_id = v_new;
    INSERT INTO pyretrieve.tools AS t (
        workspace_id, project_id, fragment_id, name, schema, schema_version, operation, tags, server,
        classification, observed_at, expires_at)
    VALUES (p_workspace, p_project, v_new, v_name, p_schema, v_version, p_operation, v_tags, p_server,
            f.classification, f.observed_at, f.expires_at)
    ON CONFLICT (workspace_id, fragment_id) DO NOTHING;
    RETURN QUERY SELECT v_new, v_version, CASE WHEN v_found THEN 'superseded' ELSE 'created' END;
END;
$$;
COMMENT ON FUNCTION pyretrieve.put_tool(text, text, jsonb, text, text[], text, pyretrieve.classification, timestamptz, timestamptz) IS
    'Register a tool (a JSON schema with name, description and parameters) in a workspace/project where the caller is a writer: stores a fragment whose body is pyretrieve.tool_text(schema) and a tools row. Re-registering an unchanged tool writes nothing (status unchanged); a changed schema supersedes the active version''s fragment and bumps schema_version (status superseded; when the searchable text is unchanged, e.g. only defaults or required arguments differ, the same fragment keeps the new schema: status updated); changed tags, server or operation alone update the row (status updated). Raises PR010 for an invalid schema, operation family, tags or server. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.tool_entries(p_decision uuid, p_ids uuid[])
RETURNS TABLE (fragment_id uuid, name text, schema_version integer, operation text, tags text[],
               server text, schema_chars integer)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 1000 ids';
    END IF;
    RETURN QUERY
    SELECT t.fragment_id, t.name, t.schema_version, t.operation, t.tags, t.server,
           length(t.schema::text)
      FROM unnest(p_ids) AS u(id)
      JOIN pyretrieve.tools t ON t.workspace_id = d.workspace_id AND t.fragment_id = u.id
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_entries(uuid, uuid[]) IS
    'The tool metadata (name, schema version, operation family, tags, server, schema size in characters; not the schema) of the given fragment ids that are tools the transaction''s decision admits; absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.tool_schemas(p_decision uuid, p_ids uuid[])
RETURNS TABLE (fragment_id uuid, name text, schema_version integer, schema jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 1000 ids';
    END IF;
    RETURN QUERY
    SELECT t.fragment_id, t.name, t.schema_version, t.schema
      FROM unnest(p_ids) AS u(id)
      JOIN pyretrieve.tools t ON t.workspace_id = d.workspace_id AND t.fragment_id = u.id
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_schemas(uuid, uuid[]) IS
    'The JSON schemas of the given fragment ids that are tools the transaction''s decision admits (active, in scope, at or below the ceiling, fresh, not expired); absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.tool_by_name(p_decision uuid, p_name text)
RETURNS TABLE (fragment_id uuid, name text, schema_version integer, operation text, schema jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_name IS NULL OR length(p_name) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'tool name must be 1 to 128 characters';
    END IF;
    RETURN QUERY
    SELECT t.fragment_id, t.name, t.schema_version, t.operation, t.schema
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND t.project_id = d.project_id AND t.name = p_name
       AND f.project_id = d.project_id AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.schema_version DESC, f.classification DESC, t.fragment_id
     LIMIT 1;
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_by_name(uuid, text) IS
    'The active tool of this exact name that the transaction''s decision admits (its newest schema version), or no row: an absent tool and one the decision does not admit look the same. For rediscovery, when a model names a tool it was not offered. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.tool_rollout(p_decision uuid)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
    v_stage text;
BEGIN
    SELECT r.stage INTO v_stage FROM pyretrieve.tool_rollouts r
     WHERE r.workspace_id = d.workspace_id AND r.project_id = d.project_id;
    RETURN coalesce(v_stage, 'off');
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_rollout(uuid) IS
    'The rollout stage of adaptive tool selection for the decision''s project (off when none was set). SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.set_tool_rollout(p_workspace text, p_project text, p_stage text)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_stage IS NULL OR p_stage NOT IN ('off', 'eval', 'canary', 'majority', 'full') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'stage must be off, eval, canary, majority or full';
    END IF;
    PERFORM 1 FROM pyretrieve.projects p WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'project not found';
    END IF;
    INSERT INTO pyretrieve.tool_rollouts AS r (workspace_id, project_id, stage, updated_by)
    VALUES (p_workspace, p_project, p_stage, pyretrieve.caller())
    ON CONFLICT (workspace_id, project_id) DO UPDATE
       SET stage = EXCLUDED.stage, updated_by = EXCLUDED.updated_by, updated_at = now();
    RETURN p_stage;
END;
$$;
COMMENT ON FUNCTION pyretrieve.set_tool_rollout(text, text, text) IS
    'Set a project''s rollout stage of adaptive tool selection (off | eval | canary | majority | full); returns it. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

REVOKE ALL ON FUNCTION
    pyretrieve.put_tool(text, text, jsonb, text, text[], text, pyretrieve.classification, timestamptz, timestamptz),
    pyretrieve.tool_entries(uuid, uuid[]),
    pyretrieve.tool_schemas(uuid, uuid[]),
    pyretrieve.tool_by_name(uuid, text),
    pyretrieve.tool_rollout(uuid),
    pyretrieve.set_tool_rollout(text, text, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    pyretrieve.tool_entries(uuid, uuid[]),
    pyretrieve.tool_schemas(uuid, uuid[]),
    pyretrieve.tool_by_name(uuid, text),
    pyretrieve.tool_rollout(uuid)
    TO pyretrieve_reader;
GRANT EXECUTE ON FUNCTION
    pyretrieve.put_tool(text, text, jsonb, text, text[], text, pyretrieve.classification, timestamptz, timestamptz)
    TO pyretrieve_writer;
GRANT EXECUTE ON FUNCTION pyretrieve.set_tool_rollout(text, text, text) TO pyretrieve_admin;

SET LOCAL ROLE pyretrieve_owner;
REVOKE ALL ON FUNCTION pyretrieve.tool_argument_lines(jsonb, text), pyretrieve.tool_text(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_argument_lines(jsonb, text), pyretrieve.tool_text(jsonb)
    TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin, pyretrieve_api;

RESET ROLE;
-- pyretrieve_api created the API functions; it may not create anything else.
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;

UPDATE pyretrieve.installation SET schema_version = '0006';
