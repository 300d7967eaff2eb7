-- pyretrieve migration 0019: no_tsv_gin
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- The GIN index over fragments.tsv served no query: under row-level security `@@` is not
-- leakproof, so the planner may not use it for a principal's candidates. Every insert paid to
-- maintain it.
DROP INDEX pyretrieve.fragments_tsv_idx;

UPDATE pyretrieve.installation SET schema_version = '0019';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
