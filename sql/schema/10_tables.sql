
-- ---------------------------------------------------------------------------------------------
-- Types
-- ---------------------------------------------------------------------------------------------
CREATE TYPE pyretrieve.classification AS ENUM ('public', 'internal', 'confidential', 'restricted');
CREATE TYPE pyretrieve.fragment_state AS ENUM ('active', 'superseded', 'retracted');
CREATE TYPE pyretrieve.semantic_policy AS ENUM ('disabled', 'optional', 'required');

CREATE DOMAIN pyretrieve.identifier AS text
    CHECK (VALUE ~ '^[a-z0-9][a-z0-9_.-]{0,62}$');
GRANT USAGE ON TYPE pyretrieve.classification, pyretrieve.fragment_state, pyretrieve.semantic_policy,
    pyretrieve.identifier TO pyretrieve_api;
COMMENT ON DOMAIN pyretrieve.identifier IS
    'Workspace, project and purpose names: lower-case ASCII, digits, _ . -, at most 63 characters.';

-- sha256 of the UTF-8 bytes of a text. convert_to() is only STABLE because conversions can be
-- redefined; in a UTF8 database the conversion to UTF8 is the identity, which the installer
-- checks above, so the digest is truly immutable and may back a generated column.
CREATE FUNCTION pyretrieve.content_digest(p_body text)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
RETURN pg_catalog.sha256(pg_catalog.convert_to(p_body, 'UTF8'));
COMMENT ON FUNCTION pyretrieve.content_digest(text) IS
    'sha256 of the UTF-8 bytes of a text: the content digest of a fragment body.';

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

-- ---------------------------------------------------------------------------------------------
-- Tables. Every primary and unique key starts with workspace_id: no key can act as an existence
-- oracle across workspaces, and the tables are ready to shard by workspace.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE pyretrieve.installation (
    singleton       boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    schema_version  text NOT NULL,
    created_vector  boolean NOT NULL,
    installed_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE pyretrieve.installation IS
    'One row: the installed schema version and whether the installer created the vector extension (so an uninstall removes only what it created).';

CREATE TABLE pyretrieve.workspaces (
    workspace_id  pyretrieve.identifier NOT NULL,
    display_name  text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (workspace_id)
);

-- Numbers the scopes (projects.scope_serial). A plain sequence rather than an identity column:
-- reflecting an identity column asks pg_get_serial_sequence, which needs USAGE on the schema,
-- and the login role an application reflects with holds none.
CREATE SEQUENCE pyretrieve.scope_serial_seq AS integer;

CREATE TABLE pyretrieve.projects (
    workspace_id  pyretrieve.identifier NOT NULL REFERENCES pyretrieve.workspaces,
    project_id    pyretrieve.identifier NOT NULL,
    ts_config     regconfig NOT NULL DEFAULT 'pg_catalog.english',
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    bm25_k1       double precision NOT NULL DEFAULT 0.9 CHECK (bm25_k1 > 0 AND bm25_k1 <= 10),
    bm25_b        double precision NOT NULL DEFAULT 0.4 CHECK (bm25_b >= 0 AND bm25_b <= 1),
    -- The scope's own generation sequence (see pyretrieve.scope_sequence): generations are
    -- counted per scope, so no number a caller sees moves with another scope's writes.
    generation_seq regclass NOT NULL,
    -- An opaque number for the scope, for the names and predicates of its own approximate
    -- vector indexes (embeddings.scope_serial): the catalog, which every role may read, then
    -- names no workspace or project.
    scope_serial  integer NOT NULL DEFAULT pg_catalog.nextval('pyretrieve.scope_serial_seq'::regclass),
    PRIMARY KEY (workspace_id, project_id)
);
ALTER SEQUENCE pyretrieve.scope_serial_seq OWNED BY pyretrieve.projects.scope_serial;

-- Per-scope index generations and text-search configurations, append-only: one log row per
-- writing statement and scope, and one row per configuration, so concurrent writers in a scope
-- never wait on a shared row. The view scope_generations (below) reads them.
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

CREATE TABLE pyretrieve.fragments (
    workspace_id        pyretrieve.identifier NOT NULL,
    project_id          pyretrieve.identifier NOT NULL,
    fragment_id         uuid NOT NULL DEFAULT gen_random_uuid(),
    body                text NOT NULL CHECK (pg_catalog.length(body) <= 1000000),
    content_digest      bytea GENERATED ALWAYS AS (pyretrieve.content_digest(body)) STORED,
    classification      pyretrieve.classification NOT NULL DEFAULT 'internal',
    state               pyretrieve.fragment_state NOT NULL DEFAULT 'active',
    superseded_by       uuid,
    observed_at         timestamptz NOT NULL DEFAULT pg_catalog.now(),
    expires_at          timestamptz,
    ingested_at         timestamptz NOT NULL DEFAULT pg_catalog.now(),
    source_uri          text CHECK (pg_catalog.length(source_uri) <= 2048),
    source_revision     text CHECK (pg_catalog.length(source_revision) <= 256),
    manifest_id         text CHECK (pg_catalog.length(manifest_id) <= 256),
    ts_config           regconfig NOT NULL DEFAULT 'pg_catalog.english',
    -- The body's tsvector under ts_config, and BM25's document length (tsvector_length of it):
    -- both set by the row trigger (stamp_fragment) from the body on every write, whatever the
    -- statement says, so neither can differ from the body. Not generated columns, because a
    -- generated column cannot read another one: the length needed the text analysed a second
    -- time, about an eighth of a bulk batch's server time (migration 0025).
    tsv                 tsvector NOT NULL,
    lexical_generation  bigint NOT NULL DEFAULT 0,
    doc_length          integer NOT NULL,
    -- The fragment's number in its scope's lexical index (lexical_blocks): the generation it
    -- was stamped with when written, fixed from then on. Internal: no API function returns it.
    docno               integer NOT NULL,
    PRIMARY KEY (workspace_id, fragment_id),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects,
    FOREIGN KEY (workspace_id, superseded_by) REFERENCES pyretrieve.fragments (workspace_id, fragment_id),
    CHECK ((state = 'superseded') = (superseded_by IS NOT NULL)),
    CHECK (expires_at IS NULL OR expires_at > observed_at)
);
-- Idempotency by content: one active fragment per scope, classification and body. The
-- classification is part of the key so that a writer whose ceiling is below an identical
-- fragment's classification gets its own row instead of a unique violation that would reveal
-- the hidden one.
CREATE UNIQUE INDEX fragments_active_content_key
    ON pyretrieve.fragments (workspace_id, project_id, classification, content_digest)
    WHERE state = 'active';
-- The scope index every candidate query starts from.
CREATE INDEX fragments_scope_idx
    ON pyretrieve.fragments (workspace_id, project_id, state, classification)
    INCLUDE (observed_at, expires_at, doc_length);
-- No GIN index over tsv: under RLS `@@` is not leakproof, so no candidate query could use one,
-- and maintaining it cost about a sixteenth of a bulk batch's server time (migration 0019).
-- From a document number of the lexical index to its fragment: the candidates' ids and digests,
-- and the per-fragment check of a block whose fragments a decision admits only in part.
CREATE UNIQUE INDEX fragments_docno_key
    ON pyretrieve.fragments (workspace_id, project_id, docno)
    INCLUDE (state, classification, observed_at, expires_at);
-- Re-ingestion finds the active fragment of a source (file, record id) to supersede it.
CREATE INDEX fragments_source_idx
    ON pyretrieve.fragments (workspace_id, project_id, source_uri)
    WHERE state = 'active' AND source_uri IS NOT NULL;

-- The lexical index: for each scope, lexeme and classification, the postings of its active
-- fragments in blocks of at most 128 in document-number order, each block one row holding one
-- int8 array (each posting's document number, term frequency and document length packed as
-- docno << 32 | (tf - 1) << 24 | length, so the array is sorted by document number) and what
-- the leg needs without reading it: the number of
-- postings, the largest tf and the smallest length (a bound on any posting's BM25 part), and the
-- range of its fragments' observed_at and expires_at. A decision that admits the block's
-- classification and its whole time range admits every posting in it, so a term's document
-- frequency is the sum of those counts, and the leg unpacks only the blocks of the query's
-- terms. About 8 bytes a posting, against about 230 for a row per posting with its key
-- (2,414 MB for 200,000 fragments, 35 times a GIN index of the same text). Written by the
-- fragments' triggers only: new fragments append blocks (no writer updates a shared row), and
-- small blocks of a lexeme are merged when no other writer holds them (FOR UPDATE SKIP LOCKED).
-- ---------------------------------------------------------------------------------------------
CREATE TABLE pyretrieve.lexical_blocks (
    workspace_id    pyretrieve.identifier NOT NULL,
    project_id      pyretrieve.identifier NOT NULL,
    lexeme          text NOT NULL,
    classification  pyretrieve.classification NOT NULL,
    first_docno     integer NOT NULL,
    last_docno      integer NOT NULL,
    postings        integer NOT NULL CHECK (postings BETWEEN 1 AND 128),
    max_tf          integer NOT NULL,
    min_length      integer NOT NULL,
    -- Bounds of the block's fragments' times; after a fragment leaves the block they still
    -- hold (a range of a superset), so a block is never taken as wholly admitted wrongly.
    min_observed_at timestamptz NOT NULL,
    max_observed_at timestamptz NOT NULL,
    -- The earliest expiry among its fragments (NULL: none expires) and the latest (NULL: one
    -- never expires).
    min_expires_at  timestamptz,
    max_expires_at  timestamptz,
    entries         bigint[] NOT NULL,
    PRIMARY KEY (workspace_id, project_id, lexeme, classification, first_docno),
    CHECK (cardinality(entries) = postings)
);
-- The blocks of a lexeme not yet full: a write merges them (each scope, lexeme and classification
-- keeps about one), and finds them here without reading the lexeme's full blocks; compaction
-- finds those of a writer's classifications here, without reading any other's.
CREATE INDEX lexical_blocks_partial_idx
    ON pyretrieve.lexical_blocks (workspace_id, project_id, classification, lexeme)
    INCLUDE (postings)
    WHERE postings < 128;
COMMENT ON TABLE pyretrieve.lexical_blocks IS
    'The lexical index: per scope, lexeme and classification, the postings of active fragments in blocks of up to 128 (docno << 32 | (tf - 1) << 24 | document length, in document-number order), with the count, largest tf, smallest length and time range each block''s read policy and the lexical leg use; maintained by triggers only.';

-- The lexical index's small lists. Where a scope holds many rare words, a row per lexeme was
-- most of the index (about 270 bytes a row and its keys, for a few postings: 656.5 MB for
-- 200,000 fragments in 207 scopes, 11 times a GIN index of the same text). A lexeme with fewer
-- than 128 postings of a classification in a scope keeps them in a page instead, shared with
-- the other such lexemes of its bucket (lexeme_bucket: one of 256, a hash of the lexeme): the
-- page holds its lexemes in bytewise order, where each one's postings start in its entries
-- (packed as in lexical_blocks, each lexeme's in document-number order), its lexeme range, its
-- document-number range and the time range of its fragments. A term's small list is the slice
-- of the pages of its bucket whose lexeme range holds it (one page, unless two compactions ran
-- at once). compact_lexical_index moves the blocks not full of small lexemes into pages (and
-- lexemes that reached 128 back to blocks); until then a lexeme may have both, and the lexical
-- leg reads both. A bulk write (a statement of 4,096 postings or more) writes its lists of
-- fewer than 128 as pending pages of its own, one per bucket and classification, instead of a
-- block per lexeme: every batch of a load wrote a row per rare lexeme, which the next merges
-- and compaction deleted (a 200,000-fragment load left the blocks' heap at 504 MB for 81 MB
-- of live rows, evals/bench/lexical-storage-*.json). The leg reads pending pages as any page;
-- compaction merges them into their buckets' pages.
-- Where a group of 16 buckets (16g to 16g + 15) holds fewer than 1,024 small postings of a
-- classification, its lexemes share one page instead, keyed by bucket 256 + g: in a scope of a
-- few hundred fragments a bucket's page held about 30 postings, and the rows' own bytes (their
-- header, keys, ranges and array headers) were two thirds of its small lists (61.6 MB for 3.1
-- million postings in 202 such scopes, evals/bench/lexical-storage-0058-200k.json). A term's
-- pages are those of its bucket and of its group, and compaction rewrites a group whole, so it
-- decides which of the two its group keeps from all of the group's postings.
CREATE SEQUENCE pyretrieve.lexical_page_seq AS bigint;
CREATE TABLE pyretrieve.lexical_pages (
    workspace_id    pyretrieve.identifier NOT NULL,
    project_id      pyretrieve.identifier NOT NULL,
    -- 0 to 255: a bucket's own pages; 256 + g: the pages of group g's 16 buckets.
    bucket          smallint NOT NULL CHECK (bucket BETWEEN 0 AND 271),
    classification  pyretrieve.classification NOT NULL,
    page            bigint NOT NULL DEFAULT nextval('pyretrieve.lexical_page_seq'),
    first_lexeme    text NOT NULL,
    last_lexeme     text NOT NULL,
    postings        integer NOT NULL CHECK (postings >= 1),
    first_docno     integer NOT NULL,
    last_docno      integer NOT NULL,
    -- As in lexical_blocks: bounds of the page's fragments' times (of a superset after a
    -- fragment leaves).
    min_observed_at timestamptz NOT NULL,
    max_observed_at timestamptz NOT NULL,
    min_expires_at  timestamptz,
    max_expires_at  timestamptz,
    lexemes         text[] NOT NULL,
    starts          integer[] NOT NULL,
    entries         bigint[] NOT NULL,
    -- Written by a bulk write and not yet merged by compaction (its lexeme range overlaps its
    -- bucket's other pages as a rule).
    pending         boolean NOT NULL DEFAULT false,
    PRIMARY KEY (workspace_id, project_id, bucket, classification, page),
    CHECK (cardinality(entries) = postings AND cardinality(starts) = cardinality(lexemes))
);
COMMENT ON TABLE pyretrieve.lexical_pages IS
    'The lexical index''s small lists: per scope, lexeme bucket (0 to 255; or 256 + g for a group of 16 buckets whose small lists hold fewer than 1,024 postings) and classification, pages holding the postings of lexemes with fewer than 128 (the lexemes in bytewise order, where each one''s postings start, the entries packed as in lexical_blocks), with their lexeme, document-number and time ranges; written by a scope''s first write, by bulk writes (pending, until compaction merges them) and by compact_lexical_index.';

-- Postings of fragments that left the active set (superseded, retracted) and are still inside a
-- block, because another writer held the block when they left, or inside a page. A block (or a
-- term's slice of a page) with a tombstone in its range is checked fragment by fragment; the
-- next write that merges the block, or the next compaction of the page, drops them.
CREATE TABLE pyretrieve.lexical_tombstones (
    workspace_id    pyretrieve.identifier NOT NULL,
    project_id      pyretrieve.identifier NOT NULL,
    lexeme          text NOT NULL,
    classification  pyretrieve.classification NOT NULL,
    docno           integer NOT NULL,
    PRIMARY KEY (workspace_id, project_id, lexeme, classification, docno)
);
COMMENT ON TABLE pyretrieve.lexical_tombstones IS
    'Postings still inside a block or a page whose fragment is no longer active, maintained by triggers and compaction: the lexical leg checks a block (or a term''s slice of a page) with one in its range fragment by fragment.';

-- Every posting of the lexical index that is not a tombstone, one row each: for tests, audits
-- and the migration, not for the request path. security_invoker, and granted to no principal.
CREATE VIEW pyretrieve.lexical_postings WITH (security_invoker = true) AS
SELECT x.workspace_id, x.project_id, x.lexeme, x.classification, (x.entry >> 32)::integer AS docno,
       ((x.entry >> 24) & 255)::integer + 1 AS tf, (x.entry & 16777215)::integer AS doc_length
  FROM (SELECT b.workspace_id, b.project_id, b.lexeme, b.classification, u.entry
          FROM pyretrieve.lexical_blocks b
         CROSS JOIN LATERAL unnest(b.entries) AS u(entry)
        UNION ALL
        SELECT p.workspace_id, p.project_id, l.lexeme, p.classification, p.entries[i.i] AS entry
          FROM pyretrieve.lexical_pages p
         CROSS JOIN LATERAL unnest(p.lexemes, p.starts) WITH ORDINALITY AS l(lexeme, start, n)
         CROSS JOIN LATERAL generate_series(l.start, coalesce(p.starts[l.n + 1], p.postings + 1) - 1)
               AS i(i)) x
 WHERE NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_tombstones t
                    WHERE t.workspace_id = x.workspace_id AND t.project_id = x.project_id
                      AND t.lexeme = x.lexeme AND t.classification = x.classification
                      AND t.docno = (x.entry >> 32)::integer);
COMMENT ON VIEW pyretrieve.lexical_postings IS
    'The lexical index (blocks and pages) one posting a row (scope, lexeme, classification, docno, tf, doc_length), tombstones left out: for tests and audits, granted to no principal.';

-- BM25's scope statistics (document count, total length) as an append-only log: each writing
-- statement adds, per scope and per (classification, observed_at, expires_at), the change in
-- the number of active fragments and in the sum of their lengths. Every row summarises
-- fragments that agree on every column a decision filters on, so a decision admits a row
-- exactly when it admits those fragments, and the sums over the admitted rows are the
-- statistics of exactly the admitted fragments, read in a few rows per writing statement
-- instead of one index entry per fragment. Appending never waits on another writer.
CREATE TABLE pyretrieve.statistics_log (
    workspace_id    pyretrieve.identifier NOT NULL,
    project_id      pyretrieve.identifier NOT NULL,
    -- The highest lexical generation the statement stamped in the scope, and the row's place
    -- among that statement's rows: unique without a sequence of its own.
    generation      bigint NOT NULL,
    position        integer NOT NULL,
    classification  pyretrieve.classification NOT NULL,
    observed_at     timestamptz NOT NULL,
    expires_at      timestamptz,
    fragments       bigint NOT NULL,
    length_sum      bigint NOT NULL,
    PRIMARY KEY (workspace_id, project_id, generation, position)
);
COMMENT ON TABLE pyretrieve.statistics_log IS
    'Changes to a scope''s count of active fragments and their total length, per classification, observed_at and expires_at, one row per writing statement and group, maintained by triggers; its read policy is the fragments'' filter on those columns, so the admitted rows sum to the statistics of exactly the admitted fragments.';

-- One fragment's change to the statistics log (pyretrieve.log_statistics).
CREATE TYPE pyretrieve.statistics_delta AS (
    workspace_id    text,
    project_id      text,
    classification  pyretrieve.classification,
    observed_at     timestamptz,
    expires_at      timestamptz,
    fragments       bigint,
    length_sum      bigint,
    generation      bigint
);

-- One lexeme's postings of one classification, to be written into a scope's lexical index
-- (pyretrieve.write_lexical_lists): the entries packed as in lexical_blocks, in document-number
-- order, and the time range of their fragments.
CREATE TYPE pyretrieve.lexical_list AS (
    classification  pyretrieve.classification,
    lexeme          text,
    min_observed_at timestamptz,
    max_observed_at timestamptz,
    min_expires_at  timestamptz,
    max_expires_at  timestamptz,
    entries         bigint[]
);

CREATE TABLE pyretrieve.embedding_models (
    model_id      text NOT NULL CHECK (model_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$'),
    dimension     integer NOT NULL CHECK (dimension BETWEEN 1 AND 2000),
    model_serial  integer GENERATED ALWAYS AS IDENTITY,
    registered_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- The fusion weights a search naming this model uses when the request gives none; both
    -- above 0, so either leg can still rank alone when the other does not run.
    lexical_weight double precision NOT NULL DEFAULT 1.0
                   CHECK (lexical_weight > 0 AND lexical_weight <= 1000),
    vector_weight  double precision NOT NULL DEFAULT 1.0
                   CHECK (vector_weight > 0 AND vector_weight <= 1000),
    -- The fusion such a search uses when it names none; the weights above are chosen for it.
    fusion         text NOT NULL DEFAULT 'rrf' CHECK (fusion IN ('rrf', 'dbsf')),
    PRIMARY KEY (model_id),
    UNIQUE (model_serial)
);
COMMENT ON TABLE pyretrieve.embedding_models IS
    'Registered embedding models and their default fusion and weights. Global, not per workspace: a model id, its dimension and its defaults are configuration, not tenant data.';

CREATE TABLE pyretrieve.embeddings (
    workspace_id       pyretrieve.identifier NOT NULL,
    project_id         pyretrieve.identifier NOT NULL,
    fragment_id        uuid NOT NULL,
    model_id           text NOT NULL REFERENCES pyretrieve.embedding_models,
    embedding          public.vector NOT NULL,
    source_digest      bytea NOT NULL CHECK (pg_catalog.length(source_digest) = 32),
    vector_generation  bigint NOT NULL DEFAULT 0,
    embedded_at        timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- The fragment's visibility columns, copied by a trigger on every write (never by the
    -- caller), so the vector leg and the read policy filter embeddings on their own columns.
    classification     pyretrieve.classification NOT NULL,
    fragment_state     pyretrieve.fragment_state NOT NULL,
    observed_at        timestamptz NOT NULL,
    expires_at         timestamptz,
    -- The project's scope_serial, set by the same trigger: the predicate of a scope's own
    -- approximate index (pyretrieve.create_vector_index).
    scope_serial       integer NOT NULL,
    PRIMARY KEY (workspace_id, fragment_id, model_id),
    FOREIGN KEY (workspace_id, fragment_id) REFERENCES pyretrieve.fragments
);
-- Exact scans of a scope read this index and then the compact embedding rows; the vector is
-- kept in line (MAIN) so a scan does not chase TOAST pointers for common dimensions.
CREATE INDEX embeddings_scope_idx ON pyretrieve.embeddings (workspace_id, project_id, model_id);
ALTER TABLE pyretrieve.embeddings ALTER COLUMN embedding SET STORAGE MAIN;

-- How many embeddings each scope holds of each model, as an append-only log: every statement
-- that inserts embeddings adds one row per scope and model with the number it inserted (no
-- embedding is ever deleted, and an update keeps its scope and model). maintain_vector_indexes
-- sums it to give each scope its own HNSW index where its size says. No search reads it, and
-- only admins may (through that function): it counts hidden rows too, as the index holds them.
CREATE TABLE pyretrieve.embedding_count_log (
    workspace_id  pyretrieve.identifier NOT NULL,
    project_id    pyretrieve.identifier NOT NULL,
    -- The highest vector generation the statement stamped in the scope, and the row's place
    -- among that statement's rows: unique without a sequence of its own. Generation 0 holds
    -- what existed before the log (migration 0020).
    generation    bigint NOT NULL,
    position      integer NOT NULL,
    model_id      text NOT NULL,
    embeddings    bigint NOT NULL,
    PRIMARY KEY (workspace_id, project_id, generation, position)
);
COMMENT ON TABLE pyretrieve.embedding_count_log IS
    'The embeddings each statement inserted, per scope and model, maintained by a trigger: summed, each scope''s number of embeddings of each model (every classification and state), which maintain_vector_indexes reads to place the scopes'' own HNSW indexes. Admins only; no search reads it.';

CREATE TABLE pyretrieve.grants (
    workspace_id     pyretrieve.identifier NOT NULL,
    grant_id         uuid NOT NULL DEFAULT gen_random_uuid(),
    principal        regrole NOT NULL,
    project_id       pyretrieve.identifier NOT NULL,
    purpose          pyretrieve.identifier NOT NULL,
    ceiling          pyretrieve.classification NOT NULL,
    max_age          interval,
    semantic_policy  pyretrieve.semantic_policy NOT NULL DEFAULT 'optional',
    expires_at       timestamptz,
    granted_by       name NOT NULL,
    granted_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (workspace_id, grant_id),
    UNIQUE (workspace_id, project_id, principal, purpose),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects,
    -- Stored as clock time only: months and years have no fixed length, and a day is 23 or 25
    -- hours across a daylight-saving change, so only hours/seconds make the window the same
    -- number in SQL and in the Python ranker (grant_access converts days to hours).
    CHECK (max_age IS NULL OR (max_age > interval '0'
           AND pg_catalog.date_part('month', max_age) = 0 AND pg_catalog.date_part('year', max_age) = 0
           AND pg_catalog.date_part('day', max_age) = 0))
);

CREATE TABLE pyretrieve.decisions (
    workspace_id      pyretrieve.identifier NOT NULL,
    decision_id       uuid NOT NULL DEFAULT gen_random_uuid(),
    principal         name NOT NULL,
    project_id        pyretrieve.identifier NOT NULL,
    purpose           pyretrieve.identifier NOT NULL,
    grant_id          uuid NOT NULL,
    evaluated_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    ceiling           pyretrieve.classification NOT NULL,
    max_age           interval,
    semantic_policy   pyretrieve.semantic_policy NOT NULL,
    requested_limit   integer NOT NULL,
    candidate_limit   integer NOT NULL,
    query_digest      bytea NOT NULL CHECK (pg_catalog.length(query_digest) = 32),
    semantic_intent   text NOT NULL CHECK (semantic_intent IN ('disabled', 'optional', 'required')),
    embedding_digest  bytea CHECK (pg_catalog.length(embedding_digest) = 32),
    xact_id           xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
    -- A key of a partitioned table holds the partition key.
    PRIMARY KEY (workspace_id, decision_id, evaluated_at)
) PARTITION BY RANGE (evaluated_at);
-- A transaction holds at most one binding (a read decision or a write scope); the binding is
-- found by the transaction, never by a setting. Its look-up also states evaluated_at = now(),
-- so it reads the current month's partition only.
CREATE INDEX decisions_xact_idx ON pyretrieve.decisions (xact_id);
-- Who searched what scope when, and what one principal searched when: the audit's questions,
-- each a range scan of the months asked for.
CREATE INDEX decisions_scope_time_idx ON pyretrieve.decisions (workspace_id, project_id, evaluated_at);
CREATE INDEX decisions_principal_time_idx ON pyretrieve.decisions (principal, evaluated_at);
COMMENT ON TABLE pyretrieve.decisions IS
    'Audit log of authorisation decisions: digests and intent only, never query text, embedding values or content. At most one per transaction: the read binding of that transaction. Partitioned by month of evaluated_at (UTC); partitions are created ahead by pyretrieve.ensure_decision_partitions and whole months older than a retention are dropped by pyretrieve.prune_decisions (admins).';

CREATE TABLE pyretrieve.write_bindings (
    workspace_id  pyretrieve.identifier NOT NULL,
    binding_id    uuid NOT NULL DEFAULT gen_random_uuid(),
    principal     name NOT NULL,
    project_id    pyretrieve.identifier NOT NULL,
    ceiling       pyretrieve.classification NOT NULL,
    bound_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    xact_id       xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
    -- 1, 2, ... within the transaction: a writer may move on to another of its scopes, and
    -- the latest binding is the one in force.
    position      integer NOT NULL CHECK (position >= 1),
    PRIMARY KEY (workspace_id, binding_id),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects
);
CREATE INDEX write_bindings_xact_idx ON pyretrieve.write_bindings (xact_id);
COMMENT ON TABLE pyretrieve.write_bindings IS
    'Audit log of write scopes: which principal wrote into which workspace/project, when, with which ceiling. The latest binding of a transaction is in force; a transaction that holds a read decision never binds one.';

-- The read binding as the second wall reads it: what the policies need of this transaction's
-- decision, per server process (session_pid) and workspace, which authorize() rewrites with
-- each decision. A row binds only the transaction that wrote it (xact_id, evaluated_at = now()), so
-- an earlier transaction's row is inert, and the table holds a row per process and workspace that
-- ever authorized (no log to prune). The decisions log is the record; this is its cheap shadow: a
-- policy reads one row of a small table by its key, where the log is partitioned by month
-- and every look-up there pruned, locked and scanned partitions (about 30 look-ups a search).
CREATE TABLE pyretrieve.read_bindings (
    workspace_id  pyretrieve.identifier NOT NULL,
    -- From the default alone: no role writes it.
    session_pid   integer NOT NULL DEFAULT pg_catalog.pg_backend_pid(),
    xact_id       xid8 NOT NULL,
    decision_id   uuid NOT NULL,
    project_id    pyretrieve.identifier NOT NULL,
    ceiling       pyretrieve.classification NOT NULL,
    evaluated_at  timestamptz NOT NULL,
    max_age       interval,
    -- A process keeps a row per workspace it decided in, and a decision rewrites its own: the
    -- key leads with the workspace as every key of a workspace table does.
    PRIMARY KEY (workspace_id, session_pid)
-- Half of each page free: each authorize() rewrites a row in place of the process's earlier
-- one, a HOT update when the new version fits on the row's page (no indexed column changes).
) WITH (fillfactor = 50);
-- The look-up: the process's rows, by this index (a row per workspace it decided in).
CREATE INDEX read_bindings_session_idx ON pyretrieve.read_bindings (session_pid);
COMMENT ON TABLE pyretrieve.read_bindings IS
    'This transaction''s read decision as the row-level security policies read it (scope, ceiling, evaluation time, max_age), one row per server process and workspace, rewritten by each authorize(); a row binds only the transaction that wrote it. No principal reads or writes it.';

