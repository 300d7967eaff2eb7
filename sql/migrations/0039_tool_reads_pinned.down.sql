-- pyretrieve migration 0039, downgrade: back to 0038
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_api;
ALTER FUNCTION pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text,
                                 double precision, double precision, boolean, boolean, boolean)
    RESET enable_seqscan;
ALTER FUNCTION pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text,
                                 double precision, double precision, boolean, boolean, boolean)
    RESET enable_indexscan;
ALTER FUNCTION pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text,
                                 double precision, double precision, boolean, boolean, boolean)
    RESET enable_bitmapscan;
ALTER FUNCTION pyretrieve.tool_entries(uuid, uuid[])
    RESET enable_seqscan;
ALTER FUNCTION pyretrieve.tool_entries(uuid, uuid[])
    RESET enable_indexscan;
ALTER FUNCTION pyretrieve.tool_entries(uuid, uuid[])
    RESET enable_bitmapscan;
ALTER FUNCTION pyretrieve.tool_schemas(uuid, uuid[])
    RESET enable_seqscan;
ALTER FUNCTION pyretrieve.tool_schemas(uuid, uuid[])
    RESET enable_indexscan;
ALTER FUNCTION pyretrieve.tool_schemas(uuid, uuid[])
    RESET enable_bitmapscan;
ALTER FUNCTION pyretrieve.tool_by_name(uuid, text)
    RESET enable_seqscan;
ALTER FUNCTION pyretrieve.tool_by_name(uuid, text)
    RESET enable_indexscan;
ALTER FUNCTION pyretrieve.tool_by_name(uuid, text)
    RESET enable_bitmapscan;
ALTER FUNCTION pyretrieve.tool_rollout(uuid)
    RESET enable_seqscan;
ALTER FUNCTION pyretrieve.tool_rollout(uuid)
    RESET enable_indexscan;
ALTER FUNCTION pyretrieve.tool_rollout(uuid)
    RESET enable_bitmapscan;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0038';

RESET ROLE;
