-- pyretrieve migration 0038, downgrade: back to 0037
SET LOCAL search_path = pg_catalog, pg_temp;

-- The read API's functions are pyretrieve_api's (SECURITY DEFINER, run as it).
SET LOCAL ROLE pyretrieve_api;
ALTER FUNCTION pyretrieve.authorize(text, text, text, bytea, text, bytea, integer)
    RESET enable_seqscan;
ALTER FUNCTION pyretrieve.authorize(text, text, text, bytea, text, bytea, integer)
    RESET enable_indexscan;
ALTER FUNCTION pyretrieve.authorize(text, text, text, bytea, text, bytea, integer)
    RESET enable_bitmapscan;
ALTER FUNCTION pyretrieve.fragments(uuid, uuid[]) RESET enable_seqscan;
ALTER FUNCTION pyretrieve.fragments(uuid, uuid[]) RESET enable_indexscan;
ALTER FUNCTION pyretrieve.fragments(uuid, uuid[]) RESET enable_bitmapscan;
ALTER FUNCTION pyretrieve.lexical_candidates(uuid, text, integer, text) RESET enable_indexscan;
ALTER FUNCTION pyretrieve.lexical_candidates(uuid, text, integer, text) RESET enable_bitmapscan;
ALTER FUNCTION pyretrieve.vector_candidates(uuid, text, public.vector, integer)
    RESET enable_indexscan;
ALTER FUNCTION pyretrieve.vector_candidates(uuid, text, public.vector, integer)
    RESET enable_bitmapscan;

SET LOCAL ROLE pyretrieve_owner;
UPDATE pyretrieve.installation SET schema_version = '0037';

RESET ROLE;
