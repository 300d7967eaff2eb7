-- pyretrieve migration 0003: a lexical leg worth fusing.
--
-- * Scope-local BM25 over a postings table derived from each fragment's tsvector. Corpus
--   statistics (document count, average length, document frequency) are computed per query
--   from the rows the caller may see under the decision, so a hidden fragment can change no
--   visible score, and no shared statistics row exists for concurrent writers to queue on.
-- * Per-scope generations and text-search configurations move to append-only tables; the
--   former scope_generations table becomes a view over them. Writers no longer update one
--   shared row per scope, so concurrent ingestion into a scope does not serialise.
-- * Weighted Reciprocal Rank Fusion in search(): w / (60 + rank), weights shown in the
--   explanation; matched terms with idf, tf and length normalisation explain a lexical hit.
-- * Embeddings carry their fragment's classification, state and times (kept by triggers), so
--   the vector leg filters the scope's embeddings on their own columns and joins the fragments
--   only for the rows it returns.
--
-- Executed by the Alembic revision pyretrieve_0003; sql/pyretrieve.sql holds the same end state.
-- Run as the installer, in one transaction.

SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------------------------
-- BM25 parameters per project, and each fragment's length in tokens.
-- ---------------------------------------------------------------------------------------------
ALTER TABLE pyretrieve.projects
    ADD COLUMN bm25_k1 double precision NOT NULL DEFAULT 0.9 CHECK (bm25_k1 > 0 AND bm25_k1 <= 10),
    ADD COLUMN bm25_b double precision NOT NULL DEFAULT 0.4 CHECK (bm25_b >= 0 AND bm25_b <= 1);

-- The number of token positions in a tsvector: BM25's document length. A lexeme stored without
-- positions counts once.
CREATE FUNCTION pyretrieve.tsvector_length(p_tsv tsvector)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(sum(greatest(cardinality(u.positions), 1)), 0)::integer
      FROM unnest(p_tsv) AS u;
END;
COMMENT ON FUNCTION pyretrieve.tsvector_length(tsvector) IS
    'BM25 document length: the number of token positions in a tsvector (a lexeme without positions counts once).';

-- A generated column cannot read another generated column, so the tsvector is computed again.
ALTER TABLE pyretrieve.fragments
    ADD COLUMN doc_length integer
    GENERATED ALWAYS AS (pyretrieve.tsvector_length(pg_catalog.to_tsvector(ts_config, body))) STORED;

-- The scope's statistics scan reads only this index (document count and length of the rows
-- the decision admits).
DROP INDEX pyretrieve.fragments_scope_idx;
CREATE INDEX fragments_scope_idx
    ON pyretrieve.fragments (workspace_id, project_id, state, classification)
    INCLUDE (observed_at, expires_at, doc_length);

-- ---------------------------------------------------------------------------------------------
-- Postings: one row per (active fragment, lexeme), carrying the columns the read policy needs,
-- so term statistics and scoring read this table alone through its primary key.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE pyretrieve.postings (
    workspace_id    pyretrieve.identifier NOT NULL,
    project_id      pyretrieve.identifier NOT NULL,
    lexeme          text NOT NULL,
    fragment_id     uuid NOT NULL,
    tf              integer NOT NULL CHECK (tf BETWEEN 1 AND 256),
    doc_length      integer NOT NULL,
    classification  pyretrieve.classification NOT NULL,
    observed_at     timestamptz NOT NULL,
    expires_at      timestamptz,
    PRIMARY KEY (workspace_id, project_id, lexeme, fragment_id)
);
COMMENT ON TABLE pyretrieve.postings IS
    'Postings of active fragments (lexeme, term frequency, document length) with the fragment''s classification and times, maintained by triggers; its read policy admits exactly the postings of fragments the decision admits.';

-- ---------------------------------------------------------------------------------------------
-- Generations and configurations, append-only.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE pyretrieve.generation_log (
    workspace_id  pyretrieve.identifier NOT NULL,
    project_id    pyretrieve.identifier NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('lexical', 'vector')),
    generation    bigint NOT NULL,
    logged_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (workspace_id, project_id, kind, generation)
);
COMMENT ON TABLE pyretrieve.generation_log IS
    'One row per writing statement and scope: the highest generation it stamped. A scope''s index generation is the highest logged one; appending never waits on another writer.';

CREATE TABLE pyretrieve.scope_configs (
    workspace_id  pyretrieve.identifier NOT NULL,
    project_id    pyretrieve.identifier NOT NULL,
    ts_config     regconfig NOT NULL,
    PRIMARY KEY (workspace_id, project_id, ts_config),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects
);
COMMENT ON TABLE pyretrieve.scope_configs IS
    'The text-search configurations used in a scope, so a query is parsed once per configuration.';

-- The owner is bound by FORCE ROW LEVEL SECURITY and has no policy on tenant tables, so the
-- backfills below run with RLS not forced on the tables they read and write; it is forced
-- again before this transaction ends.
ALTER TABLE pyretrieve.fragments NO FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.embeddings NO FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.scope_generations NO FORCE ROW LEVEL SECURITY;

-- Embeddings mirror their fragment's visibility columns.
ALTER TABLE pyretrieve.embeddings
    ADD COLUMN classification pyretrieve.classification,
    ADD COLUMN fragment_state pyretrieve.fragment_state,
    ADD COLUMN observed_at timestamptz,
    ADD COLUMN expires_at timestamptz;
ALTER TABLE pyretrieve.embeddings DISABLE TRIGGER embeddings_stamp;
ALTER TABLE pyretrieve.embeddings DISABLE TRIGGER embeddings_bump_update;
UPDATE pyretrieve.embeddings e
   SET classification = f.classification, fragment_state = f.state,
       observed_at = f.observed_at, expires_at = f.expires_at
  FROM pyretrieve.fragments f
 WHERE f.workspace_id = e.workspace_id AND f.fragment_id = e.fragment_id;
ALTER TABLE pyretrieve.embeddings ENABLE TRIGGER embeddings_stamp;
ALTER TABLE pyretrieve.embeddings ENABLE TRIGGER embeddings_bump_update;
ALTER TABLE pyretrieve.embeddings
    ALTER COLUMN classification SET NOT NULL,
    ALTER COLUMN fragment_state SET NOT NULL,
    ALTER COLUMN observed_at SET NOT NULL;

INSERT INTO pyretrieve.scope_configs (workspace_id, project_id, ts_config)
SELECT sg.workspace_id, sg.project_id, c.cfg
  FROM pyretrieve.scope_generations sg CROSS JOIN LATERAL unnest(sg.ts_configs) AS c(cfg);
INSERT INTO pyretrieve.generation_log (workspace_id, project_id, kind, generation)
SELECT sg.workspace_id, sg.project_id, k.kind, k.generation
  FROM pyretrieve.scope_generations sg
 CROSS JOIN LATERAL (VALUES ('lexical', sg.lexical_generation), ('vector', sg.vector_generation)) AS k(kind, generation)
 WHERE k.generation > 0;
INSERT INTO pyretrieve.postings (workspace_id, project_id, lexeme, fragment_id, tf, doc_length,
                                 classification, observed_at, expires_at)
SELECT f.workspace_id, f.project_id, u.lexeme, f.fragment_id,
       least(greatest(cardinality(u.positions), 1), 256), f.doc_length,
       f.classification, f.observed_at, f.expires_at
  FROM pyretrieve.fragments f CROSS JOIN LATERAL unnest(f.tsv) AS u
 WHERE f.state = 'active';

ALTER TABLE pyretrieve.fragments FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.embeddings FORCE ROW LEVEL SECURITY;

DROP TRIGGER scope_generations_forward ON pyretrieve.scope_generations;
DROP FUNCTION pyretrieve.scope_generations_forward();
DROP TABLE pyretrieve.scope_generations;

CREATE VIEW pyretrieve.scope_generations WITH (security_invoker = true) AS
SELECT p.workspace_id, p.project_id,
       coalesce((SELECT max(l.generation) FROM pyretrieve.generation_log l
                  WHERE l.workspace_id = p.workspace_id AND l.project_id = p.project_id
                    AND l.kind = 'lexical'), 0) AS lexical_generation,
       coalesce((SELECT max(l.generation) FROM pyretrieve.generation_log l
                  WHERE l.workspace_id = p.workspace_id AND l.project_id = p.project_id
                    AND l.kind = 'vector'), 0) AS vector_generation,
       ARRAY(SELECT c.ts_config FROM pyretrieve.scope_configs c
              WHERE c.workspace_id = p.workspace_id AND c.project_id = p.project_id
              ORDER BY c.ts_config) AS ts_configs
  FROM pyretrieve.projects p;
COMMENT ON VIEW pyretrieve.scope_generations IS
    'Per-scope index generations (the highest lexical and vector generation written) and text-search configurations, as the caller may see them.';

-- ---------------------------------------------------------------------------------------------
-- Triggers: postings follow the fragments; the logs grow by one row per statement and scope.
-- ---------------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION pyretrieve.bump_scope_lexical()
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

CREATE OR REPLACE FUNCTION pyretrieve.bump_scope_vector()
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
    RETURN NEW;
END;
$$;
CREATE TRIGGER embeddings_mirror BEFORE INSERT OR UPDATE ON pyretrieve.embeddings
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.mirror_fragment();
-- A state refresh is not a new vector: the generation moves only when the vector or its
-- source digest is written.
DROP TRIGGER embeddings_stamp ON pyretrieve.embeddings;
CREATE TRIGGER embeddings_stamp BEFORE INSERT OR UPDATE OF embedding, source_digest ON pyretrieve.embeddings
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.stamp_vector_generation();

CREATE TRIGGER fragments_postings_insert AFTER INSERT ON pyretrieve.fragments
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.postings_insert();
CREATE TRIGGER fragments_postings_update AFTER UPDATE ON pyretrieve.fragments
    REFERENCING OLD TABLE AS before_rows NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.postings_update();

-- ---------------------------------------------------------------------------------------------
-- Row-level security for the new tables: the same filters as the fragments and projects.
-- ---------------------------------------------------------------------------------------------
ALTER TABLE pyretrieve.postings       ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.generation_log ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.scope_configs  ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;

CREATE POLICY postings_read ON pyretrieve.postings FOR SELECT TO pyretrieve_reader
    USING (workspace_id = (SELECT d.workspace_id FROM pyretrieve.bound_decision() d)
       AND project_id = (SELECT d.project_id FROM pyretrieve.bound_decision() d)
       AND classification <= (SELECT d.ceiling FROM pyretrieve.bound_decision() d)
       AND observed_at <= (SELECT d.evaluated_at FROM pyretrieve.bound_decision() d)
       AND observed_at >= coalesce((SELECT d.evaluated_at - d.max_age FROM pyretrieve.bound_decision() d),
                                   '-infinity'::timestamptz)
       AND (expires_at IS NULL OR expires_at > (SELECT d.evaluated_at FROM pyretrieve.bound_decision() d)));
CREATE POLICY postings_write_read ON pyretrieve.postings FOR SELECT TO pyretrieve_writer
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.write_scope() w));
CREATE POLICY postings_insert ON pyretrieve.postings FOR INSERT TO pyretrieve_writer
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.write_scope() w));
CREATE POLICY postings_delete ON pyretrieve.postings FOR DELETE TO pyretrieve_writer
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.write_scope() w));

DROP POLICY embeddings_read ON pyretrieve.embeddings;
DROP POLICY embeddings_insert ON pyretrieve.embeddings;
DROP POLICY embeddings_update ON pyretrieve.embeddings;
CREATE POLICY embeddings_read ON pyretrieve.embeddings FOR SELECT TO pyretrieve_reader
    USING (workspace_id = (SELECT d.workspace_id FROM pyretrieve.bound_decision() d)
       AND project_id = (SELECT d.project_id FROM pyretrieve.bound_decision() d)
       AND fragment_state = 'active'
       AND classification <= (SELECT d.ceiling FROM pyretrieve.bound_decision() d)
       AND observed_at <= (SELECT d.evaluated_at FROM pyretrieve.bound_decision() d)
       AND observed_at >= coalesce((SELECT d.evaluated_at - d.max_age FROM pyretrieve.bound_decision() d),
                                   '-infinity'::timestamptz)
       AND (expires_at IS NULL OR expires_at > (SELECT d.evaluated_at FROM pyretrieve.bound_decision() d)));
CREATE POLICY embeddings_write_read ON pyretrieve.embeddings FOR SELECT TO pyretrieve_writer
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.write_scope() w));
CREATE POLICY embeddings_insert ON pyretrieve.embeddings FOR INSERT TO pyretrieve_writer
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.write_scope() w));
CREATE POLICY embeddings_update ON pyretrieve.embeddings FOR UPDATE TO pyretrieve_writer
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.write_scope() w))
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.write_scope() w));

CREATE POLICY generation_log_read ON pyretrieve.generation_log FOR SELECT TO pyretrieve_reader
    USING ((workspace_id = (SELECT d.workspace_id FROM pyretrieve.bound_decision() d)
            AND project_id = (SELECT d.project_id FROM pyretrieve.bound_decision() d))
        OR (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
            AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)));
-- A writer logs only generations the sequence has issued, so a scope's generation cannot be
-- pushed ahead by hand (nor back: the log is append-only and the generation is its maximum).
CREATE POLICY generation_log_insert ON pyretrieve.generation_log FOR INSERT TO pyretrieve_writer
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)
       AND generation <= (SELECT s.last_value FROM pyretrieve.generation_seq s));
CREATE POLICY generation_log_admin ON pyretrieve.generation_log FOR SELECT TO pyretrieve_admin
    USING (true);

CREATE POLICY scope_configs_read ON pyretrieve.scope_configs FOR SELECT TO pyretrieve_reader
    USING ((workspace_id = (SELECT d.workspace_id FROM pyretrieve.bound_decision() d)
            AND project_id = (SELECT d.project_id FROM pyretrieve.bound_decision() d))
        OR (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
            AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w)));
CREATE POLICY scope_configs_insert ON pyretrieve.scope_configs FOR INSERT TO pyretrieve_writer
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.write_scope() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.write_scope() w));
CREATE POLICY scope_configs_admin ON pyretrieve.scope_configs FOR ALL TO pyretrieve_admin
    USING (true) WITH CHECK (true);

-- ---------------------------------------------------------------------------------------------
-- create_project records the scope's default configuration in scope_configs.
-- ---------------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION pyretrieve.create_project(
    p_workspace text, p_project text, p_ts_config regconfig DEFAULT 'pg_catalog.english')
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM 1 FROM pyretrieve.workspaces w WHERE w.workspace_id = p_workspace;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'workspace not found';
    END IF;
    INSERT INTO pyretrieve.projects (workspace_id, project_id, ts_config)
    VALUES (p_workspace, p_project, coalesce(p_ts_config, 'pg_catalog.english'))
    ON CONFLICT (workspace_id, project_id) DO NOTHING;
    INSERT INTO pyretrieve.scope_configs (workspace_id, project_id, ts_config)
    VALUES (p_workspace, p_project, coalesce(p_ts_config, 'pg_catalog.english'))
    ON CONFLICT DO NOTHING;
    RETURN p_project;
END;
$$;

-- Per-project BM25 parameters (admins).
CREATE FUNCTION pyretrieve.set_bm25(p_workspace text, p_project text, p_k1 double precision, p_b double precision)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_k1 IS NULL OR NOT (p_k1 > 0 AND p_k1 <= 10) OR p_b IS NULL OR NOT (p_b >= 0 AND p_b <= 1) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'k1 must be in (0, 10] and b in [0, 1]';
    END IF;
    UPDATE pyretrieve.projects p SET bm25_k1 = p_k1, bm25_b = p_b
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'project not found';
    END IF;
END;
$$;
COMMENT ON FUNCTION pyretrieve.set_bm25(text, text, double precision, double precision) IS
    'Set a project''s BM25 parameters k1 (term-frequency saturation, default 0.9) and b (length normalisation, default 0.4). Admins only.';

-- ---------------------------------------------------------------------------------------------
-- Vector candidates: filter the embeddings on their own columns, join fragments for the top.
-- ---------------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION pyretrieve.vector_candidates(p_decision uuid, p_model text, p_embedding public.vector, p_limit integer)
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, distance double precision,
               source_digest bytea, vector_generation bigint, lexical_generation bigint)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    PERFORM pyretrieve.check_embedding(p_model, p_embedding);
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'candidate limit out of range for this decision';
    END IF;

    -- Exact cosine distance over the scope's embeddings of the model, filtered on the
    -- fragment columns each embedding carries (the decision's filters, stated explicitly with
    -- the scope as parameters for embeddings_scope_idx, and applied again by RLS). Under RLS the
    -- distance operator is not leakproof, so a global HNSW index would filter after the scan
    -- and lose recall on small scopes; exact search has recall 1. Only the returned rows are
    -- joined to their fragments; every row at the p_limit-th distance competes on the
    -- content-bound tie-break, so the cut is exact.
    RETURN QUERY
    WITH scan AS MATERIALIZED (
        SELECT e.fragment_id,
               (e.embedding OPERATOR(public.<=>) p_embedding)::double precision AS distance,
               e.source_digest, e.vector_generation
          FROM pyretrieve.embeddings e
         WHERE e.workspace_id = d.workspace_id
           AND e.project_id = d.project_id
           AND e.model_id = p_model
           AND e.fragment_state = 'active'
           AND e.classification <= d.ceiling
           AND e.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR e.observed_at >= d.evaluated_at - d.max_age)
           AND (e.expires_at IS NULL OR e.expires_at > d.evaluated_at)
    ), top AS (
        SELECT s.fragment_id, f.content_digest, s.distance, s.source_digest, s.vector_generation,
               f.lexical_generation
          FROM scan s
          JOIN pyretrieve.fragments f
            ON f.workspace_id = d.workspace_id AND f.fragment_id = s.fragment_id
         WHERE s.distance <= (SELECT max(x.distance)
                                FROM (SELECT sc.distance FROM scan sc ORDER BY sc.distance LIMIT p_limit) x)
           AND f.project_id = d.project_id
           AND f.state = 'active'
           AND f.classification <= d.ceiling
           AND f.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
           AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
         ORDER BY s.distance, f.content_digest, f.fragment_id
         LIMIT p_limit
    )
    SELECT (row_number() OVER (ORDER BY t.distance, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.distance, t.source_digest, t.vector_generation,
           t.lexical_generation
      FROM top t
     ORDER BY 1;
END;
$$;

-- ---------------------------------------------------------------------------------------------
-- Lexical candidates: BM25 by default, ts_rank selectable for comparison.
-- ---------------------------------------------------------------------------------------------
DROP FUNCTION pyretrieve.lexical_candidates(uuid, text, integer);

CREATE FUNCTION pyretrieve.lexical_candidates(
    p_decision uuid, p_query text, p_limit integer, p_ranking text DEFAULT 'bm25')
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, score double precision,
               lexical_generation bigint, terms jsonb)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
    v_k1 double precision;
    v_b double precision;
BEGIN
    IF p_query IS NULL OR length(p_query) NOT BETWEEN 1 AND 4096 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query must be 1 to 4096 characters';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'candidate limit out of range for this decision';
    END IF;
    IF p_ranking IS NULL OR p_ranking NOT IN ('bm25', 'ts_rank') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'ranking must be bm25 or ts_rank';
    END IF;

    IF p_ranking = 'ts_rank' THEN
        -- The earlier scoring, kept for comparison: OR over the lexemes, ts_rank normalisation 1.
        RETURN QUERY
        WITH q AS MATERIALIZED (
            SELECT c.ts_config AS cfg, pyretrieve.or_tsquery(c.ts_config, p_query) AS tsq
              FROM pyretrieve.scope_configs c
             WHERE c.workspace_id = d.workspace_id AND c.project_id = d.project_id
        ), top AS (
            SELECT f.fragment_id, f.content_digest,
                   ts_rank(f.tsv, q.tsq, 1)::double precision AS score, f.lexical_generation
              FROM pyretrieve.fragments f
              JOIN q ON f.ts_config = q.cfg
             WHERE f.workspace_id = d.workspace_id
               AND f.project_id = d.project_id
               AND f.state = 'active'
               AND f.classification <= d.ceiling
               AND f.observed_at <= d.evaluated_at
               AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
               AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
               AND numnode(q.tsq) > 0
               AND f.tsv @@ q.tsq
             ORDER BY score DESC, f.content_digest, f.fragment_id
             LIMIT p_limit
        )
        SELECT (row_number() OVER (ORDER BY t.score DESC, t.content_digest, t.fragment_id))::integer,
               t.fragment_id, t.content_digest, t.score, t.lexical_generation, '[]'::jsonb
          FROM top t
         ORDER BY 1;
        RETURN;
    END IF;

    SELECT p.bm25_k1, p.bm25_b INTO v_k1, v_b
      FROM pyretrieve.projects p
     WHERE p.workspace_id = d.workspace_id AND p.project_id = d.project_id;

    -- BM25 with statistics of the rows this decision admits, and nothing else:
    --   idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    --   norm(d)  = k1 * (1 - b + b * |d| / avgdl)
    --   score(d) = sum over query terms t in d of qtf(t) * idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + norm(d))
    -- Every predicate is stated explicitly (the scope as parameters for the primary key) and
    -- RLS applies it again. Sums run in lexeme order (bytewise) so the float result never depends
    -- on the plan.
    RETURN QUERY
    WITH ql AS MATERIALIZED (
        SELECT u.lexeme, max(greatest(cardinality(u.positions), 1))::double precision AS qtf
          FROM pyretrieve.scope_configs c
         CROSS JOIN LATERAL unnest(to_tsvector(c.ts_config, p_query)) AS u
         WHERE c.workspace_id = d.workspace_id AND c.project_id = d.project_id
         GROUP BY u.lexeme
    ), st AS MATERIALIZED (
        SELECT count(*)::double precision AS n, coalesce(avg(f.doc_length), 0)::double precision AS avgdl
          FROM pyretrieve.fragments f
         WHERE f.workspace_id = d.workspace_id
           AND f.project_id = d.project_id
           AND f.state = 'active'
           AND f.classification <= d.ceiling
           AND f.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
           AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
    ), hits AS MATERIALIZED (
        SELECT p.fragment_id, p.lexeme, p.tf::double precision AS tf,
               p.doc_length::double precision AS doc_length, ql.qtf,
               (count(*) OVER (PARTITION BY p.lexeme))::double precision AS df
          FROM ql
          JOIN pyretrieve.postings p
            ON p.workspace_id = d.workspace_id AND p.project_id = d.project_id AND p.lexeme = ql.lexeme
         WHERE p.classification <= d.ceiling
           AND p.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR p.observed_at >= d.evaluated_at - d.max_age)
           AND (p.expires_at IS NULL OR p.expires_at > d.evaluated_at)
    ), parts AS (
        SELECT h.fragment_id, h.lexeme, h.tf, h.qtf, b.idf, b.norm,
               h.qtf * b.idf * (h.tf * (v_k1 + 1.0)) / (h.tf + b.norm) AS contribution
          FROM hits h
         CROSS JOIN st
         CROSS JOIN LATERAL (
               SELECT ln(1.0 + (st.n - h.df + 0.5) / (h.df + 0.5)) AS idf,
                      v_k1 * (1.0 - v_b + v_b * h.doc_length / st.avgdl) AS norm) b
    ), scored AS MATERIALIZED (
        -- One pass per fragment: its score and the parts of it, summed and listed in the same
        -- (bytewise lexeme) order, so the contributions add up to the score exactly. The
        -- explanation is built from the arrays for the returned rows only.
        SELECT pt.fragment_id,
               sum(pt.contribution ORDER BY pt.lexeme COLLATE "C") AS score,
               array_agg(pt.lexeme ORDER BY pt.lexeme COLLATE "C") AS t_term,
               array_agg(pt.idf ORDER BY pt.lexeme COLLATE "C") AS t_idf,
               array_agg(pt.tf ORDER BY pt.lexeme COLLATE "C") AS t_tf,
               array_agg(pt.qtf ORDER BY pt.lexeme COLLATE "C") AS t_qtf,
               array_agg(pt.norm ORDER BY pt.lexeme COLLATE "C") AS t_norm,
               array_agg(pt.contribution ORDER BY pt.lexeme COLLATE "C") AS t_contribution
          FROM parts pt
         GROUP BY pt.fragment_id
    ), top AS (
        -- Every fragment scoring at least the p_limit-th best score competes for the last
        -- places on the content-bound tie-break, so the cut is exact and plan-independent;
        -- the threshold is a sub-select, computed once.
        SELECT s.*, f.content_digest, f.lexical_generation
          FROM scored s
          JOIN pyretrieve.fragments f
            ON f.workspace_id = d.workspace_id AND f.fragment_id = s.fragment_id
         WHERE s.score >= (SELECT min(x.score)
                             FROM (SELECT sc.score FROM scored sc ORDER BY sc.score DESC LIMIT p_limit) x)
         ORDER BY s.score DESC, f.content_digest, f.fragment_id
         LIMIT p_limit
    )
    SELECT (row_number() OVER (ORDER BY t.score DESC, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.score, t.lexical_generation,
           (SELECT jsonb_agg(jsonb_build_object(
                       'term', u.term, 'idf', u.idf, 'tf', u.tf::integer,
                       'query_tf', u.qtf::integer, 'length_norm', u.norm,
                       'contribution', u.contribution) ORDER BY u.n)
              FROM unnest(t.t_term, t.t_idf, t.t_tf, t.t_qtf, t.t_norm, t.t_contribution)
                   WITH ORDINALITY AS u(term, idf, tf, qtf, norm, contribution, n))
      FROM top t
     ORDER BY 1;
END;
$$;
COMMENT ON FUNCTION pyretrieve.lexical_candidates(uuid, text, integer, text) IS
    'Lexical candidates for the bound decision. p_ranking ''bm25'' (default): BM25 over the OR of the query''s lexemes (repeated query terms count), with k1 and b from the project and corpus statistics (document count, average length, document frequency) computed only from the fragments the decision admits; ''ts_rank'': the earlier ts_rank scoring, for comparison. 1-based ranks in a total order (score desc, then content digest, then fragment id). Returns rank, fragment_id, content_digest, score, lexical_generation and terms (each matched term with idf, tf, query_tf, length_norm and contribution). Raises PR002 for a decision that is not the caller''s bound decision of this transaction.';

-- ---------------------------------------------------------------------------------------------
-- search(): weighted RRF, the ranking choice, and matched terms in the explanation.
-- ---------------------------------------------------------------------------------------------
DROP FUNCTION pyretrieve.search(text, text, text, text, public.vector, text, integer, text);

CREATE FUNCTION pyretrieve.search(
    p_workspace text,
    p_project text,
    p_purpose text,
    p_query text,
    p_embedding public.vector DEFAULT NULL,
    p_model text DEFAULT NULL,
    p_limit integer DEFAULT 10,
    p_mode text DEFAULT 'hybrid',
    p_lexical_weight double precision DEFAULT 1.0,
    p_vector_weight double precision DEFAULT 1.0,
    p_ranking text DEFAULT 'bm25')
RETURNS TABLE (
    rank integer, fragment_id uuid, content_digest bytea, body text, final_score double precision,
    rrf_score double precision, freshness double precision, confidence double precision,
    explanation jsonb)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    d record;
    v_wants_vector boolean;
    v_required boolean;
    v_intent text;
    v_embedding_digest bytea;
    v_lexical jsonb;
    v_vector jsonb;
    v_status text;
    v_reason text;
    v_evidence jsonb := '{}'::jsonb;
    v_ideal double precision := 0.0;
    v_factor double precision;
    v_stale integer;
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('hybrid', 'lexical', 'vector') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'mode must be hybrid, lexical or vector';
    END IF;
    IF p_lexical_weight IS NULL OR p_vector_weight IS NULL
       OR NOT (p_lexical_weight >= 0 AND p_lexical_weight <= 1000)
       OR NOT (p_vector_weight >= 0 AND p_vector_weight <= 1000) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'weights must be between 0 and 1000';
    END IF;
    IF p_query IS NULL OR length(p_query) NOT BETWEEN 1 AND 4096 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query must be 1 to 4096 characters';
    END IF;
    v_wants_vector := p_mode <> 'lexical';
    IF v_wants_vector AND p_embedding IS NOT NULL THEN
        v_embedding_digest := pyretrieve.embedding_digest(p_embedding);
    END IF;
    v_intent := CASE WHEN NOT v_wants_vector THEN 'disabled'
                     WHEN p_mode = 'vector' THEN 'required' ELSE 'optional' END;

    -- 1. Policy.
    SELECT * INTO d FROM pyretrieve.authorize(
        p_workspace => p_workspace, p_project => p_project, p_purpose => p_purpose,
        p_query_digest => pyretrieve.content_digest(p_query), p_semantic_intent => v_intent,
        p_embedding_digest => v_embedding_digest, p_requested_limit => p_limit);
    v_required := p_mode = 'vector' OR d.semantic_policy = 'required';

    -- 2. Lexical candidates (a failure here is a hard error).
    IF p_mode <> 'vector' THEN
        SELECT coalesce(jsonb_agg(to_jsonb(c) ORDER BY c.rank), '[]'::jsonb) INTO v_lexical
          FROM pyretrieve.lexical_candidates(d.decision_id, p_query, d.candidate_limit, p_ranking) c;
        v_ideal := v_ideal + p_lexical_weight / 61.0::double precision;
    END IF;

    -- 3. Vector candidates, when mode, intent and policy allow and an embedding exists.
    IF NOT v_wants_vector THEN
        v_status := 'not_requested';
    ELSIF d.semantic_policy = 'disabled' THEN
        v_status := 'degraded';
        v_reason := 'disabled';
        v_evidence := jsonb_build_object('policy', 'disabled');
    ELSIF p_embedding IS NULL OR p_model IS NULL THEN
        v_status := 'degraded';
        v_reason := 'missing_embedding';
        v_evidence := jsonb_build_object('model', p_model);
    ELSE
        BEGIN
            SELECT coalesce(jsonb_agg(to_jsonb(c) ORDER BY c.rank), '[]'::jsonb),
                   count(*) FILTER (WHERE c.source_digest <> c.content_digest
                                       OR c.vector_generation < c.lexical_generation)
              INTO v_vector, v_stale
              FROM pyretrieve.vector_candidates(d.decision_id, p_model, p_embedding, d.candidate_limit) c;
            IF v_stale > 0 THEN
                v_status := 'degraded';
                v_reason := 'stale';
                v_evidence := jsonb_build_object('model', p_model, 'stale_candidates', v_stale,
                                                 'candidates', jsonb_array_length(v_vector));
                v_vector := NULL;
            ELSE
                v_status := 'used';
                v_evidence := jsonb_build_object('model', p_model);
                v_ideal := v_ideal + p_vector_weight / 61.0::double precision;
            END IF;
        EXCEPTION
            WHEN SQLSTATE 'PR012' THEN
                v_status := 'degraded'; v_reason := 'unavailable';
                v_evidence := jsonb_build_object('model', p_model, 'cause', 'unknown_model');
            WHEN SQLSTATE 'PR011' THEN
                v_status := 'degraded'; v_reason := 'corrupt';
                v_evidence := jsonb_build_object('model', p_model, 'cause', 'invalid_embedding');
        END;
    END IF;
    IF v_required AND v_status IS DISTINCT FROM 'used' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR030', MESSAGE = 'semantic retrieval is required but was not available';
    END IF;
    IF NOT v_ideal > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'the weights of the modalities that ran are all zero';
    END IF;
    v_factor := CASE WHEN v_status = 'degraded' THEN 0.75::double precision ELSE 1.0::double precision END;

    -- 4. Authoritative records, fusion, freshness, total order, confidence, explanation.
    RETURN QUERY
    WITH lex AS (
        SELECT (x->>'rank')::integer AS rank, (x->>'fragment_id')::uuid AS fragment_id,
               (x->>'score')::double precision AS score, x->'terms' AS terms
          FROM jsonb_array_elements(coalesce(v_lexical, '[]'::jsonb)) x
    ), vec AS (
        SELECT (x->>'rank')::integer AS rank, (x->>'fragment_id')::uuid AS fragment_id,
               (x->>'distance')::double precision AS distance,
               (x->>'vector_generation')::bigint AS vector_generation
          FROM jsonb_array_elements(coalesce(v_vector, '[]'::jsonb)) x
    ), rec AS (
        SELECT r.*
          FROM pyretrieve.fragments(d.decision_id, ARRAY(
                   SELECT l.fragment_id FROM lex l UNION SELECT v.fragment_id FROM vec v)) r
    ), fused AS (
        SELECT r.*, l.rank AS lexical_rank, l.score AS lexical_score, l.terms AS lexical_terms,
               v.rank AS vector_rank, v.distance, v.vector_generation,
               p_lexical_weight / (60 + l.rank)::double precision AS lexical_contribution,
               p_vector_weight / (60 + v.rank)::double precision AS vector_contribution,
               (extract(epoch FROM d.evaluated_at - r.observed_at) * 1000000)::bigint AS age_us,
               (extract(epoch FROM d.max_age) * 1000000)::bigint AS max_age_us
          FROM rec r
          LEFT JOIN lex l ON l.fragment_id = r.fragment_id
          LEFT JOIN vec v ON v.fragment_id = r.fragment_id
    ), scored AS (
        SELECT f.*,
               (0.0::double precision + coalesce(f.lexical_contribution, 0.0::double precision))
                   + coalesce(f.vector_contribution, 0.0::double precision) AS rrf,
               CASE WHEN f.max_age_us IS NULL THEN 1.0::double precision
                    ELSE least(1.0::double precision, greatest(0.5::double precision,
                         1.0::double precision - 0.5::double precision
                             * (f.age_us::double precision / f.max_age_us::double precision)))
               END AS fresh
          FROM fused f
    ), ordered AS (
        SELECT s.*, s.rrf * s.fresh AS final,
               (row_number() OVER (ORDER BY s.rrf * s.fresh DESC, s.rrf DESC,
                                            s.content_digest, s.fragment_id))::integer AS fused_rank
          FROM scored s
    ), top AS (
        SELECT o.*,
               least(1.0::double precision, greatest(0.0::double precision,
                   (o.rrf / v_ideal) * o.fresh * (61.0::double precision / (60.0::double precision + o.fused_rank))
                   * v_factor)) AS conf
          FROM ordered o
         WHERE o.fused_rank <= p_limit
    )
    SELECT t.fused_rank, t.fragment_id, t.content_digest, t.body, t.final, t.rrf, t.fresh, t.conf,
           jsonb_build_object(
               'fragment', jsonb_build_object('workspace_id', t.workspace_id, 'project_id', t.project_id,
                                              'fragment_id', t.fragment_id),
               'content', jsonb_build_object('text', t.body, 'trust', 'untrusted-data'),
               'provenance', jsonb_build_object(
                   'source_uri', t.source_uri, 'source_revision', t.source_revision,
                   'manifest_id', t.manifest_id, 'observed_at', t.observed_at,
                   'retrieved_at', d.evaluated_at, 'expires_at', t.expires_at,
                   'ingested_at', t.ingested_at, 'content_digest', encode(t.content_digest, 'hex')),
               'lexical', CASE WHEN t.lexical_rank IS NULL THEN NULL ELSE jsonb_build_object(
                   'rank', t.lexical_rank, 'score', t.lexical_score, 'ranking', p_ranking,
                   'terms', t.lexical_terms,
                   'contribution', t.lexical_contribution, 'weight', p_lexical_weight) END,
               'vector', CASE WHEN t.vector_rank IS NULL THEN NULL ELSE jsonb_build_object(
                   'rank', t.vector_rank, 'distance', t.distance, 'metric', 'cosine_distance',
                   'contribution', t.vector_contribution, 'weight', p_vector_weight) END,
               'rrf', jsonb_build_object('k', 60, 'rank_base', 1, 'score', t.rrf,
                   'formula', 'sum over modalities of w/(60+rank), 1-based ranks, a missing modality contributes 0'),
               'freshness', jsonb_build_object('factor', t.fresh, 'age_us', t.age_us, 'max_age_us', t.max_age_us),
               'final_score', t.final,
               'confidence', t.conf,
               'tie_break', encode(t.content_digest, 'hex') || ':' || t.fragment_id::text,
               'generations', jsonb_build_object('lexical', t.lexical_generation, 'vector', t.vector_generation),
               'semantic', jsonb_build_object('status', v_status, 'reason', v_reason, 'evidence', v_evidence,
                                              'lowers_confidence', v_status = 'degraded'),
               'semantic_query_digest', encode(v_embedding_digest, 'hex'),
               'decision_id', d.decision_id)
      FROM top t
     ORDER BY t.fused_rank;
END;
$$;
COMMENT ON FUNCTION pyretrieve.search(text, text, text, text, public.vector, text, integer, text, double precision, double precision, text) IS
    'One fused, explained search: authorize, lexical candidates (BM25 by default, p_ranking ''ts_rank'' for comparison), vector candidates (when the mode and the grant''s semantic policy allow and an embedding and model are given), then weighted Reciprocal Rank Fusion (w / (60 + rank), 1-based ranks, k = 60, weights default 1.0, a missing modality contributes 0), a freshness factor within the grant''s max_age, a total order (final score, RRF score, content digest, fragment id), confidence and a jsonb explanation per result. Same order as the Python client. Raises PR001 on deny and PR030 when semantic retrieval is required but unavailable.';

-- ---------------------------------------------------------------------------------------------
-- Privileges for what this migration created.
-- ---------------------------------------------------------------------------------------------
REVOKE ALL ON pyretrieve.postings, pyretrieve.generation_log, pyretrieve.scope_configs,
    pyretrieve.scope_generations FROM PUBLIC;
REVOKE ALL ON FUNCTION pyretrieve.tsvector_length(tsvector), pyretrieve.postings_insert(),
    pyretrieve.postings_update(), pyretrieve.mirror_fragment(),
    pyretrieve.set_bm25(text, text, double precision, double precision),
    pyretrieve.lexical_candidates(uuid, text, integer, text),
    pyretrieve.search(text, text, text, text, public.vector, text, integer, text, double precision, double precision, text)
    FROM PUBLIC;

GRANT SELECT ON pyretrieve.postings, pyretrieve.generation_log, pyretrieve.scope_configs,
    pyretrieve.scope_generations TO pyretrieve_reader;
GRANT INSERT, DELETE ON pyretrieve.postings TO pyretrieve_writer;
GRANT UPDATE (fragment_state) ON pyretrieve.embeddings TO pyretrieve_writer;
GRANT INSERT ON pyretrieve.generation_log, pyretrieve.scope_configs TO pyretrieve_writer;
GRANT SELECT ON SEQUENCE pyretrieve.generation_seq TO pyretrieve_writer;
GRANT SELECT ON pyretrieve.generation_log, pyretrieve.scope_generations TO pyretrieve_admin;
GRANT SELECT, INSERT ON pyretrieve.scope_configs TO pyretrieve_admin;
GRANT UPDATE (bm25_k1, bm25_b) ON pyretrieve.projects TO pyretrieve_admin;

GRANT EXECUTE ON FUNCTION pyretrieve.tsvector_length(tsvector)
    TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin;
GRANT EXECUTE ON FUNCTION pyretrieve.postings_insert(), pyretrieve.postings_update(),
    pyretrieve.mirror_fragment()
    TO pyretrieve_writer;
GRANT EXECUTE ON FUNCTION
    pyretrieve.lexical_candidates(uuid, text, integer, text),
    pyretrieve.search(text, text, text, text, public.vector, text, integer, text, double precision, double precision, text)
    TO pyretrieve_reader;
GRANT EXECUTE ON FUNCTION pyretrieve.set_bm25(text, text, double precision, double precision)
    TO pyretrieve_admin;

UPDATE pyretrieve.installation SET schema_version = '0003';

RESET ROLE;
