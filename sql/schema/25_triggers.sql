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

CREATE FUNCTION pyretrieve.stamp_lexical_generation()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.lexical_generation := nextval(pyretrieve.scope_sequence(NEW.workspace_id, NEW.project_id));
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

CREATE FUNCTION pyretrieve.postings_insert()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO pyretrieve.postings (workspace_id, project_id, lexeme, fragment_id, tf, doc_length,
                                     classification, observed_at, expires_at)
    SELECT r.workspace_id, r.project_id, u.lexeme, r.fragment_id,
           least(greatest(cardinality(u.positions), 1), 256), r.doc_length,
           r.classification, r.observed_at, r.expires_at
      FROM changed r CROSS JOIN LATERAL unnest(r.tsv) AS u
     WHERE r.state = 'active';
    PERFORM pyretrieve.log_statistics(ARRAY(
        SELECT ROW(r.workspace_id, r.project_id, r.classification, r.observed_at, r.expires_at,
                   1, r.doc_length, r.lexical_generation)::pyretrieve.statistics_delta
          FROM changed r
         WHERE r.state = 'active'));
    RETURN NULL;
END;
$$;

-- A fragment leaves the index when it stops being active (superseded, retracted). Its lexemes
-- come from its own tsvector, so the delete walks the primary key, not the table.
CREATE FUNCTION pyretrieve.postings_update()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM pyretrieve.postings p
     USING (SELECT o.workspace_id, o.project_id, o.fragment_id, u.lexeme
              FROM before_rows o
              JOIN changed n ON n.workspace_id = o.workspace_id AND n.fragment_id = o.fragment_id
             CROSS JOIN LATERAL unnest(o.tsv) AS u
             WHERE o.state = 'active' AND n.state <> 'active') gone
     WHERE p.workspace_id = gone.workspace_id AND p.project_id = gone.project_id
       AND p.lexeme = gone.lexeme AND p.fragment_id = gone.fragment_id;
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

CREATE TRIGGER fragments_postings_insert AFTER INSERT ON pyretrieve.fragments
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.postings_insert();
CREATE TRIGGER fragments_postings_update AFTER UPDATE ON pyretrieve.fragments
    REFERENCING OLD TABLE AS before_rows NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.postings_update();

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

