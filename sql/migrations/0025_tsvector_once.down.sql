-- pyretrieve migration 0025, downgrade: back to 0024
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- tsv and doc_length are generated columns again. PostgreSQL cannot make a column generated
-- in place, so both are dropped (with the scope index, which includes doc_length) and added
-- again, computed from the bodies: the table is rewritten, and the two columns come last.
DROP TRIGGER fragments_stamp ON pyretrieve.fragments;
DROP FUNCTION pyretrieve.stamp_fragment();
ALTER TABLE pyretrieve.fragments DROP COLUMN tsv, DROP COLUMN doc_length;
ALTER TABLE pyretrieve.fragments
    ADD COLUMN tsv tsvector GENERATED ALWAYS AS (pg_catalog.to_tsvector(ts_config, body)) STORED,
    ADD COLUMN doc_length integer GENERATED ALWAYS AS (pyretrieve.tsvector_length(pg_catalog.to_tsvector(ts_config, body))) STORED;
CREATE INDEX fragments_scope_idx
    ON pyretrieve.fragments (workspace_id, project_id, state, classification)
    INCLUDE (observed_at, expires_at, doc_length);
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.stamp_lexical_generation()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    NEW.lexical_generation := nextval(pyretrieve.scope_sequence(NEW.workspace_id, NEW.project_id));
    IF TG_OP = 'INSERT' THEN
        IF NEW.lexical_generation > 2147483647 THEN
            RAISE EXCEPTION USING ERRCODE = 'PR014', MESSAGE = 'the scope has no document numbers left';
        END IF;
        NEW.docno := NEW.lexical_generation;
    ELSE
        NEW.docno := OLD.docno;
    END IF;
    RETURN NEW;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.stamp_lexical_generation() IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.stamp_lexical_generation() FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
CREATE TRIGGER fragments_stamp BEFORE INSERT OR UPDATE ON pyretrieve.fragments FOR EACH ROW EXECUTE FUNCTION pyretrieve.stamp_lexical_generation();

UPDATE pyretrieve.installation SET schema_version = '0024';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
