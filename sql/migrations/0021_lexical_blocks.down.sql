-- pyretrieve migration 0021, downgrade: back to 0020
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

DROP FUNCTION pyretrieve.lexical_index_insert() CASCADE;
DROP FUNCTION pyretrieve.lexical_index_update() CASCADE;
DROP FUNCTION pyretrieve.write_lexical_postings(text,text,text[],pyretrieve.classification[],bigint[],timestamp with time zone[],timestamp with time zone[]) CASCADE;
DROP VIEW pyretrieve.lexical_postings CASCADE;
DROP POLICY lexical_blocks_delete ON pyretrieve.lexical_blocks;
DROP POLICY lexical_blocks_insert ON pyretrieve.lexical_blocks;
DROP POLICY lexical_blocks_lock ON pyretrieve.lexical_blocks;
DROP POLICY lexical_blocks_read ON pyretrieve.lexical_blocks;
DROP POLICY lexical_tombstones_delete ON pyretrieve.lexical_tombstones;
DROP POLICY lexical_tombstones_insert ON pyretrieve.lexical_tombstones;
DROP POLICY lexical_tombstones_read ON pyretrieve.lexical_tombstones;
-- Back to a row per (active fragment, lexeme): the installing superuser writes every active
-- fragment's postings past row-level security, and the blocks, tombstones and document
-- numbers go.
SET LOCAL ROLE pyretrieve_owner;
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
        INCLUDE (tf, doc_length, classification, observed_at, expires_at)
);
COMMENT ON TABLE pyretrieve.postings IS
    'Postings of active fragments (lexeme, term frequency, document length) with the fragment''s classification and times, maintained by triggers; its read policy admits exactly the postings of fragments the decision admits.';
REVOKE ALL ON pyretrieve.postings FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON pyretrieve.postings TO pyretrieve_api;
ALTER TABLE pyretrieve.postings ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
RESET ROLE;
INSERT INTO pyretrieve.postings (workspace_id, project_id, lexeme, fragment_id, tf, doc_length,
                                 classification, observed_at, expires_at)
SELECT f.workspace_id, f.project_id, u.lexeme, f.fragment_id,
       least(greatest(cardinality(u.positions), 1), 256), f.doc_length,
       f.classification, f.observed_at, f.expires_at
  FROM pyretrieve.fragments f CROSS JOIN LATERAL unnest(f.tsv) AS u
 WHERE f.state = 'active';
SET LOCAL ROLE pyretrieve_owner;
DROP TABLE pyretrieve.lexical_blocks, pyretrieve.lexical_tombstones;
DROP INDEX pyretrieve.fragments_docno_key;
ALTER TABLE pyretrieve.fragments DROP COLUMN docno;

SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.stamp_lexical_generation()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    NEW.lexical_generation := nextval(pyretrieve.scope_sequence(NEW.workspace_id, NEW.project_id));
    RETURN NEW;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.stamp_lexical_generation() IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.stamp_lexical_generation() FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.postings_insert()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.postings_insert() IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.postings_insert() FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.postings_update()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
COMMENT ON FUNCTION pyretrieve.postings_update() IS NULL;
REVOKE ALL ON FUNCTION pyretrieve.postings_update() FROM PUBLIC;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.lexical_candidates(p_decision uuid, p_query text, p_limit integer, p_ranking text DEFAULT 'bm25'::text)
 RETURNS TABLE(rank integer, fragment_id uuid, content_digest bytea, score double precision, lexical_generation bigint, terms jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET client_min_messages TO 'warning'
AS $function$
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
        -- The admitted fragments' count and average length, from the statistics log: a few rows
        -- per writing statement rather than one index entry per fragment. The average is the
        -- same numeric division of the same integers that avg() over the fragments makes.
        SELECT coalesce(sum(s.fragments), 0)::double precision AS n,
               coalesce(sum(s.length_sum) / nullif(sum(s.fragments), 0), 0)::double precision AS avgdl
          FROM pyretrieve.statistics_log s
         WHERE s.workspace_id = d.workspace_id
           AND s.project_id = d.project_id
           AND s.classification <= d.ceiling
           AND s.observed_at <= d.evaluated_at
           AND (d.max_age IS NULL OR s.observed_at >= d.evaluated_at - d.max_age)
           AND (s.expires_at IS NULL OR s.expires_at > d.evaluated_at)
    ), hits AS MATERIALIZED (
        -- Each term's postings apart (an index-only scan of the key), with its document
        -- frequency counted over them alone: no sort of every posting by term.
        SELECT p.fragment_id, ql.lexeme, p.tf, p.doc_length, ql.qtf, p.df
          FROM ql
         CROSS JOIN LATERAL (
               SELECT p.fragment_id, p.tf::double precision AS tf,
                      p.doc_length::double precision AS doc_length,
                      (count(*) OVER ())::double precision AS df
                 FROM pyretrieve.postings p
                WHERE p.workspace_id = d.workspace_id AND p.project_id = d.project_id
                  AND p.lexeme = ql.lexeme
                  AND p.classification <= d.ceiling
                  AND p.observed_at <= d.evaluated_at
                  AND (d.max_age IS NULL OR p.observed_at >= d.evaluated_at - d.max_age)
                  AND (p.expires_at IS NULL OR p.expires_at > d.evaluated_at)) p
    ), parts AS NOT MATERIALIZED (
        SELECT h.fragment_id, h.lexeme, h.tf, h.qtf, b.idf, b.norm,
               h.qtf * b.idf * (h.tf * (v_k1 + 1.0)) / (h.tf + b.norm) AS contribution
          FROM hits h
         CROSS JOIN st
         CROSS JOIN LATERAL (
               SELECT ln(1.0 + (st.n - h.df + 0.5) / (h.df + 0.5)) AS idf,
                      v_k1 * (1.0 - v_b + v_b * h.doc_length / st.avgdl) AS norm) b
    ), scored AS MATERIALIZED (
        -- Each fragment's score, summed in bytewise lexeme order so the float result never
        -- depends on the plan. Only the score: the parts of it are listed for the returned rows
        -- alone (terms, below), from the same expressions, so they add up to it exactly.
        -- Listing them for every matching fragment made the leg twice as slow at 100,000 rows.
        SELECT pt.fragment_id, sum(pt.contribution ORDER BY pt.lexeme COLLATE "C") AS score
          FROM parts pt
         GROUP BY pt.fragment_id
    ), top AS MATERIALIZED (
        -- Every fragment scoring at least the p_limit-th best score competes for the last
        -- places on the content-bound tie-break, so the cut is exact and plan-independent;
        -- the threshold is a sub-select, computed once.
        SELECT s.fragment_id, s.score, f.content_digest, f.lexical_generation
          FROM scored s
          JOIN pyretrieve.fragments f
            ON f.workspace_id = d.workspace_id AND f.fragment_id = s.fragment_id
         WHERE s.score >= (SELECT min(x.score)
                             FROM (SELECT sc.score FROM scored sc ORDER BY sc.score DESC LIMIT p_limit) x)
         ORDER BY s.score DESC, f.content_digest, f.fragment_id
         LIMIT p_limit
    ), terms AS MATERIALIZED (
        SELECT pt.fragment_id,
               jsonb_agg(jsonb_build_object(
                   'term', pt.lexeme, 'idf', pt.idf, 'tf', pt.tf::integer,
                   'query_tf', pt.qtf::integer, 'length_norm', pt.norm,
                   'contribution', pt.contribution) ORDER BY pt.lexeme COLLATE "C") AS terms
          FROM parts pt
         WHERE pt.fragment_id IN (SELECT t.fragment_id FROM top t)
         GROUP BY pt.fragment_id
    )
    SELECT (row_number() OVER (ORDER BY t.score DESC, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.score, t.lexical_generation, tm.terms
      FROM top t
      JOIN terms tm ON tm.fragment_id = t.fragment_id
     ORDER BY 1;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) IS 'Lexical candidates for the bound decision. p_ranking ''bm25'' (default): BM25 over the OR of the query''s lexemes (repeated query terms count), with k1 and b from the project and corpus statistics (document count, average length, document frequency) computed only from the fragments the decision admits; ''ts_rank'': the earlier ts_rank scoring, for comparison. 1-based ranks in a total order (score desc, then content digest, then fragment id). Returns rank, fragment_id, content_digest, score, lexical_generation and terms (each matched term with idf, tf, query_tf, length_norm and contribution). Raises PR002 for a decision that is not the caller''s bound decision of this transaction. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.lexical_candidates(uuid,text,integer,text) TO pyretrieve_reader;
SET LOCAL ROLE pyretrieve_owner;
CREATE POLICY postings_delete ON pyretrieve.postings FOR DELETE TO pyretrieve_api USING ((((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))));
CREATE POLICY postings_insert ON pyretrieve.postings FOR INSERT TO pyretrieve_api WITH CHECK ((((workspace_id)::text = (( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND ((project_id)::text = (( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))::text) AND (classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")))));
CREATE POLICY postings_read ON pyretrieve.postings FOR SELECT TO pyretrieve_api USING ((((workspace_id)::text = (COALESCE(( SELECT d.workspace_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.workspace_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND ((project_id)::text = (COALESCE(( SELECT d.project_id
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), ( SELECT w.project_id
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position"))))::text) AND (((classification <= ( SELECT d.ceiling
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at <= ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))) AND (observed_at >= COALESCE(( SELECT (d.evaluated_at - d.max_age)
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)), '-infinity'::timestamp with time zone)) AND ((expires_at IS NULL) OR (expires_at > ( SELECT d.evaluated_at
   FROM pyretrieve.bound_decision() d(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id))))) OR ((classification <= ( SELECT w.ceiling
   FROM pyretrieve.bound_write() w(workspace_id, binding_id, principal, project_id, ceiling, bound_at, xact_id, "position")
  WHERE (NOT (EXISTS ( SELECT 1
           FROM pyretrieve.bound_decision() bound_decision(workspace_id, decision_id, principal, project_id, purpose, grant_id, evaluated_at, ceiling, max_age, semantic_policy, requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest, xact_id)))))) IS TRUE))));
CREATE TRIGGER fragments_postings_insert AFTER INSERT ON pyretrieve.fragments REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.postings_insert();
CREATE TRIGGER fragments_postings_update AFTER UPDATE ON pyretrieve.fragments REFERENCING OLD TABLE AS before_rows NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION pyretrieve.postings_update();

UPDATE pyretrieve.installation SET schema_version = '0020';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
