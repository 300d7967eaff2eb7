-- pyretrieve migration 0025: tsvector_once
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- The text is analysed once per write: the row trigger sets tsv and doc_length, which stop
-- being generated columns (their stored values stay; no row is rewritten).
DROP TRIGGER fragments_stamp ON pyretrieve.fragments;
DROP FUNCTION pyretrieve.stamp_lexical_generation();
ALTER TABLE pyretrieve.fragments
    ALTER COLUMN tsv DROP EXPRESSION,
    ALTER COLUMN doc_length DROP EXPRESSION,
    ALTER COLUMN tsv SET NOT NULL,
    ALTER COLUMN doc_length SET NOT NULL;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.stamp_fragment()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.body = OLD.body AND NEW.ts_config = OLD.ts_config THEN
        NEW.tsv := OLD.tsv;
        NEW.doc_length := OLD.doc_length;
    ELSE
        NEW.tsv := to_tsvector(NEW.ts_config, NEW.body);
        NEW.doc_length := pyretrieve.tsvector_length(NEW.tsv);
    END IF;
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
COMMENT ON FUNCTION pyretrieve.stamp_fragment() IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.stamp_fragment() FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
CREATE TRIGGER fragments_stamp BEFORE INSERT OR UPDATE ON pyretrieve.fragments FOR EACH ROW EXECUTE FUNCTION pyretrieve.stamp_fragment();

UPDATE pyretrieve.installation SET schema_version = '0025';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
