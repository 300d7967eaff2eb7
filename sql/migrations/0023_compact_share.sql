-- pyretrieve migration 0023: compact_share
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP FUNCTION pyretrieve.compact_lexical_index(text,text) CASCADE;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.compact_lexical_index(p_workspace text, p_project text, p_min_share double precision DEFAULT 0)
 RETURNS TABLE(rows_read integer, rows_written integer, postings integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_ceiling pyretrieve.classification := pyretrieve.bind_write_scope(p_workspace, p_project);
    v_small bigint;
    v_paged bigint;
BEGIN
    IF p_min_share IS NULL OR p_min_share = 'NaN'::double precision OR p_min_share < 0
       OR p_min_share = 'Infinity'::double precision THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'min share must be a finite number of at least 0';
    END IF;
    IF p_min_share > 0 THEN
        SELECT coalesce(sum(b.postings), 0)
               + (SELECT count(*) FROM pyretrieve.lexical_tombstones t
                   WHERE t.workspace_id = p_workspace AND t.project_id = p_project
                     AND t.classification <= v_ceiling)
          INTO v_small
          FROM pyretrieve.lexical_blocks b
         WHERE b.workspace_id = p_workspace AND b.project_id = p_project
           AND b.classification <= v_ceiling AND b.postings < 128;
        SELECT coalesce(sum(p.postings), 0) INTO v_paged
          FROM pyretrieve.lexical_pages p
         WHERE p.workspace_id = p_workspace AND p.project_id = p_project
           AND p.classification <= v_ceiling;
        IF v_small < p_min_share * v_paged THEN
            RETURN QUERY SELECT 0, 0, 0;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT c.rows_read, c.rows_written, c.postings
                   FROM pyretrieve.compact_lexical_postings(p_workspace, p_project, v_ceiling) c;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.compact_lexical_index(text,text,double precision) IS 'Compact the write scope''s lexical index, for the writer''s classifications: the postings of lexemes with fewer than 128 in a classification move from their blocks into pages shared by the lexemes of a bucket (a row per rare lexeme is most of the index otherwise), lexemes that reached 128 move back to blocks, and tombstoned postings of the rewritten pages go. Rows another transaction holds are left for a later run (it never waits on a writer). p_min_share > 0 compacts only when the postings in blocks not full and the tombstones are at least that share of the postings in pages, else returns zeros (the Ingestor runs it after each ingest run with 1, so a growing scope rewrites each posting a bounded number of times); 0, the default, always compacts. Raises PR010 for a share that is negative, infinite or not a number. Returns the rows read and written and the postings moved. Searches return the same rows, scores and terms before and after. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.compact_lexical_index(text,text,double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.compact_lexical_index(text,text,double precision) TO pyretrieve_writer;
SET LOCAL ROLE pyretrieve_owner;

UPDATE pyretrieve.installation SET schema_version = '0023';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
