-- pyretrieve migration 0042, downgrade: back to 0041
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.fragments(p_decision uuid, p_ids uuid[])
 RETURNS TABLE(workspace_id text, project_id text, fragment_id uuid, body text, content_digest bytea, classification pyretrieve.classification, state pyretrieve.fragment_state, superseded_by uuid, observed_at timestamp with time zone, expires_at timestamp with time zone, ingested_at timestamp with time zone, source_uri text, source_revision text, manifest_id text, ts_config regconfig, lexical_generation bigint)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_indexscan TO 'on'
 SET enable_bitmapscan TO 'on'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.fragments(uuid,uuid[]) IS 'The authoritative records (body, digest, classification, state, times, provenance, generation) for the given ids, only those visible under the bound decision; ids that are absent or not visible are silently left out, alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.fragments(uuid,uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.fragments(uuid,uuid[]) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0041';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
