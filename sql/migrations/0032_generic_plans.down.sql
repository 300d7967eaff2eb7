-- pyretrieve migration 0032, downgrade: back to 0031
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_api;
ALTER FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) RESET plan_cache_mode;
SET LOCAL ROLE pyretrieve_owner;
ALTER FUNCTION pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,double precision,text,text,integer,text) RESET plan_cache_mode;

UPDATE pyretrieve.installation SET schema_version = '0031';

RESET ROLE;
