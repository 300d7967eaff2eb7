-- The decisions log's partitions: this month and the next two.
SELECT pg_catalog.count(*) AS decision_partitions FROM pyretrieve.ensure_decision_partitions();

INSERT INTO pyretrieve.installation (schema_version, created_vector)
VALUES ('0059', pg_catalog.current_setting('pyretrieve.install_creates_vector')::boolean);

RESET ROLE;
-- pyretrieve_api created the API functions; it may not create anything else.
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
