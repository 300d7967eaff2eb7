-- ---------------------------------------------------------------------------------------------
-- Generations. Every fragment and embedding row is stamped by a trigger from its scope's own
-- sequence (callers cannot choose the number, and no number moves with another scope's
-- writes); the generation log follows with one row per statement and scope, not per row.
-- ---------------------------------------------------------------------------------------------

-- The generation sequence of a scope (created with the project).
CREATE FUNCTION pyretrieve.scope_sequence(p_workspace text, p_project text)
RETURNS regclass
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT p.generation_seq FROM pyretrieve.projects p
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
END;

-- A fragment's document number in the lexical index is the generation it is first stamped
-- with (unique in its scope), and never changes. Document numbers are int4, as the index keeps
-- them: a scope runs out after 2,147,483,647 generations.
CREATE FUNCTION pyretrieve.stamp_lexical_generation()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

CREATE FUNCTION pyretrieve.stamp_vector_generation()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.vector_generation := nextval(pyretrieve.scope_sequence(NEW.workspace_id, NEW.project_id));
    NEW.embedded_at := now();
    RETURN NEW;
END;
$$;

CREATE FUNCTION pyretrieve.bump_scope_lexical()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO pyretrieve.generation_log (workspace_id, project_id, kind, generation)
    SELECT r.workspace_id, r.project_id, 'lexical', max(r.lexical_generation)
      FROM changed r
     GROUP BY r.workspace_id, r.project_id
    ON CONFLICT DO NOTHING;
    -- A configuration seen before conflicts and is skipped without taking a lock.
    INSERT INTO pyretrieve.scope_configs (workspace_id, project_id, ts_config)
    SELECT DISTINCT r.workspace_id, r.project_id, r.ts_config
      FROM changed r
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;

CREATE FUNCTION pyretrieve.bump_scope_vector()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- A refresh of the mirrored fragment columns keeps the generation, which is then
    -- already logged.
    INSERT INTO pyretrieve.generation_log (workspace_id, project_id, kind, generation)
    SELECT r.workspace_id, r.project_id, 'vector', max(r.vector_generation)
      FROM changed r
     GROUP BY r.workspace_id, r.project_id
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;

-- The statistics log's rows for one statement, from its fragments entering the active set (+1
-- and their length) and leaving it (-1 and minus their length): summed per scope and per
-- (classification, observed_at, expires_at), groups that cancel out left out. Each scope's rows
-- carry the highest generation the statement stamped there, unique to the statement.
CREATE FUNCTION pyretrieve.log_statistics(p_delta pyretrieve.statistics_delta[])
RETURNS void
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO pyretrieve.statistics_log (workspace_id, project_id, generation, position,
                                           classification, observed_at, expires_at,
                                           fragments, length_sum)
    SELECT g.workspace_id, g.project_id,
           max(g.generation) OVER (PARTITION BY g.workspace_id, g.project_id),
           (row_number() OVER (PARTITION BY g.workspace_id, g.project_id
                               ORDER BY g.classification, g.observed_at, g.expires_at))::integer,
           g.classification, g.observed_at, g.expires_at, g.fragments, g.length_sum
      FROM (SELECT x.workspace_id, x.project_id, x.classification, x.observed_at, x.expires_at,
                   max(x.generation) AS generation,
                   sum(x.fragments)::bigint AS fragments, sum(x.length_sum)::bigint AS length_sum
              FROM unnest(p_delta) x
             GROUP BY x.workspace_id, x.project_id, x.classification, x.observed_at, x.expires_at
            HAVING sum(x.fragments) <> 0 OR sum(x.length_sum) <> 0) g;
END;
$$;

-- Rewrites, for each (lexeme, classification) of a scope it is given, the blocks not yet full
-- and the blocks with a tombstone in their range, as far as no other transaction holds them
-- (FOR UPDATE SKIP LOCKED: a writer never waits on another here, and never takes a block
-- another is rewriting). A lexeme is rewritten when that drops a tombstoned posting, or merges
-- blocks not full: at once while they hold 16 postings or fewer together (a rare lexeme keeps
-- one row), else once four have gathered, so a lexeme that gains a few postings in every batch
-- is not rewritten in every batch (each rewrite leaves the old rows to vacuum). Its postings,
-- less the tombstoned ones (whose tombstones go), in document-number order, are cut into blocks
-- of 128 again. A new block's time range spans its sources' (the range of a superset still
-- bounds its fragments).
CREATE FUNCTION pyretrieve.merge_lexical_blocks(
    p_workspace text, p_project text, p_lexemes text[], p_classes pyretrieve.classification[])
RETURNS void
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lexemes text[];
    v_classes pyretrieve.classification[];
    v_firsts integer[];
BEGIN
    SELECT array_agg(c.lexeme), array_agg(c.classification), array_agg(c.first_docno)
      INTO v_lexemes, v_classes, v_firsts
      FROM (SELECT h.*,
                   count(*) FILTER (WHERE h.postings < 128)
                       OVER (PARTITION BY h.lexeme, h.classification) AS partial,
                   sum(h.postings) FILTER (WHERE h.postings < 128)
                       OVER (PARTITION BY h.lexeme, h.classification) AS partial_postings,
                   bool_or(h.tombstoned) OVER (PARTITION BY h.lexeme, h.classification) AS dropping
              FROM (SELECT b.lexeme, b.classification, b.first_docno, b.postings,
                           EXISTS (SELECT 1 FROM pyretrieve.lexical_tombstones x
                                    WHERE x.workspace_id = p_workspace AND x.project_id = p_project
                                      AND x.lexeme = b.lexeme AND x.classification = b.classification
                                      AND x.docno BETWEEN b.first_docno AND b.last_docno
                                      AND x.docno = ANY (b.docnos)) AS tombstoned
                      FROM pyretrieve.lexical_blocks b
                      JOIN (SELECT DISTINCT t.lexeme, t.classification
                              FROM unnest(p_lexemes, p_classes) AS t(lexeme, classification)) t
                        ON b.lexeme = t.lexeme AND b.classification = t.classification
                     WHERE b.workspace_id = p_workspace AND b.project_id = p_project
                       AND (b.postings < 128
                            OR EXISTS (SELECT 1 FROM pyretrieve.lexical_tombstones x
                                        WHERE x.workspace_id = p_workspace AND x.project_id = p_project
                                          AND x.lexeme = b.lexeme AND x.classification = b.classification
                                          AND x.docno BETWEEN b.first_docno AND b.last_docno))
                       FOR UPDATE OF b SKIP LOCKED) h) c
     WHERE c.dropping OR (c.partial >= 2 AND (c.partial_postings <= 16 OR c.partial >= 4));
    IF v_lexemes IS NULL THEN
        RETURN;
    END IF;
    WITH gone AS (
        DELETE FROM pyretrieve.lexical_blocks b
         USING unnest(v_lexemes, v_classes, v_firsts) AS h(lexeme, classification, first_docno)
         WHERE b.workspace_id = p_workspace AND b.project_id = p_project
           AND b.lexeme = h.lexeme AND b.classification = h.classification
           AND b.first_docno = h.first_docno
        RETURNING b.*
    ), posting AS (
        SELECT gone.lexeme, gone.classification, u.docno, u.entry,
               gone.min_observed_at, gone.max_observed_at, gone.min_expires_at, gone.max_expires_at
          FROM gone CROSS JOIN LATERAL unnest(gone.docnos, gone.entries) AS u(docno, entry)
    ), dropped AS (
        DELETE FROM pyretrieve.lexical_tombstones x
         USING posting p
         WHERE x.workspace_id = p_workspace AND x.project_id = p_project
           AND x.lexeme = p.lexeme AND x.classification = p.classification AND x.docno = p.docno
        RETURNING x.lexeme, x.classification, x.docno
    ), kept AS (
        SELECT p.*, (row_number() OVER (PARTITION BY p.lexeme, p.classification ORDER BY p.docno) - 1) / 128 AS chunk
          FROM posting p
         WHERE NOT EXISTS (SELECT 1 FROM dropped d
                            WHERE d.lexeme = p.lexeme AND d.classification = p.classification
                              AND d.docno = p.docno)
    )
    INSERT INTO pyretrieve.lexical_blocks (
        workspace_id, project_id, lexeme, classification, first_docno, last_docno, postings,
        max_tf, min_length, min_observed_at, max_observed_at, min_expires_at, max_expires_at,
        docnos, entries)
    SELECT p_workspace, p_project, k.lexeme, k.classification, min(k.docno), max(k.docno),
           count(*)::integer, max(((k.entry >> 24) & 255) + 1), min(k.entry & 16777215),
           min(k.min_observed_at), max(k.max_observed_at), min(k.min_expires_at),
           CASE WHEN bool_and(k.max_expires_at IS NOT NULL) THEN max(k.max_expires_at) END,
           array_agg(k.docno ORDER BY k.docno), array_agg(k.entry ORDER BY k.docno)
      FROM kept k
     GROUP BY k.lexeme, k.classification, k.chunk;
END;
$$;

-- New active fragments join the lexical index: per scope, lexeme and classification, their
-- postings in document-number order cut into blocks of 128, then the lexemes left with a block
-- not full are merged (merge_lexical_blocks). tf is the number of positions (at least 1, at most
-- the 256 a tsvector keeps); a length fits 24 bits, as a body holds at most 1,000,000
-- characters. The statistics log follows.
CREATE FUNCTION pyretrieve.lexical_index_insert()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
BEGIN
    FOR s IN
        WITH added AS (
            INSERT INTO pyretrieve.lexical_blocks (
                workspace_id, project_id, lexeme, classification, first_docno, last_docno,
                postings, max_tf, min_length, min_observed_at, max_observed_at, min_expires_at,
                max_expires_at, docnos, entries)
            SELECT x.workspace_id, x.project_id, x.lexeme, x.classification, min(x.docno),
                   max(x.docno), count(*)::integer, max(x.tf), min(x.doc_length),
                   min(x.observed_at), max(x.observed_at), min(x.expires_at),
                   CASE WHEN bool_and(x.expires_at IS NOT NULL) THEN max(x.expires_at) END,
                   array_agg(x.docno ORDER BY x.docno),
                   array_agg(((x.tf - 1) << 24) | x.doc_length ORDER BY x.docno)
              FROM (SELECT r.workspace_id, r.project_id, u.lexeme, r.classification, r.docno,
                           least(greatest(cardinality(u.positions), 1), 256) AS tf, r.doc_length,
                           r.observed_at, r.expires_at,
                           (row_number() OVER (PARTITION BY r.workspace_id, r.project_id, u.lexeme,
                                                            r.classification
                                               ORDER BY r.docno) - 1) / 128 AS chunk
                      FROM changed r CROSS JOIN LATERAL unnest(r.tsv) AS u
                     WHERE r.state = 'active') x
             GROUP BY x.workspace_id, x.project_id, x.lexeme, x.classification, x.chunk
            RETURNING workspace_id, project_id, lexeme, classification, postings
        )
        SELECT a.workspace_id, a.project_id, array_agg(a.lexeme) AS lexemes,
               array_agg(a.classification) AS classes
          FROM added a
         WHERE a.postings < 128
         GROUP BY a.workspace_id, a.project_id
    LOOP
        PERFORM pyretrieve.merge_lexical_blocks(s.workspace_id, s.project_id, s.lexemes, s.classes);
    END LOOP;
    PERFORM pyretrieve.log_statistics(ARRAY(
        SELECT ROW(r.workspace_id, r.project_id, r.classification, r.observed_at, r.expires_at,
                   1, r.doc_length, r.lexical_generation)::pyretrieve.statistics_delta
          FROM changed r
         WHERE r.state = 'active'));
    RETURN NULL;
END;
$$;

-- A fragment leaves the lexical index when it stops being active (superseded, retracted): each
-- of its postings becomes a tombstone, and merge_lexical_blocks then drops them from the blocks
-- no other transaction holds (the rest when a later write merges those). Its lexemes come from
-- its own tsvector.
CREATE FUNCTION pyretrieve.lexical_index_update()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
BEGIN
    FOR s IN
        WITH added AS (
            INSERT INTO pyretrieve.lexical_tombstones (workspace_id, project_id, lexeme, classification, docno)
            SELECT o.workspace_id, o.project_id, u.lexeme, o.classification, o.docno
              FROM before_rows o
              JOIN changed n ON n.workspace_id = o.workspace_id AND n.fragment_id = o.fragment_id
             CROSS JOIN LATERAL unnest(o.tsv) AS u
             WHERE o.state = 'active' AND n.state <> 'active'
            RETURNING workspace_id, project_id, lexeme, classification
        )
        SELECT a.workspace_id, a.project_id, array_agg(a.lexeme) AS lexemes,
               array_agg(a.classification) AS classes
          FROM added a
         GROUP BY a.workspace_id, a.project_id
    LOOP
        PERFORM pyretrieve.merge_lexical_blocks(s.workspace_id, s.project_id, s.lexemes, s.classes);
    END LOOP;
    PERFORM pyretrieve.log_statistics(ARRAY(
        SELECT ROW(x.workspace_id, x.project_id, x.classification, x.observed_at, x.expires_at,
                   x.fragments, x.length_sum, g.generation)::pyretrieve.statistics_delta
          FROM (SELECT n.workspace_id, n.project_id, n.classification, n.observed_at,
                       n.expires_at, 1 AS fragments, n.doc_length AS length_sum
                  FROM changed n WHERE n.state = 'active'
                UNION ALL
                SELECT o.workspace_id, o.project_id, o.classification, o.observed_at,
                       o.expires_at, -1, -o.doc_length
                  FROM before_rows o WHERE o.state = 'active') x
          JOIN (SELECT n.workspace_id, n.project_id, max(n.lexical_generation) AS generation
                  FROM changed n
                 GROUP BY n.workspace_id, n.project_id) g
            ON g.workspace_id = x.workspace_id AND g.project_id = x.project_id));
    -- Embeddings re-read their fragment's state (the mirror trigger sets the value).
    UPDATE pyretrieve.embeddings e
       SET fragment_state = n.state
      FROM before_rows o
      JOIN changed n ON n.workspace_id = o.workspace_id AND n.fragment_id = o.fragment_id
     WHERE o.state IS DISTINCT FROM n.state
       AND e.workspace_id = n.workspace_id AND e.fragment_id = n.fragment_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER fragments_lexical_insert AFTER INSERT ON pyretrieve.fragments
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.lexical_index_insert();
CREATE TRIGGER fragments_lexical_update AFTER UPDATE ON pyretrieve.fragments
    REFERENCING OLD TABLE AS before_rows NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.lexical_index_update();

CREATE TRIGGER fragments_stamp BEFORE INSERT OR UPDATE ON pyretrieve.fragments
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.stamp_lexical_generation();
CREATE TRIGGER fragments_bump_insert AFTER INSERT ON pyretrieve.fragments
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_lexical();
CREATE TRIGGER fragments_bump_update AFTER UPDATE ON pyretrieve.fragments
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_lexical();
-- An embedding takes its fragment's classification, state and times from the fragment row on
-- every write (the caller cannot set them), and the fragments' update trigger refreshes them
-- when a fragment changes state.
CREATE FUNCTION pyretrieve.mirror_fragment()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f record;
BEGIN
    SELECT fr.project_id, fr.classification, fr.state, fr.observed_at, fr.expires_at INTO f
      FROM pyretrieve.fragments fr
     WHERE fr.workspace_id = NEW.workspace_id AND fr.fragment_id = NEW.fragment_id;
    IF NOT FOUND OR f.project_id <> NEW.project_id THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
    NEW.classification := f.classification;
    NEW.fragment_state := f.state;
    NEW.observed_at := f.observed_at;
    NEW.expires_at := f.expires_at;
    NEW.scope_serial := (SELECT p.scope_serial FROM pyretrieve.projects p
                          WHERE p.workspace_id = NEW.workspace_id AND p.project_id = NEW.project_id);
    RETURN NEW;
END;
$$;
CREATE TRIGGER embeddings_mirror BEFORE INSERT OR UPDATE ON pyretrieve.embeddings
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.mirror_fragment();
-- A state refresh is not a new vector: the generation moves only when the vector or its
-- source digest is written.
CREATE TRIGGER embeddings_stamp BEFORE INSERT OR UPDATE OF embedding, source_digest ON pyretrieve.embeddings
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.stamp_vector_generation();
CREATE TRIGGER embeddings_bump_insert AFTER INSERT ON pyretrieve.embeddings
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_vector();
CREATE TRIGGER embeddings_bump_update AFTER UPDATE ON pyretrieve.embeddings
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.bump_scope_vector();

-- The count log's rows for one statement's new embeddings: one per scope and model, carrying
-- the highest generation the statement stamped in the scope (unique to the statement).
CREATE FUNCTION pyretrieve.count_embeddings()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO pyretrieve.embedding_count_log (workspace_id, project_id, generation, position,
                                                model_id, embeddings)
    SELECT g.workspace_id, g.project_id,
           max(g.generation) OVER (PARTITION BY g.workspace_id, g.project_id),
           (row_number() OVER (PARTITION BY g.workspace_id, g.project_id
                               ORDER BY g.model_id COLLATE "C"))::integer,
           g.model_id, g.embeddings
      FROM (SELECT r.workspace_id, r.project_id, r.model_id,
                   max(r.vector_generation) AS generation, count(*) AS embeddings
              FROM changed r
             GROUP BY r.workspace_id, r.project_id, r.model_id) g;
    RETURN NULL;
END;
$$;
CREATE TRIGGER embeddings_count AFTER INSERT ON pyretrieve.embeddings
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.count_embeddings();

