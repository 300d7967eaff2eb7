INSERT INTO pyretrieve.installation (schema_version, created_vector)
VALUES ('0009', pg_catalog.current_setting('pyretrieve.install_creates_vector')::boolean);

RESET ROLE;
-- pyretrieve_api created the API functions; it may not create anything else.
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
