-- pyretrieve migration 0033, downgrade: back to 0032
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_api;
ALTER FUNCTION pyretrieve.vector_candidates(uuid,text,public.vector,integer)
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION pyretrieve.vector_candidates(uuid,text,public.vector,integer)
    RESET enable_seqscan;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0032';

RESET ROLE;
