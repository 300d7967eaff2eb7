-- pyretrieve migration 0035: exact_search_floats
-- pyretrieve.search writes floats at extra_float_digits 1 whatever the caller set: the legs'
-- rows travel to its fusion as jsonb, a float becomes jsonb through its text, and at a caller's
-- extra_float_digits of 0 or below that text was rounded, so the explanation showed another
-- lexical score and cosine distance than the client's. Its body, comment and privileges are
-- unchanged; the setting follows its plan_cache_mode, as the head schema lists it.
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_owner;
ALTER FUNCTION pyretrieve.search(text, text, text, text, public.vector, text, integer, text,
                                 double precision, double precision, text, text, integer, text)
    SET extra_float_digits = 1;

UPDATE pyretrieve.installation SET schema_version = '0035';

RESET ROLE;
