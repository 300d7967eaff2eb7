-- ---------------------------------------------------------------------------------------------
-- Row-level security: the second wall. Principals hold no table privilege at all (the functions
-- are the only door); the functions run as pyretrieve_api, and these policies admit to that
-- role only what the transaction's one binding admits: the read decision's whole filter, or
-- the write scope up to the writer's ceiling, or, for admins, the configuration tables. RLS is
-- forced on every table, so the owner is bound too. Look-ups are written as (select ...) so
-- they are evaluated once per query (InitPlans); the binding they read (bound_filter: the read
-- binding, else the write scope) is found by process and transaction id and cannot change
-- while the transaction lives, so every InitPlan reads the same row. The read policies state
-- the scope as one row comparison (one look-up), the ceiling as another, and the decision's
-- window with now() (a decision binds only the transaction that made it, so its evaluation
-- time is now()) and its oldest observation time: at most four look-ups a table, where 0050's
-- policies wrote ten.
-- ---------------------------------------------------------------------------------------------
ALTER TABLE pyretrieve.installation      ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.workspaces        ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.projects          ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.scope_configs     ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.generation_log    ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.lexical_blocks    ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.lexical_pages     ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.lexical_tombstones ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.statistics_log    ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.embedding_count_log ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.fragments         ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.embedding_models  ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.embeddings        ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.grants            ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.decisions         ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.write_bindings    ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.read_bindings     ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;

-- installation: a version; written only by the installer, which runs as the owner.
CREATE POLICY installation_read ON pyretrieve.installation FOR SELECT TO pyretrieve_api USING (true);
CREATE POLICY installation_install ON pyretrieve.installation FOR ALL
    TO pyretrieve_owner USING (true) WITH CHECK (true);

-- Configuration tables: the bound scope, or everything for an admin caller. The bound scope is
-- the one binding's, the decision's or else the write scope's: a transaction holds one (a
-- forged second binding adds no scope).
CREATE POLICY workspaces_read ON pyretrieve.workspaces FOR SELECT TO pyretrieve_api
    USING (workspace_id = (SELECT b.workspace_id FROM pyretrieve.bound_filter() b)
        OR (SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY workspaces_admin ON pyretrieve.workspaces FOR INSERT TO pyretrieve_api
    WITH CHECK ((SELECT pyretrieve.caller_in('pyretrieve_admin')));

CREATE POLICY projects_read ON pyretrieve.projects FOR SELECT TO pyretrieve_api
    USING ((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
        OR (SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY projects_admin_insert ON pyretrieve.projects FOR INSERT TO pyretrieve_api
    WITH CHECK ((SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY projects_admin_update ON pyretrieve.projects FOR UPDATE TO pyretrieve_api
    USING ((SELECT pyretrieve.caller_in('pyretrieve_admin'))) WITH CHECK ((SELECT pyretrieve.caller_in('pyretrieve_admin')));

CREATE POLICY generation_log_read ON pyretrieve.generation_log FOR SELECT TO pyretrieve_api
    USING ((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
        OR (SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY generation_log_insert ON pyretrieve.generation_log FOR INSERT TO pyretrieve_api
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w));

CREATE POLICY scope_configs_read ON pyretrieve.scope_configs FOR SELECT TO pyretrieve_api
    USING ((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
        OR (SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY scope_configs_insert ON pyretrieve.scope_configs FOR INSERT TO pyretrieve_api
    WITH CHECK ((workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w))
        OR (SELECT pyretrieve.caller_in('pyretrieve_admin')));

-- Fragments: the decision's whole filter (scope, ceiling, state, evaluation time, max_age,
-- expiry), or, under a write scope, every state up to the writer's ceiling (writes need the
-- superseded and retracted rows to stay idempotent). A transaction holds one or the other
-- (authorize and bind_write_scope refuse the second; the write branch is void under a decision
-- all the same). The scope is stated once, outside the OR, as the binding's: so the scope's
-- index bounds every scan and the statistics of a scope are an index-only scan. Two scope
-- branches ORed made the planner OR two bitmap scans and read the heap, 1.3 to 1.7 times the
-- hand-written query's time at a 10,000-row scope.
CREATE POLICY fragments_read ON pyretrieve.fragments FOR SELECT TO pyretrieve_api
    USING ((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
       AND classification <= (SELECT b.ceiling FROM pyretrieve.bound_filter() b)
       AND ((state = 'active'
            AND observed_at <= (SELECT pg_catalog.now())
            AND observed_at >= (SELECT b.oldest FROM pyretrieve.bound_filter() b)
            AND (expires_at IS NULL OR expires_at > (SELECT pg_catalog.now())))
            OR (SELECT NOT b.reading FROM pyretrieve.bound_filter() b)));
CREATE POLICY fragments_insert ON pyretrieve.fragments FOR INSERT TO pyretrieve_api
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w)
       AND state = 'active' AND superseded_by IS NULL);
CREATE POLICY fragments_update ON pyretrieve.fragments FOR UPDATE TO pyretrieve_api
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w))
    -- A successor must itself be visible in the same scope; checked before the foreign key so
    -- a guessed id cannot probe for rows the writer may not see.
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w)
       AND (superseded_by IS NULL
            OR pyretrieve.visible_successor(workspace_id, project_id, superseded_by)));

-- The lexical index. A block is admitted by a decision when its classification is within the
-- ceiling and its time range meets the decision's window (some fragment in it may be admitted);
-- the lexical leg reads a block whole only when the window holds the whole range and no
-- tombstone lies in it, and otherwise checks each posting against its fragment, under the
-- fragments' policy. Under a write scope, the blocks of the writer's classifications: the
-- fragments' triggers append, lock (FOR UPDATE, hence the UPDATE policy; no column is ever
-- updated) and rewrite them there.
CREATE POLICY lexical_blocks_read ON pyretrieve.lexical_blocks FOR SELECT TO pyretrieve_api
    USING ((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
       AND classification <= (SELECT b.ceiling FROM pyretrieve.bound_filter() b)
       AND ((min_observed_at <= (SELECT pg_catalog.now())
            AND max_observed_at >= (SELECT b.oldest FROM pyretrieve.bound_filter() b)
            AND (max_expires_at IS NULL OR max_expires_at > (SELECT pg_catalog.now())))
            OR (SELECT NOT b.reading FROM pyretrieve.bound_filter() b)));
CREATE POLICY lexical_blocks_insert ON pyretrieve.lexical_blocks FOR INSERT TO pyretrieve_api
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));
CREATE POLICY lexical_blocks_lock ON pyretrieve.lexical_blocks FOR UPDATE TO pyretrieve_api
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w))
    WITH CHECK (false);
CREATE POLICY lexical_blocks_delete ON pyretrieve.lexical_blocks FOR DELETE TO pyretrieve_api
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));
-- Pages of small lists: as blocks (a term's slice of a page is read like a block, with the
-- page's time range); compaction locks, deletes and writes them under a write scope.
CREATE POLICY lexical_pages_read ON pyretrieve.lexical_pages FOR SELECT TO pyretrieve_api
    USING ((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
       AND classification <= (SELECT b.ceiling FROM pyretrieve.bound_filter() b)
       AND ((min_observed_at <= (SELECT pg_catalog.now())
            AND max_observed_at >= (SELECT b.oldest FROM pyretrieve.bound_filter() b)
            AND (max_expires_at IS NULL OR max_expires_at > (SELECT pg_catalog.now())))
            OR (SELECT NOT b.reading FROM pyretrieve.bound_filter() b)));
CREATE POLICY lexical_pages_insert ON pyretrieve.lexical_pages FOR INSERT TO pyretrieve_api
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));
CREATE POLICY lexical_pages_lock ON pyretrieve.lexical_pages FOR UPDATE TO pyretrieve_api
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w))
    WITH CHECK (false);
CREATE POLICY lexical_pages_delete ON pyretrieve.lexical_pages FOR DELETE TO pyretrieve_api
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));
-- Tombstones: a decision reads those of its scope and classifications (one in a block's range
-- makes the leg check that block fragment by fragment); a writer's triggers add and drop those
-- of its classifications.
CREATE POLICY lexical_tombstones_read ON pyretrieve.lexical_tombstones FOR SELECT TO pyretrieve_api
    USING ((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
       AND classification <= (SELECT b.ceiling FROM pyretrieve.bound_filter() b));
CREATE POLICY lexical_tombstones_insert ON pyretrieve.lexical_tombstones FOR INSERT TO pyretrieve_api
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));
CREATE POLICY lexical_tombstones_delete ON pyretrieve.lexical_tombstones FOR DELETE TO pyretrieve_api
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));

-- The statistics log: the fragments' filters on the columns each row carries (every fragment
-- a row summarises agrees on them), so a decision admits exactly the rows of the fragments it
-- admits. Appended under the write scope, up to the writer's ceiling.
CREATE POLICY statistics_log_read ON pyretrieve.statistics_log FOR SELECT TO pyretrieve_api
    USING ((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
       AND classification <= (SELECT b.ceiling FROM pyretrieve.bound_filter() b)
       AND ((observed_at <= (SELECT pg_catalog.now())
            AND observed_at >= (SELECT b.oldest FROM pyretrieve.bound_filter() b)
            AND (expires_at IS NULL OR expires_at > (SELECT pg_catalog.now())))
            OR (SELECT NOT b.reading FROM pyretrieve.bound_filter() b)));
CREATE POLICY statistics_log_insert ON pyretrieve.statistics_log FOR INSERT TO pyretrieve_api
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));

-- Embeddings: the fragments' filters on the columns each embedding carries.
CREATE POLICY embeddings_read ON pyretrieve.embeddings FOR SELECT TO pyretrieve_api
    USING ((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
       AND classification <= (SELECT b.ceiling FROM pyretrieve.bound_filter() b)
       AND ((fragment_state = 'active'
            AND observed_at <= (SELECT pg_catalog.now())
            AND observed_at >= (SELECT b.oldest FROM pyretrieve.bound_filter() b)
            AND (expires_at IS NULL OR expires_at > (SELECT pg_catalog.now())))
            OR (SELECT NOT b.reading FROM pyretrieve.bound_filter() b)));
CREATE POLICY embeddings_insert ON pyretrieve.embeddings FOR INSERT TO pyretrieve_api
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));
CREATE POLICY embeddings_update ON pyretrieve.embeddings FOR UPDATE TO pyretrieve_api
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w))
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));

-- The embeddings' count log: written by the embeddings' trigger in the write scope alone, read
-- by admins alone (maintain_vector_indexes). A decision or a write binding admits no row of it,
-- so no search and no writer learns a scope's size, hidden rows included, from it.
CREATE POLICY embedding_count_log_read ON pyretrieve.embedding_count_log FOR SELECT TO pyretrieve_api
    USING ((SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY embedding_count_log_insert ON pyretrieve.embedding_count_log FOR INSERT TO pyretrieve_api
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w));

-- Models are configuration, not tenant data.
CREATE POLICY embedding_models_read ON pyretrieve.embedding_models FOR SELECT
    TO pyretrieve_api, pyretrieve_owner USING (true);
CREATE POLICY embedding_models_admin ON pyretrieve.embedding_models FOR INSERT TO pyretrieve_api
    WITH CHECK ((SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY embedding_models_admin_update ON pyretrieve.embedding_models FOR UPDATE TO pyretrieve_api
    USING ((SELECT pyretrieve.caller_in('pyretrieve_admin')))
    WITH CHECK ((SELECT pyretrieve.caller_in('pyretrieve_admin')));

-- Grants: the caller sees the grants that apply to it (its own authority, never another
-- principal's); admins manage all of them.
CREATE POLICY grants_own ON pyretrieve.grants FOR SELECT TO pyretrieve_api
    USING (pg_catalog.pg_has_role((SELECT pyretrieve.caller()), principal, 'USAGE')
        OR (SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY grants_admin_insert ON pyretrieve.grants FOR INSERT TO pyretrieve_api
    WITH CHECK ((SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY grants_admin_update ON pyretrieve.grants FOR UPDATE TO pyretrieve_api
    USING ((SELECT pyretrieve.caller_in('pyretrieve_admin')))
    WITH CHECK ((SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY grants_admin_delete ON pyretrieve.grants FOR DELETE TO pyretrieve_api
    USING ((SELECT pyretrieve.caller_in('pyretrieve_admin')));

-- Decisions: this transaction's own (the binding), or all for an admin; a new one only as an
-- exact copy of one of the caller's live grants, in this transaction, at this transaction's
-- time. Nobody may update or delete one: the log is append-only.
CREATE POLICY decisions_read ON pyretrieve.decisions FOR SELECT TO pyretrieve_api
    USING (xact_id = pg_catalog.pg_current_xact_id_if_assigned()
        OR (SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY decisions_insert ON pyretrieve.decisions FOR INSERT TO pyretrieve_api
    WITH CHECK (principal = (SELECT pyretrieve.caller())
        AND xact_id = pg_catalog.pg_current_xact_id()
        AND evaluated_at = pg_catalog.now()
        AND candidate_limit BETWEEN 1 AND 1000
        AND grant_id = pyretrieve.effective_grant(workspace_id, project_id, purpose)
        AND EXISTS (SELECT 1 FROM pyretrieve.grants g
                     WHERE g.workspace_id = decisions.workspace_id
                       AND g.grant_id = decisions.grant_id
                       AND g.project_id = decisions.project_id
                       AND g.purpose = decisions.purpose
                       AND g.ceiling = decisions.ceiling
                       AND g.max_age IS NOT DISTINCT FROM decisions.max_age
                       AND g.semantic_policy = decisions.semantic_policy));

CREATE POLICY write_bindings_read ON pyretrieve.write_bindings FOR SELECT TO pyretrieve_api
    USING (xact_id = pg_catalog.pg_current_xact_id_if_assigned()
        OR (SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY write_bindings_insert ON pyretrieve.write_bindings FOR INSERT TO pyretrieve_api
    WITH CHECK (principal = (SELECT pyretrieve.caller())
        AND xact_id = pg_catalog.pg_current_xact_id()
        AND bound_at = pg_catalog.now()
        AND ceiling = pyretrieve.writer_ceiling(workspace_id, project_id));

-- Read bindings: a process sees its own row only. authorize() writes it as an exact copy of
-- this transaction's decision (copies_bound_decision), replacing the row
-- of an earlier transaction of the process; within a transaction the row cannot change, so
-- no statement's look-ups can see two bindings. Nobody deletes one.
CREATE POLICY read_bindings_read ON pyretrieve.read_bindings FOR SELECT TO pyretrieve_api
    USING (session_pid = pg_catalog.pg_backend_pid());
CREATE POLICY read_bindings_insert ON pyretrieve.read_bindings FOR INSERT TO pyretrieve_api
    WITH CHECK (session_pid = pg_catalog.pg_backend_pid()
        AND xact_id = pg_catalog.pg_current_xact_id()
        AND evaluated_at = pg_catalog.now()
        AND pyretrieve.copies_bound_decision(decision_id, workspace_id, project_id, ceiling,
                                             evaluated_at, max_age));
CREATE POLICY read_bindings_replace ON pyretrieve.read_bindings FOR UPDATE TO pyretrieve_api
    USING (session_pid = pg_catalog.pg_backend_pid()
        AND xact_id <> pg_catalog.pg_current_xact_id())
    WITH CHECK (session_pid = pg_catalog.pg_backend_pid()
        AND xact_id = pg_catalog.pg_current_xact_id()
        AND evaluated_at = pg_catalog.now()
        AND pyretrieve.copies_bound_decision(decision_id, workspace_id, project_id, ceiling,
                                             evaluated_at, max_age));

-- Per-scope index generations (a view for DBAs and the scope_generation() function; it runs
-- under the RLS of the tables it reads).
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

