-- pyretrieve migration 0001, downgrade: remove everything 0001 created.
-- The vector extension is dropped only if the installer created it and nothing else uses it;
-- the cluster-wide roles only if no other database still uses them.
DO $down$
DECLARE
    v_created_vector boolean;
    v_role text;
BEGIN
    SELECT i.created_vector INTO v_created_vector FROM pyretrieve.installation i;
    DROP SCHEMA pyretrieve CASCADE;
    IF v_created_vector THEN
        BEGIN
            DROP EXTENSION vector;
        EXCEPTION WHEN dependent_objects_still_exist THEN
            RAISE NOTICE 'vector extension kept: other objects use it';
        END;
    END IF;
    FOREACH v_role IN ARRAY ARRAY['pyretrieve_admin', 'pyretrieve_writer', 'pyretrieve_reader', 'pyretrieve_owner'] LOOP
        BEGIN
            EXECUTE pg_catalog.format('DROP ROLE IF EXISTS %I', v_role);
        EXCEPTION
            WHEN dependent_objects_still_exist THEN
                RAISE NOTICE 'role % kept: another database still uses it', v_role;
            WHEN insufficient_privilege THEN
                RAISE NOTICE 'role % kept: not allowed to drop it', v_role;
        END;
    END LOOP;
END
$down$;
