-- pyretrieve migration 0039: tool_reads_pinned
-- As 0038 for the read API, for tool discovery: with a caller's index scans off,
-- discover_tools' statements scanned every tenant's tools and fragments whole. discover_tools,
-- tool_entries, tool_schemas, tool_by_name and tool_rollout pin sequential scans off and index
-- scans on. Bodies, comments and privileges are unchanged; the settings follow the ones each
-- function pinned before, as the head schema lists them.
SET LOCAL search_path = pg_catalog, pg_temp;

-- The functions are pyretrieve_api's (SECURITY DEFINER, run as it).
SET LOCAL ROLE pyretrieve_api;
ALTER FUNCTION pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text,
                                 double precision, double precision, boolean, boolean, boolean)
    SET enable_seqscan = off;
ALTER FUNCTION pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text,
                                 double precision, double precision, boolean, boolean, boolean)
    SET enable_indexscan = on;
ALTER FUNCTION pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text,
                                 double precision, double precision, boolean, boolean, boolean)
    SET enable_bitmapscan = on;
ALTER FUNCTION pyretrieve.tool_entries(uuid, uuid[])
    SET enable_seqscan = off;
ALTER FUNCTION pyretrieve.tool_entries(uuid, uuid[])
    SET enable_indexscan = on;
ALTER FUNCTION pyretrieve.tool_entries(uuid, uuid[])
    SET enable_bitmapscan = on;
ALTER FUNCTION pyretrieve.tool_schemas(uuid, uuid[])
    SET enable_seqscan = off;
ALTER FUNCTION pyretrieve.tool_schemas(uuid, uuid[])
    SET enable_indexscan = on;
ALTER FUNCTION pyretrieve.tool_schemas(uuid, uuid[])
    SET enable_bitmapscan = on;
ALTER FUNCTION pyretrieve.tool_by_name(uuid, text)
    SET enable_seqscan = off;
ALTER FUNCTION pyretrieve.tool_by_name(uuid, text)
    SET enable_indexscan = on;
ALTER FUNCTION pyretrieve.tool_by_name(uuid, text)
    SET enable_bitmapscan = on;
ALTER FUNCTION pyretrieve.tool_rollout(uuid)
    SET enable_seqscan = off;
ALTER FUNCTION pyretrieve.tool_rollout(uuid)
    SET enable_indexscan = on;
ALTER FUNCTION pyretrieve.tool_rollout(uuid)
    SET enable_bitmapscan = on;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0039';

RESET ROLE;
