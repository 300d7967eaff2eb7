-- pyretrieve migration 0034: binding_index_scans
-- bound_decision and bound_write find the transaction's binding through the xact_id index
-- whatever the statistics say: a month's partition of the decisions log starts empty and is
-- analysed so, and until autovacuum analysed it again each look-up scanned it whole. Their
-- bodies, comments and privileges are unchanged; the setting follows their search_path, as the
-- head schema lists it.
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_owner;
ALTER FUNCTION pyretrieve.bound_decision() SET enable_seqscan = off;
ALTER FUNCTION pyretrieve.bound_write() SET enable_seqscan = off;

UPDATE pyretrieve.installation SET schema_version = '0034';

RESET ROLE;
