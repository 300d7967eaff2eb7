-- pyretrieve migration 0038: index_scans_pinned
-- A caller's planner settings do not reach inside the read functions: a principal may set
-- enable_indexscan and enable_bitmapscan off, and authorize then scanned every tenant's grants
-- whole and fragments every tenant's fragments, a time that grows with what the others hold and
-- a load any caller could multiply. authorize and fragments pin sequential scans off and index
-- scans on; lexical_candidates and vector_candidates, which pinned sequential scans off already,
-- pin index scans on. Bodies, comments and privileges are unchanged; the settings follow the
-- ones each function pinned before, as the head schema lists them.
SET LOCAL search_path = pg_catalog, pg_temp;

-- The read API's functions are pyretrieve_api's (SECURITY DEFINER, run as it).
SET LOCAL ROLE pyretrieve_api;
ALTER FUNCTION pyretrieve.authorize(text, text, text, bytea, text, bytea, integer)
    SET enable_seqscan = off;
ALTER FUNCTION pyretrieve.authorize(text, text, text, bytea, text, bytea, integer)
    SET enable_indexscan = on;
ALTER FUNCTION pyretrieve.authorize(text, text, text, bytea, text, bytea, integer)
    SET enable_bitmapscan = on;
ALTER FUNCTION pyretrieve.fragments(uuid, uuid[]) SET enable_seqscan = off;
ALTER FUNCTION pyretrieve.fragments(uuid, uuid[]) SET enable_indexscan = on;
ALTER FUNCTION pyretrieve.fragments(uuid, uuid[]) SET enable_bitmapscan = on;
ALTER FUNCTION pyretrieve.lexical_candidates(uuid, text, integer, text) SET enable_indexscan = on;
ALTER FUNCTION pyretrieve.lexical_candidates(uuid, text, integer, text) SET enable_bitmapscan = on;
ALTER FUNCTION pyretrieve.vector_candidates(uuid, text, public.vector, integer)
    SET enable_indexscan = on;
ALTER FUNCTION pyretrieve.vector_candidates(uuid, text, public.vector, integer)
    SET enable_bitmapscan = on;

SET LOCAL ROLE pyretrieve_owner;
UPDATE pyretrieve.installation SET schema_version = '0038';

RESET ROLE;
