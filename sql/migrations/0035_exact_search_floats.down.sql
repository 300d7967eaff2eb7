-- pyretrieve migration 0035, downgrade: back to 0034
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_owner;
ALTER FUNCTION pyretrieve.search(text, text, text, text, public.vector, text, integer, text,
                                 double precision, double precision, text, text, integer, text)
    RESET extra_float_digits;

UPDATE pyretrieve.installation SET schema_version = '0034';

RESET ROLE;
