-- pyretrieve migration 0034, downgrade: back to 0033
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_owner;
ALTER FUNCTION pyretrieve.bound_decision() RESET enable_seqscan;
ALTER FUNCTION pyretrieve.bound_write() RESET enable_seqscan;

UPDATE pyretrieve.installation SET schema_version = '0033';

RESET ROLE;
