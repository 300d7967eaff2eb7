-- pyretrieve migration 0002, downgrade: remove the audit views and their helper.
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP VIEW pyretrieve.audit_findings;
DROP VIEW pyretrieve.audit_access;
DROP VIEW pyretrieve.audit_roles;
DROP VIEW pyretrieve.audit_keys;
DROP VIEW pyretrieve.audit_views;
DROP VIEW pyretrieve.audit_functions;
DROP VIEW pyretrieve.audit_privileges;
DROP VIEW pyretrieve.audit_policies;
DROP VIEW pyretrieve.audit_tables;
DROP VIEW pyretrieve.audit_objects;
DROP VIEW pyretrieve.audit_server;
DROP FUNCTION pyretrieve.audit_expression_calls(pg_node_tree);

UPDATE pyretrieve.installation SET schema_version = '0001';

RESET ROLE;
