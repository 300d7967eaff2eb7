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
    USING ((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
       AND classification <= (SELECT b.ceiling FROM pyretrieve.bound_filter() b)
       AND ((observed_at <= (SELECT pg_catalog.now())
            AND observed_at >= (SELECT b.oldest FROM pyretrieve.bound_filter() b)
            AND (expires_at IS NULL OR expires_at > (SELECT pg_catalog.now())))
            OR (SELECT NOT b.reading FROM pyretrieve.bound_filter() b)));
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
    USING (((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
            AND (SELECT b.reading FROM pyretrieve.bound_filter() b))
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
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
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
               server text, schema_chars integer, entities text[])
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize): index scans on, sequential
-- scans off, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 1000 ids';
    END IF;
    RETURN QUERY
    -- The ids as an index condition (= ANY): one key look-up per id, whatever the size of the
    -- scope's catalog (a join with unnest() let the planner read the whole scope).
    SELECT t.fragment_id, t.name, t.schema_version, t.operation, t.tags, t.server,
           length(t.schema::text), t.entities
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND f.workspace_id = d.workspace_id
       AND t.fragment_id = ANY (p_ids)
       AND t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_entries(uuid, uuid[]) IS
    'The tool metadata (name, schema version, operation family, tags, server, schema size in characters, entity words of the name and description; not the schema) of the given fragment ids that are tools the transaction''s decision admits; absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.tool_schemas(p_decision uuid, p_ids uuid[])
RETURNS TABLE (fragment_id uuid, name text, schema_version integer, schema jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize): index scans on, sequential
-- scans off, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
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
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND f.workspace_id = d.workspace_id
       AND t.fragment_id = ANY (p_ids)
       AND t.project_id = d.project_id AND f.project_id = d.project_id
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
-- A caller's planner settings do not reach inside (see authorize): index scans on, sequential
-- scans off, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
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
-- A caller's planner settings do not reach inside (see authorize): index scans on, sequential
-- scans off, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
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

-- ---------------------------------------------------------------------------------------------
-- Tool discovery for SQL callers: pyretrieve.discover_tools(...) returns the document the
-- Python client's Discovery.document() holds, key for key and value for value (a test compares
-- their canonical JSON byte for byte). The steps are the client's, in its order:
--   search (authorize, both legs, fragments, RRF, freshness, total order) for a pool of 48
--   -> the tools among them the decision admits -> similar-tool penalties (write tools only)
--   -> order by adjusted score, then fused rank -> confidence -> K of the policy -> rollout
--   -> schemas of the chosen K only.
-- The word lists and constants below are pyretrieve.tools.definitions' and .select's; a test
-- checks them against the Python ones.
-- ---------------------------------------------------------------------------------------------
SET LOCAL ROLE pyretrieve_owner;

-- Verbs (and synonyms) by operation family, as pyretrieve.tools.definitions.OPERATION_SYNONYMS.
CREATE FUNCTION pyretrieve.tool_operation_words()
RETURNS TABLE (family text, word text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT f.family, w.word
      FROM (VALUES
        ('delete', ARRAY['delete', 'deletes', 'deleting', 'remove', 'removes', 'removing', 'erase',
                         'drop', 'purge', 'destroy', 'unregister', 'uninstall', 'cancel', 'revoke',
                         'discard', 'clear', 'wipe', 'unsubscribe', 'terminate']),
        ('update', ARRAY['update', 'updates', 'updating', 'modify', 'edit', 'change', 'set', 'rename',
                         'patch', 'replace', 'adjust', 'alter', 'reschedule', 'move', 'enable',
                         'disable', 'toggle', 'upgrade', 'assign', 'configure', 'reset']),
        ('create', ARRAY['create', 'creates', 'creating', 'add', 'adds', 'new', 'make', 'insert',
                         'register', 'book', 'schedule', 'generate', 'send', 'submit', 'upload',
                         'open', 'start', 'reserve', 'buy', 'purchase', 'invite', 'build']),
        ('get', ARRAY['get', 'gets', 'fetch', 'retrieve', 'read', 'show', 'display', 'view', 'lookup',
                      'check', 'describe', 'obtain', 'calculate', 'compute', 'estimate', 'convert',
                      'tell', 'what', 'whats', 'how']),
        ('search', ARRAY['search', 'find', 'query', 'locate', 'discover', 'look', 'seek', 'filter',
                         'match']),
        ('list', ARRAY['list', 'lists', 'enumerate', 'all', 'browse'])) AS f(family, words),
           LATERAL pg_catalog.unnest(f.words) AS w(word);
END;
COMMENT ON FUNCTION pyretrieve.tool_operation_words() IS
    'The verbs and synonyms of each operation family (delete, update, create, get, search, list) that requests and tool names are read with, as pyretrieve.tools.definitions.OPERATION_SYNONYMS.';

-- Words that never name an entity, as pyretrieve.tools.definitions._STOP.
CREATE FUNCTION pyretrieve.tool_stop_words()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
RETURN ARRAY['a', 'an', 'the', 'of', 'for', 'to', 'in', 'on', 'by', 'with', 'and', 'or', 'from', 'at',
             'is', 'are', 'be', 'it', 'this', 'that', 'my', 'me', 'i', 'you', 'your', 'please', 'can',
             'could', 'would', 'will', 'should', 'do', 'does', 'need', 'want'];
COMMENT ON FUNCTION pyretrieve.tool_stop_words() IS
    'Words that never name an entity when a request is compared with a tool name, as pyretrieve.tools.definitions._STOP.';

-- The lower-case words of a text with snake_case, camelCase and dotted names split: the
-- matches of [A-Za-z][a-z]*|[0-9]+ (ASCII letters only, as Python's re reads that pattern).
CREATE FUNCTION pyretrieve.tool_words(p_text text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(pg_catalog.array_agg(pg_catalog.lower(m.w[1] COLLATE "C") ORDER BY m.n), '{}')
      FROM pg_catalog.regexp_matches(p_text, '([A-Za-z][a-z]*|[0-9]+)', 'g') WITH ORDINALITY AS m(w, n);
END;
COMMENT ON FUNCTION pyretrieve.tool_words(text) IS
    'The lower-case words of a text, snake_case, camelCase and dotted names split, in order (pyretrieve.tools.definitions.words).';

-- The entity words of a text: neither operation verbs nor stop words, longer than one letter,
-- not numbers, plurals lightly stemmed, as pyretrieve.tools.definitions.entity_words: ies -> y;
-- es after s, x, z, ch or sh (boxes -> box); else a final s but not ss (games -> game).
CREATE FUNCTION pyretrieve.tool_entity_words(p_text text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(pg_catalog.array_agg(DISTINCT s.stem ORDER BY s.stem), '{}')
      FROM (SELECT CASE
                     WHEN pg_catalog.length(u.w) > 5 AND u.w LIKE '%ies'
                         THEN pg_catalog.left(u.w, -3) || 'y'
                     WHEN pg_catalog.length(u.w) > 4 AND u.w ~ '(s|x|z|ch|sh)es$'
                         THEN pg_catalog.left(u.w, -2)
                     WHEN pg_catalog.length(u.w) > 3 AND u.w LIKE '%s' AND u.w NOT LIKE '%ss'
                         THEN pg_catalog.left(u.w, -1)
                     ELSE u.w END COLLATE "C" AS stem
              FROM pg_catalog.unnest(pyretrieve.tool_words(p_text)) AS u(w)
             WHERE pg_catalog.length(u.w) > 1 AND u.w !~ '^[0-9]+$'
               AND NOT u.w = ANY (pyretrieve.tool_stop_words())
               AND NOT EXISTS (SELECT 1 FROM pyretrieve.tool_operation_words() o WHERE o.word = u.w)) s;
END;
COMMENT ON FUNCTION pyretrieve.tool_entity_words(text) IS
    'The entity words of a text (not operation verbs, not stop words, longer than one letter, not numbers, plurals lightly stemmed), sorted: pyretrieve.tools.definitions.entity_words.';

-- What a tool is about, for similar-tool protection: the entity words of its name and
-- description, stored when the row is written (reading them costs about 45 us per tool, 2 ms
-- for a pool of 48). Added here rather than in CREATE TABLE because the expression needs the
-- function above; migration 0030 adds it the same way, so the column comes last in both.
ALTER TABLE pyretrieve.tools ADD COLUMN entities text[] NOT NULL
    GENERATED ALWAYS AS (pyretrieve.tool_entity_words(
        name || ' ' || coalesce(schema ->> 'description', ''))) STORED;
COMMENT ON COLUMN pyretrieve.tools.entities IS
    'The entity words of the tool''s name and description (pyretrieve.tool_entity_words), kept by the database: a write tool of the family a request asks for that shares none of them with the request is penalised (no_shared_entity).';

-- The operation families a request asks for, sorted: delete/update/create/search by their
-- verbs; get and list only when none of those is named (their verbs are too common).
CREATE FUNCTION pyretrieve.tool_query_operations(p_text text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH found AS (
        SELECT DISTINCT o.family
          FROM pg_catalog.unnest(pyretrieve.tool_words(p_text)) AS u(w)
          JOIN pyretrieve.tool_operation_words() o ON o.word = u.w
    )
    SELECT coalesce(pg_catalog.array_agg(f.family COLLATE "C" ORDER BY f.family COLLATE "C"), '{}')
      FROM found f
     WHERE f.family NOT IN ('get', 'list')
        OR NOT EXISTS (SELECT 1 FROM found x WHERE x.family NOT IN ('get', 'list'));
END;
COMMENT ON FUNCTION pyretrieve.tool_query_operations(text) IS
    'The operation families a request asks for, sorted (pyretrieve.tools.definitions.query_operations): delete, update, create and search by their verbs; get and list only when no other family is named.';

-- A stable bucket 0..99 for (workspace, principal): the first 8 bytes of
-- sha256(workspace || NUL || principal), big-endian, unsigned, modulo 100.
CREATE FUNCTION pyretrieve.tool_rollout_bucket(p_workspace text, p_principal text)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT ((('x' || pg_catalog.encode(pg_catalog.substr(h.d, 1, 8), 'hex'))::bit(64)::bigint::numeric
             + CASE WHEN pg_catalog.get_byte(h.d, 0) >= 128 THEN 18446744073709551616::numeric ELSE 0 END)
            % 100)::integer
      FROM (SELECT pg_catalog.sha256(pg_catalog.convert_to(p_workspace, 'UTF8') || '\x00'::bytea
                                     || pg_catalog.convert_to(p_principal, 'UTF8')) AS d) h;
END;
COMMENT ON FUNCTION pyretrieve.tool_rollout_bucket(text, text) IS
    'The rollout bucket (0..99) of a principal in a workspace: sha256 of workspace, NUL, principal; first 8 bytes as an unsigned big-endian integer, modulo 100 (pyretrieve.tools.select.rollout_bucket).';

-- The K a policy recommends for a confidence level and, in the selection's order, the adjusted
-- scores, the BM25 scores and the cosine distances (NULL where a leg did not find the tool)
-- (pyretrieve.tools.select.recommended_k); never more than the candidates there are.
CREATE FUNCTION pyretrieve.tool_recommended_k(
    p_policy text, p_level text, p_scores double precision[],
    p_lexical double precision[], p_distances double precision[])
RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_scores), 0);
    v_k integer;
    v_best double precision;
    v_drop double precision;
    v_high integer;
    -- near: the parameters pyretrieve.tools.select.NEAR_DEFAULT (BM25 ratio, distance margin, kmin).
    c_a constant double precision := 0.7;
    c_b constant double precision := 0.1;
    c_kmin constant integer := 8;
    v_best_lexical double precision;
    v_best_distance double precision;
BEGIN
    CASE p_policy
    WHEN 'fixed-10' THEN v_k := 10;
    WHEN 'fixed-15' THEN v_k := 15;
    WHEN 'fixed-20' THEN v_k := 20;
    WHEN 'fixed-48' THEN v_k := 48;
    WHEN 'tight' THEN
        v_k := CASE p_level WHEN 'none' THEN 0 WHEN 'high' THEN 3 WHEN 'normal' THEN 5 WHEN 'low' THEN 10 ELSE 15 END;
    WHEN 'wide' THEN
        v_k := CASE p_level WHEN 'none' THEN 0 WHEN 'high' THEN 5 WHEN 'normal' THEN 8 WHEN 'low' THEN 12 ELSE 15 END;
    WHEN 'gap' THEN
        -- Cut after the largest drop among the first 20 (at least 3; the first of equal drops).
        v_high := least(v_n, 20);
        IF p_level = 'none' THEN
            v_k := 0;
        ELSIF v_high <= 3 THEN
            v_k := v_high;
        ELSE
            v_best := NULL;
            FOR i IN 4 .. v_high LOOP
                v_drop := p_scores[i - 1] - p_scores[i];
                IF v_best IS NULL OR v_drop > v_best THEN
                    v_best := v_drop;
                    v_k := i - 1;
                END IF;
            END LOOP;
            IF NOT v_best > 0 THEN
                v_k := v_high;
            END IF;
        END IF;
    WHEN 'near' THEN
        -- Up to the last tool whose BM25 is at least a times the pool's best, or whose cosine
        -- distance is at most the best plus b; at least kmin.
        IF p_level = 'none' THEN
            v_k := 0;
        ELSE
            SELECT max(x) INTO v_best_lexical FROM unnest(p_lexical) AS x;
            SELECT min(x) INTO v_best_distance FROM unnest(p_distances) AS x;
            v_k := 0;
            FOR i IN 1 .. v_n LOOP
                IF (p_lexical[i] IS NOT NULL AND v_best_lexical > 0 AND p_lexical[i] >= c_a * v_best_lexical)
                   OR (p_distances[i] IS NOT NULL AND p_distances[i] <= v_best_distance + c_b) THEN
                    v_k := i;
                END IF;
            END LOOP;
            v_k := greatest(c_kmin, v_k);
        END IF;
    ELSE
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'unknown K policy';
    END CASE;
    RETURN least(v_k, v_n);
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_recommended_k(text, text, double precision[], double precision[], double precision[]) IS
    'The K a tool-selection policy recommends for a confidence level and, in the selection''s order, the adjusted scores, BM25 scores and cosine distances (pyretrieve.tools.select.recommended_k), never more than the candidates.';

SET LOCAL ROLE pyretrieve_api;

CREATE FUNCTION pyretrieve.discover_tools(
    p_workspace text,
    p_project text,
    p_purpose text,
    p_query text,
    p_embedding public.vector DEFAULT NULL,
    p_model text DEFAULT NULL,
    p_policy text DEFAULT NULL,
    p_mode text DEFAULT 'hybrid',
    p_lexical_weight double precision DEFAULT 1.0,
    p_vector_weight double precision DEFAULT 1.0,
    p_protect boolean DEFAULT true,
    p_adaptive boolean DEFAULT NULL,
    p_master boolean DEFAULT true)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Doubles pass through jsonb as text: the shortest exact digits, whatever the caller set.
SET extra_float_digits = 1
-- A caller's planner settings do not reach inside (see authorize): index scans on, sequential
-- scans off, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    c_pool constant integer := 48;
    c_candidates constant integer := 100;
    c_formula constant text := 'normalized = fused / ideal fused score (1-based RRF, k = 60); '
                               'adjusted = normalized * product of penalty factors';
    v_policy text := coalesce(p_policy, 'near');
    d pyretrieve.decisions;
    v_hits jsonb;
    v_ideal double precision := 0.0;
    v_asked text[];
    v_query_entities text[];
    v_scored jsonb;
    v_n integer;
    v_s1 double precision;
    v_s2 double precision;
    v_level text;
    v_reason text;
    v_recommended integer;
    v_baseline integer;
    v_stage text;
    v_applied boolean;
    v_k integer;
    v_schemas jsonb;
    v_tools jsonb;
    v_omissions jsonb;
    v_fingerprint text;
BEGIN
    IF v_policy NOT IN ('fixed-10', 'fixed-15', 'fixed-20', 'fixed-48', 'tight', 'gap', 'wide', 'near') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010',
            MESSAGE = 'policy must be one of fixed-10, fixed-15, fixed-20, fixed-48, tight, gap, wide, near';
    END IF;
    IF p_protect IS NULL OR p_master IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'protect and master must not be null';
    END IF;

    -- 1. The search path (it authorizes: one decision for the transaction) for a pool of 48.
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'fragment_id', s.fragment_id, 'fused_rank', s.rank, 'score', s.final_score,
               'lexical_rank', s.explanation -> 'modalities' -> 'lexical' -> 'rank',
               'vector_rank', s.explanation -> 'modalities' -> 'vector' -> 'rank',
               'lexical_score', s.explanation -> 'modalities' -> 'lexical' -> 'score',
               'vector_distance', s.explanation -> 'modalities' -> 'vector' -> 'distance',
               'vector_used', s.explanation -> 'semantic' ->> 'status' = 'used') ORDER BY s.rank),
           '[]'::jsonb)
      INTO v_hits
      FROM pyretrieve.search(p_workspace => p_workspace, p_project => p_project,
                             p_purpose => p_purpose, p_query => p_query,
                             p_embedding => p_embedding, p_model => p_model, p_limit => c_pool,
                             p_mode => p_mode, p_lexical_weight => p_lexical_weight,
                             p_vector_weight => p_vector_weight,
                             p_candidate_limit => c_candidates,
                             -- K is calibrated on RRF scores, whatever the model's default.
                             p_fusion => 'rrf') s;
    SELECT * INTO STRICT d FROM pyretrieve.bound_decision();
    d := pyretrieve.require_decision(d.decision_id);

    -- The fused score of a tool ranked first by every leg that ran.
    IF p_mode <> 'vector' THEN
        v_ideal := v_ideal + p_lexical_weight / 61.0::double precision;
    END IF;
    IF coalesce((v_hits -> 0 ->> 'vector_used')::boolean, false) THEN
        v_ideal := v_ideal + p_vector_weight / 61.0::double precision;
    END IF;

    -- 2. The tools among them the decision admits; penalties; the order by adjusted score.
    v_asked := CASE WHEN p_protect THEN pyretrieve.tool_query_operations(p_query) ELSE '{}' END;
    v_query_entities := pyretrieve.tool_entity_words(p_query);
    WITH hit AS (
        SELECT (h ->> 'fragment_id')::uuid AS fragment_id, (h ->> 'fused_rank')::integer AS fused_rank,
               (h ->> 'score')::double precision AS score, h -> 'lexical_rank' AS lexical_rank,
               h -> 'vector_rank' AS vector_rank, h -> 'lexical_score' AS lexical_score,
               h -> 'vector_distance' AS vector_distance
          FROM jsonb_array_elements(v_hits) AS h
    ), tool AS (
        SELECT h.*, e.name, e.schema_version, e.operation, e.entities,
               CASE WHEN v_ideal > 0 THEN h.score / v_ideal ELSE 0.0::double precision END AS normalized,
               CASE
                 WHEN cardinality(v_asked) = 0 OR e.operation NOT IN ('delete', 'update', 'create') THEN NULL
                 WHEN NOT e.operation = ANY (v_asked) THEN jsonb_build_object(
                     'code', 'operation_contradiction', 'factor', pyretrieve.json_double(0.5),
                     'asked', to_jsonb(v_asked), 'tool_family', e.operation)
                 WHEN NOT e.entities && v_query_entities THEN jsonb_build_object(
                     'code', 'no_shared_entity', 'factor', pyretrieve.json_double(0.8),
                     'tool_family', e.operation)
               END AS penalty
          FROM hit h
          JOIN pyretrieve.tool_entries(p_decision => d.decision_id,
                                       p_ids => ARRAY(SELECT x.fragment_id FROM hit x)) e
            ON e.fragment_id = h.fragment_id
    ), adjusted AS (
        SELECT t.*, t.normalized * coalesce((t.penalty ->> 'factor')::double precision,
                                            1.0::double precision) AS adjusted
          FROM tool t
    )
    SELECT coalesce(jsonb_agg(to_jsonb(a) || jsonb_build_object('rank', a.rank)
                              ORDER BY a.rank), '[]'::jsonb)
      INTO v_scored
      FROM (SELECT x.*, (row_number() OVER (ORDER BY x.adjusted DESC, x.fused_rank))::integer AS rank
              FROM adjusted x) a;
    v_n := jsonb_array_length(v_scored);

    -- 3. Confidence from the top adjusted score, the second and the gap.
    IF v_n = 0 THEN
        v_level := 'none';
        v_reason := 'no authorised tool matched';
    ELSE
        v_s1 := (v_scored -> 0 ->> 'adjusted')::double precision;
        v_s2 := CASE WHEN v_n > 1 THEN (v_scored -> 1 ->> 'adjusted')::double precision
                     ELSE 0.0::double precision END;
        IF v_s1 >= 0.9 AND v_s1 - v_s2 >= 0.1 THEN
            v_level := 'high';
            v_reason := 'top tool ranked first by every leg, clear gap to the next';
        ELSIF v_s1 >= 0.6 THEN
            v_level := 'normal';
            v_reason := 'top tool ranked high by the legs that ran';
        ELSIF v_s1 >= 0.4 THEN
            v_level := 'low';
            v_reason := 'top tool found by one leg only or ranked low';
        ELSE
            v_level := 'fail';
            v_reason := 'no tool ranked high by any leg';
        END IF;
    END IF;

    -- 4. K: the policy's, applied by the rollout stage (or the caller's choice), never more than
    --    the baseline K of 48 or the candidates.
    v_recommended := pyretrieve.tool_recommended_k(v_policy, v_level,
        ARRAY(SELECT (x ->> 'adjusted')::double precision FROM jsonb_array_elements(v_scored) AS x),
        ARRAY(SELECT (x ->> 'lexical_score')::double precision FROM jsonb_array_elements(v_scored) AS x),
        ARRAY(SELECT (x ->> 'vector_distance')::double precision FROM jsonb_array_elements(v_scored) AS x));
    v_baseline := least(48, v_n);
    v_stage := pyretrieve.tool_rollout(d.decision_id);
    v_applied := CASE
        WHEN v_policy IN ('fixed-10', 'fixed-15', 'fixed-20', 'fixed-48') THEN true
        WHEN p_adaptive IS NOT NULL THEN p_adaptive AND p_master
        ELSE p_master AND pyretrieve.tool_rollout_bucket(d.workspace_id, d.principal)
                 < CASE v_stage WHEN 'canary' THEN 5 WHEN 'majority' THEN 50 WHEN 'full' THEN 100 ELSE 0 END
    END;
    v_k := CASE WHEN v_applied THEN least(v_recommended, v_baseline) ELSE v_baseline END;

    -- 5. Schemas of the chosen K only, under the same decision.
    SELECT coalesce(jsonb_object_agg(s.fragment_id::text, s.schema), '{}'::jsonb)
      INTO v_schemas
      FROM pyretrieve.tool_schemas(p_decision => d.decision_id, p_ids => ARRAY(
               SELECT (x ->> 'fragment_id')::uuid FROM jsonb_array_elements(v_scored) AS x
                WHERE (x ->> 'rank')::integer <= v_k)) s;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'name', x ->> 'name', 'schema_version', (x ->> 'schema_version')::integer,
               'rank', (x ->> 'rank')::integer, 'fused_rank', (x ->> 'fused_rank')::integer,
               'lexical_rank', x -> 'lexical_rank', 'vector_rank', x -> 'vector_rank',
               'lexical_score', x -> 'lexical_score', 'vector_distance', x -> 'vector_distance',
               'operation', x ->> 'operation',
               'fused_score', pyretrieve.json_double((x ->> 'score')::double precision),
               'normalized_score', pyretrieve.json_double((x ->> 'normalized')::double precision),
               'adjusted_score', pyretrieve.json_double((x ->> 'adjusted')::double precision),
               'penalties', CASE WHEN x -> 'penalty' = 'null'::jsonb THEN '[]'::jsonb
                                 ELSE jsonb_build_array(x -> 'penalty') END,
               'chosen', (x ->> 'rank')::integer <= v_k,
               'cut', CASE WHEN (x ->> 'rank')::integer <= v_k THEN NULL
                           WHEN v_applied OR v_k = v_recommended THEN 'cut_by_k'
                           ELSE 'cut_by_baseline_k' END,
               'formula', c_formula) ORDER BY (x ->> 'rank')::integer), '[]'::jsonb),
           coalesce(jsonb_agg(jsonb_build_object(
               'name', x ->> 'name', 'fragment_id', x ->> 'fragment_id',
               'position', (x ->> 'rank')::integer, 'reason', 'cut_by_k',
               'score', pyretrieve.json_double((x ->> 'adjusted')::double precision))
               ORDER BY (x ->> 'rank')::integer) FILTER (WHERE (x ->> 'rank')::integer > v_k), '[]'::jsonb)
      INTO v_tools, v_omissions
      FROM jsonb_array_elements(v_scored) AS x;

    -- The context fingerprint: sha256 over the sorted "name NUL version" lines of the chosen.
    SELECT pg_catalog.encode(pg_catalog.sha256(coalesce(pg_catalog.string_agg(l.line, '\x0a'::bytea ORDER BY l.line),
                                                        ''::bytea)), 'hex')
      INTO v_fingerprint
      FROM (SELECT pg_catalog.convert_to(x ->> 'name', 'UTF8') || '\x00'::bytea
                   || pg_catalog.convert_to(x ->> 'schema_version', 'UTF8') AS line
              FROM jsonb_array_elements(v_scored) AS x
             WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')) l;

    RETURN jsonb_build_object(
        'decision_id', d.decision_id,
        'query_digest', pg_catalog.encode(pyretrieve.content_digest(p_query), 'hex'),
        'policy', v_policy,
        'stage', v_stage,
        'applied', v_applied,
        'confidence', jsonb_build_object(
            'level', v_level,
            'score', pyretrieve.json_double(coalesce(v_s1, 0.0::double precision)),
            'reason', v_reason,
            'recommended_k', v_recommended,
            'top_score', pyretrieve.json_double(v_s1),
            'second_score', pyretrieve.json_double(v_s2),
            'gap', pyretrieve.json_double(v_s1 - v_s2)),
        'k', (SELECT count(*) FROM jsonb_array_elements(v_scored) AS x
               WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')),
        'fingerprint', v_fingerprint,
        'tools', v_tools,
        'omissions', v_omissions,
        'schemas', (SELECT coalesce(jsonb_agg(v_schemas -> (x ->> 'fragment_id') ORDER BY (x ->> 'rank')::integer),
                                    '[]'::jsonb)
                      FROM jsonb_array_elements(v_scored) AS x
                     WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')));
END;
$$;
COMMENT ON FUNCTION pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text, double precision, double precision, boolean, boolean, boolean) IS
    'Tool discovery for an agent request, as one jsonb document: the ranked tools the caller may use (search''s authorization, legs, fusion and freshness for a pool of 48, then only tools the decision admits), each with its explanation (fused, lexical and vector ranks, fused, normalised and adjusted scores, similar-tool penalties, chosen, why cut), the confidence (level none/high/normal/low/fail, score, reason, recommended K, top and second score, gap), K, omissions for authorised tools cut by K, the context fingerprint and the schemas of the chosen K only. p_policy: fixed-10, fixed-15, fixed-20, fixed-48, tight, gap, wide or near (default near, the evaluated default); adaptive K only truncates and is applied by the project''s rollout stage unless p_adaptive says otherwise; p_master false turns it off. Byte-identical, as canonical JSON, to the Python client''s Discovery.document() for the same request and decision. Raises what search raises (PR001 on deny, PR010 on bad input, PR030). SECURITY DEFINER (runs as pyretrieve_api): it calls helpers that principals are not granted (the bound decision, the word lists, the rollout bucket) and principals reach the tables only through the SQL API.';

REVOKE ALL ON FUNCTION
    pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text, double precision, double precision, boolean, boolean, boolean)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text, double precision, double precision, boolean, boolean, boolean)
    TO pyretrieve_reader;

SET LOCAL ROLE pyretrieve_owner;
REVOKE ALL ON FUNCTION pyretrieve.tool_operation_words(), pyretrieve.tool_stop_words(),
    pyretrieve.tool_words(text), pyretrieve.tool_entity_words(text), pyretrieve.tool_query_operations(text),
    pyretrieve.tool_rollout_bucket(text, text), pyretrieve.tool_recommended_k(text, text, double precision[], double precision[], double precision[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_operation_words(), pyretrieve.tool_stop_words(),
    pyretrieve.tool_words(text), pyretrieve.tool_entity_words(text), pyretrieve.tool_query_operations(text),
    pyretrieve.tool_rollout_bucket(text, text), pyretrieve.tool_recommended_k(text, text, double precision[], double precision[], double precision[])
    TO pyretrieve_api;
-- discover_tools (as pyretrieve_api) runs search() and the renderings it calls.
GRANT EXECUTE ON FUNCTION
    pyretrieve.search(text, text, text, text, public.vector, text, integer, text, double precision, double precision, text, text, integer, text),
    pyretrieve.json_double(double precision), pyretrieve.iso_utc(timestamptz)
    TO pyretrieve_api;
