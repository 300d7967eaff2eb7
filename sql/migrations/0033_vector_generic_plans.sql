-- pyretrieve migration 0033: vector_generic_plans
-- vector_candidates plans its statements generically from a session's first call, instead of
-- afresh at every call, and reads no table sequentially. Its body, comment and privileges are
-- unchanged; plan_cache_mode keeps its place among the pinned settings and enable_seqscan
-- follows it, as the head schema lists them.
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_api;
ALTER FUNCTION pyretrieve.vector_candidates(uuid,text,public.vector,integer)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION pyretrieve.vector_candidates(uuid,text,public.vector,integer)
    SET enable_seqscan = off;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0033';

RESET ROLE;
