-- pyretrieve migration 0019, downgrade: back to 0018
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

CREATE INDEX fragments_tsv_idx ON pyretrieve.fragments USING gin (tsv);

UPDATE pyretrieve.installation SET schema_version = '0018';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
