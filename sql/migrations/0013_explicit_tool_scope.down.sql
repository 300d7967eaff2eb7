-- pyretrieve migration 0013, downgrade: back to 0012
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.tool_entries(p_decision uuid, p_ids uuid[])
 RETURNS TABLE(fragment_id uuid, name text, schema_version integer, operation text, tags text[], server text, schema_chars integer)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
           length(t.schema::text)
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND t.fragment_id = ANY (p_ids)
       AND t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) IS 'The tool metadata (name, schema version, operation family, tags, server, schema size in characters; not the schema) of the given fragment ids that are tools the transaction''s decision admits; absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_entries(uuid,uuid[]) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.tool_schemas(p_decision uuid, p_ids uuid[])
 RETURNS TABLE(fragment_id uuid, name text, schema_version integer, schema jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
     WHERE t.workspace_id = d.workspace_id AND t.fragment_id = ANY (p_ids)
       AND t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.tool_schemas(uuid,uuid[]) IS 'The JSON schemas of the given fragment ids that are tools the transaction''s decision admits (active, in scope, at or below the ceiling, fresh, not expired); absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.tool_schemas(uuid,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_schemas(uuid,uuid[]) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0012';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
