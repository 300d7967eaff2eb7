-- pyretrieve migration 0023, downgrade: back to 0022
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP FUNCTION pyretrieve.compact_lexical_index(text,text,double precision) CASCADE;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.compact_lexical_index(p_workspace text, p_project text)
 RETURNS TABLE(rows_read integer, rows_written integer, postings integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_ceiling pyretrieve.classification := pyretrieve.bind_write_scope(p_workspace, p_project);
BEGIN
    RETURN QUERY SELECT c.rows_read, c.rows_written, c.postings
                   FROM pyretrieve.compact_lexical_postings(p_workspace, p_project, v_ceiling) c;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.compact_lexical_index(text,text) IS 'Compact the write scope''s lexical index, for the writer''s classifications: the postings of lexemes with fewer than 128 in a classification move from their blocks into pages shared by the lexemes of a bucket (a row per rare lexeme is most of the index otherwise), lexemes that reached 128 move back to blocks, and tombstoned postings of the rewritten pages go. Rows another transaction holds are left for a later run (it never waits on a writer). Returns the rows read and written and the postings moved. Searches return the same rows, scores and terms before and after. The Ingestor runs it after each ingest run. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.compact_lexical_index(text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.compact_lexical_index(text,text) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0022';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
