-- pyretrieve migration 0032: generic_plans
-- lexical_candidates and search plan their statements generically from a session's first call
-- instead of afresh for each of its first five. Their bodies, comments and privileges are
-- unchanged; the setting is appended to their pinned settings, as the head schema lists it.
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_api;
ALTER FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text)
    SET plan_cache_mode = force_generic_plan;
SET LOCAL ROLE pyretrieve_owner;
ALTER FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer,text)
    SET plan_cache_mode = force_generic_plan;

UPDATE pyretrieve.installation SET schema_version = '0032';

RESET ROLE;
