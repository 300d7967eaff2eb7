-- GENERATED FILE: do not edit. Built from sql/schema/*.sql by `python -m pyretrieve.db.schema`.

-- ==== sql/schema/00_prelude.sql ====
-- pyretrieve: policy-filtered hybrid retrieval inside PostgreSQL.
--
-- The canonical install script: it creates the whole current schema in one transaction.
-- Versioned deltas live in sql/migrations/ and are executed by the Alembic revisions; a test
-- checks that a database built from this file and one built by `alembic upgrade head` have
-- identical catalogs.
--
-- Requires PostgreSQL 15+ and pgvector 0.7+. Run as a role that may create roles and the
-- `vector` extension (a superuser, or the managed service's admin role), in one transaction:
--   psql -v ON_ERROR_STOP=1 --single-transaction -f sql/pyretrieve.sql

-- ---------------------------------------------------------------------------------------------
-- Roles. Roles are cluster-wide, so they are created only when missing.
--   pyretrieve_owner   NOLOGIN; owns the tables, types and sequences, and the few functions
--                      that need ownership (index and sequence DDL); bound by FORCE ROW LEVEL
--                      SECURITY too.
--   pyretrieve_api     NOLOGIN, NOINHERIT; owns the SECURITY DEFINER functions of the SQL API
--                      and holds exactly the table privileges they need. Row-level security
--                      binds it: its policies admit only what the transaction's one binding
--                      (a read decision or a write scope) admits.
--   pyretrieve_reader  principals that search.
--   pyretrieve_writer  principals that ingest (inherits reader).
--   pyretrieve_admin   principals that manage workspaces, projects, grants and models.
-- A principal is an ordinary role that is a member of one of the group roles. The groups hold
-- no privilege on any table, view or sequence: the functions are the only door. A principal's
-- identity is the role the request runs as (SET ROLE from an authenticator, or the login
-- role itself), which pyretrieve.caller() reads; nothing a caller can set changes it.
-- ---------------------------------------------------------------------------------------------
DO $roles$
BEGIN
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        RAISE EXCEPTION 'pyretrieve needs a UTF8 database (this one is %)', pg_catalog.getdatabaseencoding();
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pyretrieve_owner') THEN
        CREATE ROLE pyretrieve_owner NOLOGIN NOINHERIT NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pyretrieve_api') THEN
        CREATE ROLE pyretrieve_api NOLOGIN NOINHERIT NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pyretrieve_reader') THEN
        CREATE ROLE pyretrieve_reader NOLOGIN NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pyretrieve_writer') THEN
        CREATE ROLE pyretrieve_writer NOLOGIN NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pyretrieve_admin') THEN
        CREATE ROLE pyretrieve_admin NOLOGIN NOBYPASSRLS;
    END IF;
END
$roles$;

-- A writer may also search; an admin is not implicitly a reader of content.
GRANT pyretrieve_reader TO pyretrieve_writer;

-- Remember whether this installer creates the extension, so an uninstall removes only that.
SELECT pg_catalog.set_config('pyretrieve.install_creates_vector',
    (NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'vector'))::text, true);
CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;
-- pgvector's type, operators and functions are referenced as public.*; a pgvector installed in
-- another schema is refused here rather than half-working later.
DO $vector$
BEGIN
    IF (SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
         WHERE e.extname = 'vector') <> 'public' THEN
        RAISE EXCEPTION 'pyretrieve needs the vector extension in schema public';
    END IF;
END
$vector$;

CREATE SCHEMA pyretrieve AUTHORIZATION pyretrieve_owner;
REVOKE ALL ON SCHEMA pyretrieve FROM PUBLIC;
COMMENT ON SCHEMA pyretrieve IS
    'pyretrieve: policy-filtered hybrid retrieval. Access through the functions; RLS is forced on every table.';

-- The API functions are created by pyretrieve_api itself (50_writers and the read API switch
-- to it); it may create objects in the schema only while the installer runs (the epilogue
-- revokes CREATE again).
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;

-- Everything below is created by, and so owned by, the NOLOGIN owner role unless a section
-- switches to pyretrieve_api.
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

-- ==== sql/schema/10_tables.sql ====

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


-- ==== sql/schema/20_bindings.sql ====
-- ---------------------------------------------------------------------------------------------
-- Identity and bindings. STABLE and SECURITY INVOKER: called inside the API functions (which
-- run as pyretrieve_api) and by the policies as (select ...), so once per query.
--
-- A transaction reads under one decision (authorize) or writes under write scopes
-- (bind_write_scope), never both. A binding is found by the transaction id, not by any
-- setting. The decision cannot change while the transaction lives, so every sub-select of a
-- policy that reads it reads the same row, however lazily PostgreSQL evaluates them. A write
-- scope changes only when a write function binds another one before its own statements run,
-- never during a statement.
-- ---------------------------------------------------------------------------------------------

-- The principal a request runs as. Inside a SECURITY DEFINER function current_user is the
-- function's owner, so the caller is read from the role the session switched to with SET ROLE
-- (the `role` parameter, which PostgreSQL lets a session set only to roles its login role may
-- become) or, without SET ROLE, the login role itself. Neither is a custom setting.
CREATE FUNCTION pyretrieve.caller()
RETURNS name
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT CASE WHEN pg_catalog.current_setting('role') = 'none' THEN SESSION_USER
                ELSE pg_catalog.current_setting('role')::name END;
END;
COMMENT ON FUNCTION pyretrieve.caller() IS
    'The principal the request runs as: the role set with SET ROLE, else the login role. Inside the SQL API this is the caller''s identity; no custom setting can change it.';

-- Whether the caller reaches a group role (pyretrieve_reader, _writer, _admin).
CREATE FUNCTION pyretrieve.caller_in(p_group name)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT pg_catalog.pg_has_role(pyretrieve.caller(), p_group, 'USAGE');
END;

-- The read decision of this transaction, if one was made.
-- Through the xact_id index, whatever the statistics say (enable_seqscan): a month's partition
-- of the decisions log starts empty and is analysed so, and until autovacuum analyses it again
-- the planner takes it for tiny and scans it whole, at every look-up (a search makes about 30):
-- 36 us per look-up at 500 rows and 109 at 2,000 in a scratch run, against 8 by the index.
CREATE FUNCTION pyretrieve.bound_decision()
RETURNS SETOF pyretrieve.decisions
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
BEGIN ATOMIC
    SELECT d.*
      FROM pyretrieve.decisions d
     WHERE d.xact_id = pg_catalog.pg_current_xact_id_if_assigned()
       AND d.evaluated_at = pg_catalog.now()
     LIMIT 1;
END;
COMMENT ON FUNCTION pyretrieve.bound_decision() IS
    'The one read decision of this transaction (found by transaction id, never by a setting), or no row.';

-- The write scope of this transaction, if one was bound.
-- Through the xact_id index, whatever the statistics say, as bound_decision.
CREATE FUNCTION pyretrieve.bound_write()
RETURNS SETOF pyretrieve.write_bindings
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
BEGIN ATOMIC
    SELECT w.*
      FROM pyretrieve.write_bindings w
     WHERE w.xact_id = pg_catalog.pg_current_xact_id_if_assigned()
       AND w.bound_at = pg_catalog.now()
     ORDER BY w.position DESC
     LIMIT 1;
END;
COMMENT ON FUNCTION pyretrieve.bound_write() IS
    'The write scope in force in this transaction (its latest binding, found by transaction id, never by a setting), or no row.';

-- What the second wall admits in this transaction, as one row: the read decision's scope,
-- ceiling and oldest observation time (reading), else the write scope's, with the writer's
-- ceiling and no time bound (not reading: writes see every state and time up to the writer's
-- ceiling); no row without a binding. Every read policy reads it, the scope as one row
-- comparison. The decision comes from read_bindings, this process's row written in this
-- transaction (found by the process's index): the decisions log itself, partitioned by month and
-- under its own policy, cost the policies about 0.1 ms a search more. The write arm is read
-- only when the transaction holds no read decision (a forged write binding beside a decision
-- widens nothing). PARALLEL RESTRICTED: the key is the leader's process id.
CREATE FUNCTION pyretrieve.bound_filter()
RETURNS TABLE (workspace_id pyretrieve.identifier, project_id pyretrieve.identifier,
               ceiling pyretrieve.classification, oldest timestamptz, reading boolean)
LANGUAGE sql STABLE PARALLEL RESTRICTED SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
BEGIN ATOMIC
    (SELECT r.workspace_id, r.project_id, r.ceiling,
            coalesce(r.evaluated_at - r.max_age, '-infinity'::timestamptz), true
       FROM pyretrieve.read_bindings r
      WHERE r.session_pid = pg_catalog.pg_backend_pid()
        AND r.xact_id = pg_catalog.pg_current_xact_id_if_assigned()
        AND r.evaluated_at = pg_catalog.now()
     UNION ALL
     SELECT w.workspace_id, w.project_id, w.ceiling, '-infinity'::timestamptz, false
       FROM pyretrieve.bound_write() w
      WHERE NOT EXISTS (SELECT 1 FROM pyretrieve.read_bindings r
                         WHERE r.session_pid = pg_catalog.pg_backend_pid()
                           AND r.xact_id = pg_catalog.pg_current_xact_id_if_assigned()
                           AND r.evaluated_at = pg_catalog.now()))
    LIMIT 1;
END;
COMMENT ON FUNCTION pyretrieve.bound_filter() IS
    'What the row-level security policies admit in this transaction, as one row: the read decision''s workspace, project, ceiling and oldest observation time (reading = true), else the write scope''s with the writer''s ceiling (reading = false); no row without a binding. Found by process and transaction, never by a setting.';

-- Whether a read binding's fields are those of this transaction's decision: the check the
-- read bindings' insert and update policies make of every row written.
CREATE FUNCTION pyretrieve.copies_bound_decision(
    p_decision uuid, p_workspace text, p_project text, p_ceiling pyretrieve.classification,
    p_evaluated_at timestamptz, p_max_age interval)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT EXISTS (SELECT 1 FROM pyretrieve.bound_decision() d
                    WHERE d.decision_id = p_decision
                      AND d.workspace_id = p_workspace
                      AND d.project_id = p_project
                      AND d.ceiling = p_ceiling
                      AND d.evaluated_at = p_evaluated_at
                      AND d.max_age IS NOT DISTINCT FROM p_max_age);
END;
COMMENT ON FUNCTION pyretrieve.copies_bound_decision(uuid, text, text, pyretrieve.classification, timestamptz, interval) IS
    'Whether the given decision id, scope, ceiling, evaluation time and max_age are exactly those of this transaction''s decision (bound_decision()): the check the read bindings'' policies make of every row written.';

-- Every role the caller is a member of, directly or through other roles (pg_has_role ...
-- MEMBER), itself included: found by walking up its own memberships, so that what it costs
-- follows the caller's memberships, not the roles the cluster holds.
CREATE FUNCTION pyretrieve.caller_memberships()
RETURNS oid[]
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH RECURSIVE up(role_id) AS (
        SELECT pg_catalog.to_regrole(pg_catalog.quote_ident((SELECT pyretrieve.caller())))::oid
        UNION
        SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN up ON m.member = up.role_id
    )
    SELECT coalesce(pg_catalog.array_agg(up.role_id ORDER BY up.role_id), '{}') FROM up;
END;
COMMENT ON FUNCTION pyretrieve.caller_memberships() IS
    'Every role the caller is a member of, directly or through other roles, itself included (pg_has_role MEMBER), from its own memberships.';

-- The roles whose grants apply to the caller: its memberships that pass privileges on
-- (pg_has_role ... USAGE). A grant look-up probes the grants' key once per such role, where it
-- read every principal's grants of the scope and kept the caller's: with 5,000 principals
-- granted one project, an authorize read 10,000 grant rows, until 0044.
CREATE FUNCTION pyretrieve.caller_roles()
RETURNS oid[]
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(pg_catalog.array_agg(m.role_id ORDER BY m.role_id), '{}')
      FROM pg_catalog.unnest(pyretrieve.caller_memberships()) AS m(role_id)
     WHERE pg_catalog.pg_has_role((SELECT pyretrieve.caller()), m.role_id, 'USAGE');
END;
COMMENT ON FUNCTION pyretrieve.caller_roles() IS
    'The roles whose grants apply to the caller: itself and the roles it inherits the privileges of (pg_has_role USAGE), from its own memberships, so that a grant look-up probes the key once per role.';

-- The caller's writer ceiling in a scope: the highest ceiling among its live grants there,
-- NULL when it holds none or is not a writer.
CREATE FUNCTION pyretrieve.writer_ceiling(p_workspace text, p_project text)
RETURNS pyretrieve.classification
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT max(g.ceiling)
      FROM pyretrieve.grants g
     WHERE g.workspace_id = p_workspace
       AND g.project_id = p_project
       AND g.principal::oid = ANY ((SELECT pyretrieve.caller_roles())::oid[])
       AND pg_catalog.pg_has_role(pyretrieve.caller(), g.principal, 'USAGE')
       AND pyretrieve.caller_in('pyretrieve_writer')
       AND (g.expires_at IS NULL OR g.expires_at > pg_catalog.now());
END;

-- Whether an active fragment with this id is visible in this scope to the bound write scope.
-- A policy may not query its own table directly (PostgreSQL refuses the recursion); a function
-- may, and its query still runs under RLS.
CREATE FUNCTION pyretrieve.visible_successor(p_workspace text, p_project text, p_fragment_id uuid)
RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM pyretrieve.fragments s
                    WHERE s.workspace_id = p_workspace AND s.project_id = p_project
                      AND s.fragment_id = p_fragment_id AND s.state = 'active');
END;
$$;

-- The grant a decision for this scope and purpose must copy: among the live grants that apply
-- to the caller, the caller's own before a group's, then the widest. The caller's own is one
-- probe of the key, and when it holds one no group's is looked at; otherwise the key is probed
-- once per role the caller inherits (caller_roles), which costs about 20 us more. The caller
-- is read once (a sub-select): with few roles, or a caller's enable_indexscan off, the planner
-- scans pg_authid, and a bare caller() ran once per role.
CREATE FUNCTION pyretrieve.effective_grant(p_workspace text, p_project text, p_purpose text)
RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(
        (SELECT gr.grant_id
           FROM pyretrieve.grants gr
          WHERE gr.workspace_id = p_workspace
            AND gr.project_id = p_project
            AND gr.principal::oid = pg_catalog.to_regrole(
                    pg_catalog.quote_ident((SELECT pyretrieve.caller())))::oid
            AND gr.purpose = p_purpose
            AND (gr.expires_at IS NULL OR gr.expires_at > pg_catalog.now())),
        (SELECT gr.grant_id
           FROM pyretrieve.grants gr
          WHERE gr.workspace_id = p_workspace
            AND gr.project_id = p_project
            AND gr.principal::oid = ANY ((SELECT pyretrieve.caller_roles())::oid[])
            AND gr.purpose = p_purpose
            AND pg_catalog.pg_has_role((SELECT pyretrieve.caller()), gr.principal, 'USAGE')
            AND (gr.expires_at IS NULL OR gr.expires_at > pg_catalog.now())
          ORDER BY gr.ceiling DESC, gr.max_age DESC NULLS FIRST, gr.grant_id
          LIMIT 1));
END;

-- Superusers and BYPASSRLS roles pass every policy; a caller that is one (or reaches one
-- through membership) is refused, so no request runs with the widest grant of every role.
CREATE FUNCTION pyretrieve.check_caller()
RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_roles oid[] := pyretrieve.caller_memberships();
BEGIN
    -- The caller's memberships, each read by its key: a scan of the cluster's roles for the
    -- superusers read every role at every request (5,024 at 5,000 roles, until 0044).
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                WHERE r.oid = ANY (v_roles) AND (r.rolsuper OR r.rolbypassrls)) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR004',
            MESSAGE = 'the principal is a superuser or bypasses row-level security; act as an ordinary principal role';
    END IF;
END;
$$;

-- A request that set no timeouts of its own gets bounded ones for the rest of its transaction:
-- a lock held by another writer, a runaway statement or a client that stops half-way can then
-- hold a scope only for a while, and fails with a typed error (57014, 55P03, 25P03).
-- SET ROLE does not apply role-level settings, so the groups cannot carry these.
CREATE FUNCTION pyretrieve.apply_request_timeouts()
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.current_setting('lock_timeout') = '0' THEN
        PERFORM pg_catalog.set_config('lock_timeout', '10s', true);
    END IF;
    IF pg_catalog.current_setting('statement_timeout') = '0' THEN
        PERFORM pg_catalog.set_config('statement_timeout', '60s', true);
    END IF;
    IF pg_catalog.current_setting('idle_in_transaction_session_timeout') = '0' THEN
        PERFORM pg_catalog.set_config('idle_in_transaction_session_timeout', '60s', true);
    END IF;
END;
$$;

-- Text-search configurations come from pg_catalog or this schema only: a configuration in a
-- session's pg_temp would vanish with the session and leave every later search of the scope
-- failing on a dangling reference.
CREATE FUNCTION pyretrieve.check_ts_config(p_config regconfig)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_config IS NULL OR NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_ts_config c
         WHERE c.oid = p_config
           AND c.cfgnamespace IN ('pg_catalog'::regnamespace, 'pyretrieve'::regnamespace)) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR015',
            MESSAGE = 'text-search configuration must be one of pg_catalog or pyretrieve';
    END IF;
END;
$$;

-- ==== sql/schema/25_triggers.sql ====
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

-- Every write of a fragment row: its text analysed once (the tsvector under its configuration,
-- and the document length from it), kept as it was when neither the body nor the configuration
-- changes, whatever the statement set; and its generation stamped. A fragment's document number
-- in the lexical index is the generation it is first stamped with (unique in its scope), and
-- never changes. Document numbers are int4, as the index keeps them: a scope runs out after
-- 2,147,483,647 generations.
CREATE FUNCTION pyretrieve.stamp_fragment()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
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

-- Writes postings into a scope's lexical index, and rewrites what the write touches. For each
-- (lexeme, classification) of p_lexemes/p_classes (the lexemes of the new postings, or of new
-- tombstones), the blocks not yet full and the blocks that may hold a tombstone are taken as far
-- as no other transaction holds them (FOR UPDATE SKIP LOCKED: a writer never waits on another
-- here, and never takes a block another is rewriting; a lexeme's first blocks take nothing). A
-- lexeme's taken blocks are rewritten with its new postings when that drops a tombstoned
-- posting, or when four blocks not full have gathered (the new postings count as one): each
-- posting is rewritten a few times at most, not in every batch that adds to its lexeme (merging
-- as soon as two had gathered cost a fifth more server time per batch of 1,000 fragments in a
-- growing scope, for a quarter fewer rows). Then every lexeme's postings (new, and those of the
-- blocks rewritten, less the tombstoned ones, whose tombstones go) are written in
-- document-number order in blocks of 128, each with its count, largest tf, smallest length and
-- document-number range, and the time range of its sources (a superset's range still bounds its
-- fragments). The postings come as flat arrays, one element each.
-- A bulk write (4,096 new postings or more in the statement) takes only the lexemes with 128
-- new postings or more through that rule; its other lists (a batch's rare lexemes, and the
-- tails under 128 of the others) go into pending pages, one per bucket and classification,
-- which compaction merges: a row per rare lexeme per batch, written and then deleted, was most
-- of a load's writes to the index and most of its size as loaded.
CREATE FUNCTION pyretrieve.write_lexical_postings(
    p_workspace text, p_project text,
    p_lexemes text[], p_classes pyretrieve.classification[],
    p_entries bigint[], p_observed timestamptz[], p_expires timestamptz[])
RETURNS void
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_first boolean;
    v_blocks tid[];
    v_lists pyretrieve.lexical_list[];
    v_bulk boolean := (SELECT count(e.e) FROM unnest(p_entries) AS e(e)) >= 4096;
BEGIN
    -- Into an index empty of what the writer may see (a new scope's first write), the lists go
    -- as compaction would leave them: blocks for a lexeme with 128 postings or more, pages for
    -- the others. Nothing is there to merge, and compaction need not move them later. (Two
    -- first writes at once may both take this way: their pages then share buckets, which the
    -- leg reads and compaction merges.)
    v_first := p_entries IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_blocks b
                        WHERE b.workspace_id = p_workspace AND b.project_id = p_project)
       AND NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_pages p
                        WHERE p.workspace_id = p_workspace AND p.project_id = p_project)
       AND NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_tombstones x
                        WHERE x.workspace_id = p_workspace AND x.project_id = p_project);

    IF NOT v_first THEN
        -- The blocks to rewrite: for each lexeme, first without a lock whether one may be needed,
        -- then its candidates (through the partial index; for a tombstone, the few blocks starting
        -- last at or before its document number, as concurrent writers' blocks interleave), those
        -- no other transaction holds, then the rule again on what was taken.
        WITH touched AS MATERIALIZED (
            SELECT t.lexeme, t.classification, count(t.entry) % 128 AS fresh
              FROM unnest(p_lexemes, p_classes, p_entries) AS t(lexeme, classification, entry)
             GROUP BY t.lexeme, t.classification
            HAVING NOT v_bulk OR count(t.entry) >= 128
        ), wanted AS MATERIALIZED (
            SELECT t.lexeme, t.classification, t.fresh
              FROM touched t
             CROSS JOIN LATERAL (
                   SELECT count(*) AS blocks, sum(pb.postings) AS postings
                     FROM pyretrieve.lexical_blocks pb
                    WHERE pb.workspace_id = p_workspace AND pb.project_id = p_project
                      AND pb.lexeme = t.lexeme AND pb.classification = t.classification
                      AND pb.postings < 128) pa
             WHERE EXISTS (SELECT 1 FROM pyretrieve.lexical_tombstones x
                            WHERE x.workspace_id = p_workspace AND x.project_id = p_project
                              AND x.lexeme = t.lexeme AND x.classification = t.classification)
                OR pa.blocks + (t.fresh > 0)::integer >= 2
                   AND pa.blocks + (t.fresh > 0)::integer >= 4
        ), candidate AS MATERIALIZED (
            SELECT w.lexeme, w.classification, w.fresh, c.first_docno
              FROM wanted w
             CROSS JOIN LATERAL (
                   SELECT pb.first_docno
                     FROM pyretrieve.lexical_blocks pb
                    WHERE pb.workspace_id = p_workspace AND pb.project_id = p_project
                      AND pb.lexeme = w.lexeme AND pb.classification = w.classification
                      AND pb.postings < 128
                   UNION
                   SELECT tb.first_docno
                     FROM pyretrieve.lexical_tombstones x
                    CROSS JOIN LATERAL (
                          SELECT tb.first_docno, tb.last_docno
                            FROM pyretrieve.lexical_blocks tb
                           WHERE tb.workspace_id = p_workspace AND tb.project_id = p_project
                             AND tb.lexeme = x.lexeme AND tb.classification = x.classification
                             AND tb.first_docno <= x.docno
                           ORDER BY tb.first_docno DESC
                           LIMIT 8) tb
                    WHERE x.workspace_id = p_workspace AND x.project_id = p_project
                      AND x.lexeme = w.lexeme AND x.classification = w.classification
                      AND tb.last_docno >= x.docno) c
        ), taken AS MATERIALIZED (
            SELECT c.fresh, b.*
              FROM candidate c
             CROSS JOIN LATERAL (
                   SELECT b.ctid AS block, b.lexeme, b.classification, b.postings,
                          EXISTS (SELECT 1 FROM pyretrieve.lexical_tombstones x
                                   WHERE x.workspace_id = p_workspace AND x.project_id = p_project
                                     AND x.lexeme = b.lexeme AND x.classification = b.classification
                                     AND x.docno BETWEEN b.first_docno AND b.last_docno) AS tombstoned
                     FROM pyretrieve.lexical_blocks b
                    WHERE b.workspace_id = p_workspace AND b.project_id = p_project
                      AND b.lexeme = c.lexeme AND b.classification = c.classification
                      AND b.first_docno = c.first_docno
                      FOR UPDATE SKIP LOCKED) b
        )
        -- The blocks are held (locked) until the transaction ends, so their row versions stay put.
        SELECT array_agg(k.block) INTO v_blocks
          FROM (SELECT k.block,
                       bool_or(k.tombstoned) OVER w AS dropping,
                       count(*) FILTER (WHERE k.postings < 128) OVER w + (k.fresh > 0)::integer
                           AS partial,
                       sum(k.postings) FILTER (WHERE k.postings < 128) OVER w + k.fresh
                           AS partial_postings
                  FROM taken k
                WINDOW w AS (PARTITION BY k.lexeme, k.classification)) k
         WHERE k.dropping OR k.partial >= 4;
    END IF;

    WITH gone AS (
        DELETE FROM pyretrieve.lexical_blocks b
         WHERE b.ctid = ANY (v_blocks)
           AND b.workspace_id = p_workspace AND b.project_id = p_project
        RETURNING b.*
    ), old AS (
        SELECT gone.lexeme, gone.classification, u.entry, gone.min_observed_at,
               gone.max_observed_at, gone.min_expires_at, gone.max_expires_at
          FROM gone CROSS JOIN LATERAL unnest(gone.entries) AS u(entry)
    ), dropped AS (
        -- The tombstones of the rewritten blocks' postings, found from each block by its
        -- lexeme's key and document-number range (a block holds at most 128 entries), then
        -- deleted by row. Joined to the postings instead, a plan that took the scope's
        -- tombstones for one row compared every one with every posting: 348,508 comparisons
        -- for one retract with 55 tombstones in the scope, and more with each retract after.
        DELETE FROM pyretrieve.lexical_tombstones x
         WHERE x.ctid = ANY (ARRAY(
                   SELECT t.ctid
                     FROM gone g
                    CROSS JOIN LATERAL (
                          SELECT y.ctid
                            FROM pyretrieve.lexical_tombstones y
                           WHERE y.workspace_id = p_workspace AND y.project_id = p_project
                             AND y.lexeme = g.lexeme AND y.classification = g.classification
                             AND y.docno BETWEEN g.first_docno AND g.last_docno
                             AND EXISTS (SELECT 1 FROM unnest(g.entries) AS u(v)
                                          WHERE (u.v >> 32)::integer = y.docno)) t))
           AND x.workspace_id = p_workspace AND x.project_id = p_project
        RETURNING x.lexeme, x.classification, x.docno
    ), posting AS (
        SELECT o.* FROM old o
         WHERE NOT EXISTS (SELECT 1 FROM dropped d
                            WHERE d.lexeme = o.lexeme AND d.classification = o.classification
                              AND d.docno = (o.entry >> 32)::integer)
        UNION ALL
        SELECT n.lexeme, n.classification, n.entry, n.observed_at, n.observed_at, n.expires_at,
               n.expires_at
          FROM unnest(p_lexemes, p_classes, p_entries, p_observed, p_expires)
                   AS n(lexeme, classification, entry, observed_at, expires_at)
         WHERE n.entry IS NOT NULL
    ), grouped AS (
        -- Grouped by a hash, then each lexeme's entries sorted alone (an entry sorts by its
        -- document number): one sort of all the postings by lexeme cost several times as much.
        SELECT g.lexeme, g.classification, g.min_observed_at, g.max_observed_at,
               g.min_expires_at, g.max_expires_at, o.entries
          FROM (SELECT p.lexeme, p.classification, min(p.min_observed_at) AS min_observed_at,
                       max(p.max_observed_at) AS max_observed_at,
                       min(p.min_expires_at) AS min_expires_at,
                       CASE WHEN bool_and(p.max_expires_at IS NOT NULL) THEN max(p.max_expires_at) END
                           AS max_expires_at,
                       array_agg(p.entry) AS entries
                  FROM posting p
                 GROUP BY p.lexeme, p.classification) g
         CROSS JOIN LATERAL (SELECT array_agg(v.e ORDER BY v.e) AS entries
                               FROM unnest(g.entries) AS v(e)) o
    )
    SELECT array_agg(ROW(g.classification, g.lexeme, g.min_observed_at, g.max_observed_at,
                         g.min_expires_at, g.max_expires_at, g.entries)::pyretrieve.lexical_list)
      INTO v_lists
      FROM grouped g;
    PERFORM pyretrieve.write_lexical_lists(p_workspace, p_project, v_lists,
                                           p_pages => v_first OR v_bulk,
                                           p_pending => v_bulk AND NOT v_first);
END;
$$;

-- A lexeme's bucket among a scope's pages of small lists (lexical_pages): the first byte of its
-- SHA-256, so the same on every server and every version.
CREATE FUNCTION pyretrieve.lexeme_bucket(p_lexeme text)
RETURNS smallint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT get_byte(sha256(convert_to(p_lexeme, 'UTF8')), 0)::smallint
$$;

-- Writes lists of postings into a scope's lexical index, each (lexeme, classification) once,
-- its entries in document-number order: a list of 128 or more (every list, with p_pages false:
-- a write's lists waiting for compaction) in blocks of 128 (each with its
-- count, largest tf, smallest length, document-number range and the time range of its sources),
-- the others packed into pages of about 1,024 postings per bucket and classification (per
-- group of 16 buckets where the group's lists here hold fewer than 1,024), in
-- bytewise lexeme order (a page closes once 1,024 postings precede the next lexeme), each with
-- where its lexemes start and the time range of their sources. Compaction writes what it takes
-- back through here, and so does every write of postings (into pages only when the scope's
-- index is empty, and a bulk write's pages, p_pending, which compaction merges later). Returns
-- the rows written.
CREATE FUNCTION pyretrieve.write_lexical_lists(
    p_workspace text, p_project text, p_lists pyretrieve.lexical_list[],
    p_pages boolean DEFAULT true, p_pending boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_written integer;
BEGIN
    WITH grouped AS (
        SELECT l.classification, l.lexeme, pyretrieve.lexeme_bucket(l.lexeme) AS bucket,
               l.min_observed_at, l.max_observed_at, l.min_expires_at, l.max_expires_at,
               l.entries, cardinality(l.entries) AS n
          FROM unnest(p_lists) AS l
    ), blocks AS (
        INSERT INTO pyretrieve.lexical_blocks (
            workspace_id, project_id, lexeme, classification, first_docno, last_docno, postings,
            max_tf, min_length, min_observed_at, max_observed_at, min_expires_at, max_expires_at,
            entries)
        SELECT p_workspace, p_project, g.lexeme, g.classification,
               (c.e[1] >> 32)::integer, (c.e[cardinality(c.e)] >> 32)::integer, cardinality(c.e),
               s.max_tf, s.min_length, g.min_observed_at, g.max_observed_at, g.min_expires_at,
               g.max_expires_at, c.e
          FROM grouped g
         CROSS JOIN LATERAL generate_series(0, (g.n - 1) / 128) AS k(k)
         CROSS JOIN LATERAL (SELECT g.entries[k.k * 128 + 1 : k.k * 128 + 128] AS e) c
         CROSS JOIN LATERAL (SELECT max(((x.v >> 24) & 255)::integer + 1) AS max_tf,
                                    min((x.v & 16777215)::integer) AS min_length
                               FROM unnest(c.e) AS x(v)) s
         WHERE g.n >= 128 OR NOT p_pages
        RETURNING 1
    ), slotted AS (
        -- Each small lexeme's page key: its group's (256 + bucket / 16) where the small lists
        -- written here of its group and classification hold fewer than 1,024 postings, else its
        -- bucket's. Compaction writes a group whole, so it decides from the group's postings.
        SELECT g.classification, g.lexeme, g.min_observed_at, g.max_observed_at,
               g.min_expires_at, g.max_expires_at, g.entries, g.n,
               CASE WHEN sum(g.n) OVER (PARTITION BY g.classification, g.bucket >> 4) < 1024
                    THEN (256 + (g.bucket >> 4))::smallint ELSE g.bucket END AS bucket
          FROM grouped g
         WHERE g.n < 128 AND p_pages
    ), placed AS (
        -- Each small lexeme's page under its key and where its postings start there.
        SELECT p.*, p.before / 1024 AS page_no
          FROM (SELECT s.*, sum(s.n) OVER (PARTITION BY s.classification, s.bucket
                                           ORDER BY s.lexeme COLLATE "C") - s.n AS before
                  FROM slotted s) p
    ), paged AS (
        SELECT p.*, (p.before - min(p.before) OVER (PARTITION BY p.classification, p.bucket, p.page_no))::integer + 1
                        AS start
          FROM placed p
    ), pages AS (
        INSERT INTO pyretrieve.lexical_pages (
            workspace_id, project_id, bucket, classification, first_lexeme, last_lexeme,
            postings, first_docno, last_docno, min_observed_at, max_observed_at, min_expires_at,
            max_expires_at, lexemes, starts, entries, pending)
        SELECT p_workspace, p_project, h.bucket, h.classification, h.lexemes[1],
               h.lexemes[cardinality(h.lexemes)], cardinality(e.entries), e.first_docno,
               e.last_docno, h.min_observed_at, h.max_observed_at, h.min_expires_at,
               h.max_expires_at, h.lexemes, h.starts, e.entries, p_pending
          FROM (SELECT p.classification, p.bucket, p.page_no,
                       array_agg(p.lexeme ORDER BY p.lexeme COLLATE "C") AS lexemes,
                       array_agg(p.start ORDER BY p.lexeme COLLATE "C") AS starts,
                       min(p.min_observed_at) AS min_observed_at,
                       max(p.max_observed_at) AS max_observed_at,
                       min(p.min_expires_at) AS min_expires_at,
                       CASE WHEN bool_and(p.max_expires_at IS NOT NULL) THEN max(p.max_expires_at) END
                           AS max_expires_at
                  FROM paged p
                 GROUP BY p.classification, p.bucket, p.page_no) h
          JOIN (SELECT p.classification, p.bucket, p.page_no,
                       array_agg(u.e ORDER BY p.lexeme COLLATE "C", u.e) AS entries,
                       min((u.e >> 32)::integer) AS first_docno,
                       max((u.e >> 32)::integer) AS last_docno
                  FROM paged p CROSS JOIN LATERAL unnest(p.entries) AS u(e)
                 GROUP BY p.classification, p.bucket, p.page_no) e
            ON e.classification = h.classification AND e.bucket = h.bucket
           AND e.page_no = h.page_no
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM blocks) + (SELECT count(*) FROM pages) INTO v_written;
    RETURN v_written;
END;
$$;

-- A scope's pages (of the classifications up to p_ceiling) whose lexeme range meets that of
-- another page that may hold lexemes of the same bucket and classification (of its bucket, or a
-- group's page and a page of one of its buckets): written by two first writes at once, or two
-- compactions at once. The leg reads them all, so they are correct; compaction counts their
-- postings as waiting and rewrites their groups, so they do not stay. Pending pages (a bulk
-- write's) are counted on their own, and are left out here on both sides: a bulk write's page
-- overlaps its bucket's pages as a rule, and counting those would count every page.
CREATE FUNCTION pyretrieve.overlapping_pages(
    p_workspace text, p_project text, p_ceiling pyretrieve.classification)
RETURNS TABLE (classification pyretrieve.classification, bucket smallint, postings integer)
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT p.classification, p.bucket, p.postings
      FROM pyretrieve.lexical_pages p
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project
       AND p.classification <= p_ceiling
       AND NOT p.pending
       AND EXISTS (SELECT 1 FROM pyretrieve.lexical_pages o
                    WHERE o.workspace_id = p.workspace_id AND o.project_id = p.project_id
                      -- The same group of 16 (an expression a hash join keys on: a function
                      -- call here, compared for every pair of the scope's pages, took 420 ms
                      -- at 241 pages), and a key of the other's: the same, or one a group's.
                      AND CASE WHEN o.bucket < 256 THEN o.bucket >> 4 ELSE o.bucket - 256 END
                          = CASE WHEN p.bucket < 256 THEN p.bucket >> 4 ELSE p.bucket - 256 END
                      AND (o.bucket = p.bucket OR o.bucket >= 256 OR p.bucket >= 256)
                      AND o.classification = p.classification
                      AND o.page <> p.page AND NOT o.pending
                      AND o.first_lexeme COLLATE "C" <= p.last_lexeme
                      AND p.first_lexeme COLLATE "C" <= o.last_lexeme);
END;

-- Moves a scope's small lists into pages (lexical_pages), for the classifications up to
-- p_ceiling. A small lexeme is one whose blocks in a classification are all not full; the
-- groups of 16 buckets rewritten are those holding one, or a tombstone, or pages to merge. In
-- each, the pages no other transaction holds are taken with the small lexemes' blocks (FOR
-- UPDATE SKIP LOCKED: a group with a page held elsewhere is left for a later run, a block held
-- elsewhere stays a block), and their postings, less the tombstoned ones (whose tombstones go),
-- are written again: a lexeme with 128 or more in blocks of 128, the others packed into pages of
-- about 1,024 postings in bytewise lexeme order, one page of the group's own where they are
-- fewer than 1,024. A page's time range spans its lexemes' sources' ranges (a superset's
-- range still bounds its fragments). Returns the rows read and written and the postings moved.
CREATE FUNCTION pyretrieve.compact_lexical_postings(
    p_workspace text, p_project text, p_ceiling pyretrieve.classification)
RETURNS TABLE (rows_read integer, rows_written integer, postings integer)
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_pages tid[];
    v_blocks tid[];
    v_classes pyretrieve.classification[];
    v_lexemes text[];
    v_buckets smallint[];
    v_held text[];
    v_lists pyretrieve.lexical_list[];
    v_written integer;
    v_postings integer;
BEGIN
    -- The small lexemes of the classifications up to p_ceiling (the partial index holds the
    -- blocks not full), each with its bucket. Whether a lexeme has a full block is one probe of
    -- the key per lexeme (a sub-select in the target list, never turned into a join: right
    -- after a load the planner takes the scope for empty and a join read every block once per
    -- block).
    SELECT array_agg(s.classification), array_agg(s.lexeme), array_agg(s.bucket)
      INTO v_classes, v_lexemes, v_buckets
      FROM (SELECT b.classification, b.lexeme, pyretrieve.lexeme_bucket(b.lexeme) AS bucket,
                   EXISTS (SELECT 1 FROM pyretrieve.lexical_blocks f
                            WHERE f.workspace_id = p_workspace AND f.project_id = p_project
                              AND f.lexeme = b.lexeme AND f.classification = b.classification
                              AND f.postings = 128) AS full_block
              FROM (SELECT DISTINCT b.classification, b.lexeme
                      FROM pyretrieve.lexical_blocks b
                     WHERE b.workspace_id = p_workspace AND b.project_id = p_project
                       AND b.classification <= p_ceiling AND b.postings < 128) b
            OFFSET 0) s
     WHERE NOT s.full_block;

    -- The groups of 16 buckets to rewrite (of a small lexeme, of a tombstone, with pages that
    -- overlap, with a bulk write's pending pages, or whose pages are not as a compaction leaves
    -- them: one page of the group's own where its postings are fewer than 1,024, else none),
    -- the pages of each that no other transaction holds (taken), and the groups with a page held
    -- elsewhere (left alone). A group is rewritten whole, its buckets' pages and its own, so
    -- that the write sees all of its postings to choose between the two.
    WITH wanted AS (
        SELECT DISTINCT x.classification,
               CASE WHEN x.bucket < 256 THEN x.bucket >> 4 ELSE x.bucket - 256 END AS grp
          FROM (SELECT u.classification, u.bucket FROM unnest(v_classes, v_buckets) AS u(classification, bucket)
                UNION ALL
                SELECT t.classification, pyretrieve.lexeme_bucket(t.lexeme)
                  FROM pyretrieve.lexical_tombstones t
                 WHERE t.workspace_id = p_workspace AND t.project_id = p_project
                   AND t.classification <= p_ceiling
                UNION ALL
                SELECT o.classification, o.bucket
                  FROM pyretrieve.overlapping_pages(p_workspace, p_project, p_ceiling) o
                UNION ALL
                SELECT p.classification, p.bucket
                  FROM pyretrieve.lexical_pages p
                 WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                   AND p.classification <= p_ceiling AND p.pending
                UNION ALL
                SELECT c.classification, (256 + c.grp)::smallint  -- its group's key
                  FROM (SELECT p.classification,
                               CASE WHEN p.bucket < 256 THEN p.bucket >> 4 ELSE p.bucket - 256 END AS grp,
                               sum(p.postings) AS n, count(*) AS pages,
                               count(*) FILTER (WHERE p.bucket >= 256) AS own
                          FROM pyretrieve.lexical_pages p
                         WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                           AND p.classification <= p_ceiling AND NOT p.pending
                         GROUP BY 1, 2) c
                 WHERE CASE WHEN c.n < 1024 THEN c.pages > 1 OR c.own = 0 ELSE c.own > 0 END) x
    ), seen AS MATERIALIZED (
        -- A group's keys: its 16 buckets' and its own.
        SELECT w.classification, w.grp, c.pages, t.page
          FROM wanted w
         CROSS JOIN LATERAL (
               SELECT (256 + w.grp)::smallint
                      || ARRAY(SELECT b::smallint FROM generate_series(w.grp * 16, w.grp * 16 + 15) AS b)
                          AS keys
               OFFSET 0) k
         CROSS JOIN LATERAL (
               SELECT count(*) AS pages FROM pyretrieve.lexical_pages p
                WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                  AND p.bucket = ANY (k.keys)
                  AND p.classification = w.classification) c
          LEFT JOIN LATERAL (
               SELECT p.ctid AS page FROM pyretrieve.lexical_pages p
                WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                  AND p.bucket = ANY (k.keys)
                  AND p.classification = w.classification
                  FOR UPDATE SKIP LOCKED) t ON true
    ), grouped AS (
        SELECT s.classification, s.grp, count(s.page) < max(s.pages) AS held,
               array_agg(s.page) FILTER (WHERE s.page IS NOT NULL) AS pages
          FROM seen s
         GROUP BY s.classification, s.grp
    )
    SELECT (SELECT array_agg(u.page) FROM grouped k CROSS JOIN LATERAL unnest(k.pages) AS u(page)
             WHERE NOT k.held),
           (SELECT array_agg(k.classification::text || '/' || k.grp) FROM grouped k WHERE k.held)
      INTO v_pages, v_held;

    -- The small lexemes' blocks not full in the groups taken, as far as no other transaction
    -- holds them: one read of the scope's blocks not full (the partial index) against the
    -- lexemes, where a probe per lexeme cost three times as much after a first load.
    SELECT array_agg(b.ctid) INTO v_blocks
      FROM (SELECT b.ctid
              FROM pyretrieve.lexical_blocks b
             WHERE b.workspace_id = p_workspace AND b.project_id = p_project
               AND b.classification <= p_ceiling AND b.postings < 128
               AND (b.classification, b.lexeme) IN (
                     SELECT c.classification, c.lexeme
                       FROM unnest(v_classes, v_lexemes, v_buckets) AS c(classification, lexeme, bucket)
                      WHERE v_held IS NULL
                         OR NOT (c.classification::text || '/' || (c.bucket >> 4) = ANY (v_held)))
               FOR UPDATE OF b SKIP LOCKED) b;

    WITH gone_pages AS (
        DELETE FROM pyretrieve.lexical_pages p
         WHERE p.ctid = ANY (v_pages)
           AND p.workspace_id = p_workspace AND p.project_id = p_project
        RETURNING p.*
    ), gone_blocks AS (
        DELETE FROM pyretrieve.lexical_blocks b
         WHERE b.ctid = ANY (v_blocks)
           AND b.workspace_id = p_workspace AND b.project_id = p_project
        RETURNING b.*
    ), slices AS (
        -- Each taken page's slice of each of its lexemes, and each taken block, as arrays: a
        -- list's entries are stored in document-number order, so a slice is one already.
        SELECT g.classification, l.lexeme,
               g.entries[l.start : coalesce(g.starts[l.n + 1] - 1, g.postings)] AS e,
               g.min_observed_at, g.max_observed_at, g.min_expires_at, g.max_expires_at
          FROM gone_pages g
         CROSS JOIN LATERAL unnest(g.lexemes, g.starts) WITH ORDINALITY AS l(lexeme, start, n)
        UNION ALL
        SELECT g.classification, g.lexeme, g.entries, g.min_observed_at, g.max_observed_at,
               g.min_expires_at, g.max_expires_at
          FROM gone_blocks g
    ), dropped AS (
        -- The tombstones of postings taken, with them (one probe of each tombstone's slices).
        DELETE FROM pyretrieve.lexical_tombstones x
         USING slices s
         WHERE x.workspace_id = p_workspace AND x.project_id = p_project
           AND x.lexeme = s.lexeme AND x.classification = s.classification
           AND x.docno BETWEEN (s.e[1] >> 32)::integer AND (s.e[cardinality(s.e)] >> 32)::integer
           AND EXISTS (SELECT 1 FROM unnest(s.e) AS u(v) WHERE (u.v >> 32)::integer = x.docno)
        RETURNING x.lexeme, x.classification, x.docno
    ), keyed AS (
        -- A list with one slice and no tombstone is written as it is; only the others are
        -- opened, filtered and sorted (posting by posting).
        SELECT s.*, count(*) OVER (PARTITION BY s.classification, s.lexeme) = 1
                    AND t.lexeme IS NULL AS kept
          FROM slices s
          LEFT JOIN (SELECT DISTINCT d.classification, d.lexeme FROM dropped d) t
            ON t.classification = s.classification AND t.lexeme = s.lexeme
    ), grouped AS (
        SELECT k.classification, k.lexeme, k.min_observed_at, k.max_observed_at,
               k.min_expires_at, k.max_expires_at, k.e AS entries
          FROM keyed k
         WHERE k.kept
        UNION ALL
        SELECT g.classification, g.lexeme, g.min_observed_at, g.max_observed_at,
               g.min_expires_at, g.max_expires_at, o.entries
          FROM (SELECT k.classification, k.lexeme, min(k.min_observed_at) AS min_observed_at,
                       max(k.max_observed_at) AS max_observed_at,
                       min(k.min_expires_at) AS min_expires_at,
                       CASE WHEN bool_and(k.max_expires_at IS NOT NULL) THEN max(k.max_expires_at) END
                           AS max_expires_at,
                       array_agg(u.v) AS entries
                  FROM keyed k
                 CROSS JOIN LATERAL unnest(k.e) AS u(v)
                 WHERE NOT k.kept
                   AND NOT EXISTS (SELECT 1 FROM dropped d
                                    WHERE d.lexeme = k.lexeme AND d.classification = k.classification
                                      AND d.docno = (u.v >> 32)::integer)
                 GROUP BY k.classification, k.lexeme) g
         CROSS JOIN LATERAL (SELECT array_agg(v.e ORDER BY v.e) AS entries
                               FROM unnest(g.entries) AS v(e)) o
    )
    SELECT array_agg(ROW(g.classification, g.lexeme, g.min_observed_at, g.max_observed_at,
                         g.min_expires_at, g.max_expires_at, g.entries)::pyretrieve.lexical_list),
           coalesce(sum(cardinality(g.entries)), 0)
      INTO v_lists, v_postings
      FROM grouped g;
    v_written := coalesce(pyretrieve.write_lexical_lists(p_workspace, p_project, v_lists), 0);

    RETURN QUERY SELECT coalesce(cardinality(v_pages), 0) + coalesce(cardinality(v_blocks), 0),
                        v_written, v_postings;
END;
$$;

-- New active fragments join the lexical index (write_lexical_postings), one scope at a time:
-- each posting packed as docno << 32 | (tf - 1) << 24 | length, where tf is the number of
-- positions (at least 1, at most the 256 a tsvector keeps) and a length fits 24 bits (a body
-- holds at most 1,000,000 characters); a document number is a positive int4, so the packed
-- entries sort by it. The statistics log follows.
CREATE FUNCTION pyretrieve.lexical_index_insert()
RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
BEGIN
    FOR s IN
        SELECT r.workspace_id, r.project_id, array_agg(u.lexeme) AS lexemes,
               array_agg(r.classification) AS classes,
               array_agg((r.docno::bigint << 32)
                         | ((least(greatest(cardinality(u.positions), 1), 256) - 1)::bigint << 24)
                         | r.doc_length) AS entries,
               array_agg(r.observed_at) AS observed, array_agg(r.expires_at) AS expires
          FROM changed r CROSS JOIN LATERAL unnest(r.tsv) AS u
         WHERE r.state = 'active'
         GROUP BY r.workspace_id, r.project_id
    LOOP
        PERFORM pyretrieve.write_lexical_postings(s.workspace_id, s.project_id, s.lexemes,
                                                  s.classes, s.entries, s.observed, s.expires);
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
-- of its postings becomes a tombstone, and write_lexical_postings then drops them from the
-- blocks no other transaction holds (the rest when a later write takes those). Its lexemes come from
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
        PERFORM pyretrieve.write_lexical_postings(s.workspace_id, s.project_id, s.lexemes,
                                                  s.classes, NULL, NULL, NULL);
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
    FOR EACH ROW EXECUTE FUNCTION pyretrieve.stamp_fragment();
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


-- ==== sql/schema/30_policies.sql ====
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


-- ==== sql/schema/40_read_api.sql ====
-- ---------------------------------------------------------------------------------------------
-- Errors. Every error raised here has its own SQLSTATE in class PR, a fixed message that names
-- no row, id or content, and is mapped to a typed Python error in one place.
--   PR001 access denied (no grant, scope absent, not a reader/writer/admin)   same for all
--   PR002 decision not valid for this request (not the caller's, not this transaction,
--         not the bound one)
--   PR003 transaction already bound (one binding, a read decision or a write scope, per
--         transaction)
--   PR004 the caller is a superuser or bypasses row-level security
--   PR010 invalid input (limits, lengths, identifiers, digests)
--   PR011 invalid embedding (dimension, NaN/Inf, zero norm)
--   PR012 unknown embedding model
--   PR013 conflict (a model registered with another dimension)
--   PR014 a value exceeds a limit of the database (a text with too many distinct words for a
--         tsvector)
--   PR015 unsupported text-search configuration (only pg_catalog's or pyretrieve's)
--   PR016 invalid fusion setting (an unknown fusion, a model's default weights not both given
--         or outside (0, 1000])
--   PR020 not found (a fragment absent or not visible to the caller: the same error)
--   PR030 semantic retrieval required but not available
-- ---------------------------------------------------------------------------------------------

CREATE FUNCTION pyretrieve.check_identifier(p_value text, p_what text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NULL OR p_value !~ '^[a-z0-9][a-z0-9_.-]{0,62}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid ' || p_what;
    END IF;
END;
$$;

-- The decision of this request: the transaction's decision, only if it is the one named and
-- belongs to the caller.
CREATE FUNCTION pyretrieve.require_decision(p_decision uuid)
RETURNS pyretrieve.decisions
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d pyretrieve.decisions;
BEGIN
    SELECT * INTO d FROM pyretrieve.bound_decision();
    IF NOT FOUND OR p_decision IS NULL OR d.decision_id <> p_decision
       OR d.principal <> pyretrieve.caller() THEN
        RAISE EXCEPTION USING ERRCODE = 'PR002', MESSAGE = 'decision not valid for this request';
    END IF;
    RETURN d;
END;
$$;

CREATE FUNCTION pyretrieve.or_tsquery(p_config regconfig, p_query text)
RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
BEGIN ATOMIC
    SELECT replace(plainto_tsquery(p_config, p_query)::text, ' & ', ' | ')::tsquery;
END;
COMMENT ON FUNCTION pyretrieve.or_tsquery(regconfig, text) IS
    'The OR of the query''s lexemes in one text-search configuration (phrases from compound words stay phrases).';

CREATE FUNCTION pyretrieve.check_embedding(p_model text, p_embedding public.vector)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_dimension integer;
    v_norm double precision;
BEGIN
    SELECT m.dimension INTO v_dimension FROM pyretrieve.embedding_models m WHERE m.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    IF p_embedding IS NULL OR public.vector_dims(p_embedding) <> v_dimension THEN
        RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding dimension does not match the model';
    END IF;
    v_norm := public.vector_norm(p_embedding);
    IF NOT (v_norm > 0 AND v_norm < 'Infinity'::double precision) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding must be finite and non-zero';
    END IF;
    -- Subnormal float4 values (below 2^-126 in magnitude) lose precision and can make cosine
    -- distances NaN; the client refuses them too.
    IF EXISTS (SELECT 1 FROM unnest(p_embedding::real[]) AS x(v)
                WHERE x.v <> 0 AND abs(x.v) < 1.17549435e-38::real) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding must not hold subnormal values';
    END IF;
END;
$$;

-- ---------------------------------------------------------------------------------------------
-- The read API. SECURITY DEFINER, written reason: principals hold no privilege on any table,
-- so these functions are their only door to the data. Each runs as pyretrieve_api (never the
-- table owner), takes the caller's identity from pyretrieve.caller(), works only under the
-- transaction's one decision, states the decision's filters explicitly, and is bound by the
-- row-level security policies of pyretrieve_api as a second wall.
-- ---------------------------------------------------------------------------------------------
SET LOCAL ROLE pyretrieve_api;

CREATE FUNCTION pyretrieve.authorize(
    p_workspace text,
    p_project text,
    p_purpose text,
    p_query_digest bytea,
    p_semantic_intent text,
    p_embedding_digest bytea,
    p_requested_limit integer)
RETURNS TABLE (
    decision_id uuid, principal name, workspace_id text, project_id text, purpose text,
    evaluated_at timestamptz, ceiling pyretrieve.classification, max_age interval,
    semantic_policy pyretrieve.semantic_policy, candidate_limit integer, grant_id uuid)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside: with index scans off (any principal may
-- set enable_indexscan and enable_bitmapscan) its statements scanned every tenant's rows of
-- the table whole, a time that grows with what the others hold and a load any caller could
-- multiply. Index scans stay on and sequential scans off here, whatever the caller set.
-- Every function of the API pins how it is planned (plan_cache_mode), generically unless it
-- says why not: a plan for the values at hand follows the statistics of those values, and the
-- statistics lag a growing scope. Taken
-- before a scope held a row, they take it for one row, and planned for that, a writer's probe
-- of one fragment by its key read the scope whole, through the scope's index (3,000 rows read
-- by one retract at a 3,000-row scope, 9,006 by one created_now, until 0043).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    g pyretrieve.grants;
    d pyretrieve.decisions;
    v_attempt integer;
    v_grant uuid;
BEGIN
    PERFORM pyretrieve.check_caller();
    PERFORM pyretrieve.apply_request_timeouts();
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM pyretrieve.check_identifier(p_purpose, 'purpose');
    IF p_query_digest IS NULL OR length(p_query_digest) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query digest must be 32 bytes (sha256)';
    END IF;
    IF p_embedding_digest IS NOT NULL AND length(p_embedding_digest) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'embedding digest must be 32 bytes (sha256)';
    END IF;
    IF p_semantic_intent IS NULL OR p_semantic_intent NOT IN ('disabled', 'optional', 'required') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'semantic intent must be disabled, optional or required';
    END IF;
    IF p_requested_limit IS NULL OR p_requested_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'requested limit must be between 1 and 1000';
    END IF;

    -- One binding per transaction, whatever any setting says: a second decision (for any scope,
    -- any principal) or a decision after a write scope is refused.
    IF EXISTS (SELECT 1 FROM pyretrieve.bound_decision()) OR EXISTS (SELECT 1 FROM pyretrieve.bound_write()) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR003', MESSAGE = 'transaction already bound to another scope';
    END IF;

    -- The grants policy shows only grants that apply to the caller, so an absent scope and
    -- a scope without a grant look the same here: both are denied with the same error. The most
    -- specific grant wins (the caller's own before a group's), then the widest. It is chosen
    -- once, before the grant is read: compared row by row, a caller's enable_indexscan off made
    -- a scan of the grants choose it again for every grant. The grant is then read by its whole
    -- key: compared with a sub-select's value, the plan read the workspace's grants and kept one.
    v_grant := pyretrieve.effective_grant(p_workspace, p_project, p_purpose);
    SELECT gr.* INTO g
      FROM pyretrieve.grants gr
     WHERE gr.workspace_id = p_workspace
       AND gr.grant_id = v_grant;
    IF NOT FOUND OR NOT pyretrieve.caller_in('pyretrieve_reader') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;

    -- The decisions log is partitioned by month. When the partition of this month does not
    -- exist yet (no maintenance has run since the month began), the first decision creates it
    -- and the insert is retried once.
    FOR v_attempt IN 1..2 LOOP
        BEGIN
            INSERT INTO pyretrieve.decisions AS dn (
                workspace_id, principal, project_id, purpose, grant_id, ceiling, max_age, semantic_policy,
                requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest)
            VALUES (
                g.workspace_id, pyretrieve.caller(), g.project_id, g.purpose, g.grant_id, g.ceiling,
                g.max_age, g.semantic_policy,
                p_requested_limit, least(greatest(p_requested_limit, 100), 1000),
                p_query_digest, p_semantic_intent, p_embedding_digest)
            RETURNING dn.* INTO d;
            EXIT;
        EXCEPTION WHEN check_violation THEN
            -- Every CHECK of the row was validated above: only a missing partition is left.
            IF v_attempt = 2 THEN
                RAISE;
            END IF;
            PERFORM pyretrieve.ensure_decision_partitions();
        END;
    END LOOP;

    -- The binding the second wall reads (bound_filter): this process's row in the workspace.
    INSERT INTO pyretrieve.read_bindings AS r (
        xact_id, decision_id, workspace_id, project_id, ceiling, evaluated_at, max_age)
    VALUES (
        d.xact_id, d.decision_id, d.workspace_id, d.project_id, d.ceiling, d.evaluated_at,
        d.max_age)
    ON CONFLICT (workspace_id, session_pid) DO UPDATE
       SET xact_id = excluded.xact_id, decision_id = excluded.decision_id,
           project_id = excluded.project_id,
           ceiling = excluded.ceiling, evaluated_at = excluded.evaluated_at,
           max_age = excluded.max_age;

    RETURN QUERY SELECT d.decision_id, d.principal, d.workspace_id::text, d.project_id::text,
                        d.purpose::text, d.evaluated_at, d.ceiling, d.max_age, d.semantic_policy,
                        d.candidate_limit, d.grant_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.authorize(text, text, text, bytea, text, bytea, integer) IS
    'Authorise the caller (pyretrieve.caller(): the role the request runs as) for one workspace/project and purpose. Checks the caller''s live grants, records the decision (digests and intent only: never query text, embedding values or content), binds this transaction to that scope (one decision per transaction: a second authorize, or one after a write, raises PR003) and returns the decision with its evaluation time, ceiling, max_age, semantic policy and bounded candidate limit. Raises SQLSTATE PR001 (access denied) alike for an absent scope and a scope without a grant, and PR004 for a superuser or BYPASSRLS caller. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.lexical_candidates(
    p_decision uuid, p_query text, p_limit integer, p_ranking text DEFAULT 'bm25')
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, score double precision,
               lexical_generation bigint, terms json)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
-- The terms' numbers are written as text: the shortest text that reads back as the same double.
SET extra_float_digits = 1
-- Every table is read through a key of the scope and term: a small index table's statistics
-- made a scan of every scope's pages look cheaper in a test, and a caller's enable_* settings
-- do not reach inside.
SET enable_seqscan = off
-- Its statement's plan is generic from the first call: PL/pgSQL plans it afresh for each of a
-- session's first five calls, about 3.5 ms each, and then keeps the generic plan, which every
-- later call runs with anyway (evals/bench/session_start.py). The results do not depend on
-- the plan (sums in lexeme order, a total order for the cut).
SET plan_cache_mode = force_generic_plan
-- Nor a caller's index scans off (see authorize).
SET enable_indexscan = on
SET enable_bitmapscan = on
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
               t.fragment_id, t.content_digest, t.score, t.lexical_generation, '[]'::json
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
    -- Every predicate is stated explicitly (the scope as parameters for the primary keys) and
    -- RLS applies it again. Sums run in lexeme order (bytewise) so the float result never depends
    -- on the plan.
    RETURN QUERY
    WITH ql AS MATERIALIZED (
        -- The query's lexemes, numbered in bytewise order (the order every sum runs in), each
        -- with the keys of the pages that may hold its small list (its bucket's and its group
        -- of 16's, 256 + bucket / 16) and its tombstones' document numbers (one probe of their
        -- key per term).
        SELECT q.lexeme, q.qtf, (row_number() OVER (ORDER BY q.lexeme COLLATE "C"))::integer AS ti,
               ARRAY[k.bucket, (256 + (k.bucket >> 4))::smallint] AS keys,
               (SELECT array_agg(x.docno ORDER BY x.docno)
                  FROM pyretrieve.lexical_tombstones x
                 WHERE x.workspace_id = d.workspace_id AND x.project_id = d.project_id
                   AND x.lexeme = q.lexeme AND x.classification <= d.ceiling) AS tombstones
          FROM (SELECT u.lexeme, max(greatest(cardinality(u.positions), 1))::double precision AS qtf
                  FROM pyretrieve.scope_configs c
                 CROSS JOIN LATERAL unnest(to_tsvector(c.ts_config, p_query)) AS u
                 WHERE c.workspace_id = d.workspace_id AND c.project_id = d.project_id
                 GROUP BY u.lexeme) q
         CROSS JOIN LATERAL (SELECT pyretrieve.lexeme_bucket(q.lexeme) AS bucket OFFSET 0) k
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
    ), bl AS MATERIALIZED (
        -- The blocks of the query's terms the decision may admit (a classification within the
        -- ceiling, a time range that meets the window: one key range per term), and the terms'
        -- slices of the pages of their buckets (small lists) read as blocks with their page's
        -- time range, each marked timely when the window holds its whole time range, and whole
        -- when it is timely and none of the term's tombstones lies in its range.
        SELECT t.ti, t.first_docno, t.last_docno, t.postings, t.entries, t.tombstones, t.timely,
               t.timely AND (t.tombstones IS NULL
                             OR NOT EXISTS (SELECT 1 FROM unnest(t.tombstones) AS x(docno)
                                             WHERE x.docno BETWEEN t.first_docno AND t.last_docno)) AS whole
          FROM (
        SELECT ql.ti, b.first_docno, b.last_docno, b.postings, b.entries, ql.tombstones,
               (b.max_observed_at <= d.evaluated_at
                AND (d.max_age IS NULL OR b.min_observed_at >= d.evaluated_at - d.max_age)
                AND (b.min_expires_at IS NULL OR b.min_expires_at > d.evaluated_at)) AS timely
          FROM ql
         CROSS JOIN LATERAL (
               SELECT b.first_docno, b.last_docno, b.postings, b.entries,
                      b.min_observed_at, b.max_observed_at, b.min_expires_at
                 FROM pyretrieve.lexical_blocks b
                WHERE b.workspace_id = d.workspace_id AND b.project_id = d.project_id
                  AND b.lexeme = ql.lexeme
                  AND b.classification <= d.ceiling
                  AND b.min_observed_at <= d.evaluated_at
                  AND (d.max_age IS NULL OR b.max_observed_at >= d.evaluated_at - d.max_age)
                  AND (b.max_expires_at IS NULL OR b.max_expires_at > d.evaluated_at)
               UNION ALL
               SELECT (x.e[1] >> 32)::integer, (x.e[cardinality(x.e)] >> 32)::integer,
                      cardinality(x.e), x.e, p.min_observed_at, p.max_observed_at, p.min_expires_at
                 FROM pyretrieve.lexical_pages p
                -- OFFSET 0 keeps each sub-select whole, computed once per page: pulled up, its
                -- expression was copied into every reference (the filter, the slice's bounds,
                -- the four uses of the slice), and each copy read the page's arrays again,
                -- decompressed when compressed (until 0056: a tenth of the leg on SciFact).
                CROSS JOIN LATERAL (SELECT array_position(p.lexemes, ql.lexeme) AS i OFFSET 0) i
                CROSS JOIN LATERAL (
                      SELECT p.entries[p.starts[i.i] : coalesce(p.starts[i.i + 1] - 1, p.postings)] AS e
                      OFFSET 0) x
                WHERE p.workspace_id = d.workspace_id AND p.project_id = d.project_id
                  AND p.bucket = ANY (ql.keys)
                  AND p.classification <= d.ceiling
                  AND ql.lexeme COLLATE "C" BETWEEN p.first_lexeme AND p.last_lexeme
                  AND p.min_observed_at <= d.evaluated_at
                  AND (d.max_age IS NULL OR p.max_observed_at >= d.evaluated_at - d.max_age)
                  AND (p.max_expires_at IS NULL OR p.max_expires_at > d.evaluated_at)
                  AND i.i IS NOT NULL) b) t
    ), part AS MATERIALIZED (
        -- The postings of blocks admitted in part. In a timely block, every posting but the
        -- tombstoned is admitted: its fragment is active (a retract or supersede tombstones its
        -- postings in the same transaction), of the block's classification and in its time
        -- range. Each is looked up among the term's tombstones (sorted: a binary search), not
        -- read: until compaction rewrote their blocks, the tombstones of 20 retracts made each
        -- search of 3,000 SciFact abstracts check 3,200 fragments against 200.
        SELECT bl.ti, u.entry
          FROM bl
         CROSS JOIN LATERAL unnest(bl.entries) AS u(entry)
         CROSS JOIN LATERAL (SELECT width_bucket((u.entry >> 32)::integer, bl.tombstones) AS i) k
         WHERE bl.timely AND NOT bl.whole
           AND (k.i = 0 OR bl.tombstones[k.i] <> (u.entry >> 32)::integer)
        UNION ALL
        -- The postings of the other blocks, each checked against its fragment: the decision's
        -- filter stated here, and the fragments' read policy again.
        SELECT bl.ti, u.entry
          FROM bl
         CROSS JOIN LATERAL unnest(bl.entries) AS u(entry)
         WHERE NOT bl.timely
           AND EXISTS (SELECT 1 FROM pyretrieve.fragments f
                        WHERE f.workspace_id = d.workspace_id AND f.project_id = d.project_id
                          AND f.docno = (u.entry >> 32)::integer
                          AND f.state = 'active'
                          AND f.classification <= d.ceiling
                          AND f.observed_at <= d.evaluated_at
                          AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
                          AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at))
    ), df AS MATERIALIZED (
        -- Each term's document frequency over the admitted fragments: whole blocks by their
        -- counts, the others by their checked postings.
        SELECT x.ti, sum(x.n)::double precision AS df
          FROM (SELECT bl.ti, bl.postings::bigint AS n FROM bl WHERE bl.whole
                UNION ALL
                SELECT part.ti, count(*) FROM part GROUP BY part.ti) x
         GROUP BY x.ti
    ), w AS MATERIALIZED (
        -- Each term's idf and weight qtf * idf, with the constants of its parts, and the text
        -- its explanation entries share (written once per term, not once per returned row).
        SELECT ql.ti, ql.lexeme, ql.qtf, i.idf, ql.qtf * i.idf AS wq,
               '{"term": ' || to_json(ql.lexeme)::text || ', "idf": ' || i.idf::text
               || ', "tf": ' AS head,
               ', "query_tf": ' || ql.qtf::integer::text || ', "length_norm": ' AS mid
          FROM ql
          JOIN df ON df.ti = ql.ti
         CROSS JOIN st
         CROSS JOIN LATERAL (SELECT ln(1.0 + (st.n - df.df + 0.5) / (df.df + 0.5)) AS idf) i
    ), scored AS MATERIALIZED (
        -- Each fragment's score: its terms' parts summed in bytewise lexeme order, over input
        -- sorted by fragment and term (so no group is sorted again), so the float result never
        -- depends on the plan. A part is qtf * idf * (tf * (k1 + 1)) / (tf + norm) with
        -- norm = k1 * (1 - b + b * length / avgdl), each operation in that order. The term's
        -- weight joins its blocks (a few dozen rows), not each of their postings.
        SELECT h.docno, sum(h.part ORDER BY h.ti) AS score
          FROM (SELECT p.docno, p.ti,
                       p.wq * (p.tf * (v_k1 + 1.0)) / (p.tf + v_k1 * (1.0 - v_b + v_b * p.len / p.avgdl)) AS part
                  FROM (SELECT y.ti, y.wq, y.avgdl, (y.entry >> 32)::integer AS docno,
                               (((y.entry >> 24) & 255) + 1)::double precision AS tf,
                               (y.entry & 16777215)::double precision AS len
                          FROM (SELECT b.ti, b.wq, b.avgdl, unnest(b.entries) AS entry
                                  FROM (SELECT bl.ti, w.wq, st.avgdl, bl.entries
                                          FROM bl JOIN w ON w.ti = bl.ti CROSS JOIN st
                                         WHERE bl.whole
                                        OFFSET 0) b
                                UNION ALL
                                SELECT part.ti, w.wq, st.avgdl, part.entry
                                  FROM part JOIN w ON w.ti = part.ti CROSS JOIN st) y) p
                 ORDER BY p.docno, p.ti) h
         GROUP BY h.docno
    ), top AS MATERIALIZED (
        -- Every fragment scoring at least the p_limit-th best score competes for the last
        -- places on the content-bound tie-break, so the cut is exact and plan-independent;
        -- the threshold is a sub-select, computed once. Each such fragment is probed by its
        -- document number (LIMIT 1: the key is unique in the scope), whatever the statistics
        -- say: joined, a scope taken for a few rows (no statistics yet) was read whole to
        -- hash it against the one fragment that passed.
        SELECT s.docno, s.score, f.fragment_id, f.content_digest, f.lexical_generation
          FROM scored s
         CROSS JOIN LATERAL (
               SELECT f.fragment_id, f.content_digest, f.lexical_generation
                 FROM pyretrieve.fragments f
                WHERE f.workspace_id = d.workspace_id AND f.project_id = d.project_id
                  AND f.docno = s.docno
                  AND f.state = 'active'
                  AND f.classification <= d.ceiling
                  AND f.observed_at <= d.evaluated_at
                  AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
                  AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
                LIMIT 1) f
         WHERE s.score >= (SELECT min(x.score)
                             FROM (SELECT sc.score FROM scored sc ORDER BY sc.score DESC LIMIT p_limit) x)
         ORDER BY s.score DESC, f.content_digest, f.fragment_id
         LIMIT p_limit
    ), top_docnos AS MATERIALIZED (
        SELECT array_agg(t.docno ORDER BY t.docno) AS docnos FROM top t
    ), terms AS MATERIALIZED (
        -- The explanation's terms of the returned rows alone: each row's posting of each term,
        -- found by binary search (width_bucket over the entries, which sort by document number)
        -- in the blocks whose range holds it, and its part
        -- from the same expressions as its score, so the parts add up to it exactly. The JSON
        -- is written as text (floats as their shortest exact text, the setting pinned above):
        -- jsonb_build_object cost several times as much. It is returned as json, checked and
        -- kept as written: jsonb parsed every number into a numeric and printed it again, a
        -- tenth of the leg's time on SciFact (evals/bench/lexical-0054-scifact.json).
        SELECT y.docno,
               ('[' || string_agg(
                   w.head || y.tf::integer::text || w.mid || y.norm::text || ', "contribution": '
                   || (w.wq * (y.tf * (v_k1 + 1.0)) / (y.tf + y.norm))::text || '}',
                   ', ' ORDER BY w.ti) || ']')::json AS terms
          FROM (SELECT bl.ti, td.docnos[k.k] AS docno,
                       (((bl.entries[i.i] >> 24) & 255) + 1)::double precision AS tf,
                       v_k1 * (1.0 - v_b + v_b * (bl.entries[i.i] & 16777215)::double precision / st.avgdl) AS norm
                  FROM bl
                 CROSS JOIN top_docnos td
                 CROSS JOIN st
                 CROSS JOIN LATERAL generate_series(width_bucket(bl.first_docno - 1, td.docnos) + 1,
                                                    width_bucket(bl.last_docno, td.docnos)) AS k(k)
                 -- Computed once per probe, not once per reference (OFFSET 0, as for the pages).
                 CROSS JOIN LATERAL (
                       SELECT width_bucket((td.docnos[k.k]::bigint << 32) | 4294967295, bl.entries) AS i
                       OFFSET 0) i
                 WHERE i.i > 0 AND (bl.entries[i.i] >> 32) = td.docnos[k.k]) y
          JOIN w ON w.ti = y.ti
         GROUP BY y.docno
    )
    SELECT (row_number() OVER (ORDER BY t.score DESC, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.score, t.lexical_generation, tm.terms
      FROM top t
      JOIN terms tm ON tm.docno = t.docno
     ORDER BY 1;
END;
$$;
COMMENT ON FUNCTION pyretrieve.lexical_candidates(uuid, text, integer, text) IS
    'Lexical candidates for the bound decision. p_ranking ''bm25'' (default): BM25 over the OR of the query''s lexemes (repeated query terms count), with k1 and b from the project and corpus statistics (document count, average length, document frequency) computed only from the fragments the decision admits; ''ts_rank'': the earlier ts_rank scoring, for comparison. 1-based ranks in a total order (score desc, then content digest, then fragment id). Returns rank, fragment_id, content_digest, score, lexical_generation and terms (a json array, kept as written: each matched term, in bytewise lexeme order, with idf, tf, query_tf, length_norm and contribution). Raises PR002 for a decision that is not the caller''s bound decision of this transaction. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- The approximate vector leg of a scope that has its own HNSW index (create_vector_index):
-- the nearest rows by the index, with the decision's filters applied during the scan, so
-- pgvector's iterative scan goes on until enough admitted rows are found. The index holds only
-- this scope's rows of this model, so neither the rows found nor the time taken depend on any
-- other scope. The settings are the function's own, fixed here, whatever the caller set:
-- ef_search and a strict distance order for recall, and no plan other than the index (a
-- caller's enable_* settings do not reach inside). p_limit + 32 nearest rows compete for the
-- p_limit places on the content-bound tie-break, as in the exact leg. The statement is built
-- with format() only from integers (the scope's serial, the model's dimension); every value
-- is a parameter.
CREATE FUNCTION pyretrieve.approximate_vector_candidates(
    p_decision pyretrieve.decisions, p_model text, p_embedding public.vector, p_limit integer,
    p_scope_serial integer, p_dimension integer)
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, distance double precision,
               source_digest bytea, vector_generation bigint, lexical_generation bigint,
               search text)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_sort = off
AS $$
BEGIN
    -- Set here rather than as SET clauses: pgvector defines them only once its library is
    -- loaded, which the vector argument has done by now. The SET clauses above make these
    -- local to the call as well.
    PERFORM pg_catalog.set_config('hnsw.ef_search', '1000', true);
    PERFORM pg_catalog.set_config('hnsw.iterative_scan', 'strict_order', true);
    PERFORM pg_catalog.set_config('hnsw.max_scan_tuples', '100000', true);
    RETURN QUERY EXECUTE pg_catalog.format($q$
    WITH near AS MATERIALIZED (
        SELECT e.fragment_id,
               (e.embedding::public.vector(%1$s) OPERATOR(public.<=>) $2::public.vector(%1$s))::double precision AS distance,
               e.source_digest, e.vector_generation
          FROM pyretrieve.embeddings e
         WHERE e.scope_serial = %2$s AND e.model_id = $1
           AND e.workspace_id = $3 AND e.project_id = $4
           AND e.fragment_state = 'active'
           AND e.classification <= $5
           AND e.observed_at <= $6
           AND ($7::interval IS NULL OR e.observed_at >= $6 - $7::interval)
           AND (e.expires_at IS NULL OR e.expires_at > $6)
         ORDER BY e.embedding::public.vector(%1$s) OPERATOR(public.<=>) $2::public.vector(%1$s)
         LIMIT $8 + 32
    ), top AS (
        SELECT n.fragment_id, f.content_digest, n.distance, n.source_digest, n.vector_generation,
               f.lexical_generation
          FROM near n
          CROSS JOIN LATERAL (
                SELECT f.content_digest, f.lexical_generation
                  FROM pyretrieve.fragments f
                 WHERE f.workspace_id = $3 AND f.fragment_id = n.fragment_id
                   AND f.project_id = $4
                   AND f.state = 'active'
                   AND f.classification <= $5
                   AND f.observed_at <= $6
                   AND ($7::interval IS NULL OR f.observed_at >= $6 - $7::interval)
                   AND (f.expires_at IS NULL OR f.expires_at > $6)
                OFFSET 0) f
         ORDER BY n.distance, f.content_digest, n.fragment_id
         LIMIT $8
    )
    SELECT (row_number() OVER (ORDER BY t.distance, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.distance, t.source_digest, t.vector_generation,
           t.lexical_generation, 'hnsw'::text
      FROM top t
     ORDER BY 1$q$, p_dimension, p_scope_serial)
    USING p_model, p_embedding, p_decision.workspace_id::text, p_decision.project_id::text,
          p_decision.ceiling, p_decision.evaluated_at, p_decision.max_age, p_limit;
END;
$$;
COMMENT ON FUNCTION pyretrieve.approximate_vector_candidates(pyretrieve.decisions, text, public.vector, integer, integer, integer) IS
    'The vector leg over a scope''s own HNSW index (internal to vector_candidates, which calls it when the index exists): the decision''s filters applied during an iterative, strictly ordered index scan (ef_search 1000, pgvector''s maximum), then the content-bound tie-break. Every row says search ''hnsw''.';

-- plan_cache_mode: the statements' plans are generic from the first call, made once per session
-- and blind to the scope's size, so no scan in them may depend on it. Each nearest row's
-- fragment is one look-up by key (the LATERAL ... OFFSET 0 below): a generic plan of a plain
-- join read the whole scope for each row, 20x slower at a 10,000-row scope, which is why 0007
-- to 0032 planned every call afresh; that planning was 0.6 to 1.2 ms of each call, with the
-- same rows (evals/bench/vector-plans.json: 0.70 against 1.43 ms p50 at a 200-row scope, 6.45
-- against 7.17 at 10,000). No sequential scan of the table either (enable_seqscan): a plan
-- made for an average scope must not read every scope's embeddings for a small one.
CREATE FUNCTION pyretrieve.vector_candidates(p_decision uuid, p_model text, p_embedding public.vector, p_limit integer)
RETURNS TABLE (rank integer, fragment_id uuid, content_digest bytea, distance double precision,
               source_digest bytea, vector_generation bigint, lexical_generation bigint,
               search text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
-- Nor a caller's index scans off (see authorize).
SET enable_indexscan = on
SET enable_bitmapscan = on
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
    v_scope integer;
    v_dimension integer;
    v_indexed boolean;
BEGIN
    PERFORM pyretrieve.check_embedding(p_model, p_embedding);
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'candidate limit out of range for this decision';
    END IF;

    -- A scope with its own HNSW index of this model (create_vector_index) is searched through
    -- it; every other scope exactly. The index's existence is the switch, not a row count or a
    -- statistic, so the same data and indexes always take the same path. Its name and its
    -- index row are read in one snapshot, the statement's: with the name resolved by
    -- to_regclass (the newest catalog), a search whose snapshot predated the commit of a
    -- rebuild (the old index dropped, the new one renamed to its name) found the new name but
    -- not the new row, and scanned the scope exactly (until 0052).
    SELECT p.scope_serial, m.dimension,
           EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                     JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid
                    WHERE c.relnamespace = 'pyretrieve'::pg_catalog.regnamespace
                      AND c.relname = pg_catalog.format('embeddings_hnsw_s%s_m%s',
                                                        p.scope_serial, m.model_serial)
                      AND i.indisvalid AND i.indisready)
      INTO v_scope, v_dimension, v_indexed
      FROM pyretrieve.projects p, pyretrieve.embedding_models m
     WHERE p.workspace_id = d.workspace_id AND p.project_id = d.project_id
       AND m.model_id = p_model;
    IF v_indexed THEN
        RETURN QUERY SELECT * FROM pyretrieve.approximate_vector_candidates(
            d, p_model, p_embedding, p_limit, v_scope, v_dimension);
        RETURN;
    END IF;

    -- Exact cosine distance over the scope's embeddings of the model, filtered on the
    -- fragment columns each embedding carries (the decision's filters, stated explicitly with
    -- the scope as parameters for embeddings_scope_idx, and applied again by RLS). Under RLS the
    -- distance operator is not leakproof, so a global HNSW index would filter after the scan
    -- and lose recall on small scopes; exact search has recall 1. Only the returned rows are
    -- joined to their fragments; every row at the p_limit-th distance competes on the
    -- content-bound tie-break, so the cut is exact.
    --
    -- One pass keeps the p_limit + 1 nearest rows (a bounded sort, no copy of the scope). When
    -- the next row lies farther than the p_limit-th, those p_limit rows are exactly the rows at
    -- or within the p_limit-th distance. Only when it ties does a second pass (skipped
    -- otherwise: its one-time filter is false) collect every row at or within that distance,
    -- however many tie. Until 0055 every call kept the scope's distances and read them twice,
    -- a seventh of the leg at a 10,000-row scope (evals/bench/vector-revisions-0055.json).
    -- Both passes read the scope as "scoped" states it, once: NOT MATERIALIZED puts the
    -- statement in each pass, each then with its own plan.
    RETURN QUERY
    WITH scoped AS NOT MATERIALIZED (
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
    ), near AS MATERIALIZED (
        SELECT c.fragment_id, c.distance, c.source_digest, c.vector_generation
          FROM scoped c
         ORDER BY c.distance
         LIMIT p_limit + 1
    ), edge AS MATERIALIZED (
        -- The p_limit-th distance (the last row's, when there are fewer) and whether the row
        -- after it ties it.
        SELECT x.last, (SELECT count(*) FROM near n WHERE n.distance <= x.last) > p_limit AS tied
          FROM (SELECT max(y.distance) AS last
                  FROM (SELECT n.distance FROM near n ORDER BY n.distance LIMIT p_limit) y) x
    ), scan AS (
        SELECT n.fragment_id, n.distance, n.source_digest, n.vector_generation
          FROM near n
         WHERE n.distance <= (SELECT g.last FROM edge g) AND NOT (SELECT g.tied FROM edge g)
        UNION ALL
        SELECT c.fragment_id, c.distance, c.source_digest, c.vector_generation
          FROM scoped c
         WHERE (SELECT g.tied FROM edge g) AND c.distance <= (SELECT g.last FROM edge g)
    ), top AS (
        SELECT s.fragment_id, f.content_digest, s.distance, s.source_digest, s.vector_generation,
               f.lexical_generation
          FROM scan s
          -- One look-up by primary key per nearest row. As a plain join, the planner (which
          -- under RLS expects about one row of the scan) chose at some scope sizes a bitmap
          -- scan of the whole scope, repeated for every row: 8x slower at 2,500 rows.
          -- OFFSET 0 keeps the sub-select from being flattened into such a join.
          CROSS JOIN LATERAL (
                SELECT f.content_digest, f.lexical_generation
                  FROM pyretrieve.fragments f
                 WHERE f.workspace_id = d.workspace_id AND f.fragment_id = s.fragment_id
                   AND f.project_id = d.project_id
                   AND f.state = 'active'
                   AND f.classification <= d.ceiling
                   AND f.observed_at <= d.evaluated_at
                   AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
                   AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
                OFFSET 0) f
         ORDER BY s.distance, f.content_digest, s.fragment_id
         LIMIT p_limit
    )
    SELECT (row_number() OVER (ORDER BY t.distance, t.content_digest, t.fragment_id))::integer,
           t.fragment_id, t.content_digest, t.distance, t.source_digest, t.vector_generation,
           t.lexical_generation, 'exact'::text
      FROM top t
     ORDER BY 1;
END;
$$;
COMMENT ON FUNCTION pyretrieve.vector_candidates(uuid, text, public.vector, integer) IS
    'Vector candidates for the bound decision: cosine distance to p_embedding over the scope''s embeddings of model p_model, exact, or through the scope''s own HNSW index of that model when an admin created one (create_vector_index; recall measured in evals/bench), 1-based ranks in a total order (distance, then content digest, then fragment id). Returns rank, fragment_id, content_digest, distance, source_digest (digest of the text the embedding was computed from), vector_generation, lexical_generation and search (''exact'' for the exact scan, ''hnsw'' through the scope''s index; the same for every row of a call, and it depends on this scope alone). Raises PR011 for a wrong dimension, NaN/Inf or zero public.vector, PR012 for an unknown model. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.fragments(p_decision uuid, p_ids uuid[])
RETURNS TABLE (
    workspace_id text, project_id text, fragment_id uuid, body text, content_digest bytea,
    classification pyretrieve.classification, state pyretrieve.fragment_state, superseded_by uuid,
    observed_at timestamptz, expires_at timestamptz, ingested_at timestamptz, source_uri text,
    source_revision text, manifest_id text, ts_config regconfig, lexical_generation bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside: with index scans off (any principal may
-- set enable_indexscan and enable_bitmapscan) its statements scanned every tenant's rows of
-- the table whole, a time that grows with what the others hold and a load any caller could
-- multiply. Index scans stay on and sequential scans off here, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
-- A plan for any scope, not for the statistics of the one at hand: those lag a growing scope,
-- and planned for a scope they took for one row, the records of 200 ids were read through the
-- scope's index, every fragment of the scope (5,000 of a 5,000-row scope), at every search.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 2 * d.candidate_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'too many ids for this decision';
    END IF;
    -- One probe of the key per id (LIMIT 1 keeps it a probe, whatever the estimates).
    RETURN QUERY
    SELECT f.workspace_id::text, f.project_id::text, f.fragment_id, f.body, f.content_digest,
           f.classification, f.state, f.superseded_by, f.observed_at, f.expires_at, f.ingested_at,
           f.source_uri, f.source_revision, f.manifest_id, f.ts_config, f.lexical_generation
      FROM (SELECT DISTINCT i.id FROM unnest(p_ids) AS i(id)) i
     CROSS JOIN LATERAL (
           SELECT f.* FROM pyretrieve.fragments f
            WHERE f.workspace_id = d.workspace_id
              AND f.fragment_id = i.id
              AND f.project_id = d.project_id
              AND f.state = 'active'
              AND f.classification <= d.ceiling
              AND f.observed_at <= d.evaluated_at
              AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
              AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
            LIMIT 1) f
     ORDER BY f.fragment_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.fragments(uuid, uuid[]) IS
    'The authoritative records (body, digest, classification, state, times, provenance, generation) for the given ids, only those visible under the bound decision; ids that are absent or not visible are silently left out, alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';


SET LOCAL ROLE pyretrieve_owner;

-- ==== sql/schema/45_search.sql ====
-- ---------------------------------------------------------------------------------------------
-- One fused, explained search for SQL callers. The same steps, in the same order and with the
-- same float arithmetic, as the Python client and its pure ranker (a test compares them):
--   fusion     = the request's, else the model's registered default (model_defaults), else rrf
--   weights    = the request's, else the model's registered defaults, else 1.0 each
--   rrf        : (0.0 + w_lex / (60 + lexical_rank)) + w_vec / (60 + vector_rank)
--   dbsf       : (0.0 + w_lex * n_lex) + w_vec * n_vec, n = max(0, (x - lower) / (upper - lower))
--                with x the BM25 score or 1 - cosine distance and lower/upper = mean -/+ 3 sample
--                std of that leg's candidates (dbsf_distribution, summed in rank order); 0.5 when
--                upper <= lower
--   freshness  = least(1.0, greatest(0.5, 1.0 - 0.5 * (age_us / max_age_us)))   (1.0 without max_age)
--   final      = fused * freshness; order by final desc, fused desc, content_digest, fragment_id
--   confidence = least(1, greatest(0, (fused / ideal) * freshness * (61 / (60 + rank)) * semantic_factor))
-- The explanation is the Python ranker's (pyretrieve/explain.py), key for key and value for value:
-- its canonical JSON is byte-identical to the client's for the same request and decision.
-- ---------------------------------------------------------------------------------------------

-- A double as a jsonb number that reads back as the same double, and as a float: the shortest
-- exact digits (extra_float_digits pinned), with at least one decimal place (1.0, not 1), as
-- Python's json module renders floats.
CREATE FUNCTION pyretrieve.json_double(p_value double precision)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET extra_float_digits = 1
BEGIN ATOMIC
    SELECT pg_catalog.to_jsonb(pg_catalog.round(n.v, GREATEST(pg_catalog.scale(n.v), 1)))
      FROM (SELECT p_value::text::numeric AS v) n;
END;
COMMENT ON FUNCTION pyretrieve.json_double(double precision) IS
    'A double precision value as a jsonb number with its shortest exact digits and at least one decimal place, so a JSON reader gets back the same IEEE double, as a float.';

-- A timestamp as the explanation renders it: ISO 8601 in UTC, always with microseconds and Z.
CREATE FUNCTION pyretrieve.iso_utc(p_value timestamptz)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT pg_catalog.to_char(p_value AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
END;
COMMENT ON FUNCTION pyretrieve.iso_utc(timestamptz) IS
    'A timestamp in ISO 8601, in UTC, with microseconds and a Z suffix: how explanations render times.';

-- sha256 of the embedding as float32 little-endian bytes, the digest the client records.
-- vector_send() writes a 4-byte header then big-endian float4 values.
CREATE FUNCTION pyretrieve.embedding_digest(p_embedding public.vector)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT pg_catalog.sha256(pg_catalog.string_agg(
               pg_catalog.substr(b.raw, 5 + 4 * i + 3, 1)
            || pg_catalog.substr(b.raw, 5 + 4 * i + 2, 1)
            || pg_catalog.substr(b.raw, 5 + 4 * i + 1, 1)
            || pg_catalog.substr(b.raw, 5 + 4 * i, 1), ''::bytea ORDER BY i))
      FROM (SELECT public.vector_send(p_embedding) AS raw) b,
           pg_catalog.generate_series(0, public.vector_dims(p_embedding) - 1) AS i;
END;
COMMENT ON FUNCTION pyretrieve.embedding_digest(public.vector) IS
    'sha256 of an embedding as float32 little-endian bytes: the embedding digest that authorize() records instead of the values.';

-- The distribution DBSF normalises one leg's candidate scores by: count, mean and sample
-- standard deviation, summed one addition at a time in the array's order (rank order), as the
-- Python ranker does (pyretrieve.ranking.distribution); avg() and stddev() would accumulate
-- differently. No row for no values.
CREATE FUNCTION pyretrieve.dbsf_distribution(p_values double precision[])
RETURNS TABLE (candidates integer, mean double precision, std double precision,
               lower_bound double precision, upper_bound double precision)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_value double precision;
    v_total double precision := 0.0;
    v_squares double precision := 0.0;
    v_delta double precision;
    v_spread double precision;
BEGIN
    candidates := coalesce(pg_catalog.array_length(p_values, 1), 0);
    IF candidates = 0 THEN
        RETURN;
    END IF;
    FOREACH v_value IN ARRAY p_values LOOP
        v_total := v_total + v_value;
    END LOOP;
    mean := v_total / candidates::double precision;
    std := 0.0::double precision;
    IF candidates > 1 THEN
        FOREACH v_value IN ARRAY p_values LOOP
            v_delta := v_value - mean;
            v_squares := v_squares + v_delta * v_delta;
        END LOOP;
        std := pg_catalog.sqrt(v_squares / (candidates - 1)::double precision);
    END IF;
    v_spread := 3.0::double precision * std;
    lower_bound := mean - v_spread;
    upper_bound := mean + v_spread;
    RETURN NEXT;
END;
$$;
COMMENT ON FUNCTION pyretrieve.dbsf_distribution(double precision[]) IS
    'The distribution-based score fusion range of one leg''s candidate scores, given in rank order: count, mean, sample standard deviation and mean -/+ 3 std, summed one addition at a time in the given order so the doubles are the Python ranker''s. No row for an empty array.';
-- The stable code of the typed error the Python client raises for a database error (the
-- SQLSTATE and the server's primary message, as pyretrieve.db.errors.translate reads them): a
-- failed vector leg names it as its cause, on both sides. A test raises every SQLSTATE and
-- compares the two.
CREATE FUNCTION pyretrieve.error_code(p_sqlstate text, p_message text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT CASE
        -- Told apart by the message (read here, never shown).
        WHEN s.state IN ('28P01', '28000') THEN 'VES_MEMORY_AUTHENTICATION_FAILED'
        WHEN s.state = '3F000' AND pg_catalog.strpos(s.message, '"pyretrieve"') > 0
            THEN 'VES_MEMORY_SCHEMA_MISSING'
        WHEN s.state IN ('42883', '42P01') AND (pg_catalog.strpos(s.message, 'pyretrieve.') > 0
                                             OR pg_catalog.strpos(s.message, '"pyretrieve') > 0)
            THEN 'VES_MEMORY_SCHEMA_MISSING'
        WHEN s.state IN ('22023', '42704') AND s.message ~ '^role "[^\n]*" does not exist$'
            THEN 'VES_MEMORY_UNKNOWN_PRINCIPAL'
        WHEN s.state = '42501' AND pg_catalog.starts_with(s.message, 'permission denied to set role')
            THEN 'VES_MEMORY_UNKNOWN_PRINCIPAL'
        -- The schema's own SQLSTATEs.
        WHEN s.state = 'PR001' THEN 'VES_MEMORY_ACCESS_DENIED'
        WHEN s.state IN ('PR002', 'PR003') THEN 'VES_MEMORY_INVALID_DECISION'
        WHEN s.state = 'PR004' THEN 'VES_MEMORY_PRIVILEGED_CALLER'
        WHEN s.state IN ('PR010', 'PR015') THEN 'VES_MEMORY_INVALID_INPUT'
        WHEN s.state = 'PR016' THEN 'VES_MEMORY_INVALID_FUSION'
        WHEN s.state = 'PR011' THEN 'VES_MEMORY_INVALID_EMBEDDING'
        WHEN s.state = 'PR012' THEN 'VES_MEMORY_UNKNOWN_MODEL'
        WHEN s.state = 'PR013' THEN 'VES_MEMORY_CONFLICT'
        WHEN s.state = 'PR014' THEN 'VES_MEMORY_LIMIT_EXCEEDED'
        WHEN s.state = 'PR020' THEN 'VES_MEMORY_NOT_FOUND'
        WHEN s.state = 'PR030' THEN 'VES_MEMORY_SEMANTIC_REQUIRED'
        -- Standard SQLSTATEs, then their classes.
        WHEN s.state = '42501' THEN 'VES_MEMORY_ACCESS_DENIED'
        WHEN s.state IN ('23505', '40001', '40P01') THEN 'VES_MEMORY_CONFLICT'
        WHEN s.state IN ('55P03', '57014', '25P03') THEN 'VES_MEMORY_TIMEOUT'
        WHEN s.state = '54000' THEN 'VES_MEMORY_LIMIT_EXCEEDED'
        WHEN pg_catalog.left(s.state, 2) IN ('08', '53', '57') THEN 'VES_MEMORY_DATABASE_UNAVAILABLE'
        WHEN pg_catalog.left(s.state, 2) IN ('22', '23') THEN 'VES_MEMORY_INVALID_INPUT'
        -- The classes the driver reports as operational errors.
        WHEN pg_catalog.left(s.state, 2) IN ('27', '28', '2F', '38', '39', '3B', '40', '54', '55',
                                             '58', 'F0', 'HV')
            THEN 'VES_MEMORY_DATABASE_UNAVAILABLE'
        ELSE 'VES_MEMORY_INTERNAL'
    END
      FROM (SELECT coalesce(p_sqlstate, '') AS state, coalesce(p_message, '') AS message) s;
END;
COMMENT ON FUNCTION pyretrieve.error_code(text, text) IS
    'The stable code of the typed error the Python client raises for a database error with this SQLSTATE and primary message (pyretrieve.db.errors.translate): the cause search() records when the vector leg fails, as the client does.';

CREATE FUNCTION pyretrieve.search(
    p_workspace text,
    p_project text,
    p_purpose text,
    p_query text,
    p_embedding public.vector DEFAULT NULL,
    p_model text DEFAULT NULL,
    p_limit integer DEFAULT 10,
    p_mode text DEFAULT 'hybrid',
    p_lexical_weight double precision DEFAULT NULL,
    p_vector_weight double precision DEFAULT NULL,
    p_ranking text DEFAULT 'bm25',
    p_semantic text DEFAULT 'optional',
    p_candidate_limit integer DEFAULT NULL,
    p_fusion text DEFAULT NULL)
RETURNS TABLE (
    rank integer, fragment_id uuid, content_digest bytea, body text, final_score double precision,
    fused_score double precision, freshness double precision, confidence double precision,
    explanation jsonb)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
-- Each statement's plan is generic from the first call. PL/pgSQL plans a statement afresh for
-- each of a session's first five calls and then keeps the generic plan, which is what the
-- statements run with from then on anyway: planning them again cost a new session's second to
-- sixth search about 4 ms each (evals/bench/session_start.py). Functions it calls inherit the
-- setting unless they pin their own.
SET plan_cache_mode = force_generic_plan
-- Whatever the caller set: the explanation's numbers never depend on it. (Until 0036 the legs'
-- rows reached the fusion as jsonb, made through float text, which a caller's
-- extra_float_digits of 0 or below rounded; they travel as arrays of their own types now.)
SET extra_float_digits = 1
AS $$
#variable_conflict use_column
DECLARE
    d record;
    v_wants_vector boolean;
    v_required boolean;
    v_intent text;
    v_embedding_digest bytea;
    -- Each leg's rows in rank order, column by column (NULL: the leg did not run, or its
    -- rows were stale): the fusion reads them back with unnest, every value its own type.
    v_lex_ranks integer[];
    v_lex_ids uuid[];
    v_lex_scores double precision[];
    v_lex_terms json[];
    v_vec_ranks integer[];
    v_vec_ids uuid[];
    v_vec_distances double precision[];
    v_vec_generations bigint[];
    v_vec_searches text[];
    v_vec_count integer;
    v_status text;
    v_reason text;
    v_evidence jsonb := '{}'::jsonb;
    v_ideal double precision := 0.0;
    v_factor double precision;
    v_stale integer;
    v_wl double precision;
    v_wv double precision;
    v_source text;
    v_weights_model text;
    v_weights jsonb;
    v_fusion text;
    v_fusion_source text;
    v_fusion_model text;
    v_model_fusion text;
    v_model_wl double precision;
    v_model_wv double precision;
    v_ln integer;
    v_lmean double precision;
    v_lstd double precision;
    v_llo double precision;
    v_lhi double precision;
    v_vn integer;
    v_vmean double precision;
    v_vstd double precision;
    v_vlo double precision;
    v_vhi double precision;
    v_per_leg integer;
BEGIN
    -- The client's checks (pyretrieve.client.build_request), each refused alike (PR010).
    IF p_query IS NULL OR length(p_query) NOT BETWEEN 1 AND 4096 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'query must be 1 to 4096 characters';
    END IF;
    IF p_mode IS NULL OR p_mode NOT IN ('hybrid', 'lexical', 'vector') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'mode must be hybrid, lexical or vector';
    END IF;
    IF p_semantic IS NULL OR p_semantic NOT IN ('optional', 'required', 'disabled') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'semantic must be optional, required or disabled';
    END IF;
    IF p_ranking IS NULL OR p_ranking NOT IN ('bm25', 'ts_rank') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'ranking must be bm25 or ts_rank';
    END IF;
    IF p_mode = 'vector' AND p_semantic = 'disabled' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'vector mode needs semantic retrieval';
    END IF;
    IF p_candidate_limit IS NOT NULL AND p_candidate_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'candidate limit must be between 1 and 1000';
    END IF;
    IF p_model IS NOT NULL AND length(p_model) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid model id';
    END IF;
    IF p_fusion IS NOT NULL AND p_fusion NOT IN ('rrf', 'dbsf') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR016', MESSAGE = 'fusion must be rrf or dbsf';
    END IF;
    IF (p_lexical_weight IS NULL) <> (p_vector_weight IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'give both weights or neither';
    END IF;
    IF p_lexical_weight IS NOT NULL
       AND (NOT (p_lexical_weight >= 0 AND p_lexical_weight <= 1000)
            OR NOT (p_vector_weight >= 0 AND p_vector_weight <= 1000)) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'weights must be between 0 and 1000';
    END IF;
    v_wants_vector := p_mode <> 'lexical' AND p_semantic <> 'disabled';
    IF v_wants_vector AND p_embedding IS NOT NULL THEN
        v_embedding_digest := pyretrieve.embedding_digest(p_embedding);
    END IF;
    -- The client's rule (pyretrieve.contract.semantic_intent).
    v_intent := CASE WHEN NOT v_wants_vector THEN 'disabled'
                     WHEN p_mode = 'vector' OR p_semantic = 'required' THEN 'required'
                     ELSE 'optional' END;

    -- 1. Policy.
    SELECT * INTO d FROM pyretrieve.authorize(
        p_workspace => p_workspace, p_project => p_project, p_purpose => p_purpose,
        p_query_digest => pyretrieve.content_digest(p_query), p_semantic_intent => v_intent,
        p_embedding_digest => v_embedding_digest, p_requested_limit => p_limit);
    -- Required by the request (its intent: lexical mode wants no semantic leg at all, so it
    -- requires none) or by the grant.
    v_required := v_intent = 'required' OR d.semantic_policy = 'required';
    v_per_leg := least(d.candidate_limit, coalesce(p_candidate_limit, d.candidate_limit));

    -- The fusion and the weights: the request's, else the named model's registered defaults,
    -- else rrf and 1.0 each (the client's rule, Retriever._fusion).
    IF p_model IS NOT NULL AND (p_fusion IS NULL OR p_lexical_weight IS NULL) THEN
        SELECT m.fusion, m.lexical_weight, m.vector_weight INTO v_model_fusion, v_model_wl, v_model_wv
          FROM pyretrieve.model_defaults(p_model) m;
    END IF;
    IF p_fusion IS NOT NULL THEN
        v_fusion := p_fusion;
        v_fusion_source := 'request';
    ELSIF v_model_fusion IS NOT NULL THEN
        v_fusion := v_model_fusion;
        v_fusion_source := 'model';
        v_fusion_model := p_model;
    ELSE
        v_fusion := 'rrf';
        v_fusion_source := 'default';
    END IF;
    IF p_lexical_weight IS NOT NULL THEN
        v_wl := p_lexical_weight;
        v_wv := p_vector_weight;
        v_source := 'request';
    ELSIF v_model_wl IS NOT NULL THEN
        v_wl := v_model_wl;
        v_wv := v_model_wv;
        v_source := 'model';
        v_weights_model := p_model;
    ELSE
        v_wl := 1.0::double precision;
        v_wv := 1.0::double precision;
        v_source := 'default';
    END IF;
    v_weights := jsonb_build_object('lexical', pyretrieve.json_double(v_wl),
                                    'vector', pyretrieve.json_double(v_wv),
                                    'source', v_source, 'model', v_weights_model);

    -- 2. Lexical candidates (a failure here is a hard error).
    IF p_mode <> 'vector' THEN
        SELECT array_agg(c.rank ORDER BY c.rank), array_agg(c.fragment_id ORDER BY c.rank),
               array_agg(c.score ORDER BY c.rank), array_agg(c.terms ORDER BY c.rank)
          INTO v_lex_ranks, v_lex_ids, v_lex_scores, v_lex_terms
          FROM pyretrieve.lexical_candidates(d.decision_id, p_query, v_per_leg, p_ranking) c;
        IF v_fusion = 'rrf' THEN
            v_ideal := v_ideal + v_wl / 61.0::double precision;
        ELSE
            v_ideal := v_ideal + v_wl;
        END IF;
    END IF;

    -- 3. Vector candidates, when mode, intent and policy allow and an embedding exists.
    IF NOT v_wants_vector THEN
        v_status := 'not_requested';
    ELSIF d.semantic_policy = 'disabled' THEN
        v_status := 'degraded';
        v_reason := 'disabled';
        v_evidence := jsonb_build_object('policy', 'disabled');
    ELSIF p_embedding IS NULL THEN
        -- The client's evidence when it has no embedding and no embedder for the model.
        v_status := 'degraded';
        v_reason := 'missing_embedding';
        v_evidence := jsonb_build_object('model', p_model, 'embedder_registered', false);
    ELSIF p_model IS NULL THEN
        v_status := 'degraded';
        v_reason := 'missing_embedding';
        v_evidence := jsonb_build_object('model', p_model);
    ELSE
        BEGIN
            SELECT array_agg(c.rank ORDER BY c.rank), array_agg(c.fragment_id ORDER BY c.rank),
                   array_agg(c.distance ORDER BY c.rank),
                   array_agg(c.vector_generation ORDER BY c.rank),
                   array_agg(c.search ORDER BY c.rank), count(*),
                   count(*) FILTER (WHERE c.source_digest <> c.content_digest
                                       OR c.vector_generation < c.lexical_generation)
              INTO v_vec_ranks, v_vec_ids, v_vec_distances, v_vec_generations, v_vec_searches,
                   v_vec_count, v_stale
              FROM pyretrieve.vector_candidates(d.decision_id, p_model, p_embedding, v_per_leg) c;
            IF v_stale > 0 THEN
                v_status := 'degraded';
                v_reason := 'stale';
                v_evidence := jsonb_build_object('model', p_model, 'stale_candidates', v_stale,
                                                 'candidates', v_vec_count);
                v_vec_ranks := NULL;
                v_vec_ids := NULL;
                v_vec_distances := NULL;
                v_vec_generations := NULL;
                v_vec_searches := NULL;
            ELSE
                v_status := 'used';
                v_evidence := jsonb_build_object('model', p_model);
                IF v_fusion = 'rrf' THEN
                    v_ideal := v_ideal + v_wv / 61.0::double precision;
                ELSE
                    v_ideal := v_ideal + v_wv;
                END IF;
            END IF;
        EXCEPTION
            WHEN SQLSTATE 'PR012' THEN
                v_status := 'degraded'; v_reason := 'unavailable';
                v_evidence := jsonb_build_object('model', p_model, 'cause', 'unknown_model');
            WHEN SQLSTATE 'PR011' THEN
                v_status := 'degraded'; v_reason := 'corrupt';
                v_evidence := jsonb_build_object('model', p_model, 'cause', 'invalid_embedding');
            -- Any other failure of the leg (OTHERS leaves out query_canceled: a cancel or a
            -- statement_timeout ends the whole call, which is one statement).
            WHEN OTHERS THEN
                v_status := 'degraded'; v_reason := 'unavailable';
                v_evidence := jsonb_build_object(
                    'model', p_model, 'cause', pyretrieve.error_code(SQLSTATE, SQLERRM));
        END;
    END IF;
    IF v_required AND v_status IS DISTINCT FROM 'used' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR030', MESSAGE = 'semantic retrieval is required but was not available';
    END IF;
    IF NOT v_ideal > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'the weights of the modalities that ran are all zero';
    END IF;
    v_factor := CASE WHEN v_status = 'degraded' THEN 0.75::double precision ELSE 1.0::double precision END;
    -- DBSF: each leg's distribution over all of its candidates, in rank order.
    IF v_fusion = 'dbsf' THEN
        SELECT x.candidates, x.mean, x.std, x.lower_bound, x.upper_bound
          INTO v_ln, v_lmean, v_lstd, v_llo, v_lhi
          FROM pyretrieve.dbsf_distribution(coalesce(v_lex_scores, '{}'::double precision[])) x;
        SELECT x.candidates, x.mean, x.std, x.lower_bound, x.upper_bound
          INTO v_vn, v_vmean, v_vstd, v_vlo, v_vhi
          FROM pyretrieve.dbsf_distribution(ARRAY(
                   SELECT 1.0::double precision - u.distance
                     FROM unnest(v_vec_distances) WITH ORDINALITY AS u(distance, o)
                    ORDER BY u.o)) x;
    END IF;

    -- 4. Authoritative records, fusion, freshness, total order, confidence, explanation.
    -- The lexical terms travel as the leg wrote them and are rendered (each number through
    -- json_double) only for the rows returned: a leg's 100 candidates hold several hundred
    -- numbers, and each json_double call costs a few microseconds.
    RETURN QUERY
    WITH lex AS (
        SELECT x.rank, x.fragment_id, x.score, x.terms
          FROM unnest(v_lex_ranks, v_lex_ids, v_lex_scores, v_lex_terms)
               AS x(rank, fragment_id, score, terms)
    ), vec AS (
        SELECT x.rank, x.fragment_id, x.distance, x.vector_generation, x.search
          FROM unnest(v_vec_ranks, v_vec_ids, v_vec_distances, v_vec_generations, v_vec_searches)
               AS x(rank, fragment_id, distance, vector_generation, search)
    ), rec AS (
        SELECT r.*
          FROM pyretrieve.fragments(d.decision_id, ARRAY(
                   SELECT l.fragment_id FROM lex l UNION SELECT v.fragment_id FROM vec v)) r
    ), joined AS (
        SELECT r.*, l.rank AS lexical_rank, l.score AS lexical_score, l.terms AS lexical_terms,
               v.rank AS vector_rank, v.distance, v.vector_generation, v.search AS vector_search,
               1.0::double precision - v.distance AS vector_input,
               CASE WHEN v_fusion = 'dbsf' AND l.rank IS NOT NULL THEN
                   CASE WHEN NOT (v_lhi > v_llo) THEN 0.5::double precision
                        ELSE greatest(0.0::double precision, (l.score - v_llo) / (v_lhi - v_llo)) END
               END AS lexical_normalized,
               CASE WHEN v_fusion = 'dbsf' AND v.rank IS NOT NULL THEN
                   CASE WHEN NOT (v_vhi > v_vlo) THEN 0.5::double precision
                        ELSE greatest(0.0::double precision,
                                      ((1.0::double precision - v.distance) - v_vlo) / (v_vhi - v_vlo)) END
               END AS vector_normalized,
               (extract(epoch FROM d.evaluated_at - r.observed_at) * 1000000)::bigint AS age_us,
               (extract(epoch FROM d.max_age) * 1000000)::bigint AS max_age_us
          FROM rec r
          LEFT JOIN lex l ON l.fragment_id = r.fragment_id
          LEFT JOIN vec v ON v.fragment_id = r.fragment_id
    ), fused AS (
        SELECT j.*,
               CASE WHEN v_fusion = 'rrf' THEN v_wl / (60 + j.lexical_rank)::double precision
                    ELSE v_wl * j.lexical_normalized END AS lexical_contribution,
               CASE WHEN v_fusion = 'rrf' THEN v_wv / (60 + j.vector_rank)::double precision
                    ELSE v_wv * j.vector_normalized END AS vector_contribution
          FROM joined j
    ), scored AS (
        SELECT f.*,
               (0.0::double precision + coalesce(f.lexical_contribution, 0.0::double precision))
                   + coalesce(f.vector_contribution, 0.0::double precision) AS fused,
               CASE WHEN f.max_age_us IS NULL THEN 1.0::double precision
                    ELSE least(1.0::double precision, greatest(0.5::double precision,
                         1.0::double precision - 0.5::double precision
                             * (f.age_us::double precision / f.max_age_us::double precision)))
               END AS fresh
          FROM fused f
    ), ordered AS (
        SELECT s.*, s.fused * s.fresh AS final,
               (row_number() OVER (ORDER BY s.fused * s.fresh DESC, s.fused DESC,
                                            s.content_digest, s.fragment_id))::integer AS fused_rank
          FROM scored s
    ), top AS (
        SELECT o.*,
               least(1.0::double precision, greatest(0.0::double precision,
                   (o.fused / v_ideal) * o.fresh * (61.0::double precision / (60.0::double precision + o.fused_rank))
                   * v_factor)) AS conf
          FROM ordered o
         WHERE o.fused_rank <= p_limit
    )
    SELECT t.fused_rank, t.fragment_id, t.content_digest, t.body, t.final, t.fused, t.fresh, t.conf,
           jsonb_build_object(
               'fused_rank', t.fused_rank,
               'decision_id', d.decision_id,
               'fragment', jsonb_build_object('workspace_id', t.workspace_id, 'project_id', t.project_id,
                                              'fragment_id', t.fragment_id,
                                              'classification', t.classification),
               'content', jsonb_build_object('text', t.body, 'trust', 'untrusted-data'),
               'provenance', jsonb_build_object(
                   'source_uri', t.source_uri, 'source_revision', t.source_revision,
                   'manifest_id', t.manifest_id, 'observed_at', pyretrieve.iso_utc(t.observed_at),
                   'retrieved_at', pyretrieve.iso_utc(d.evaluated_at),
                   'expires_at', pyretrieve.iso_utc(t.expires_at),
                   'ingested_at', pyretrieve.iso_utc(t.ingested_at),
                   'content_digest', encode(t.content_digest, 'hex')),
               'modalities', jsonb_build_object(
                   'lexical', CASE WHEN t.lexical_rank IS NULL THEN NULL ELSE jsonb_build_object(
                       'rank', t.lexical_rank, 'score', pyretrieve.json_double(t.lexical_score),
                       -- Each term's entry parsed once, typed (json_to_recordset): '->' on json
                       -- parsed the entry's text again for each of its six keys.
                       'terms', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                           'term', e.term, 'tf', e.tf, 'query_tf', e.query_tf,
                           'idf', pyretrieve.json_double(e.idf),
                           'length_norm', pyretrieve.json_double(e.length_norm),
                           'contribution', pyretrieve.json_double(e.contribution))
                           ORDER BY e.o), '[]'::jsonb)
                  FROM ROWS FROM (json_to_recordset(t.lexical_terms)
                                  AS (term text, tf integer, query_tf integer, idf double precision,
                                      length_norm double precision, contribution double precision))
                       WITH ORDINALITY AS e(term, tf, query_tf, idf, length_norm, contribution, o)),
                       'contribution', pyretrieve.json_double(t.lexical_contribution),
                       'weight', pyretrieve.json_double(v_wl))
                       || CASE WHEN v_fusion = 'dbsf' THEN jsonb_build_object('normalization', jsonb_build_object(
                              'input', pyretrieve.json_double(t.lexical_score), 'candidates', v_ln,
                              'mean', pyretrieve.json_double(v_lmean), 'std', pyretrieve.json_double(v_lstd),
                              'lower', pyretrieve.json_double(v_llo), 'upper', pyretrieve.json_double(v_lhi),
                              'normalized', pyretrieve.json_double(t.lexical_normalized)))
                          ELSE '{}'::jsonb END END,
                   'vector', CASE WHEN t.vector_rank IS NULL THEN NULL ELSE jsonb_build_object(
                       'rank', t.vector_rank, 'distance', pyretrieve.json_double(t.distance),
                       'metric', 'cosine_distance', 'search', t.vector_search,
                       'contribution', pyretrieve.json_double(t.vector_contribution),
                       'weight', pyretrieve.json_double(v_wv))
                       || CASE WHEN v_fusion = 'dbsf' THEN jsonb_build_object('normalization', jsonb_build_object(
                              'input', pyretrieve.json_double(t.vector_input), 'candidates', v_vn,
                              'mean', pyretrieve.json_double(v_vmean), 'std', pyretrieve.json_double(v_vstd),
                              'lower', pyretrieve.json_double(v_vlo), 'upper', pyretrieve.json_double(v_vhi),
                              'normalized', pyretrieve.json_double(t.vector_normalized)))
                          ELSE '{}'::jsonb END END),
               'fusion', CASE WHEN v_fusion = 'rrf' THEN jsonb_build_object(
                   'method', 'rrf', 'source', v_fusion_source, 'model', v_fusion_model,
                   'k', 60, 'rank_base', 1,
                   'formula', 'sum of w/(60+rank) over modalities, 1-based ranks, missing modality contributes 0',
                   'weights', v_weights, 'score', pyretrieve.json_double(t.fused))
                   ELSE jsonb_build_object(
                   'method', 'dbsf', 'source', v_fusion_source, 'model', v_fusion_model,
                   'spread', pyretrieve.json_double(3.0::double precision),
                   'formula', 'sum of w*max(0,(x-lower)/(upper-lower)) over modalities, x = lexical score or 1 - cosine distance, lower/upper = mean -/+ 3 sample std of that modality''s candidates for this query (0.5 when upper <= lower), missing modality contributes 0',
                   'weights', v_weights, 'score', pyretrieve.json_double(t.fused)) END,
               'freshness', jsonb_build_object('factor', pyretrieve.json_double(t.fresh),
                                               'age_us', t.age_us, 'max_age_us', t.max_age_us),
               'final_score', pyretrieve.json_double(t.final),
               'confidence', pyretrieve.json_double(t.conf),
               'tie_break', encode(t.content_digest, 'hex') || ':' || t.fragment_id::text,
               'generations', jsonb_build_object('lexical_generation', t.lexical_generation,
                                                 'vector_generation', t.vector_generation),
               'semantic', jsonb_build_object('status', v_status, 'reason', v_reason, 'evidence', v_evidence,
                                              'lowers_confidence', v_status = 'degraded'),
               'semantic_query_digest', encode(v_embedding_digest, 'hex'))
      FROM top t
     ORDER BY t.fused_rank;
END;
$$;
COMMENT ON FUNCTION pyretrieve.search(text, text, text, text, public.vector, text, integer, text, double precision, double precision, text, text, integer, text) IS
    'One fused, explained search, the Python client''s request path in one call: authorize (recording the semantic intent of p_mode and p_semantic, ''optional'', ''required'' or ''disabled'', as the client does), lexical candidates (BM25 by default, p_ranking ''ts_rank'' for comparison), vector candidates (when the mode, p_semantic and the grant''s semantic policy allow and an embedding and model are given; a failed leg degrades, naming the cause the client names), each leg capped at p_candidate_limit within the decision''s candidate limit, then fusion: weighted Reciprocal Rank Fusion by default (w / (60 + rank), 1-based ranks, k = 60, a missing modality contributes 0) or distribution-based score fusion, p_fusion ''dbsf'' (each leg''s scores mapped affinely from mean -/+ 3 sample std of its candidates to 0 and 1, floored at 0, weighted and summed). The fusion and the weights (both given, or neither) are the request''s, else the named model''s registered defaults, else rrf and 1.0 each; the explanation says which fusion ran, with its parameters, and where it and the weights came from. Then a freshness factor within the grant''s max_age, a total order (final score, fused score, content digest, fragment id), confidence and a jsonb explanation per result: the document the Python ranker builds (fused rank, decision, fragment, content, provenance, modalities, fusion with its method, parameters, weights and where they came from, freshness, scores, tie-break, generations, semantic status, semantic query digest), whose canonical JSON is byte-identical to the client''s. Same order as the Python client. Raises PR001 on deny, PR010 for the arguments the client refuses, PR016 for an unknown p_fusion, and PR030 when semantic retrieval is required (by p_mode, p_semantic or the grant) but unavailable.';


-- ==== sql/schema/50_writers.sql ====
-- ---------------------------------------------------------------------------------------------
-- Writers. SECURITY DEFINER, written reason: principals hold no privilege on any table, so
-- these functions are their only door. Each runs as pyretrieve_api, binds the transaction's one
-- write scope from the caller's own writer grants, and writes only inside it, up to the
-- writer's ceiling; row-level security checks every row again. Postings, generations and the
-- embeddings' mirror columns are written by triggers only.
-- ---------------------------------------------------------------------------------------------
-- One record of a bulk batch (pyretrieve.ingest_batch): what a writer copies into its own
-- staging table and passes as one array value. No column names a derived value (digest,
-- tsvector, postings, generation, mirror columns): the database computes those.
CREATE TYPE pyretrieve.ingest_row AS (
    ord              integer,
    source_uri       text,
    body             text,
    classification   pyretrieve.classification,
    observed_at      timestamptz,
    expires_at       timestamptz,
    source_revision  text,
    manifest_id      text,
    replaces         uuid[],
    keep             uuid,
    embedding        public.vector
);
COMMENT ON TYPE pyretrieve.ingest_row IS
    'A record of a bulk ingest batch: ord (its position), the fragment to write (source_uri, body, classification, times, provenance) or keep (an active fragment that stays), the active fragments of its source it supersedes (replaces), and optionally its embedding for the batch''s model.';

SET LOCAL ROLE pyretrieve_api;

-- Bind this transaction's write scope and return the writer's ceiling there; access denied
-- (PR001) alike for an absent scope, a scope without a grant and a caller who is not a writer.
CREATE FUNCTION pyretrieve.bind_write_scope(p_workspace text, p_project text)
RETURNS pyretrieve.classification
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_ceiling pyretrieve.classification;
    w pyretrieve.write_bindings;
BEGIN
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM pyretrieve.check_caller();
    PERFORM pyretrieve.apply_request_timeouts();
    SELECT * INTO w FROM pyretrieve.bound_write();
    IF FOUND AND (w.workspace_id, w.project_id, w.principal) = (p_workspace, p_project, pyretrieve.caller()) THEN
        RETURN w.ceiling;
    END IF;
    IF EXISTS (SELECT 1 FROM pyretrieve.bound_decision()) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR003', MESSAGE = 'transaction already bound to another scope';
    END IF;
    v_ceiling := pyretrieve.writer_ceiling(p_workspace, p_project);
    IF v_ceiling IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    INSERT INTO pyretrieve.write_bindings (workspace_id, principal, project_id, ceiling, position)
    VALUES (p_workspace, pyretrieve.caller(), p_project, v_ceiling, coalesce(w.position, 0) + 1);
    RETURN v_ceiling;
END;
$$;
COMMENT ON FUNCTION pyretrieve.bind_write_scope(text, text) IS
    'Bind this transaction''s write scope to a workspace/project where the caller is a writer with a live grant, recording who wrote where (write_bindings); returns the writer''s classification ceiling there (the highest of its grants). The latest binding is in force. Raises PR001 otherwise, PR003 when the transaction holds a read decision, PR004 for a superuser or BYPASSRLS caller. The write functions call it themselves; it never widens access. SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.put_fragment(
    p_workspace text,
    p_project text,
    p_body text,
    p_classification pyretrieve.classification DEFAULT 'internal',
    p_observed_at timestamptz DEFAULT NULL,
    p_expires_at timestamptz DEFAULT NULL,
    p_source_uri text DEFAULT NULL,
    p_source_revision text DEFAULT NULL,
    p_manifest_id text DEFAULT NULL,
    p_ts_config regconfig DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_ceiling pyretrieve.classification := pyretrieve.bind_write_scope(p_workspace, p_project);
    v_id uuid;
    v_config regconfig;
    v_observed timestamptz := coalesce(p_observed_at, now());
BEGIN
    IF p_classification IS NULL OR p_classification > v_ceiling THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    IF p_body IS NULL OR length(p_body) NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'body must be 1 to 1000000 characters';
    END IF;
    IF v_observed = 'infinity' OR v_observed = '-infinity' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'observed_at must be finite';
    END IF;
    IF p_expires_at IS NOT NULL AND p_expires_at <= v_observed THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'expires_at must be after observed_at';
    END IF;
    IF length(p_source_uri) > 2048 OR length(p_source_revision) > 256 OR length(p_manifest_id) > 256 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'provenance field too long';
    END IF;
    SELECT coalesce(p_ts_config, p.ts_config) INTO v_config
      FROM pyretrieve.projects p
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    PERFORM pyretrieve.check_ts_config(v_config);

    BEGIN
        INSERT INTO pyretrieve.fragments AS f (
            workspace_id, project_id, body, classification, observed_at, expires_at,
            source_uri, source_revision, manifest_id, ts_config)
        VALUES (p_workspace, p_project, p_body, p_classification, v_observed, p_expires_at,
                p_source_uri, p_source_revision, p_manifest_id, v_config)
        ON CONFLICT (workspace_id, project_id, classification, content_digest) WHERE state = 'active'
        DO NOTHING
        RETURNING f.fragment_id INTO v_id;
    EXCEPTION WHEN program_limit_exceeded THEN
        RAISE EXCEPTION USING ERRCODE = 'PR014',
            MESSAGE = 'body has too many distinct words or positions for a text-search vector';
    END;

    IF v_id IS NULL THEN
        -- Idempotent: the same body at the same classification is already active here.
        SELECT f.fragment_id INTO STRICT v_id
          FROM pyretrieve.fragments f
         WHERE f.workspace_id = p_workspace AND f.project_id = p_project
           AND f.classification = p_classification AND f.state = 'active'
           AND f.content_digest = pyretrieve.content_digest(p_body);
    END IF;
    PERFORM pyretrieve.take_first_statistics();
    RETURN v_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.put_fragment(text, text, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text, regconfig) IS
    'Store a fragment in a workspace/project where the caller is a writer, at or below the writer''s ceiling; returns its id. Idempotent by content: the same body at the same classification returns the existing active fragment. The database computes content_digest (sha256 of the body), the tsvector and the lexical generation. observed_at defaults to now(). SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.supersede_fragment(
    p_workspace text,
    p_project text,
    p_fragment_id uuid,
    p_body text,
    p_classification pyretrieve.classification DEFAULT NULL,
    p_observed_at timestamptz DEFAULT NULL,
    p_expires_at timestamptz DEFAULT NULL,
    p_source_uri text DEFAULT NULL,
    p_source_revision text DEFAULT NULL,
    p_manifest_id text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    old pyretrieve.fragments;
    v_new uuid;
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    SELECT f.* INTO old
      FROM pyretrieve.fragments f
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project
       AND f.fragment_id = p_fragment_id AND f.state = 'active'
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
    v_new := pyretrieve.put_fragment(
        p_workspace := p_workspace, p_project := p_project, p_body := p_body,
        p_classification := coalesce(p_classification, old.classification),
        p_observed_at := p_observed_at, p_expires_at := p_expires_at,
        p_source_uri := coalesce(p_source_uri, old.source_uri),
        p_source_revision := p_source_revision,
        p_manifest_id := coalesce(p_manifest_id, old.manifest_id),
        p_ts_config := old.ts_config);
    IF v_new = old.fragment_id THEN
        RETURN v_new;
    END IF;
    UPDATE pyretrieve.fragments f
       SET state = 'superseded', superseded_by = v_new
     WHERE f.workspace_id = p_workspace AND f.fragment_id = p_fragment_id;
    RETURN v_new;
END;
$$;
COMMENT ON FUNCTION pyretrieve.supersede_fragment(text, text, uuid, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text) IS
    'Replace an active fragment with new content: stores the new fragment (as put_fragment) and marks the old one superseded by it; returns the new id (the old id when the content and classification are unchanged). Raises PR020 alike for an absent fragment and one the writer may not see. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.retract_fragment(p_workspace text, p_project text, p_fragment_id uuid)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    UPDATE pyretrieve.fragments f
       SET state = 'retracted'
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project
       AND f.fragment_id = p_fragment_id AND f.state = 'active';
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
    PERFORM pyretrieve.take_first_statistics();
END;
$$;
COMMENT ON FUNCTION pyretrieve.retract_fragment(text, text, uuid) IS
    'Retract an active fragment: it disappears from every search at once. Raises PR020 alike for an absent fragment and one the writer may not see. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- p_min_share > 0 compacts only once the postings in blocks not full, the tombstones, the
-- postings of overlapping pages (overlapping_pages) and those of pending pages are at least
-- that share of the postings in the other pages: each run rewrites every page of the buckets
-- it touches, so with 1 the pages at least double between runs and a growing scope rewrites
-- each posting a bounded number of times (rewriting at every run made each run cost in
-- proportion to the scope). It also compacts once a bucket holds 16 pending pages, because the
-- leg reads each of them for every term of the bucket (50 per bucket made a 50,000-fragment
-- scope's leg take twice as long).
CREATE FUNCTION pyretrieve.compact_lexical_index(
    p_workspace text, p_project text, p_min_share double precision DEFAULT 0)
RETURNS TABLE (rows_read integer, rows_written integer, postings integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
-- Planned for each call (not generically): its statements join the scope's blocks to arrays
-- built in the call (the small lexemes, the pages taken), whose sizes only a plan for the
-- values at hand sees. A generic plan took them for ten elements and joined by nested loops:
-- compacting a scope of 4,000 fragments after a bulk batch took 39 s against 1 s.
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_ceiling pyretrieve.classification := pyretrieve.bind_write_scope(p_workspace, p_project);
    v_small bigint;
    v_paged bigint;
    v_pending bigint;
    v_most_pending bigint;
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
               + (SELECT coalesce(sum(o.postings), 0)
                    FROM pyretrieve.overlapping_pages(p_workspace, p_project, v_ceiling) o)
          INTO v_small
          FROM pyretrieve.lexical_blocks b
         WHERE b.workspace_id = p_workspace AND b.project_id = p_project
           AND b.classification <= v_ceiling AND b.postings < 128;
        SELECT coalesce(sum(p.postings) FILTER (WHERE NOT p.pending), 0),
               coalesce(sum(p.postings) FILTER (WHERE p.pending), 0)
          INTO v_paged, v_pending
          FROM pyretrieve.lexical_pages p
         WHERE p.workspace_id = p_workspace AND p.project_id = p_project
           AND p.classification <= v_ceiling;
        -- The most pending pages a term reads: of its bucket, and of its bucket's group.
        SELECT coalesce(max(c.pages), 0) INTO v_most_pending
          FROM (SELECT count(*) AS pages
                  FROM pyretrieve.lexical_pages p
                 -- A bucket's page is read for the bucket's terms, a group's for its 16 buckets'.
                 CROSS JOIN LATERAL generate_series(
                       CASE WHEN p.bucket < 256 THEN p.bucket ELSE (p.bucket - 256) * 16 END,
                       CASE WHEN p.bucket < 256 THEN p.bucket ELSE (p.bucket - 256) * 16 + 15 END)
                       AS k(bucket)
                 WHERE p.workspace_id = p_workspace AND p.project_id = p_project
                   AND p.classification <= v_ceiling AND p.pending
                 GROUP BY p.classification, k.bucket) c;
        IF v_small + v_pending < p_min_share * v_paged AND v_most_pending < 16 THEN
            RETURN QUERY SELECT 0, 0, 0;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT c.rows_read, c.rows_written, c.postings
                   FROM pyretrieve.compact_lexical_postings(p_workspace, p_project, v_ceiling) c;
END;
$$;
COMMENT ON FUNCTION pyretrieve.compact_lexical_index(text, text, double precision) IS
    'Compact the write scope''s lexical index, for the writer''s classifications: the postings of lexemes with fewer than 128 in a classification move from their blocks into pages shared by the lexemes of a bucket (a row per rare lexeme is most of the index otherwise), lexemes that reached 128 move back to blocks, tombstoned postings of the rewritten pages go, and pages that overlap, and the pending pages of bulk writes, are merged into their buckets'' pages (a group of 16 buckets whose small lists hold fewer than 1,024 postings shares one page). Rows another transaction holds are left for a later run (it never waits on a writer). p_min_share > 0 compacts only when the postings in blocks not full, the tombstones, the postings of pages whose lexeme range meets another''s in their bucket (two first writes at once) and those of pending pages are at least that share of the postings in the other pages, or when a term would read 16 pending pages (of its bucket and of its bucket''s group of 16), else returns zeros (the Ingestor runs it with 1 after each ingest run and every 16 batches of one, so a growing scope rewrites each posting a bounded number of times); 0, the default, always compacts. Raises PR010 for a share that is negative, infinite or not a number. Returns the rows read and written and the postings moved. Searches return the same rows, scores and terms before and after. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.put_embedding(
    p_workspace text,
    p_project text,
    p_fragment_id uuid,
    p_model text,
    p_embedding public.vector,
    p_source_digest bytea)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_generation bigint;
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    PERFORM pyretrieve.check_embedding(p_model, p_embedding);
    IF p_source_digest IS NULL OR length(p_source_digest) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'source digest must be 32 bytes (sha256)';
    END IF;
    PERFORM 1 FROM pyretrieve.fragments f
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.fragment_id = p_fragment_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;
    INSERT INTO pyretrieve.embeddings AS e (
        workspace_id, project_id, fragment_id, model_id, embedding, source_digest)
    VALUES (p_workspace, p_project, p_fragment_id, p_model, p_embedding, p_source_digest)
    ON CONFLICT (workspace_id, fragment_id, model_id)
    DO UPDATE SET embedding = EXCLUDED.embedding, source_digest = EXCLUDED.source_digest
    RETURNING e.vector_generation INTO v_generation;
    PERFORM pyretrieve.take_first_statistics();
    RETURN v_generation;
END;
$$;
COMMENT ON FUNCTION pyretrieve.put_embedding(text, text, uuid, text, public.vector, bytea) IS
    'Store (or replace) the embedding of one fragment for one registered model, with the sha256 digest of the text it was computed from; returns its vector generation. An embedding whose source digest differs from the fragment''s content digest is stale. Raises PR011/PR012 for a bad vector or model and PR020 alike for an absent fragment and one the writer may not see. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- What ingestion needs to stay idempotent, read through the write scope (up to the writer's
-- ceiling, every state where the state matters). VOLATILE: each binds the write scope itself,
-- and a STABLE function would not see the binding it has just written. One index probe per key: right after a bulk
-- load the tables have no statistics, and a planner guessing from none would scan the whole
-- scope once per batch.
CREATE FUNCTION pyretrieve.active_sources(p_workspace text, p_project text, p_uris text[])
RETURNS TABLE (source_uri text, fragment_id uuid, content_digest bytea,
               classification pyretrieve.classification)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_uris IS NULL OR cardinality(p_uris) > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 100000 source uris';
    END IF;
    RETURN QUERY
    SELECT f.source_uri, f.fragment_id, f.content_digest, f.classification
      FROM unnest(p_uris) AS u(uri)
     CROSS JOIN LATERAL (
           SELECT f.source_uri, f.fragment_id, f.content_digest, f.classification
             FROM pyretrieve.fragments f
            WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.state = 'active'
              AND f.source_uri = u.uri
           OFFSET 0) f;
END;
$$;
COMMENT ON FUNCTION pyretrieve.active_sources(text, text, text[]) IS
    'The active fragments (source_uri, fragment_id, content_digest, classification) of the given source uris in the caller''s write scope, up to the writer''s ceiling: what ingestion compares against to stay idempotent. Binds the write scope (PR001 without a writer grant). SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.active_sources_like(p_workspace text, p_project text, p_patterns text[])
RETURNS TABLE (source_uri text, fragment_id uuid)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_patterns IS NULL OR cardinality(p_patterns) > 10000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 10000 patterns';
    END IF;
    RETURN QUERY
    SELECT f.source_uri, f.fragment_id FROM pyretrieve.fragments f
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.state = 'active'
       AND f.source_uri LIKE ANY (p_patterns);
END;
$$;
COMMENT ON FUNCTION pyretrieve.active_sources_like(text, text, text[]) IS
    'The active fragments of the caller''s write scope (up to the writer''s ceiling) whose source_uri matches one of the LIKE patterns: how ingestion finds what a shorter file, or a deleted one, no longer holds. SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.created_now(p_workspace text, p_project text, p_ids uuid[])
RETURNS TABLE (fragment_id uuid)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_ids IS NULL OR cardinality(p_ids) > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 100000 ids';
    END IF;
    RETURN QUERY
    SELECT f.fragment_id
      FROM unnest(p_ids) AS u(id)
     CROSS JOIN LATERAL (
           SELECT f.fragment_id, f.project_id FROM pyretrieve.fragments f
            WHERE f.workspace_id = p_workspace AND f.fragment_id = u.id AND f.ingested_at = now()
           OFFSET 0) f
     WHERE f.project_id = p_project;
END;
$$;
COMMENT ON FUNCTION pyretrieve.created_now(text, text, uuid[]) IS
    'Which of the given fragments this transaction created (as opposed to found already active with the same content). SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.embeddings_needed(p_workspace text, p_project text, p_model text, p_ids uuid[])
RETURNS TABLE (fragment_id uuid, content_digest bytea, missing boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_ids IS NULL OR cardinality(p_ids) > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 100000 ids';
    END IF;
    -- The project is checked outside the probe: inside, (workspace, project) would make the
    -- scope index look as selective as the primary key to a planner without statistics.
    RETURN QUERY
    SELECT f.fragment_id, f.content_digest, f.missing
      FROM unnest(p_ids) AS u(id)
     CROSS JOIN LATERAL (
           SELECT f.fragment_id, f.project_id, f.content_digest, e.fragment_id IS NULL AS missing
             FROM pyretrieve.fragments f
             LEFT JOIN pyretrieve.embeddings e
               ON e.workspace_id = f.workspace_id AND e.fragment_id = f.fragment_id
              AND e.model_id = p_model
            WHERE f.workspace_id = p_workspace AND f.fragment_id = u.id
              AND (e.fragment_id IS NULL OR e.source_digest <> f.content_digest
                   OR e.vector_generation < f.lexical_generation)
           OFFSET 0) f
     WHERE f.project_id = p_project;
END;
$$;
COMMENT ON FUNCTION pyretrieve.embeddings_needed(text, text, text, uuid[]) IS
    'Of the given fragments in the caller''s write scope, those whose embedding for p_model is missing or stale (computed from other text, or older than the fragment), with missing true for the first kind. SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.stale_embeddings(
    p_workspace text, p_project text, p_model text, p_after uuid DEFAULT NULL, p_limit integer DEFAULT NULL)
RETURNS TABLE (fragment_id uuid, body text, content_digest bytea, missing boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_limit IS NOT NULL AND p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'limit must be between 1 and 100000';
    END IF;
    -- Keyset pagination by id: one pass over the scope, even if a write fails to fix a row.
    RETURN QUERY
    SELECT f.fragment_id, f.body, f.content_digest, e.fragment_id IS NULL
      FROM pyretrieve.fragments f
      LEFT JOIN pyretrieve.embeddings e
        ON e.workspace_id = f.workspace_id AND e.fragment_id = f.fragment_id AND e.model_id = p_model
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.state = 'active'
       AND (e.fragment_id IS NULL OR e.source_digest <> f.content_digest
            OR e.vector_generation < f.lexical_generation)
       AND f.fragment_id > coalesce(p_after, '00000000-0000-0000-0000-000000000000'::uuid)
     ORDER BY f.fragment_id
     LIMIT p_limit;
END;
$$;
COMMENT ON FUNCTION pyretrieve.stale_embeddings(text, text, text, uuid, integer) IS
    'Active fragments of the caller''s write scope whose embedding for p_model is missing or stale, in fragment-id order after p_after (keyset pagination), at most p_limit (all when NULL), with their bodies so they can be embedded again. SECURITY DEFINER (runs as pyretrieve_api).';

-- ---------------------------------------------------------------------------------------------
-- Bulk ingestion. A writer copies a batch into a staging table of its own (a temporary table
-- it creates in its transaction) and passes the rows to ingest_batch as one array value,
-- built in its own context: this function never reads a table of the caller's by name, so no
-- object in the caller's pg_temp (a view, a table shadowing a name) runs as pyretrieve_api.
-- ---------------------------------------------------------------------------------------------

-- What ingestion compares a batch against: the active fragments of the given source uris in
-- the caller's write scope (up to the writer's ceiling) and, for one model, whether each one's
-- embedding is current. One index probe per key, as in active_sources.
CREATE FUNCTION pyretrieve.ingest_state(p_workspace text, p_project text, p_uris text[], p_model text DEFAULT NULL)
RETURNS TABLE (source_uri text, fragment_id uuid, content_digest bytea,
               classification pyretrieve.classification, embedding_current boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_uris IS NULL OR cardinality(p_uris) > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 100000 source uris';
    END IF;
    RETURN QUERY
    SELECT f.source_uri, f.fragment_id, f.content_digest, f.classification,
           CASE WHEN p_model IS NULL THEN NULL
                ELSE coalesce(e.source_digest = f.content_digest
                              AND e.vector_generation >= f.lexical_generation, false) END
      FROM unnest(p_uris) AS u(uri)
     CROSS JOIN LATERAL (
           SELECT f.source_uri, f.fragment_id, f.content_digest, f.classification, f.lexical_generation
             FROM pyretrieve.fragments f
            WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.state = 'active'
              AND f.source_uri = u.uri
           OFFSET 0) f
      LEFT JOIN LATERAL (
           SELECT e.source_digest, e.vector_generation
             FROM pyretrieve.embeddings e
            WHERE p_model IS NOT NULL AND e.workspace_id = p_workspace
              AND e.fragment_id = f.fragment_id AND e.model_id = p_model
           OFFSET 0) e ON true;
END;
$$;
COMMENT ON FUNCTION pyretrieve.ingest_state(text, text, text[], text) IS
    'The active fragments (source_uri, fragment_id, content_digest, classification) of the given source uris in the caller''s write scope, up to the writer''s ceiling, and for p_model whether each embedding is current (computed from this content after the fragment was written; NULL without a model): what a bulk ingest plans its batch from. Binds the write scope (PR001 without a writer grant). SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.ingest_batch(
    p_workspace text,
    p_project text,
    p_rows pyretrieve.ingest_row[],
    p_model text DEFAULT NULL)
RETURNS TABLE (ord integer, fragment_id uuid, created boolean, embedded boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
-- Plans that hold for any scope, not for the statistics of the one at hand: those lag a
-- growing scope, and planned for a scope they took for one row, the insert compared each new
-- row with every fragment of the scope (10,000,000 comparisons for a batch of 1,000 into a
-- 10,000-row scope), so each batch cost more than the last. The look-ups by key are also
-- written as one probe per row (LIMIT 1 in a lateral sub-select), whatever the estimates.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_ceiling pyretrieve.classification := pyretrieve.bind_write_scope(p_workspace, p_project);
    v_config regconfig;
    v_dimension integer;
    v_locked uuid[];
    v_replaced uuid[];
    v_kept uuid[];
    v_ords integer[];
    v_ids uuid[];
    v_created boolean[];
    v_found jsonb;
    v_embedded integer[] := '{}';
BEGIN
    IF p_rows IS NULL OR cardinality(p_rows) > 10000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 10000 rows';
    END IF;

    -- Every check runs before any write, over the whole batch: a batch is written whole or
    -- not at all.
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r GROUP BY r.ord HAVING r.ord IS NULL OR count(*) > 1) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'every row needs its own ord';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                WHERE r.keep IS NULL AND (r.classification IS NULL OR r.classification > v_ceiling)) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                WHERE (r.keep IS NULL AND (r.body IS NULL OR length(r.body) NOT BETWEEN 1 AND 1000000))
                   OR (r.keep IS NOT NULL AND r.body IS NOT NULL)) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'body must be 1 to 1000000 characters (and absent for a kept row)';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                WHERE r.observed_at IN ('infinity', '-infinity')) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'observed_at must be finite';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                WHERE r.expires_at <= coalesce(r.observed_at, now())) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'expires_at must be after observed_at';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                WHERE length(r.source_uri) > 2048 OR length(r.source_revision) > 256
                   OR length(r.manifest_id) > 256) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'provenance field too long';
    END IF;

    -- The fragments the batch supersedes and keeps: each named once, each active and visible
    -- in this write scope (an absent id and one the writer may not see fail alike, PR020).
    SELECT coalesce(array_agg(x.id), '{}') INTO v_replaced
      FROM unnest(p_rows) r CROSS JOIN LATERAL unnest(r.replaces) AS x(id);
    SELECT coalesce(array_agg(r.keep), '{}') INTO v_kept FROM unnest(p_rows) r WHERE r.keep IS NOT NULL;
    IF EXISTS (SELECT 1 FROM unnest(v_replaced || v_kept) AS x(id)
                GROUP BY x.id HAVING x.id IS NULL OR count(*) > 1) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'a fragment is superseded or kept twice';
    END IF;
    IF cardinality(v_replaced) + cardinality(v_kept) > 0 THEN
        -- In id order, so concurrent batches lock in one order and never deadlock.
        SELECT coalesce(array_agg(l.fragment_id), '{}') INTO v_locked
          FROM (SELECT f.fragment_id FROM pyretrieve.fragments f
                 WHERE f.workspace_id = p_workspace AND f.project_id = p_project
                   AND f.fragment_id = ANY (v_replaced || v_kept) AND f.state = 'active'
                 ORDER BY f.fragment_id
                   FOR UPDATE) l;
        IF cardinality(v_locked) <> (SELECT count(DISTINCT x.id) FROM unnest(v_replaced || v_kept) AS x(id)) THEN
            RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
        END IF;
    END IF;

    -- Embeddings: a registered model, the model's dimension, finite, non-zero, no subnormal
    -- values (as check_embedding, for the whole batch at once).
    IF EXISTS (SELECT 1 FROM unnest(p_rows) r WHERE r.embedding IS NOT NULL) THEN
        SELECT m.dimension INTO v_dimension FROM pyretrieve.embedding_models m WHERE m.model_id = p_model;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                    WHERE r.embedding IS NOT NULL AND public.vector_dims(r.embedding) <> v_dimension) THEN
            RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding dimension does not match the model';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(p_rows) r
                    WHERE r.embedding IS NOT NULL
                      AND NOT (public.vector_norm(r.embedding) > 0
                               AND public.vector_norm(r.embedding) < 'Infinity'::double precision)) THEN
            RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding must be finite and non-zero';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(p_rows) r CROSS JOIN LATERAL unnest(r.embedding::real[]) AS x(v)
                    WHERE x.v <> 0 AND abs(x.v) < 1.17549435e-38::real) THEN
            RAISE EXCEPTION USING ERRCODE = 'PR011', MESSAGE = 'embedding must not hold subnormal values';
        END IF;
    END IF;

    SELECT p.ts_config INTO v_config
      FROM pyretrieve.projects p
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    PERFORM pyretrieve.check_ts_config(v_config);

    -- Content the batch supersedes leaves the active set first (retracted for the moment), so
    -- that a record bringing that content back, under another source, gets a fragment of its
    -- own and not the one being superseded. A fragment with exactly the row's new content and
    -- classification stays active: superseding by the same content keeps it (as
    -- supersede_fragment does).
    IF cardinality(v_replaced) > 0 THEN
        -- The ids as an array too, so the fragments are probes of their key (joined as a set,
        -- they were planned as a hash of every fragment of the scope).
        UPDATE pyretrieve.fragments f
           SET state = 'retracted'
          FROM unnest(p_rows) r CROSS JOIN LATERAL unnest(r.replaces) AS x(id)
         WHERE f.workspace_id = p_workspace AND f.project_id = p_project
           AND f.fragment_id = ANY (v_replaced) AND f.fragment_id = x.id
           AND NOT (r.keep IS NULL AND f.classification = r.classification
                    AND f.content_digest = pyretrieve.content_digest(r.body));
    END IF;

    -- New fragments in content-key order (so concurrent batches take the unique index's
    -- keys in one order and never deadlock), the input order among equal keys (so that of two
    -- records with the same body and classification the first one's row is written and the
    -- second finds it). A superseding
    -- record takes the text-search configuration (and, when it names none, the manifest and
    -- source) of the first fragment it supersedes.
    BEGIN
        INSERT INTO pyretrieve.fragments AS f (
            workspace_id, project_id, body, classification, observed_at, expires_at,
            source_uri, source_revision, manifest_id, ts_config)
        SELECT p_workspace, p_project, r.body, r.classification, coalesce(r.observed_at, now()),
               r.expires_at, coalesce(r.source_uri, o.source_uri), r.source_revision,
               coalesce(r.manifest_id, o.manifest_id), coalesce(o.ts_config, v_config)
          FROM unnest(p_rows) r
          -- Only for a row that supersedes (a filter on the row alone, so a row that does
          -- not never reaches the table): on a table never analysed, the plan read the scope
          -- through its document-number key for every row, superseding or not.
          LEFT JOIN LATERAL (
                SELECT f.source_uri, f.manifest_id, f.ts_config FROM pyretrieve.fragments f
                 WHERE r.replaces[1] IS NOT NULL
                   AND f.workspace_id = p_workspace AND f.project_id = p_project
                   AND f.fragment_id = r.replaces[1]
                 LIMIT 1) o ON true
         WHERE r.keep IS NULL
         ORDER BY r.classification, pyretrieve.content_digest(r.body), r.ord
        ON CONFLICT (workspace_id, project_id, classification, content_digest) WHERE state = 'active'
        DO NOTHING;
    EXCEPTION WHEN program_limit_exceeded THEN
        RAISE EXCEPTION USING ERRCODE = 'PR014',
            MESSAGE = 'body has too many distinct words or positions for a text-search vector';
    END;

    -- Each row's fragment: the active one with its content and classification (written now,
    -- or found), or the one it keeps. The batch's contents are read in one statement, by their
    -- digests, and matched to the rows through a map, not a join: on a table never analysed,
    -- a probe per row went through the scope's document-number key and read the scope once
    -- per row (80,200 fragment rows for a first batch of 400; 17.7 s for 2,000, against 1.6).
    SELECT coalesce(jsonb_object_agg(f.classification::text || ':' || encode(f.content_digest, 'hex'),
                                     jsonb_build_array(f.fragment_id, f.ingested_at = now())), '{}')
      INTO v_found
      FROM pyretrieve.fragments f
     WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.state = 'active'
       AND f.content_digest = ANY (ARRAY(SELECT pyretrieve.content_digest(r.body)
                                           FROM unnest(p_rows) r WHERE r.keep IS NULL));
    SELECT array_agg(m.ord ORDER BY m.ord), array_agg(m.fragment_id ORDER BY m.ord),
           array_agg(m.created ORDER BY m.ord)
      INTO v_ords, v_ids, v_created
      FROM (SELECT r.ord, (v_found -> k.key ->> 0)::uuid AS fragment_id,
                   (v_found -> k.key ->> 1)::boolean AS created
              FROM unnest(p_rows) r
             CROSS JOIN LATERAL (SELECT r.classification::text || ':'
                                        || encode(pyretrieve.content_digest(r.body), 'hex') AS key) k
             WHERE r.keep IS NULL AND v_found ? k.key
            UNION ALL
            SELECT r.ord, r.keep, false FROM unnest(p_rows) r WHERE r.keep IS NOT NULL) m;
    IF coalesce(cardinality(v_ords), 0) <> cardinality(p_rows) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'fragment not found';
    END IF;

    IF cardinality(v_replaced) > 0 THEN
        UPDATE pyretrieve.fragments f
           SET state = 'superseded', superseded_by = s.successor
          FROM (SELECT x.id AS old, m.fragment_id AS successor
                  FROM unnest(p_rows) r
                 CROSS JOIN LATERAL unnest(r.replaces) AS x(id)
                  JOIN unnest(v_ords, v_ids) AS m(ord, fragment_id) ON m.ord = r.ord) s
         WHERE f.workspace_id = p_workspace AND f.project_id = p_project AND f.fragment_id = s.old
           AND s.old <> s.successor;
    END IF;

    -- Embeddings where the fragment's is missing or stale, once per fragment (the first row).
    IF v_dimension IS NOT NULL THEN
        WITH t AS (
            SELECT DISTINCT ON (m.fragment_id) m.fragment_id, m.ord, r.embedding
              FROM unnest(p_rows) r
              JOIN unnest(v_ords, v_ids) AS m(ord, fragment_id) ON m.ord = r.ord
             WHERE r.embedding IS NOT NULL
             ORDER BY m.fragment_id, m.ord
        ), need AS (
            SELECT t.fragment_id, t.ord, t.embedding, f.content_digest
              FROM t
              JOIN pyretrieve.fragments f
                ON f.workspace_id = p_workspace AND f.fragment_id = t.fragment_id
              LEFT JOIN pyretrieve.embeddings e
                ON e.workspace_id = p_workspace AND e.fragment_id = t.fragment_id AND e.model_id = p_model
             WHERE e.fragment_id IS NULL OR e.source_digest <> f.content_digest
                OR e.vector_generation < f.lexical_generation
        ), put AS (
            INSERT INTO pyretrieve.embeddings AS e (
                workspace_id, project_id, fragment_id, model_id, embedding, source_digest)
            SELECT p_workspace, p_project, need.fragment_id, p_model, need.embedding, need.content_digest
              FROM need
             ORDER BY need.fragment_id
            ON CONFLICT (workspace_id, fragment_id, model_id)
            DO UPDATE SET embedding = EXCLUDED.embedding, source_digest = EXCLUDED.source_digest
            RETURNING e.fragment_id
        )
        SELECT coalesce(array_agg(need.ord), '{}') INTO v_embedded
          FROM need WHERE need.fragment_id IN (SELECT put.fragment_id FROM put);
    END IF;
    PERFORM pyretrieve.take_first_statistics();

    RETURN QUERY
    SELECT m.ord, m.fragment_id, m.created, m.ord = ANY (v_embedded)
      FROM unnest(v_ords, v_ids, v_created) AS m(ord, fragment_id, created)
     ORDER BY m.ord;
END;
$$;
COMMENT ON FUNCTION pyretrieve.ingest_batch(text, text, pyretrieve.ingest_row[], text) IS
    'Write one ingest batch in one set-based step: new fragments (idempotent by content, as put_fragment), the active fragments each row supersedes (replaces: marked superseded by the row''s fragment, as supersede_fragment), kept fragments (keep), and the rows'' embeddings for p_model where missing or stale (the source digest is the fragment''s own content digest). Every check (grant, ceiling PR001, lengths and times PR010, each superseded or kept fragment active and visible PR020, model and vectors PR012/PR011) runs before any write, so the batch is written whole or not at all. Returns each row''s fragment, whether this transaction created it and whether an embedding was stored for it. The rows are a value: the function never reads a caller''s table. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

SET LOCAL ROLE pyretrieve_owner;

-- ==== sql/schema/60_admin.sql ====
-- ---------------------------------------------------------------------------------------------
-- Admins. The DDL helpers run as the owner; the admin API runs as pyretrieve_api (SECURITY
-- DEFINER, written reason: principals hold no table privilege; these functions are the admins'
-- door to the configuration tables, and each checks that the caller is an admin).
-- ---------------------------------------------------------------------------------------------
CREATE FUNCTION pyretrieve.require_admin()
RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT pyretrieve.caller_in('pyretrieve_admin') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
END;
$$;

-- SECURITY DEFINER, written reason: a sequence is created by its owner, and neither admins nor
-- pyretrieve_api may own schema objects. The name is derived from the scope (never spliced from
-- the arguments' text), quoted, and only create_project (pyretrieve_api) may execute it.
CREATE FUNCTION pyretrieve.create_scope_sequence(p_workspace text, p_project text)
RETURNS regclass
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name text;
BEGIN
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    v_name := 'generation_' || substr(encode(sha256(convert_to(p_workspace || '/' || p_project, 'UTF8')), 'hex'), 1, 32);
    EXECUTE format('CREATE SEQUENCE IF NOT EXISTS pyretrieve.%I AS bigint', v_name);
    EXECUTE format('GRANT USAGE ON SEQUENCE pyretrieve.%I TO pyretrieve_api', v_name);
    RETURN format('pyretrieve.%I', v_name)::regclass;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_scope_sequence(text, text) IS
    'Create (idempotently) the generation sequence of one workspace/project and return it. SECURITY DEFINER because creating a sequence makes its caller the owner, and only pyretrieve_owner may own schema objects; executable by pyretrieve_api only (create_project).';

-- SECURITY DEFINER, written reason: creating an index on pyretrieve.embeddings requires owning
-- the table, and neither admins nor pyretrieve_api may own it. The function reads the model from the registry
-- (never from its arguments' text), quotes every identifier, and only admins may execute it.
CREATE FUNCTION pyretrieve.create_model_index(p_model text)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m pyretrieve.embedding_models;
    v_name text;
BEGIN
    SELECT * INTO m FROM pyretrieve.embedding_models em WHERE em.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    v_name := format('embeddings_hnsw_m%s', m.model_serial);
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON pyretrieve.embeddings USING hnsw ((embedding::public.vector(%s)) public.vector_cosine_ops) WHERE model_id = %L',
        v_name, m.dimension, m.model_id);
    RETURN v_name;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_model_index(text) IS
    'Create a per-model HNSW index over every scope (cosine, on the embedding cast to the model''s dimension, partial on the model). No search reads it: the vector leg scans a scope exactly or through the scope''s own index (create_vector_index), and since migration 0016 register_model no longer builds it. Kept for admins who want it for their own work. SECURITY DEFINER because index creation needs the table owner; executable by admins only.';

-- The build options of every scope's own HNSW index, one place: create_scope_vector_index
-- builds with them and maintain_vector_indexes rebuilds an index built with others. Measured in
-- evals/bench/hnsw-sweep-synthetic-100k.json on 100,000 low-contrast clustered vectors, searched
-- at ef_search 1000 (pgvector's maximum): recall@100 0.956 with m 16 and ef_construction 128
-- (the options until 0048), 0.990 with these; through the leg, with a tenth of the scope hidden,
-- 0.997 (evals/bench/vector-index-0049.json). A denser graph (m 48) reached 0.998 but searched
-- about as slowly as the exact scan at 50,000 rows. pg_class.reloptions spells an index's
-- options so, in this order.
CREATE FUNCTION pyretrieve.vector_index_options()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN ARRAY['m=32', 'ef_construction=256']::text[];
COMMENT ON FUNCTION pyretrieve.vector_index_options() IS
    'The HNSW build options (reloptions) of every scope''s own index: m 32, ef_construction 256. create_scope_vector_index builds with them; maintain_vector_indexes rebuilds an index built with others. Internal (pyretrieve_api).';

-- SECURITY DEFINER, written reason: as create_model_index, an index on pyretrieve.embeddings
-- needs the table's owner. The name and the predicate are built from two integers (the scope's
-- serial, the model's serial and dimension read from the registry) and the model id quoted as a
-- literal, so the catalog, which every role may read, names no workspace or project; only
-- create_vector_index (pyretrieve_api), which checks the caller and the scope, may execute it.
-- An index built with other options than vector_index_options() is rebuilt: the new one is built
-- under a second name while the old one still serves searches (a build blocks writes, not
-- reads), then the old one is dropped and the new one takes its name, in one transaction, so a
-- search sees the old index or the new one and never neither.
CREATE FUNCTION pyretrieve.create_scope_vector_index(p_scope_serial integer, p_model text)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m pyretrieve.embedding_models;
    v_name text;
    v_old regclass;
    v_build text;
    v_pass integer;
BEGIN
    SELECT * INTO m FROM pyretrieve.embedding_models em WHERE em.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    IF p_scope_serial IS NULL OR p_scope_serial < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid scope';
    END IF;
    v_name := format('embeddings_hnsw_s%s_m%s', p_scope_serial, m.model_serial);
    -- Looked up twice: once without a lock (an index as wanted returns at once, blocking no
    -- writer), and again once builds of the table are serialised (SHARE ROW EXCLUSIVE conflicts
    -- with itself, with writes and with other builds, not with reads), in case another call
    -- built or rebuilt it meanwhile.
    FOR v_pass IN 1..2 LOOP
        v_old := to_regclass(format('pyretrieve.%I', v_name));
        IF v_old IS NOT NULL AND (SELECT c.reloptions FROM pg_catalog.pg_class c WHERE c.oid = v_old)
                                 IS NOT DISTINCT FROM pyretrieve.vector_index_options() THEN
            RETURN v_name;
        END IF;
        IF v_pass = 1 THEN
            LOCK TABLE pyretrieve.embeddings IN SHARE ROW EXCLUSIVE MODE;
        END IF;
    END LOOP;
    v_build := CASE WHEN v_old IS NULL THEN v_name ELSE v_name || '_rebuilt' END;
    EXECUTE format(
        'CREATE INDEX %I ON pyretrieve.embeddings USING hnsw ((embedding::public.vector(%s)) public.vector_cosine_ops) WITH (%s) WHERE scope_serial = %s AND model_id = %L',
        v_build, m.dimension, array_to_string(pyretrieve.vector_index_options(), ', '),
        p_scope_serial, m.model_id);
    IF v_old IS NOT NULL THEN
        EXECUTE format('DROP INDEX pyretrieve.%I', v_name);
        EXECUTE format('ALTER INDEX pyretrieve.%I RENAME TO %I', v_build, v_name);
    END IF;
    RETURN v_name;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_scope_vector_index(integer, text) IS
    'Create (idempotently) one scope''s own HNSW index of one model: cosine, with vector_index_options() (m 32, ef_construction 256), partial on the scope''s serial and the model; an index of that name built with other options is rebuilt (the old one serves searches until the new one replaces it, in one transaction). SECURITY DEFINER because index creation needs the table owner; executable by create_vector_index (pyretrieve_api) only.';

-- SECURITY DEFINER, written reason: dropping an index needs its owner. The name is built from
-- integers alone, as above; only drop_vector_index (pyretrieve_api) may execute it.
CREATE FUNCTION pyretrieve.drop_scope_vector_index(p_scope_serial integer, p_model text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m pyretrieve.embedding_models;
    v_name text;
BEGIN
    SELECT * INTO m FROM pyretrieve.embedding_models em WHERE em.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    v_name := format('embeddings_hnsw_s%s_m%s', p_scope_serial, m.model_serial);
    IF to_regclass(format('pyretrieve.%I', v_name)) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP INDEX pyretrieve.%I', v_name);
    RETURN true;
END;
$$;
COMMENT ON FUNCTION pyretrieve.drop_scope_vector_index(integer, text) IS
    'Drop one scope''s own HNSW index of one model, if it exists; true when one was dropped. SECURITY DEFINER because dropping an index needs its owner; executable by drop_vector_index (pyretrieve_api) only.';

-- A table the planner has no statistics for is planned on its defaults: each condition on the
-- scope is taken for a 1-in-200 filter, so a scope of thousands looks like a row or two, and an
-- index that starts with the scope costs the same as the key a statement probes. Planned so, a
-- retract, a duplicate put or a search read their scope whole. Autovacuum analyses a table
-- about a minute after its first rows, or never where it is off. The writers call this at their
-- end: each of the tables below that holds rows and was never analysed (reltuples < 0, which
-- ANALYZE, VACUUM and an index build on rows set) is analysed now, in the writer's
-- transaction, which sees its own rows, once it holds 1,000 rows: a sample of a few rows takes
-- every column for unique, the scope's too, which misleads as the defaults do (a table analysed
-- at its first row read 145,485 fragments for one search at 3,000). Below 1,000 rows a whole
-- scope is a small read. After that autovacuum keeps the statistics, and a scope that outgrows
-- them stays on its keys (migrations 0041 to 0043). Each table is analysed once in its life,
-- so no writer can make it work more than that; a table another transaction is analysing (or
-- vacuuming, or indexing) is left to it rather than waited for. The rows are counted by the
-- cumulative statistics: those committed, and those of this transaction.
-- SECURITY DEFINER, written reason: ANALYZE needs the table's owner. It takes no argument and
-- returns nothing; only pyretrieve_api (the writers) may execute it.
CREATE FUNCTION pyretrieve.take_first_statistics()
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's statistics target does not make the one analyse cost more.
SET default_statistics_target = 100
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_table regclass;
BEGIN
    FOR v_table IN
        SELECT c.oid::regclass
          FROM pg_catalog.pg_class c
         WHERE c.oid = ANY ('{pyretrieve.fragments, pyretrieve.lexical_blocks, pyretrieve.lexical_pages, pyretrieve.lexical_tombstones, pyretrieve.embeddings}'::regclass[])
           AND c.reltuples < 0
         ORDER BY c.oid
    LOOP
        CONTINUE WHEN pg_catalog.pg_stat_get_live_tuples(v_table)
                      + pg_catalog.pg_stat_get_xact_tuples_inserted(v_table) < 1000;
        BEGIN
            EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE NOWAIT', v_table);
            EXECUTE pg_catalog.format('ANALYZE %s', v_table);
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION pyretrieve.take_first_statistics() IS
    'Analyse each of fragments, lexical_blocks, lexical_pages, lexical_tombstones and embeddings that holds 1,000 rows or more and was never analysed (reltuples < 0), once, in the calling transaction; a table another transaction holds for maintenance is skipped, not waited for. The writers call it at their end, so that no plan of a new install is made on the planner''s defaults, which take a scope of thousands for a row or two. SECURITY DEFINER because ANALYZE needs the table owner; executable by the writers (pyretrieve_api) only.';

-- ---------------------------------------------------------------------------------------------
-- Decision retention. pyretrieve.decisions is partitioned by month of evaluated_at (UTC). The
-- partitions are owned by pyretrieve_owner, have row-level security enabled and forced with no
-- policy of their own (so nothing reads one except through the parent, whose policies apply),
-- and are only ever created or dropped whole: no decision row is ever updated or deleted.
-- ---------------------------------------------------------------------------------------------

-- The monthly partitions of pyretrieve.decisions and the range each holds.
CREATE FUNCTION pyretrieve.decision_partition_ranges()
RETURNS TABLE (partition_name text, range_start timestamptz, range_end timestamptz)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT c.relname::text, b.m[1]::timestamptz, b.m[2]::timestamptz
      FROM pg_catalog.pg_inherits i
      JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
     CROSS JOIN LATERAL (SELECT pg_catalog.regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                '^FOR VALUES FROM \(''([^'']+)''\) TO \(''([^'']+)''\)$') AS m) b
     WHERE i.inhparent = 'pyretrieve.decisions'::regclass AND b.m IS NOT NULL
     ORDER BY 2;
END;
$$;
COMMENT ON FUNCTION pyretrieve.decision_partition_ranges() IS
    'The partitions of pyretrieve.decisions with the range of evaluated_at each holds, oldest first (read from the catalog).';

-- SECURITY DEFINER, written reason: a partition is created by the owner of the partitioned
-- table, and neither admins nor pyretrieve_api may own it. Names and bounds are derived from
-- the clock (never from the arguments' text); the inputs are a number of months and a start.
CREATE FUNCTION pyretrieve.ensure_decision_partitions(p_months_ahead integer DEFAULT 2, p_from timestamptz DEFAULT NULL)
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_first timestamp := date_trunc('month', coalesce(p_from, now()) AT TIME ZONE 'UTC');
    v_last timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
    v_month timestamp;
    v_start timestamptz;
    v_end timestamptz;
    v_name text;
BEGIN
    IF p_months_ahead IS NULL OR p_months_ahead NOT BETWEEN 0 AND 24 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'months ahead must be between 0 and 24';
    END IF;
    IF v_first > v_last OR v_first < v_last - interval '20 years' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'the first month must be in the last 20 years';
    END IF;
    v_month := v_first;
    WHILE v_month <= v_last + make_interval(months => p_months_ahead) LOOP
        v_start := v_month AT TIME ZONE 'UTC';
        v_end := (v_month + interval '1 month') AT TIME ZONE 'UTC';
        v_name := 'decisions_' || to_char(v_month, 'YYYY_MM');
        IF NOT EXISTS (SELECT 1 FROM pyretrieve.decision_partition_ranges() r
                        WHERE r.range_start < v_end AND r.range_end > v_start) THEN
            BEGIN
                EXECUTE format('CREATE TABLE pyretrieve.%I PARTITION OF pyretrieve.decisions FOR VALUES FROM (%L) TO (%L)',
                               v_name, v_start, v_end);
                EXECUTE format('ALTER TABLE pyretrieve.%I ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY', v_name);
                EXECUTE format('COMMENT ON TABLE pyretrieve.%I IS %L', v_name,
                               format('Decisions evaluated in %s (UTC): a partition of pyretrieve.decisions, read and written only through it.',
                                      to_char(v_month, 'YYYY-MM')));
                RETURN NEXT v_name;
            EXCEPTION WHEN duplicate_table OR invalid_object_definition THEN
                -- Another transaction created it meanwhile.
                NULL;
            END;
        END IF;
        v_month := v_month + interval '1 month';
    END LOOP;
END;
$$;
COMMENT ON FUNCTION pyretrieve.ensure_decision_partitions(integer, timestamptz) IS
    'Create the monthly partitions of pyretrieve.decisions (UTC months) from the month of p_from (default: the current month) to p_months_ahead months after the current one, where missing; returns the names created. Idempotent; authorize calls it when no partition holds the current month yet. SECURITY DEFINER (runs as pyretrieve_owner): a partition is created by the owner of the partitioned table.';

-- SECURITY DEFINER, written reason: dropping a partition needs the owner of the table. The
-- function drops only a partition of pyretrieve.decisions, and only one whose range ended at
-- least a day ago, whatever its caller asks: no decision of an open or recent transaction
-- can go.
CREATE FUNCTION pyretrieve.drop_decision_partition(p_partition text)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pyretrieve.decision_partition_ranges() r
                    WHERE r.partition_name = p_partition AND r.range_end <= now() - interval '1 day') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'not a decision partition that ended more than a day ago';
    END IF;
    EXECUTE format('DROP TABLE pyretrieve.%I', p_partition);
END;
$$;
COMMENT ON FUNCTION pyretrieve.drop_decision_partition(text) IS
    'Drop one partition of pyretrieve.decisions whose range ended more than a day ago (prune_decisions calls it). SECURITY DEFINER (runs as pyretrieve_owner): dropping a partition needs the owner of the table.';

SET LOCAL ROLE pyretrieve_api;

CREATE FUNCTION pyretrieve.create_workspace(p_workspace text, p_display_name text DEFAULT '')
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    INSERT INTO pyretrieve.workspaces (workspace_id, display_name)
    VALUES (p_workspace, coalesce(p_display_name, ''))
    ON CONFLICT (workspace_id) DO NOTHING;
    RETURN p_workspace;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_workspace(text, text) IS
    'Create a workspace (idempotent); returns its id. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.create_project(
    p_workspace text, p_project text, p_ts_config regconfig DEFAULT 'pg_catalog.english')
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM 1 FROM pyretrieve.workspaces w WHERE w.workspace_id = p_workspace;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'workspace not found';
    END IF;
    PERFORM pyretrieve.check_ts_config(coalesce(p_ts_config, 'pg_catalog.english'));
    INSERT INTO pyretrieve.projects (workspace_id, project_id, ts_config, generation_seq)
    VALUES (p_workspace, p_project, coalesce(p_ts_config, 'pg_catalog.english'),
            pyretrieve.create_scope_sequence(p_workspace, p_project))
    ON CONFLICT (workspace_id, project_id) DO NOTHING;
    INSERT INTO pyretrieve.scope_configs (workspace_id, project_id, ts_config)
    VALUES (p_workspace, p_project, coalesce(p_ts_config, 'pg_catalog.english'))
    ON CONFLICT DO NOTHING;
    RETURN p_project;
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_project(text, text, regconfig) IS
    'Create a project in a workspace (idempotent) with its default text-search configuration; returns its id. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- Per-project BM25 parameters (admins).
CREATE FUNCTION pyretrieve.set_bm25(p_workspace text, p_project text, p_k1 double precision, p_b double precision)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
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
    'Set a project''s BM25 parameters k1 (term-frequency saturation, default 0.9) and b (length normalisation, default 0.4). Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- The scope's serial, for an admin: PR020 for a scope that does not exist.
CREATE FUNCTION pyretrieve.admin_scope_serial(p_workspace text, p_project text)
RETURNS integer
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_scope integer;
BEGIN
    PERFORM pyretrieve.require_admin();
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    SELECT p.scope_serial INTO v_scope
      FROM pyretrieve.projects p
     WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'project not found';
    END IF;
    RETURN v_scope;
END;
$$;
COMMENT ON FUNCTION pyretrieve.admin_scope_serial(text, text) IS
    'A scope''s opaque serial (projects.scope_serial), for the admin functions that name its own indexes: admins only, PR020 for an unknown scope.';

CREATE FUNCTION pyretrieve.create_vector_index(p_workspace text, p_project text, p_model text)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN pyretrieve.create_scope_vector_index(
        pyretrieve.admin_scope_serial(p_workspace, p_project), p_model);
END;
$$;
COMMENT ON FUNCTION pyretrieve.create_vector_index(text, text, text) IS
    'Give one workspace/project its own HNSW index of one model, built with vector_index_options() (idempotent; an index built with other options is rebuilt, and serves searches until the new one replaces it); from then on vector_candidates searches that scope through it instead of exactly. Worth it above about 20,000 rows of the scope (evals/bench/vector-index.json: 1.6 times faster at 10,000 rows, 3.6 times at 30,000, 14 times at 100,000); below that the exact scan is about as fast and has recall 1. The index holds only that scope''s rows, so no other scope changes what it finds or how long it takes. Building it blocks writes to the embeddings for its duration. Admins only; PR020 for an unknown scope, PR012 for an unknown model. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.drop_vector_index(p_workspace text, p_project text, p_model text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN pyretrieve.drop_scope_vector_index(
        pyretrieve.admin_scope_serial(p_workspace, p_project), p_model);
END;
$$;
COMMENT ON FUNCTION pyretrieve.drop_vector_index(text, text, text) IS
    'Drop a scope''s own HNSW index of one model (create_vector_index); the scope''s vector leg is exact again. True when an index was dropped. Admins only; PR020 for an unknown scope, PR012 for an unknown model. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- The automatic choice of the vector leg's path: the leg takes a scope's own index when it
-- exists (vector_candidates), and this keeps the indexes where the measured line puts them. A
-- scope gets an index of a model from p_min_rows embeddings of it, and loses it below half as
-- many, so that a scope near the line does not flap. The count is of every row the index would
-- hold, of every classification and state: what the index and the exact scan cost depends on.
-- An index built with other options than vector_index_options() (an install upgraded from an
-- older schema) is rebuilt, so an upgrade reaches the measured recall through the same job.
-- Building an index blocks writes to the embeddings while it runs; p_dry_run says what would be
-- done and does nothing.
CREATE FUNCTION pyretrieve.maintain_vector_indexes(
    p_min_rows integer DEFAULT 20000, p_dry_run boolean DEFAULT false)
RETURNS TABLE (workspace_id text, project_id text, model_id text, embeddings bigint,
               action text, applied boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    r record;
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_min_rows IS NULL OR p_min_rows < 2 OR p_dry_run IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'min_rows must be at least 2';
    END IF;
    FOR r IN
        WITH counts AS MATERIALIZED (
            SELECT c.workspace_id, c.project_id, c.model_id, sum(c.embeddings)::bigint AS embeddings
              FROM pyretrieve.embedding_count_log c
             GROUP BY c.workspace_id, c.project_id, c.model_id
        ), pairs AS (
            SELECT p.workspace_id, p.project_id, p.scope_serial, m.model_id,
                   coalesce(c.embeddings, 0) AS embeddings,
                   i.oid IS NOT NULL AS indexed, i.reloptions AS options
              FROM pyretrieve.projects p
             CROSS JOIN pyretrieve.embedding_models m
              LEFT JOIN counts c
                ON c.workspace_id = p.workspace_id AND c.project_id = p.project_id
               AND c.model_id = m.model_id
              LEFT JOIN pg_catalog.pg_class i
                ON i.oid = pg_catalog.to_regclass(pg_catalog.format(
                               'pyretrieve.embeddings_hnsw_s%s_m%s', p.scope_serial, m.model_serial))
        )
        SELECT x.workspace_id::text AS workspace_id, x.project_id::text AS project_id,
               x.scope_serial, x.model_id::text AS model_id, x.embeddings,
               CASE WHEN NOT x.indexed THEN 'create'
                    WHEN x.embeddings < p_min_rows / 2 THEN 'drop'
                    WHEN x.options IS DISTINCT FROM pyretrieve.vector_index_options() THEN 'rebuild'
                    ELSE 'keep' END AS action
          FROM pairs x
         WHERE x.indexed OR x.embeddings >= p_min_rows
         ORDER BY x.workspace_id, x.project_id, x.model_id
    LOOP
        IF NOT p_dry_run AND r.action IN ('create', 'rebuild') THEN
            PERFORM pyretrieve.create_scope_vector_index(r.scope_serial, r.model_id);
        ELSIF NOT p_dry_run AND r.action = 'drop' THEN
            PERFORM pyretrieve.drop_scope_vector_index(r.scope_serial, r.model_id);
        END IF;
        workspace_id := r.workspace_id;
        project_id := r.project_id;
        model_id := r.model_id;
        embeddings := r.embeddings;
        action := r.action;
        applied := r.action <> 'keep' AND NOT p_dry_run;
        RETURN NEXT;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION pyretrieve.maintain_vector_indexes(integer, boolean) IS
    'Choose each scope''s vector search path from its size: every workspace/project holding at least p_min_rows embeddings of a model (default 20,000, where evals/bench/vector-index.json puts the line) gets its own HNSW index of that model (as create_vector_index), an indexed scope holding fewer than half as many loses it (as drop_vector_index), and an index built with other options than vector_index_options() is rebuilt (as create_vector_index). The count is every embedding of the scope and model, of every classification and state (what the index holds), from pyretrieve.embedding_count_log. Returns one row per scope and model with an index or due one: embeddings, action (create, drop, rebuild or keep) and whether it was applied; p_dry_run applies nothing. Run it as a maintenance job (with pg_cron, say); building an index blocks writes to the embeddings while it runs. Admins only; PR010 for p_min_rows below 2. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.grant_access(
    p_principal regrole,
    p_workspace text,
    p_project text,
    p_purpose text,
    p_ceiling pyretrieve.classification,
    p_max_age interval DEFAULT NULL,
    p_semantic_policy pyretrieve.semantic_policy DEFAULT 'optional',
    p_expires_at timestamptz DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_id uuid;
BEGIN
    PERFORM pyretrieve.require_admin();
    PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
    PERFORM pyretrieve.check_identifier(p_project, 'project');
    PERFORM pyretrieve.check_identifier(p_purpose, 'purpose');
    IF p_principal IS NULL OR p_ceiling IS NULL OR p_semantic_policy IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'principal, ceiling and semantic policy are required';
    END IF;
    IF p_max_age IS NOT NULL AND (p_max_age <= interval '0'
        OR date_part('month', p_max_age) <> 0 OR date_part('year', p_max_age) <> 0) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'max_age must be positive days/hours (no months or years)';
    END IF;
    -- Days become 24-hour spans (see the CHECK on grants.max_age).
    p_max_age := make_interval(secs => extract(epoch FROM p_max_age));
    PERFORM 1 FROM pyretrieve.projects p WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'project not found';
    END IF;
    INSERT INTO pyretrieve.grants AS g (
        workspace_id, project_id, principal, purpose, ceiling, max_age, semantic_policy, expires_at,
        granted_by)
    VALUES (p_workspace, p_project, p_principal, p_purpose, p_ceiling, p_max_age, p_semantic_policy, p_expires_at,
            pyretrieve.caller())
    ON CONFLICT (workspace_id, project_id, principal, purpose) DO UPDATE
       SET ceiling = EXCLUDED.ceiling, max_age = EXCLUDED.max_age,
           semantic_policy = EXCLUDED.semantic_policy, expires_at = EXCLUDED.expires_at,
           granted_by = EXCLUDED.granted_by, granted_at = now()
    RETURNING g.grant_id INTO v_id;
    RETURN v_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.grant_access(regrole, text, text, text, pyretrieve.classification, interval, pyretrieve.semantic_policy, timestamptz) IS
    'Grant a principal (a role; members that inherit it are covered too) read access to a workspace/project for a purpose, with a classification ceiling, an optional max_age (freshness window), a semantic policy (disabled | optional | required) and an optional expiry. Writers write where they hold a grant, up to its ceiling. Replaces an existing grant for the same principal, scope and purpose; returns the grant id. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.revoke_access(p_principal regrole, p_workspace text, p_project text, p_purpose text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    DELETE FROM pyretrieve.grants g
     WHERE g.workspace_id = p_workspace AND g.project_id = p_project
       AND g.principal = p_principal AND g.purpose = p_purpose;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION pyretrieve.revoke_access(regrole, text, text, text) IS
    'Remove a principal''s grant for a workspace/project and purpose; returns whether one existed. Decisions already made keep their record; new requests are denied. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.register_model(
    p_model text, p_dimension integer,
    p_lexical_weight double precision DEFAULT NULL, p_vector_weight double precision DEFAULT NULL,
    p_fusion text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_dimension integer;
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_model IS NULL OR p_model !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid model id';
    END IF;
    IF p_dimension IS NULL OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'dimension must be between 1 and 2000';
    END IF;
    -- A fusion setting refused has its own SQLSTATE (contract.INVALID_FUSION_SQLSTATE), checked
    -- before anything is written. NaN passes "> 0" in PostgreSQL but fails "<= 1000".
    IF (p_lexical_weight IS NULL) <> (p_vector_weight IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR016', MESSAGE = 'give both default weights or neither';
    END IF;
    IF p_lexical_weight IS NOT NULL
       AND NOT (p_lexical_weight > 0 AND p_lexical_weight <= 1000
                AND p_vector_weight > 0 AND p_vector_weight <= 1000) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR016', MESSAGE = 'default weights must be above 0 and at most 1000';
    END IF;
    IF p_fusion IS NOT NULL AND p_fusion NOT IN ('rrf', 'dbsf') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR016', MESSAGE = 'fusion must be rrf or dbsf';
    END IF;
    INSERT INTO pyretrieve.embedding_models (model_id, dimension, lexical_weight, vector_weight, fusion)
    VALUES (p_model, p_dimension, coalesce(p_lexical_weight, 1.0), coalesce(p_vector_weight, 1.0),
            coalesce(p_fusion, 'rrf'))
    ON CONFLICT (model_id) DO NOTHING;
    SELECT m.dimension INTO v_dimension FROM pyretrieve.embedding_models m WHERE m.model_id = p_model;
    IF v_dimension <> p_dimension THEN
        RAISE EXCEPTION USING ERRCODE = 'PR013', MESSAGE = 'model already registered with another dimension';
    END IF;
    IF p_lexical_weight IS NOT NULL THEN
        UPDATE pyretrieve.embedding_models m
           SET lexical_weight = p_lexical_weight, vector_weight = p_vector_weight
         WHERE m.model_id = p_model;
    END IF;
    IF p_fusion IS NOT NULL THEN
        UPDATE pyretrieve.embedding_models m SET fusion = p_fusion WHERE m.model_id = p_model;
    END IF;
    -- No index: the vector leg never read one over all scopes, and maintaining it slowed every
    -- embedding write. A large scope gets its own (create_vector_index).
    RETURN p_model;
END;
$$;
COMMENT ON FUNCTION pyretrieve.register_model(text, integer, double precision, double precision, text) IS
    'Register an embedding model and its dimension (idempotent); returns the model id. It builds no index: a large scope gets its own HNSW index with create_vector_index. With both default weights (each above 0, at most 1000) it sets the lexical and vector weights, and with p_fusion (rrf or dbsf) the fusion, that searches naming this model use when they give none; what is not given is 1.0 each and rrf for a new model and stays as it was for an existing one. Raises PR016 for an unknown fusion or default weights not both given or outside (0, 1000], before anything is written, and PR013 if the model exists with another dimension. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

-- Listings for admins and the CLI.
CREATE FUNCTION pyretrieve.list_projects()
RETURNS TABLE (workspace_id text, project_id text, ts_config regconfig, bm25_k1 double precision,
               bm25_b double precision, created_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY
    SELECT w.workspace_id::text, p.project_id::text, p.ts_config, p.bm25_k1, p.bm25_b, w.created_at
      FROM pyretrieve.workspaces w LEFT JOIN pyretrieve.projects p USING (workspace_id)
     ORDER BY 1, 2;
END;
$$;
COMMENT ON FUNCTION pyretrieve.list_projects() IS
    'Every workspace with its projects (a workspace without projects appears once, with NULL project): text-search configuration and BM25 parameters. Admins only. SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.list_grants()
RETURNS TABLE (principal text, workspace_id text, project_id text, purpose text,
               ceiling pyretrieve.classification, max_age interval,
               semantic_policy pyretrieve.semantic_policy, expires_at timestamptz,
               granted_by name, granted_at timestamptz, grant_id uuid)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY
    SELECT g.principal::text, g.workspace_id::text, g.project_id::text, g.purpose::text, g.ceiling,
           g.max_age, g.semantic_policy, g.expires_at, g.granted_by, g.granted_at, g.grant_id
      FROM pyretrieve.grants g
     ORDER BY 1, 2, 3, 4;
END;
$$;
COMMENT ON FUNCTION pyretrieve.list_grants() IS
    'Every grant: principal, scope, purpose, ceiling, max_age, semantic policy, expiry, who granted it and when. Admins only. SECURITY DEFINER (runs as pyretrieve_api).';

CREATE FUNCTION pyretrieve.list_models()
RETURNS TABLE (model_id text, dimension integer, registered_at timestamptz,
               fusion text, lexical_weight double precision, vector_weight double precision)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    IF NOT (pyretrieve.caller_in('pyretrieve_reader') OR pyretrieve.caller_in('pyretrieve_admin')) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    RETURN QUERY
    SELECT m.model_id, m.dimension, m.registered_at, m.fusion, m.lexical_weight, m.vector_weight
      FROM pyretrieve.embedding_models m ORDER BY 1;
END;
$$;
COMMENT ON FUNCTION pyretrieve.list_models() IS
    'The registered embedding models, their dimensions, default fusions and default weights (configuration, not tenant data). Readers, writers and admins. SECURITY DEFINER (runs as pyretrieve_api).';

-- The fusion and weights search() and the client use when a request names this model and
-- gives none.
CREATE FUNCTION pyretrieve.model_defaults(p_model text)
RETURNS TABLE (fusion text, lexical_weight double precision, vector_weight double precision)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    IF NOT (pyretrieve.caller_in('pyretrieve_reader') OR pyretrieve.caller_in('pyretrieve_admin')) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'access denied';
    END IF;
    RETURN QUERY
    SELECT m.fusion, m.lexical_weight, m.vector_weight FROM pyretrieve.embedding_models m
     WHERE m.model_id = p_model;
END;
$$;
COMMENT ON FUNCTION pyretrieve.model_defaults(text) IS
    'A registered model''s default fusion and weights (lexical, vector), or no row for a model that is not registered: what a search naming the model uses when it gives none. Configuration, not tenant data. Readers, writers and admins. SECURITY DEFINER (runs as pyretrieve_api) because principals hold no table privilege.';

CREATE FUNCTION pyretrieve.schema_version()
RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
BEGIN ATOMIC
    SELECT i.schema_version FROM pyretrieve.installation i;
END;
COMMENT ON FUNCTION pyretrieve.schema_version() IS
    'The installed schema version. SECURITY DEFINER (runs as pyretrieve_api) so that principals, who hold no table privilege, can read it.';

-- Decision retention and the audit's questions, for admins.
CREATE FUNCTION pyretrieve.decision_partitions()
RETURNS TABLE (partition_name text, range_start timestamptz, range_end timestamptz, decisions bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY
    SELECT r.partition_name, r.range_start, r.range_end,
           (SELECT count(*) FROM pyretrieve.decisions d
             WHERE d.evaluated_at >= r.range_start AND d.evaluated_at < r.range_end)
      FROM pyretrieve.decision_partition_ranges() r
     ORDER BY r.range_start;
END;
$$;
COMMENT ON FUNCTION pyretrieve.decision_partitions() IS
    'The monthly partitions of the decisions log, with their range and the number of decisions each holds. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals hold no table privilege.';

CREATE FUNCTION pyretrieve.prune_decisions(p_older_than interval, p_dry_run boolean DEFAULT false)
RETURNS TABLE (partition_name text, range_start timestamptz, range_end timestamptz, decisions bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    p record;
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_older_than IS NULL OR p_older_than < interval '1 day' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'retention must be at least one day';
    END IF;
    -- Whole months only: a partition goes when every decision it can hold is older than the
    -- retention, so no decision younger than that is ever dropped.
    FOR p IN SELECT * FROM pyretrieve.decision_partitions() d
              WHERE d.range_end <= now() - p_older_than ORDER BY d.range_start LOOP
        IF NOT p_dry_run THEN
            PERFORM pyretrieve.drop_decision_partition(p.partition_name);
        END IF;
        partition_name := p.partition_name;
        range_start := p.range_start;
        range_end := p.range_end;
        decisions := p.decisions;
        RETURN NEXT;
    END LOOP;
    IF NOT p_dry_run THEN
        PERFORM pyretrieve.ensure_decision_partitions();
    END IF;
END;
$$;
COMMENT ON FUNCTION pyretrieve.prune_decisions(interval, boolean) IS
    'Retention of the decisions log: drop every monthly partition whose whole range is older than p_older_than (at least one day), returning each with the number of decisions it held (with p_dry_run, only report them), then create the partitions ahead. Decisions are never deleted one by one. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals hold no table privilege.';

-- Who searched what scope when: the decisions of a time range, optionally of one scope or one
-- principal, newest first. Each filter given becomes a predicate of its own (dynamic SQL with
-- parameters, never spliced text), so the planner uses the scope or principal index and reads
-- only the months asked for.
CREATE FUNCTION pyretrieve.list_decisions(
    p_since timestamptz,
    p_until timestamptz DEFAULT NULL,
    p_workspace text DEFAULT NULL,
    p_project text DEFAULT NULL,
    p_principal text DEFAULT NULL,
    p_limit integer DEFAULT 1000)
RETURNS TABLE (evaluated_at timestamptz, principal name, workspace_id text, project_id text,
               purpose text, decision_id uuid, grant_id uuid, ceiling pyretrieve.classification,
               semantic_intent text, requested_limit integer, query_digest bytea,
               embedding_digest bytea)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_sql text := 'SELECT d.evaluated_at, d.principal, d.workspace_id::text, d.project_id::text,'
               || ' d.purpose::text, d.decision_id, d.grant_id, d.ceiling, d.semantic_intent,'
               || ' d.requested_limit, d.query_digest, d.embedding_digest'
               || ' FROM pyretrieve.decisions d WHERE d.evaluated_at >= $1 AND d.evaluated_at < $2';
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_since IS NULL OR (p_until IS NOT NULL AND p_until <= p_since) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'a time range: since, and until after it';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'limit must be between 1 and 100000';
    END IF;
    IF p_project IS NOT NULL AND p_workspace IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'a project is named with its workspace';
    END IF;
    IF p_workspace IS NOT NULL THEN
        PERFORM pyretrieve.check_identifier(p_workspace, 'workspace');
        v_sql := v_sql || ' AND d.workspace_id = $3';
    END IF;
    IF p_project IS NOT NULL THEN
        PERFORM pyretrieve.check_identifier(p_project, 'project');
        v_sql := v_sql || ' AND d.project_id = $4';
    END IF;
    IF p_principal IS NOT NULL THEN
        v_sql := v_sql || ' AND d.principal = $5';
    END IF;
    v_sql := v_sql || ' ORDER BY d.evaluated_at DESC, d.decision_id LIMIT $6';
    RETURN QUERY EXECUTE v_sql
        USING p_since, coalesce(p_until, 'infinity'::timestamptz), p_workspace, p_project,
              p_principal::name, p_limit;
END;
$$;
COMMENT ON FUNCTION pyretrieve.list_decisions(timestamptz, timestamptz, text, text, text, integer) IS
    'Who searched what scope when: the decisions evaluated in [p_since, p_until), optionally of one workspace (and project) or one principal, newest first, at most p_limit: digests and intent only, never query text. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals hold no table privilege.';

SET LOCAL ROLE pyretrieve_owner;

-- ==== sql/schema/65_tools.sql ====
-- ---------------------------------------------------------------------------------------------
-- Tools for LLM agents. A tool IS a fragment: its body is searchable text built from the name,
-- the description and the arguments' names and descriptions (never raw JSON), so grants, RLS,
-- BM25, vectors, freshness, supersession, classification and embedding staleness all apply
-- unchanged. pyretrieve.tools holds one row per tool fragment (one per schema version): the
-- name, the schema, its version, the operation family, tags and server. Its rows carry the
-- fragment's classification and times (copied when the row is written, never by the caller);
-- every function also joins the fragment, so a tool row is returned only when both the tools
-- policy and the fragments policy admit it.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE pyretrieve.tools (
    workspace_id    pyretrieve.identifier NOT NULL,
    project_id      pyretrieve.identifier NOT NULL,
    fragment_id     uuid NOT NULL,
    name            text NOT NULL CHECK (name ~ '^[A-Za-z0-9_.:/-]{1,128}$'),
    schema          jsonb NOT NULL CHECK (pg_catalog.jsonb_typeof(schema) = 'object'),
    schema_version  integer NOT NULL CHECK (schema_version >= 1),
    operation       text NOT NULL
                    CHECK (operation IN ('delete', 'update', 'create', 'get', 'search', 'list', 'other')),
    tags            text[] NOT NULL DEFAULT '{}' CHECK (pg_catalog.cardinality(tags) <= 32),
    server          text CHECK (pg_catalog.length(server) <= 256),
    classification  pyretrieve.classification NOT NULL,
    observed_at     timestamptz NOT NULL,
    expires_at      timestamptz,
    registered_at   timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (workspace_id, fragment_id),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects,
    FOREIGN KEY (workspace_id, fragment_id) REFERENCES pyretrieve.fragments (workspace_id, fragment_id)
);
-- Not unique: a writer whose ceiling is below a same-named hidden tool registers its own row
-- rather than colliding with (and so detecting) the hidden one.
CREATE INDEX tools_name_idx ON pyretrieve.tools (workspace_id, project_id, name);
COMMENT ON TABLE pyretrieve.tools IS
    'Tools for LLM agents: one row per tool fragment (schema version) with its name, JSON schema, operation family, tags and server, and the fragment''s classification and times. The fragment is the searchable text; supersession keeps one active version per name.';

-- Adaptive tool selection is rolled out per project: off, eval (computed and logged, not
-- applied), canary (5% of principals), majority (50%), full.
CREATE TABLE pyretrieve.tool_rollouts (
    workspace_id  pyretrieve.identifier NOT NULL,
    project_id    pyretrieve.identifier NOT NULL,
    stage         text NOT NULL CHECK (stage IN ('off', 'eval', 'canary', 'majority', 'full')),
    updated_by    name NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (workspace_id, project_id),
    FOREIGN KEY (workspace_id, project_id) REFERENCES pyretrieve.projects
);
COMMENT ON TABLE pyretrieve.tool_rollouts IS
    'Per-project rollout stage of adaptive tool selection (off | eval | canary | majority | full). It changes how many authorised tools are offered, never which tools are authorised.';

ALTER TABLE pyretrieve.tools          ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE pyretrieve.tool_rollouts  ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;

-- Tools: the fragments' filters on the columns each tool row carries (the functions join the
-- fragment for its state, so a row must pass both policies).
CREATE POLICY tools_read ON pyretrieve.tools FOR SELECT TO pyretrieve_api
    USING ((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
       AND classification <= (SELECT b.ceiling FROM pyretrieve.bound_filter() b)
       AND ((observed_at <= (SELECT pg_catalog.now())
            AND observed_at >= (SELECT b.oldest FROM pyretrieve.bound_filter() b)
            AND (expires_at IS NULL OR expires_at > (SELECT pg_catalog.now())))
            OR (SELECT NOT b.reading FROM pyretrieve.bound_filter() b)));
CREATE POLICY tools_insert ON pyretrieve.tools FOR INSERT TO pyretrieve_api
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));
CREATE POLICY tools_update ON pyretrieve.tools FOR UPDATE TO pyretrieve_api
    USING (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w))
    WITH CHECK (workspace_id = (SELECT w.workspace_id FROM pyretrieve.bound_write() w)
       AND project_id = (SELECT w.project_id FROM pyretrieve.bound_write() w)
       AND classification <= (SELECT w.ceiling FROM pyretrieve.bound_write() w));

-- Rollout stages: the decision's own scope for readers, everything for admins.
CREATE POLICY tool_rollouts_read ON pyretrieve.tool_rollouts FOR SELECT TO pyretrieve_api
    USING (((workspace_id, project_id) = (SELECT b.workspace_id, b.project_id FROM pyretrieve.bound_filter() b)
            AND (SELECT b.reading FROM pyretrieve.bound_filter() b))
        OR (SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY tool_rollouts_admin_insert ON pyretrieve.tool_rollouts FOR INSERT TO pyretrieve_api
    WITH CHECK ((SELECT pyretrieve.caller_in('pyretrieve_admin')));
CREATE POLICY tool_rollouts_admin_update ON pyretrieve.tool_rollouts FOR UPDATE TO pyretrieve_api
    USING ((SELECT pyretrieve.caller_in('pyretrieve_admin')))
    WITH CHECK ((SELECT pyretrieve.caller_in('pyretrieve_admin')));

GRANT SELECT, INSERT (workspace_id, project_id, fragment_id, name, schema, schema_version, operation,
                      tags, server, classification, observed_at, expires_at),
      UPDATE (schema, schema_version, operation, tags, server)
    ON pyretrieve.tools TO pyretrieve_api;
GRANT SELECT, INSERT (workspace_id, project_id, stage, updated_by),
      UPDATE (stage, updated_by, updated_at)
    ON pyretrieve.tool_rollouts TO pyretrieve_api;

-- The searchable text of a tool: the name split into words (snake_case, camelCase, dots), the
-- description, then one line per argument "- name (type): description One of: a, b." with
-- nested fields flattened as parent.child (list items parent[].child). Never raw JSON.
CREATE FUNCTION pyretrieve.tool_argument_lines(p_properties jsonb, p_prefix text)
RETURNS SETOF text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    v_path text;
    v_line text;
    v_enum text;
BEGIN
    IF p_properties IS NULL OR jsonb_typeof(p_properties) <> 'object' THEN
        RETURN;
    END IF;
    FOR r IN SELECT e.key, e.value FROM jsonb_each(p_properties) AS e ORDER BY e.key COLLATE "C" LOOP
        v_path := p_prefix || r.key;
        IF jsonb_typeof(r.value) <> 'object' THEN
            RETURN NEXT '- ' || v_path;
            CONTINUE;
        END IF;
        v_line := '- ' || v_path;
        IF jsonb_typeof(r.value -> 'type') = 'string' THEN
            v_line := v_line || ' (' || (r.value ->> 'type') || ')';
        END IF;
        IF jsonb_typeof(r.value -> 'description') = 'string' THEN
            v_line := v_line || ': ' || (r.value ->> 'description');
        END IF;
        IF jsonb_typeof(r.value -> 'enum') = 'array' THEN
            SELECT string_agg(x.v #>> '{}', ', ' ORDER BY x.n) INTO v_enum
              FROM jsonb_array_elements(r.value -> 'enum') WITH ORDINALITY AS x(v, n)
             WHERE x.n <= 10;
            IF v_enum IS NOT NULL THEN
                v_line := v_line || ' One of: ' || v_enum || '.';
            END IF;
        END IF;
        RETURN NEXT v_line;
        RETURN QUERY SELECT * FROM pyretrieve.tool_argument_lines(r.value -> 'properties', v_path || '.');
        IF jsonb_typeof(r.value -> 'items') = 'object' THEN
            RETURN QUERY SELECT * FROM pyretrieve.tool_argument_lines(r.value -> 'items' -> 'properties', v_path || '[].');
        END IF;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_argument_lines(jsonb, text) IS
    'One line per argument of a JSON-schema properties object ("- name (type): description One of: ..."), nested fields flattened as parent.child and parent[].child, in bytewise key order.';

CREATE FUNCTION pyretrieve.tool_text(p_schema jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name text := p_schema ->> 'name';
    v_words text;
    v_text text;
    v_args text;
BEGIN
    v_words := regexp_replace(regexp_replace(v_name, '([a-z0-9])([A-Z])', '\1 \2', 'g'), '[_.:/-]+', ' ', 'g');
    v_text := v_name || E'\n' || lower(v_words);
    IF jsonb_typeof(p_schema -> 'description') = 'string' THEN
        v_text := v_text || E'\n' || (p_schema ->> 'description');
    END IF;
    SELECT string_agg(l, E'\n') INTO v_args
      FROM pyretrieve.tool_argument_lines(p_schema -> 'parameters' -> 'properties', '') AS l;
    IF v_args IS NOT NULL THEN
        v_text := v_text || E'\nParameters:\n' || v_args;
    END IF;
    RETURN v_text;
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_text(jsonb) IS
    'The searchable body of a tool fragment, built from its schema: the name, the name split into words, the description and one line per argument (never raw JSON).';

SET LOCAL ROLE pyretrieve_api;

CREATE FUNCTION pyretrieve.put_tool(
    p_workspace text,
    p_project text,
    p_schema jsonb,
    p_operation text DEFAULT 'other',
    p_tags text[] DEFAULT '{}',
    p_server text DEFAULT NULL,
    p_classification pyretrieve.classification DEFAULT 'internal',
    p_expires_at timestamptz DEFAULT NULL,
    p_observed_at timestamptz DEFAULT NULL)
RETURNS TABLE (fragment_id uuid, schema_version integer, status text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize).
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_name text;
    v_body text;
    v_tags text[] := coalesce(p_tags, '{}');
    old record;
    v_new uuid;
    v_version integer := 1;
    v_found boolean;
    f pyretrieve.fragments;
BEGIN
    PERFORM pyretrieve.bind_write_scope(p_workspace, p_project);
    IF p_schema IS NULL OR jsonb_typeof(p_schema) <> 'object' OR jsonb_typeof(p_schema -> 'name') <> 'string'
       OR (p_schema ->> 'name') !~ '^[A-Za-z0-9_.:/-]{1,128}$'
       OR (p_schema ? 'description' AND jsonb_typeof(p_schema -> 'description') <> 'string')
       OR (p_schema ? 'parameters' AND jsonb_typeof(p_schema -> 'parameters') <> 'object')
       OR octet_length(p_schema::text) > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid tool schema';
    END IF;
    IF p_operation IS NULL OR p_operation NOT IN ('delete', 'update', 'create', 'get', 'search', 'list', 'other') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid operation family';
    END IF;
    IF cardinality(v_tags) > 32 OR EXISTS (SELECT 1 FROM unnest(v_tags) t WHERE t IS NULL OR length(t) NOT BETWEEN 1 AND 64)
       OR length(p_server) > 256 OR p_classification IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid tool tags, server or classification';
    END IF;
    v_name := p_schema ->> 'name';
    v_body := pyretrieve.tool_text(p_schema);

    -- The active version of this name the writer may see (up to its ceiling). A hidden one
    -- above the ceiling is not found, and the writer gets its own row: no existence oracle.
    SELECT t.fragment_id, t.schema, t.schema_version, t.operation, t.tags, t.server,
           fr.classification, fr.expires_at
      INTO old
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments fr ON fr.workspace_id = t.workspace_id AND fr.fragment_id = t.fragment_id
     WHERE t.workspace_id = p_workspace AND t.project_id = p_project AND t.name = v_name
       AND fr.project_id = p_project AND fr.state = 'active'
     ORDER BY t.schema_version DESC, fr.classification DESC, t.fragment_id
     LIMIT 1;

    v_found := FOUND;
    IF v_found AND old.classification = p_classification AND old.schema = p_schema THEN
        IF old.operation = p_operation AND old.tags = v_tags AND old.server IS NOT DISTINCT FROM p_server THEN
            RETURN QUERY SELECT old.fragment_id, old.schema_version, 'unchanged'::text;
            RETURN;
        END IF;
        UPDATE pyretrieve.tools t SET operation = p_operation, tags = v_tags, server = p_server
         WHERE t.workspace_id = p_workspace AND t.fragment_id = old.fragment_id;
        RETURN QUERY SELECT old.fragment_id, old.schema_version, 'updated'::text;
        RETURN;
    END IF;
    IF v_found THEN
        v_new := pyretrieve.supersede_fragment(
            p_workspace := p_workspace, p_project := p_project, p_fragment_id := old.fragment_id,
            p_body := v_body, p_classification := p_classification, p_observed_at := p_observed_at,
            p_expires_at := p_expires_at, p_source_uri := 'tool:' || v_name);
        v_version := old.schema_version + CASE WHEN old.schema = p_schema THEN 0 ELSE 1 END;
        IF v_new = old.fragment_id THEN
            -- The searchable text is the same (the change is in defaults, required arguments
            -- or other constraints): the fragment stays, the tool row records the new schema.
            UPDATE pyretrieve.tools t
               SET schema = p_schema, schema_version = v_version, operation = p_operation,
                   tags = v_tags, server = p_server
             WHERE t.workspace_id = p_workspace AND t.fragment_id = old.fragment_id;
            RETURN QUERY SELECT old.fragment_id, v_version, 'updated'::text;
            RETURN;
        END IF;
    ELSE
        v_new := pyretrieve.put_fragment(
            p_workspace := p_workspace, p_project := p_project, p_body := v_body,
            p_classification := p_classification, p_observed_at := p_observed_at,
            p_expires_at := p_expires_at, p_source_uri := 'tool:' || v_name);
    END IF;

    SELECT fr.* INTO STRICT f FROM pyretrieve.fragments fr
     WHERE fr.workspace_id = p_workspace AND fr.fragment_id = v_new;
    INSERT INTO pyretrieve.tools AS t (
        workspace_id, project_id, fragment_id, name, schema, schema_version, operation, tags, server,
        classification, observed_at, expires_at)
    VALUES (p_workspace, p_project, v_new, v_name, p_schema, v_version, p_operation, v_tags, p_server,
            f.classification, f.observed_at, f.expires_at)
    ON CONFLICT (workspace_id, fragment_id) DO NOTHING;
    RETURN QUERY SELECT v_new, v_version, CASE WHEN v_found THEN 'superseded' ELSE 'created' END;
END;
$$;
COMMENT ON FUNCTION pyretrieve.put_tool(text, text, jsonb, text, text[], text, pyretrieve.classification, timestamptz, timestamptz) IS
    'Register a tool (a JSON schema with name, description and parameters) in a workspace/project where the caller is a writer: stores a fragment whose body is pyretrieve.tool_text(schema) and a tools row. Re-registering an unchanged tool writes nothing (status unchanged); a changed schema supersedes the active version''s fragment and bumps schema_version (status superseded; when the searchable text is unchanged, e.g. only defaults or required arguments differ, the same fragment keeps the new schema: status updated); changed tags, server or operation alone update the row (status updated). Raises PR010 for an invalid schema, operation family, tags or server. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.tool_entries(p_decision uuid, p_ids uuid[])
RETURNS TABLE (fragment_id uuid, name text, schema_version integer, operation text, tags text[],
               server text, schema_chars integer, entities text[])
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize): index scans on, sequential
-- scans off, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 1000 ids';
    END IF;
    RETURN QUERY
    -- The ids as an index condition (= ANY): one key look-up per id, whatever the size of the
    -- scope's catalog (a join with unnest() let the planner read the whole scope).
    SELECT t.fragment_id, t.name, t.schema_version, t.operation, t.tags, t.server,
           length(t.schema::text), t.entities
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND f.workspace_id = d.workspace_id
       AND t.fragment_id = ANY (p_ids)
       AND t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_entries(uuid, uuid[]) IS
    'The tool metadata (name, schema version, operation family, tags, server, schema size in characters, entity words of the name and description; not the schema) of the given fragment ids that are tools the transaction''s decision admits; absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.tool_schemas(p_decision uuid, p_ids uuid[])
RETURNS TABLE (fragment_id uuid, name text, schema_version integer, schema jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize): index scans on, sequential
-- scans off, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'between 0 and 1000 ids';
    END IF;
    RETURN QUERY
    SELECT t.fragment_id, t.name, t.schema_version, t.schema
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND f.workspace_id = d.workspace_id
       AND t.fragment_id = ANY (p_ids)
       AND t.project_id = d.project_id AND f.project_id = d.project_id
       AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.fragment_id;
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_schemas(uuid, uuid[]) IS
    'The JSON schemas of the given fragment ids that are tools the transaction''s decision admits (active, in scope, at or below the ceiling, fresh, not expired); absent and invisible ids are left out alike. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.tool_by_name(p_decision uuid, p_name text)
RETURNS TABLE (fragment_id uuid, name text, schema_version integer, operation text, schema jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize): index scans on, sequential
-- scans off, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
BEGIN
    IF p_name IS NULL OR length(p_name) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'tool name must be 1 to 128 characters';
    END IF;
    RETURN QUERY
    SELECT t.fragment_id, t.name, t.schema_version, t.operation, t.schema
      FROM pyretrieve.tools t
      JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
     WHERE t.workspace_id = d.workspace_id AND t.project_id = d.project_id AND t.name = p_name
       AND f.project_id = d.project_id AND f.state = 'active'
       AND f.classification <= d.ceiling AND t.classification <= d.ceiling
       AND f.observed_at <= d.evaluated_at
       AND (d.max_age IS NULL OR f.observed_at >= d.evaluated_at - d.max_age)
       AND (f.expires_at IS NULL OR f.expires_at > d.evaluated_at)
     ORDER BY t.schema_version DESC, f.classification DESC, t.fragment_id
     LIMIT 1;
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_by_name(uuid, text) IS
    'The active tool of this exact name that the transaction''s decision admits (its newest schema version), or no row: an absent tool and one the decision does not admit look the same. For rediscovery, when a model names a tool it was not offered. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.tool_rollout(p_decision uuid)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A caller's planner settings do not reach inside (see authorize): index scans on, sequential
-- scans off, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    d pyretrieve.decisions := pyretrieve.require_decision(p_decision);
    v_stage text;
BEGIN
    SELECT r.stage INTO v_stage FROM pyretrieve.tool_rollouts r
     WHERE r.workspace_id = d.workspace_id AND r.project_id = d.project_id;
    RETURN coalesce(v_stage, 'off');
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_rollout(uuid) IS
    'The rollout stage of adaptive tool selection for the decision''s project (off when none was set). SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

CREATE FUNCTION pyretrieve.set_tool_rollout(p_workspace text, p_project text, p_stage text)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_stage IS NULL OR p_stage NOT IN ('off', 'eval', 'canary', 'majority', 'full') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'stage must be off, eval, canary, majority or full';
    END IF;
    PERFORM 1 FROM pyretrieve.projects p WHERE p.workspace_id = p_workspace AND p.project_id = p_project;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR020', MESSAGE = 'project not found';
    END IF;
    INSERT INTO pyretrieve.tool_rollouts AS r (workspace_id, project_id, stage, updated_by)
    VALUES (p_workspace, p_project, p_stage, pyretrieve.caller())
    ON CONFLICT (workspace_id, project_id) DO UPDATE
       SET stage = EXCLUDED.stage, updated_by = EXCLUDED.updated_by, updated_at = now();
    RETURN p_stage;
END;
$$;
COMMENT ON FUNCTION pyretrieve.set_tool_rollout(text, text, text) IS
    'Set a project''s rollout stage of adaptive tool selection (off | eval | canary | majority | full); returns it. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';

REVOKE ALL ON FUNCTION
    pyretrieve.put_tool(text, text, jsonb, text, text[], text, pyretrieve.classification, timestamptz, timestamptz),
    pyretrieve.tool_entries(uuid, uuid[]),
    pyretrieve.tool_schemas(uuid, uuid[]),
    pyretrieve.tool_by_name(uuid, text),
    pyretrieve.tool_rollout(uuid),
    pyretrieve.set_tool_rollout(text, text, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    pyretrieve.tool_entries(uuid, uuid[]),
    pyretrieve.tool_schemas(uuid, uuid[]),
    pyretrieve.tool_by_name(uuid, text),
    pyretrieve.tool_rollout(uuid)
    TO pyretrieve_reader;
GRANT EXECUTE ON FUNCTION
    pyretrieve.put_tool(text, text, jsonb, text, text[], text, pyretrieve.classification, timestamptz, timestamptz)
    TO pyretrieve_writer;
GRANT EXECUTE ON FUNCTION pyretrieve.set_tool_rollout(text, text, text) TO pyretrieve_admin;

SET LOCAL ROLE pyretrieve_owner;
REVOKE ALL ON FUNCTION pyretrieve.tool_argument_lines(jsonb, text), pyretrieve.tool_text(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_argument_lines(jsonb, text), pyretrieve.tool_text(jsonb)
    TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin, pyretrieve_api;

-- ---------------------------------------------------------------------------------------------
-- Tool discovery for SQL callers: pyretrieve.discover_tools(...) returns the document the
-- Python client's Discovery.document() holds, key for key and value for value (a test compares
-- their canonical JSON byte for byte). The steps are the client's, in its order:
--   search (authorize, both legs, fragments, RRF, freshness, total order) for a pool of 48
--   -> the tools among them the decision admits -> similar-tool penalties (write tools only)
--   -> order by adjusted score, then fused rank -> confidence -> K of the policy -> rollout
--   -> schemas of the chosen K only.
-- The word lists and constants below are pyretrieve.tools.definitions' and .select's; a test
-- checks them against the Python ones.
-- ---------------------------------------------------------------------------------------------
SET LOCAL ROLE pyretrieve_owner;

-- Verbs (and synonyms) by operation family, as pyretrieve.tools.definitions.OPERATION_SYNONYMS.
CREATE FUNCTION pyretrieve.tool_operation_words()
RETURNS TABLE (family text, word text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT f.family, w.word
      FROM (VALUES
        ('delete', ARRAY['delete', 'deletes', 'deleting', 'remove', 'removes', 'removing', 'erase',
                         'drop', 'purge', 'destroy', 'unregister', 'uninstall', 'cancel', 'revoke',
                         'discard', 'clear', 'wipe', 'unsubscribe', 'terminate']),
        ('update', ARRAY['update', 'updates', 'updating', 'modify', 'edit', 'change', 'set', 'rename',
                         'patch', 'replace', 'adjust', 'alter', 'reschedule', 'move', 'enable',
                         'disable', 'toggle', 'upgrade', 'assign', 'configure', 'reset']),
        ('create', ARRAY['create', 'creates', 'creating', 'add', 'adds', 'new', 'make', 'insert',
                         'register', 'book', 'schedule', 'generate', 'send', 'submit', 'upload',
                         'open', 'start', 'reserve', 'buy', 'purchase', 'invite', 'build']),
        ('get', ARRAY['get', 'gets', 'fetch', 'retrieve', 'read', 'show', 'display', 'view', 'lookup',
                      'check', 'describe', 'obtain', 'calculate', 'compute', 'estimate', 'convert',
                      'tell', 'what', 'whats', 'how']),
        ('search', ARRAY['search', 'find', 'query', 'locate', 'discover', 'look', 'seek', 'filter',
                         'match']),
        ('list', ARRAY['list', 'lists', 'enumerate', 'all', 'browse'])) AS f(family, words),
           LATERAL pg_catalog.unnest(f.words) AS w(word);
END;
COMMENT ON FUNCTION pyretrieve.tool_operation_words() IS
    'The verbs and synonyms of each operation family (delete, update, create, get, search, list) that requests and tool names are read with, as pyretrieve.tools.definitions.OPERATION_SYNONYMS.';

-- Words that never name an entity, as pyretrieve.tools.definitions._STOP.
CREATE FUNCTION pyretrieve.tool_stop_words()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
RETURN ARRAY['a', 'an', 'the', 'of', 'for', 'to', 'in', 'on', 'by', 'with', 'and', 'or', 'from', 'at',
             'is', 'are', 'be', 'it', 'this', 'that', 'my', 'me', 'i', 'you', 'your', 'please', 'can',
             'could', 'would', 'will', 'should', 'do', 'does', 'need', 'want'];
COMMENT ON FUNCTION pyretrieve.tool_stop_words() IS
    'Words that never name an entity when a request is compared with a tool name, as pyretrieve.tools.definitions._STOP.';

-- The lower-case words of a text with snake_case, camelCase and dotted names split: the
-- matches of [A-Za-z][a-z]*|[0-9]+ (ASCII letters only, as Python's re reads that pattern).
CREATE FUNCTION pyretrieve.tool_words(p_text text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(pg_catalog.array_agg(pg_catalog.lower(m.w[1] COLLATE "C") ORDER BY m.n), '{}')
      FROM pg_catalog.regexp_matches(p_text, '([A-Za-z][a-z]*|[0-9]+)', 'g') WITH ORDINALITY AS m(w, n);
END;
COMMENT ON FUNCTION pyretrieve.tool_words(text) IS
    'The lower-case words of a text, snake_case, camelCase and dotted names split, in order (pyretrieve.tools.definitions.words).';

-- The entity words of a text: neither operation verbs nor stop words, longer than one letter,
-- not numbers, plurals lightly stemmed, as pyretrieve.tools.definitions.entity_words: ies -> y;
-- es after s, x, z, ch or sh (boxes -> box); else a final s but not ss (games -> game).
CREATE FUNCTION pyretrieve.tool_entity_words(p_text text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(pg_catalog.array_agg(DISTINCT s.stem ORDER BY s.stem), '{}')
      FROM (SELECT CASE
                     WHEN pg_catalog.length(u.w) > 5 AND u.w LIKE '%ies'
                         THEN pg_catalog.left(u.w, -3) || 'y'
                     WHEN pg_catalog.length(u.w) > 4 AND u.w ~ '(s|x|z|ch|sh)es$'
                         THEN pg_catalog.left(u.w, -2)
                     WHEN pg_catalog.length(u.w) > 3 AND u.w LIKE '%s' AND u.w NOT LIKE '%ss'
                         THEN pg_catalog.left(u.w, -1)
                     ELSE u.w END COLLATE "C" AS stem
              FROM pg_catalog.unnest(pyretrieve.tool_words(p_text)) AS u(w)
             WHERE pg_catalog.length(u.w) > 1 AND u.w !~ '^[0-9]+$'
               AND NOT u.w = ANY (pyretrieve.tool_stop_words())
               AND NOT EXISTS (SELECT 1 FROM pyretrieve.tool_operation_words() o WHERE o.word = u.w)) s;
END;
COMMENT ON FUNCTION pyretrieve.tool_entity_words(text) IS
    'The entity words of a text (not operation verbs, not stop words, longer than one letter, not numbers, plurals lightly stemmed), sorted: pyretrieve.tools.definitions.entity_words.';

-- What a tool is about, for similar-tool protection: the entity words of its name and
-- description, stored when the row is written (reading them costs about 45 us per tool, 2 ms
-- for a pool of 48). Added here rather than in CREATE TABLE because the expression needs the
-- function above; migration 0030 adds it the same way, so the column comes last in both.
ALTER TABLE pyretrieve.tools ADD COLUMN entities text[] NOT NULL
    GENERATED ALWAYS AS (pyretrieve.tool_entity_words(
        name || ' ' || coalesce(schema ->> 'description', ''))) STORED;
COMMENT ON COLUMN pyretrieve.tools.entities IS
    'The entity words of the tool''s name and description (pyretrieve.tool_entity_words), kept by the database: a write tool of the family a request asks for that shares none of them with the request is penalised (no_shared_entity).';

-- The operation families a request asks for, sorted: delete/update/create/search by their
-- verbs; get and list only when none of those is named (their verbs are too common).
CREATE FUNCTION pyretrieve.tool_query_operations(p_text text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH found AS (
        SELECT DISTINCT o.family
          FROM pg_catalog.unnest(pyretrieve.tool_words(p_text)) AS u(w)
          JOIN pyretrieve.tool_operation_words() o ON o.word = u.w
    )
    SELECT coalesce(pg_catalog.array_agg(f.family COLLATE "C" ORDER BY f.family COLLATE "C"), '{}')
      FROM found f
     WHERE f.family NOT IN ('get', 'list')
        OR NOT EXISTS (SELECT 1 FROM found x WHERE x.family NOT IN ('get', 'list'));
END;
COMMENT ON FUNCTION pyretrieve.tool_query_operations(text) IS
    'The operation families a request asks for, sorted (pyretrieve.tools.definitions.query_operations): delete, update, create and search by their verbs; get and list only when no other family is named.';

-- A stable bucket 0..99 for (workspace, principal): the first 8 bytes of
-- sha256(workspace || NUL || principal), big-endian, unsigned, modulo 100.
CREATE FUNCTION pyretrieve.tool_rollout_bucket(p_workspace text, p_principal text)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT ((('x' || pg_catalog.encode(pg_catalog.substr(h.d, 1, 8), 'hex'))::bit(64)::bigint::numeric
             + CASE WHEN pg_catalog.get_byte(h.d, 0) >= 128 THEN 18446744073709551616::numeric ELSE 0 END)
            % 100)::integer
      FROM (SELECT pg_catalog.sha256(pg_catalog.convert_to(p_workspace, 'UTF8') || '\x00'::bytea
                                     || pg_catalog.convert_to(p_principal, 'UTF8')) AS d) h;
END;
COMMENT ON FUNCTION pyretrieve.tool_rollout_bucket(text, text) IS
    'The rollout bucket (0..99) of a principal in a workspace: sha256 of workspace, NUL, principal; first 8 bytes as an unsigned big-endian integer, modulo 100 (pyretrieve.tools.select.rollout_bucket).';

-- The K a policy recommends for a confidence level and, in the selection's order, the adjusted
-- scores, the BM25 scores and the cosine distances (NULL where a leg did not find the tool)
-- (pyretrieve.tools.select.recommended_k); never more than the candidates there are.
CREATE FUNCTION pyretrieve.tool_recommended_k(
    p_policy text, p_level text, p_scores double precision[],
    p_lexical double precision[], p_distances double precision[])
RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_scores), 0);
    v_k integer;
    v_best double precision;
    v_drop double precision;
    v_high integer;
    -- near: the parameters pyretrieve.tools.select.NEAR_DEFAULT (BM25 ratio, distance margin, kmin).
    c_a constant double precision := 0.7;
    c_b constant double precision := 0.1;
    c_kmin constant integer := 8;
    v_best_lexical double precision;
    v_best_distance double precision;
BEGIN
    CASE p_policy
    WHEN 'fixed-10' THEN v_k := 10;
    WHEN 'fixed-15' THEN v_k := 15;
    WHEN 'fixed-20' THEN v_k := 20;
    WHEN 'fixed-48' THEN v_k := 48;
    WHEN 'tight' THEN
        v_k := CASE p_level WHEN 'none' THEN 0 WHEN 'high' THEN 3 WHEN 'normal' THEN 5 WHEN 'low' THEN 10 ELSE 15 END;
    WHEN 'wide' THEN
        v_k := CASE p_level WHEN 'none' THEN 0 WHEN 'high' THEN 5 WHEN 'normal' THEN 8 WHEN 'low' THEN 12 ELSE 15 END;
    WHEN 'gap' THEN
        -- Cut after the largest drop among the first 20 (at least 3; the first of equal drops).
        v_high := least(v_n, 20);
        IF p_level = 'none' THEN
            v_k := 0;
        ELSIF v_high <= 3 THEN
            v_k := v_high;
        ELSE
            v_best := NULL;
            FOR i IN 4 .. v_high LOOP
                v_drop := p_scores[i - 1] - p_scores[i];
                IF v_best IS NULL OR v_drop > v_best THEN
                    v_best := v_drop;
                    v_k := i - 1;
                END IF;
            END LOOP;
            IF NOT v_best > 0 THEN
                v_k := v_high;
            END IF;
        END IF;
    WHEN 'near' THEN
        -- Up to the last tool whose BM25 is at least a times the pool's best, or whose cosine
        -- distance is at most the best plus b; at least kmin.
        IF p_level = 'none' THEN
            v_k := 0;
        ELSE
            SELECT max(x) INTO v_best_lexical FROM unnest(p_lexical) AS x;
            SELECT min(x) INTO v_best_distance FROM unnest(p_distances) AS x;
            v_k := 0;
            FOR i IN 1 .. v_n LOOP
                IF (p_lexical[i] IS NOT NULL AND v_best_lexical > 0 AND p_lexical[i] >= c_a * v_best_lexical)
                   OR (p_distances[i] IS NOT NULL AND p_distances[i] <= v_best_distance + c_b) THEN
                    v_k := i;
                END IF;
            END LOOP;
            v_k := greatest(c_kmin, v_k);
        END IF;
    ELSE
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'unknown K policy';
    END CASE;
    RETURN least(v_k, v_n);
END;
$$;
COMMENT ON FUNCTION pyretrieve.tool_recommended_k(text, text, double precision[], double precision[], double precision[]) IS
    'The K a tool-selection policy recommends for a confidence level and, in the selection''s order, the adjusted scores, BM25 scores and cosine distances (pyretrieve.tools.select.recommended_k), never more than the candidates.';

SET LOCAL ROLE pyretrieve_api;

CREATE FUNCTION pyretrieve.discover_tools(
    p_workspace text,
    p_project text,
    p_purpose text,
    p_query text,
    p_embedding public.vector DEFAULT NULL,
    p_model text DEFAULT NULL,
    p_policy text DEFAULT NULL,
    p_mode text DEFAULT 'hybrid',
    p_lexical_weight double precision DEFAULT 1.0,
    p_vector_weight double precision DEFAULT 1.0,
    p_protect boolean DEFAULT true,
    p_adaptive boolean DEFAULT NULL,
    p_master boolean DEFAULT true)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Doubles pass through jsonb as text: the shortest exact digits, whatever the caller set.
SET extra_float_digits = 1
-- A caller's planner settings do not reach inside (see authorize): index scans on, sequential
-- scans off, whatever the caller set.
SET enable_seqscan = off
SET enable_indexscan = on
SET enable_bitmapscan = on
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    c_pool constant integer := 48;
    c_candidates constant integer := 100;
    c_formula constant text := 'normalized = fused / ideal fused score (1-based RRF, k = 60); '
                               'adjusted = normalized * product of penalty factors';
    v_policy text := coalesce(p_policy, 'near');
    d pyretrieve.decisions;
    v_hits jsonb;
    v_ideal double precision := 0.0;
    v_asked text[];
    v_query_entities text[];
    v_scored jsonb;
    v_n integer;
    v_s1 double precision;
    v_s2 double precision;
    v_level text;
    v_reason text;
    v_recommended integer;
    v_baseline integer;
    v_stage text;
    v_applied boolean;
    v_k integer;
    v_schemas jsonb;
    v_tools jsonb;
    v_omissions jsonb;
    v_fingerprint text;
BEGIN
    IF v_policy NOT IN ('fixed-10', 'fixed-15', 'fixed-20', 'fixed-48', 'tight', 'gap', 'wide', 'near') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010',
            MESSAGE = 'policy must be one of fixed-10, fixed-15, fixed-20, fixed-48, tight, gap, wide, near';
    END IF;
    IF p_protect IS NULL OR p_master IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'protect and master must not be null';
    END IF;

    -- 1. The search path (it authorizes: one decision for the transaction) for a pool of 48.
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'fragment_id', s.fragment_id, 'fused_rank', s.rank, 'score', s.final_score,
               'lexical_rank', s.explanation -> 'modalities' -> 'lexical' -> 'rank',
               'vector_rank', s.explanation -> 'modalities' -> 'vector' -> 'rank',
               'lexical_score', s.explanation -> 'modalities' -> 'lexical' -> 'score',
               'vector_distance', s.explanation -> 'modalities' -> 'vector' -> 'distance',
               'vector_used', s.explanation -> 'semantic' ->> 'status' = 'used') ORDER BY s.rank),
           '[]'::jsonb)
      INTO v_hits
      FROM pyretrieve.search(p_workspace => p_workspace, p_project => p_project,
                             p_purpose => p_purpose, p_query => p_query,
                             p_embedding => p_embedding, p_model => p_model, p_limit => c_pool,
                             p_mode => p_mode, p_lexical_weight => p_lexical_weight,
                             p_vector_weight => p_vector_weight,
                             p_candidate_limit => c_candidates,
                             -- K is calibrated on RRF scores, whatever the model's default.
                             p_fusion => 'rrf') s;
    SELECT * INTO STRICT d FROM pyretrieve.bound_decision();
    d := pyretrieve.require_decision(d.decision_id);

    -- The fused score of a tool ranked first by every leg that ran.
    IF p_mode <> 'vector' THEN
        v_ideal := v_ideal + p_lexical_weight / 61.0::double precision;
    END IF;
    IF coalesce((v_hits -> 0 ->> 'vector_used')::boolean, false) THEN
        v_ideal := v_ideal + p_vector_weight / 61.0::double precision;
    END IF;

    -- 2. The tools among them the decision admits; penalties; the order by adjusted score.
    v_asked := CASE WHEN p_protect THEN pyretrieve.tool_query_operations(p_query) ELSE '{}' END;
    v_query_entities := pyretrieve.tool_entity_words(p_query);
    WITH hit AS (
        SELECT (h ->> 'fragment_id')::uuid AS fragment_id, (h ->> 'fused_rank')::integer AS fused_rank,
               (h ->> 'score')::double precision AS score, h -> 'lexical_rank' AS lexical_rank,
               h -> 'vector_rank' AS vector_rank, h -> 'lexical_score' AS lexical_score,
               h -> 'vector_distance' AS vector_distance
          FROM jsonb_array_elements(v_hits) AS h
    ), tool AS (
        SELECT h.*, e.name, e.schema_version, e.operation, e.entities,
               CASE WHEN v_ideal > 0 THEN h.score / v_ideal ELSE 0.0::double precision END AS normalized,
               CASE
                 WHEN cardinality(v_asked) = 0 OR e.operation NOT IN ('delete', 'update', 'create') THEN NULL
                 WHEN NOT e.operation = ANY (v_asked) THEN jsonb_build_object(
                     'code', 'operation_contradiction', 'factor', pyretrieve.json_double(0.5),
                     'asked', to_jsonb(v_asked), 'tool_family', e.operation)
                 WHEN NOT e.entities && v_query_entities THEN jsonb_build_object(
                     'code', 'no_shared_entity', 'factor', pyretrieve.json_double(0.8),
                     'tool_family', e.operation)
               END AS penalty
          FROM hit h
          JOIN pyretrieve.tool_entries(p_decision => d.decision_id,
                                       p_ids => ARRAY(SELECT x.fragment_id FROM hit x)) e
            ON e.fragment_id = h.fragment_id
    ), adjusted AS (
        SELECT t.*, t.normalized * coalesce((t.penalty ->> 'factor')::double precision,
                                            1.0::double precision) AS adjusted
          FROM tool t
    )
    SELECT coalesce(jsonb_agg(to_jsonb(a) || jsonb_build_object('rank', a.rank)
                              ORDER BY a.rank), '[]'::jsonb)
      INTO v_scored
      FROM (SELECT x.*, (row_number() OVER (ORDER BY x.adjusted DESC, x.fused_rank))::integer AS rank
              FROM adjusted x) a;
    v_n := jsonb_array_length(v_scored);

    -- 3. Confidence from the top adjusted score, the second and the gap.
    IF v_n = 0 THEN
        v_level := 'none';
        v_reason := 'no authorised tool matched';
    ELSE
        v_s1 := (v_scored -> 0 ->> 'adjusted')::double precision;
        v_s2 := CASE WHEN v_n > 1 THEN (v_scored -> 1 ->> 'adjusted')::double precision
                     ELSE 0.0::double precision END;
        IF v_s1 >= 0.9 AND v_s1 - v_s2 >= 0.1 THEN
            v_level := 'high';
            v_reason := 'top tool ranked first by every leg, clear gap to the next';
        ELSIF v_s1 >= 0.6 THEN
            v_level := 'normal';
            v_reason := 'top tool ranked high by the legs that ran';
        ELSIF v_s1 >= 0.4 THEN
            v_level := 'low';
            v_reason := 'top tool found by one leg only or ranked low';
        ELSE
            v_level := 'fail';
            v_reason := 'no tool ranked high by any leg';
        END IF;
    END IF;

    -- 4. K: the policy's, applied by the rollout stage (or the caller's choice), never more than
    --    the baseline K of 48 or the candidates.
    v_recommended := pyretrieve.tool_recommended_k(v_policy, v_level,
        ARRAY(SELECT (x ->> 'adjusted')::double precision FROM jsonb_array_elements(v_scored) AS x),
        ARRAY(SELECT (x ->> 'lexical_score')::double precision FROM jsonb_array_elements(v_scored) AS x),
        ARRAY(SELECT (x ->> 'vector_distance')::double precision FROM jsonb_array_elements(v_scored) AS x));
    v_baseline := least(48, v_n);
    v_stage := pyretrieve.tool_rollout(d.decision_id);
    v_applied := CASE
        WHEN v_policy IN ('fixed-10', 'fixed-15', 'fixed-20', 'fixed-48') THEN true
        WHEN p_adaptive IS NOT NULL THEN p_adaptive AND p_master
        ELSE p_master AND pyretrieve.tool_rollout_bucket(d.workspace_id, d.principal)
                 < CASE v_stage WHEN 'canary' THEN 5 WHEN 'majority' THEN 50 WHEN 'full' THEN 100 ELSE 0 END
    END;
    v_k := CASE WHEN v_applied THEN least(v_recommended, v_baseline) ELSE v_baseline END;

    -- 5. Schemas of the chosen K only, under the same decision.
    SELECT coalesce(jsonb_object_agg(s.fragment_id::text, s.schema), '{}'::jsonb)
      INTO v_schemas
      FROM pyretrieve.tool_schemas(p_decision => d.decision_id, p_ids => ARRAY(
               SELECT (x ->> 'fragment_id')::uuid FROM jsonb_array_elements(v_scored) AS x
                WHERE (x ->> 'rank')::integer <= v_k)) s;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'name', x ->> 'name', 'schema_version', (x ->> 'schema_version')::integer,
               'rank', (x ->> 'rank')::integer, 'fused_rank', (x ->> 'fused_rank')::integer,
               'lexical_rank', x -> 'lexical_rank', 'vector_rank', x -> 'vector_rank',
               'lexical_score', x -> 'lexical_score', 'vector_distance', x -> 'vector_distance',
               'operation', x ->> 'operation',
               'fused_score', pyretrieve.json_double((x ->> 'score')::double precision),
               'normalized_score', pyretrieve.json_double((x ->> 'normalized')::double precision),
               'adjusted_score', pyretrieve.json_double((x ->> 'adjusted')::double precision),
               'penalties', CASE WHEN x -> 'penalty' = 'null'::jsonb THEN '[]'::jsonb
                                 ELSE jsonb_build_array(x -> 'penalty') END,
               'chosen', (x ->> 'rank')::integer <= v_k,
               'cut', CASE WHEN (x ->> 'rank')::integer <= v_k THEN NULL
                           WHEN v_applied OR v_k = v_recommended THEN 'cut_by_k'
                           ELSE 'cut_by_baseline_k' END,
               'formula', c_formula) ORDER BY (x ->> 'rank')::integer), '[]'::jsonb),
           coalesce(jsonb_agg(jsonb_build_object(
               'name', x ->> 'name', 'fragment_id', x ->> 'fragment_id',
               'position', (x ->> 'rank')::integer, 'reason', 'cut_by_k',
               'score', pyretrieve.json_double((x ->> 'adjusted')::double precision))
               ORDER BY (x ->> 'rank')::integer) FILTER (WHERE (x ->> 'rank')::integer > v_k), '[]'::jsonb)
      INTO v_tools, v_omissions
      FROM jsonb_array_elements(v_scored) AS x;

    -- The context fingerprint: sha256 over the sorted "name NUL version" lines of the chosen.
    SELECT pg_catalog.encode(pg_catalog.sha256(coalesce(pg_catalog.string_agg(l.line, '\x0a'::bytea ORDER BY l.line),
                                                        ''::bytea)), 'hex')
      INTO v_fingerprint
      FROM (SELECT pg_catalog.convert_to(x ->> 'name', 'UTF8') || '\x00'::bytea
                   || pg_catalog.convert_to(x ->> 'schema_version', 'UTF8') AS line
              FROM jsonb_array_elements(v_scored) AS x
             WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')) l;

    RETURN jsonb_build_object(
        'decision_id', d.decision_id,
        'query_digest', pg_catalog.encode(pyretrieve.content_digest(p_query), 'hex'),
        'policy', v_policy,
        'stage', v_stage,
        'applied', v_applied,
        'confidence', jsonb_build_object(
            'level', v_level,
            'score', pyretrieve.json_double(coalesce(v_s1, 0.0::double precision)),
            'reason', v_reason,
            'recommended_k', v_recommended,
            'top_score', pyretrieve.json_double(v_s1),
            'second_score', pyretrieve.json_double(v_s2),
            'gap', pyretrieve.json_double(v_s1 - v_s2)),
        'k', (SELECT count(*) FROM jsonb_array_elements(v_scored) AS x
               WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')),
        'fingerprint', v_fingerprint,
        'tools', v_tools,
        'omissions', v_omissions,
        'schemas', (SELECT coalesce(jsonb_agg(v_schemas -> (x ->> 'fragment_id') ORDER BY (x ->> 'rank')::integer),
                                    '[]'::jsonb)
                      FROM jsonb_array_elements(v_scored) AS x
                     WHERE (x ->> 'rank')::integer <= v_k AND v_schemas ? (x ->> 'fragment_id')));
END;
$$;
COMMENT ON FUNCTION pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text, double precision, double precision, boolean, boolean, boolean) IS
    'Tool discovery for an agent request, as one jsonb document: the ranked tools the caller may use (search''s authorization, legs, fusion and freshness for a pool of 48, then only tools the decision admits), each with its explanation (fused, lexical and vector ranks, fused, normalised and adjusted scores, similar-tool penalties, chosen, why cut), the confidence (level none/high/normal/low/fail, score, reason, recommended K, top and second score, gap), K, omissions for authorised tools cut by K, the context fingerprint and the schemas of the chosen K only. p_policy: fixed-10, fixed-15, fixed-20, fixed-48, tight, gap, wide or near (default near, the evaluated default); adaptive K only truncates and is applied by the project''s rollout stage unless p_adaptive says otherwise; p_master false turns it off. Byte-identical, as canonical JSON, to the Python client''s Discovery.document() for the same request and decision. Raises what search raises (PR001 on deny, PR010 on bad input, PR030). SECURITY DEFINER (runs as pyretrieve_api): it calls helpers that principals are not granted (the bound decision, the word lists, the rollout bucket) and principals reach the tables only through the SQL API.';

REVOKE ALL ON FUNCTION
    pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text, double precision, double precision, boolean, boolean, boolean)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    pyretrieve.discover_tools(text, text, text, text, public.vector, text, text, text, double precision, double precision, boolean, boolean, boolean)
    TO pyretrieve_reader;

SET LOCAL ROLE pyretrieve_owner;
REVOKE ALL ON FUNCTION pyretrieve.tool_operation_words(), pyretrieve.tool_stop_words(),
    pyretrieve.tool_words(text), pyretrieve.tool_entity_words(text), pyretrieve.tool_query_operations(text),
    pyretrieve.tool_rollout_bucket(text, text), pyretrieve.tool_recommended_k(text, text, double precision[], double precision[], double precision[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.tool_operation_words(), pyretrieve.tool_stop_words(),
    pyretrieve.tool_words(text), pyretrieve.tool_entity_words(text), pyretrieve.tool_query_operations(text),
    pyretrieve.tool_rollout_bucket(text, text), pyretrieve.tool_recommended_k(text, text, double precision[], double precision[], double precision[])
    TO pyretrieve_api;
-- discover_tools (as pyretrieve_api) runs search() and the renderings it calls.
GRANT EXECUTE ON FUNCTION
    pyretrieve.search(text, text, text, text, public.vector, text, integer, text, double precision, double precision, text, text, integer, text),
    pyretrieve.json_double(double precision), pyretrieve.iso_utc(timestamptz)
    TO pyretrieve_api;

-- ==== sql/schema/70_privileges.sql ====
-- ---------------------------------------------------------------------------------------------
-- Privileges. Nothing for PUBLIC. The principal groups hold no privilege on any table, view or
-- sequence: they may only execute the SQL API. pyretrieve_api, which the API functions run as,
-- holds exactly the table privileges those functions need, and RLS decides its rows.
-- ---------------------------------------------------------------------------------------------
REVOKE ALL ON ALL TABLES IN SCHEMA pyretrieve FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA pyretrieve FROM PUBLIC;
DO $revoke$
DECLARE
    f regprocedure;
BEGIN
    -- Each role revokes PUBLIC's default EXECUTE on the functions it owns.
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'pyretrieve'::regnamespace
                AND p.proowner = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER)
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$revoke$;
REVOKE ALL ON TYPE pyretrieve.classification, pyretrieve.fragment_state, pyretrieve.semantic_policy,
    pyretrieve.identifier, pyretrieve.ingest_row, pyretrieve.statistics_delta,
    pyretrieve.lexical_list FROM PUBLIC;

GRANT USAGE ON SCHEMA pyretrieve TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin, pyretrieve_api;
GRANT USAGE ON TYPE pyretrieve.classification, pyretrieve.fragment_state, pyretrieve.semantic_policy,
    pyretrieve.identifier TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin, pyretrieve_api;
-- Writers build bulk batches of this type (a staging table of their own, one array value).
GRANT USAGE ON TYPE pyretrieve.ingest_row TO pyretrieve_writer, pyretrieve_api;
-- The statistics log's triggers pass their rows to log_statistics as this type.
GRANT USAGE ON TYPE pyretrieve.statistics_delta TO pyretrieve_api;
-- The lexical index's triggers and compaction pass postings to write_lexical_lists as this type.
GRANT USAGE ON TYPE pyretrieve.lexical_list TO pyretrieve_api;

-- What the API functions (and the triggers they fire) read and write, as pyretrieve_api.
GRANT SELECT ON pyretrieve.installation, pyretrieve.workspaces, pyretrieve.projects,
    pyretrieve.fragments, pyretrieve.embedding_models, pyretrieve.embeddings, pyretrieve.grants,
    pyretrieve.decisions, pyretrieve.write_bindings, pyretrieve.lexical_blocks,
    pyretrieve.lexical_pages, pyretrieve.lexical_tombstones,
    pyretrieve.generation_log, pyretrieve.scope_configs, pyretrieve.statistics_log,
    pyretrieve.embedding_count_log
    TO pyretrieve_api;
GRANT INSERT (workspace_id, principal, project_id, purpose, grant_id, ceiling, max_age, semantic_policy,
              requested_limit, candidate_limit, query_digest, semantic_intent, embedding_digest)
    ON pyretrieve.decisions TO pyretrieve_api;
GRANT INSERT (workspace_id, principal, project_id, ceiling, position) ON pyretrieve.write_bindings TO pyretrieve_api;
GRANT SELECT, INSERT (xact_id, decision_id, workspace_id, project_id, ceiling, evaluated_at, max_age),
      UPDATE (xact_id, decision_id, project_id, ceiling, evaluated_at, max_age)
    ON pyretrieve.read_bindings TO pyretrieve_api;
GRANT INSERT (workspace_id, project_id, body, classification, observed_at, expires_at,
              source_uri, source_revision, manifest_id, ts_config)
    ON pyretrieve.fragments TO pyretrieve_api;
GRANT UPDATE (state, superseded_by) ON pyretrieve.fragments TO pyretrieve_api;
GRANT INSERT (workspace_id, project_id, fragment_id, model_id, embedding, source_digest),
      UPDATE (embedding, source_digest, fragment_state)
    ON pyretrieve.embeddings TO pyretrieve_api;
GRANT INSERT, DELETE ON pyretrieve.lexical_blocks, pyretrieve.lexical_pages,
    pyretrieve.lexical_tombstones TO pyretrieve_api;
-- The triggers and compaction lock blocks and pages (SELECT ... FOR UPDATE SKIP LOCKED) before
-- they rewrite them, which takes UPDATE on a column; the update policy's check admits no new
-- row, so none is updated.
GRANT UPDATE (postings) ON pyretrieve.lexical_blocks, pyretrieve.lexical_pages TO pyretrieve_api;
-- A new page draws its number.
GRANT USAGE ON SEQUENCE pyretrieve.lexical_page_seq TO pyretrieve_api;
GRANT INSERT ON pyretrieve.generation_log, pyretrieve.scope_configs, pyretrieve.statistics_log,
    pyretrieve.embedding_count_log
    TO pyretrieve_api;
-- create_project's insert draws the new scope's serial (the column's default).
GRANT USAGE ON SEQUENCE pyretrieve.scope_serial_seq TO pyretrieve_api;
GRANT INSERT (workspace_id, display_name) ON pyretrieve.workspaces TO pyretrieve_api;
GRANT INSERT (workspace_id, project_id, ts_config, generation_seq),
      UPDATE (bm25_k1, bm25_b) ON pyretrieve.projects TO pyretrieve_api;
GRANT INSERT (workspace_id, project_id, principal, purpose, ceiling, max_age, semantic_policy,
              expires_at, granted_by),
      UPDATE (ceiling, max_age, semantic_policy, expires_at, granted_by, granted_at),
      DELETE ON pyretrieve.grants TO pyretrieve_api;
GRANT INSERT (model_id, dimension, lexical_weight, vector_weight, fusion),
      UPDATE (lexical_weight, vector_weight, fusion) ON pyretrieve.embedding_models TO pyretrieve_api;

-- Helpers the API functions, the policies and the triggers call (as pyretrieve_api).
GRANT EXECUTE ON FUNCTION pyretrieve.caller(), pyretrieve.caller_in(name), pyretrieve.caller_memberships(),
    pyretrieve.caller_roles(),
    pyretrieve.bound_decision(), pyretrieve.bound_write(), pyretrieve.bound_filter(),
    pyretrieve.copies_bound_decision(uuid, text, text, pyretrieve.classification, timestamptz, interval),
    pyretrieve.writer_ceiling(text, text), pyretrieve.visible_successor(text, text, uuid),
    pyretrieve.effective_grant(text, text, text), pyretrieve.check_caller(),
    pyretrieve.apply_request_timeouts(), pyretrieve.check_ts_config(regconfig),
    pyretrieve.check_identifier(text, text), pyretrieve.require_decision(uuid),
    pyretrieve.check_embedding(text, public.vector), pyretrieve.require_admin(),
    pyretrieve.scope_sequence(text, text), pyretrieve.tsvector_length(tsvector),
    pyretrieve.log_statistics(pyretrieve.statistics_delta[]),
    pyretrieve.write_lexical_postings(text, text, text[], pyretrieve.classification[], bigint[],
        timestamptz[], timestamptz[]),
    pyretrieve.lexeme_bucket(text),
    pyretrieve.write_lexical_lists(text, text, pyretrieve.lexical_list[], boolean, boolean),
    pyretrieve.overlapping_pages(text, text, pyretrieve.classification),
    pyretrieve.compact_lexical_postings(text, text, pyretrieve.classification),
    pyretrieve.create_scope_sequence(text, text),
    pyretrieve.create_scope_vector_index(integer, text), pyretrieve.drop_scope_vector_index(integer, text),
    pyretrieve.vector_index_options(),
    pyretrieve.take_first_statistics(),
    pyretrieve.decision_partition_ranges(), pyretrieve.ensure_decision_partitions(integer, timestamptz),
    pyretrieve.drop_decision_partition(text)
    TO pyretrieve_api;

-- Pure helpers for everyone in a group (digests, the OR query, the caller's identity).
GRANT EXECUTE ON FUNCTION pyretrieve.content_digest(text), pyretrieve.or_tsquery(regconfig, text),
    pyretrieve.embedding_digest(public.vector), pyretrieve.caller()
    TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin, pyretrieve_api;
-- The explanation's renderings (a double as a float, a time in UTC), which search() calls.
GRANT EXECUTE ON FUNCTION pyretrieve.json_double(double precision), pyretrieve.iso_utc(timestamptz),
    pyretrieve.dbsf_distribution(double precision[]), pyretrieve.error_code(text, text)
    TO pyretrieve_reader;
-- search() runs as its caller and calls the API functions in order.
GRANT EXECUTE ON FUNCTION
    pyretrieve.search(text, text, text, text, public.vector, text, integer, text, double precision, double precision, text, text, integer, text)
    TO pyretrieve_reader;
-- create_model_index is an owner function that admins may call directly (nothing else does).
GRANT EXECUTE ON FUNCTION pyretrieve.create_model_index(text) TO pyretrieve_admin;
-- So is creating the decisions log's partitions ahead (a maintenance job run as an admin).
GRANT EXECUTE ON FUNCTION pyretrieve.ensure_decision_partitions(integer, timestamptz) TO pyretrieve_admin;

-- The SQL API, granted by its owner pyretrieve_api.
SET LOCAL ROLE pyretrieve_api;
DO $revoke$
DECLARE
    f regprocedure;
BEGIN
    -- Each role revokes PUBLIC's default EXECUTE on the functions it owns.
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'pyretrieve'::regnamespace
                AND p.proowner = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER)
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$revoke$;
GRANT EXECUTE ON FUNCTION pyretrieve.schema_version(), pyretrieve.list_models(),
    pyretrieve.model_defaults(text)
    TO pyretrieve_reader, pyretrieve_writer, pyretrieve_admin;
GRANT EXECUTE ON FUNCTION
    pyretrieve.authorize(text, text, text, bytea, text, bytea, integer),
    pyretrieve.lexical_candidates(uuid, text, integer, text),
    pyretrieve.vector_candidates(uuid, text, public.vector, integer),
    pyretrieve.fragments(uuid, uuid[])
    TO pyretrieve_reader;
GRANT EXECUTE ON FUNCTION
    pyretrieve.bind_write_scope(text, text),
    pyretrieve.put_fragment(text, text, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text, regconfig),
    pyretrieve.supersede_fragment(text, text, uuid, text, pyretrieve.classification, timestamptz, timestamptz, text, text, text),
    pyretrieve.retract_fragment(text, text, uuid),
    pyretrieve.compact_lexical_index(text, text, double precision),
    pyretrieve.put_embedding(text, text, uuid, text, public.vector, bytea),
    pyretrieve.active_sources(text, text, text[]),
    pyretrieve.active_sources_like(text, text, text[]),
    pyretrieve.created_now(text, text, uuid[]),
    pyretrieve.embeddings_needed(text, text, text, uuid[]),
    pyretrieve.stale_embeddings(text, text, text, uuid, integer),
    pyretrieve.ingest_state(text, text, text[], text),
    pyretrieve.ingest_batch(text, text, pyretrieve.ingest_row[], text)
    TO pyretrieve_writer;
GRANT EXECUTE ON FUNCTION
    pyretrieve.create_workspace(text, text),
    pyretrieve.create_project(text, text, regconfig),
    pyretrieve.grant_access(regrole, text, text, text, pyretrieve.classification, interval, pyretrieve.semantic_policy, timestamptz),
    pyretrieve.revoke_access(regrole, text, text, text),
    pyretrieve.register_model(text, integer, double precision, double precision, text),
    pyretrieve.set_bm25(text, text, double precision, double precision),
    pyretrieve.create_vector_index(text, text, text),
    pyretrieve.drop_vector_index(text, text, text),
    pyretrieve.maintain_vector_indexes(integer, boolean),
    pyretrieve.list_projects(),
    pyretrieve.list_grants(),
    pyretrieve.decision_partitions(),
    pyretrieve.prune_decisions(interval, boolean),
    pyretrieve.list_decisions(timestamptz, timestamptz, text, text, text, integer)
    TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;

-- ==== sql/schema/80_audit.sql ====
-- ---------------------------------------------------------------------------------------------
-- Audit (0002). Views a DBA queries (and `pyretrieve audit` reads) to see every table's RLS
-- state, every policy, privilege, function, view and key, the roles that reach SUPERUSER or
-- BYPASSRLS, who may read or write what, and every finding that weakens isolation with a fix.
-- They run as the caller (security_invoker) and read pg_catalog, which RLS does not govern,
-- plus pyretrieve.grants, where only admins (and superusers) see every grant: query them as a
-- member of pyretrieve_admin or as a superuser. The owner keeps only what ownership implies and,
-- having no policy on pyretrieve.grants, would see an empty access matrix.
-- ---------------------------------------------------------------------------------------------

-- The function calls in a stored expression (a policy's USING or WITH CHECK), read from its
-- node tree: for each call, whether it sits inside a sub-select and whether its arguments read
-- a column (a Var anywhere below it, counted conservatively). A call outside any sub-select
-- that reads no column returns the same value for every row and is evaluated once per row;
-- written as (SELECT f(...)) it becomes an InitPlan evaluated once per query.
CREATE FUNCTION pyretrieve.audit_expression_calls(p_expression pg_node_tree)
RETURNS TABLE (function_oid oid, in_subquery boolean, reads_row boolean)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_token text;
    v_kinds text[] := '{}';
    v_funcs oid[] := '{}';
    v_reads boolean[] := '{}';
    v_depth integer := 0;
    v_sublinks integer := 0;
BEGIN
    -- Tokens: an escaped character (node output backslash-escapes braces inside names, so it
    -- is skipped whole), a node opening "{NAME", a node closing "}", and a call's ":funcid N".
    FOR v_token IN
        SELECT m[1]
          FROM pg_catalog.regexp_matches(p_expression::text, '(\\.|\{[A-Z_]+|\}|:funcid [0-9]+)', 'g') AS m
    LOOP
        IF v_token LIKE '{%' THEN
            v_depth := v_depth + 1;
            v_kinds[v_depth] := substr(v_token, 2);
            v_funcs[v_depth] := NULL;
            v_reads[v_depth] := v_kinds[v_depth] = 'VAR';
            IF v_kinds[v_depth] = 'SUBLINK' THEN
                v_sublinks := v_sublinks + 1;
            END IF;
        ELSIF v_token = '}' THEN
            CONTINUE WHEN v_depth = 0;
            IF v_kinds[v_depth] = 'SUBLINK' THEN
                v_sublinks := v_sublinks - 1;
            END IF;
            IF v_kinds[v_depth] = 'FUNCEXPR' AND v_funcs[v_depth] IS NOT NULL THEN
                function_oid := v_funcs[v_depth];
                in_subquery := v_sublinks > 0;
                reads_row := v_reads[v_depth];
                RETURN NEXT;
            END IF;
            IF v_depth > 1 AND v_reads[v_depth] THEN
                v_reads[v_depth - 1] := true;
            END IF;
            v_depth := v_depth - 1;
        ELSIF v_token LIKE ':funcid %' AND v_depth > 0 AND v_kinds[v_depth] = 'FUNCEXPR' THEN
            v_funcs[v_depth] := substr(v_token, 9)::oid;
        END IF;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_expression_calls(pg_node_tree) IS
    'The function calls in a stored expression (a policy''s USING or WITH CHECK node tree): function oid, whether the call sits inside a sub-select, and whether its arguments read a column. pyretrieve.audit_policies uses it to find per-row calls that (SELECT ...) would evaluate once per query.';

CREATE VIEW pyretrieve.audit_server WITH (security_invoker = true) AS
SELECT v.server_version,
       v.server_version_num,
       v.server_version_num / 10000 AS major,
       m.minimum_version,
       CASE WHEN v.server_version_num >= 180000 THEN true
            WHEN m.minimum_num IS NULL THEN false
            ELSE v.server_version_num >= m.minimum_num END AS meets_minimum,
       'CVE-2023-2455, CVE-2024-10976, CVE-2025-8713'::text AS fixes
  FROM (SELECT pg_catalog.current_setting('server_version'),
               pg_catalog.current_setting('server_version_num')::integer) AS v(server_version, server_version_num)
  LEFT JOIN (VALUES (17, '17.6', 170006), (16, '16.10', 160010), (15, '15.14', 150014),
                    (14, '14.19', 140019), (13, '13.22', 130022)) AS m(major, minimum_version, minimum_num)
    ON m.major = v.server_version_num / 10000;
COMMENT ON VIEW pyretrieve.audit_server IS
    'The server version against the first minor release of its major version that carries the fixes for the recent row-level security CVEs (CVE-2023-2455, CVE-2024-10976, CVE-2025-8713): 17.6, 16.10, 15.14, 14.19, 13.22; every 18.x does.';

CREATE VIEW pyretrieve.audit_objects WITH (security_invoker = true) AS
WITH objects (classid, objid, owner) AS (
    SELECT 'pg_catalog.pg_namespace'::regclass, n.oid, n.nspowner
      FROM pg_catalog.pg_namespace n WHERE n.nspname = 'pyretrieve'
    UNION ALL
    SELECT 'pg_catalog.pg_class'::regclass, c.oid, c.relowner
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'pyretrieve'
    UNION ALL
    SELECT 'pg_catalog.pg_proc'::regclass, p.oid, p.proowner
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'pyretrieve'
    UNION ALL
    SELECT 'pg_catalog.pg_type'::regclass, t.oid, t.typowner
      FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
     WHERE n.nspname = 'pyretrieve' AND t.typrelid = 0 AND t.typcategory <> 'A'
)
SELECT o.type AS object_type,
       o.identity AS object,
       pg_catalog.pg_get_userbyid(x.owner)::text AS owner,
       coalesce(r.rolcanlogin, false) AS owner_can_login,
       coalesce(r.rolsuper, false) AS owner_is_superuser
  FROM objects x
  LEFT JOIN pg_catalog.pg_roles r ON r.oid = x.owner,
       LATERAL pg_catalog.pg_identify_object(x.classid, x.objid, 0) o;
COMMENT ON VIEW pyretrieve.audit_objects IS
    'Every object of the pyretrieve schema (the schema, relations, indexes, sequences, functions, types) with its owner and whether the owner can log in or is a superuser. Everything should be owned by the NOLOGIN pyretrieve_owner.';

CREATE VIEW pyretrieve.audit_tables WITH (security_invoker = true) AS
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) AS table_name,
       pg_catalog.pg_get_userbyid(c.relowner)::text AS owner,
       c.relrowsecurity AS rls_enabled,
       c.relforcerowsecurity AS rls_forced,
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid)::integer AS policies,
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_policy p
         WHERE p.polrelid = c.oid AND p.polpermissive)::integer AS permissive_policies,
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_policy p
         WHERE p.polrelid = c.oid AND NOT p.polpermissive)::integer AS restrictive_policies,
       EXISTS (SELECT FROM pg_catalog.pg_attribute a
                WHERE a.attrelid = c.oid AND a.attname = 'workspace_id' AND NOT a.attisdropped) AS has_workspace_id,
       (SELECT pg_catalog.format('%I.%I', pn.nspname, p.relname)
          FROM pg_catalog.pg_inherits i
          JOIN pg_catalog.pg_class p ON p.oid = i.inhparent
          JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace
         WHERE c.relispartition AND i.inhrelid = c.oid) AS partition_of
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'pyretrieve' AND c.relkind IN ('r', 'p');
COMMENT ON VIEW pyretrieve.audit_tables IS
    'Each table of the pyretrieve schema: owner, row-level security enabled and forced (so the owner is bound too), its policies (permissive and restrictive), whether it has a workspace_id column and, for a partition, the table it is a partition of (read through that table, under its policies; its own row-level security, with no policy, refuses every direct read).';

-- The top-level OR branches of a deparsed expression (one element when it has none): each
-- branch admits rows on its own, so each must carry its own identity check.
CREATE FUNCTION pyretrieve.audit_disjuncts(p_expression text)
RETURNS SETOF text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v text := btrim(p_expression);
    v_depth integer;
    v_quote boolean;
    v_start integer;
    v_outer boolean;
    i integer;
    c text;
BEGIN
    -- Strip parentheses that enclose the whole expression.
    LOOP
        EXIT WHEN left(v, 1) <> '(' OR right(v, 1) <> ')';
        v_depth := 0; v_quote := false; v_outer := true;
        FOR i IN 1 .. length(v) LOOP
            c := substr(v, i, 1);
            IF c = '''' THEN v_quote := NOT v_quote;
            ELSIF NOT v_quote AND c = '(' THEN v_depth := v_depth + 1;
            ELSIF NOT v_quote AND c = ')' THEN
                v_depth := v_depth - 1;
                IF v_depth = 0 AND i < length(v) THEN v_outer := false; EXIT; END IF;
            END IF;
        END LOOP;
        EXIT WHEN NOT v_outer;
        v := btrim(substr(v, 2, length(v) - 2));
    END LOOP;
    v_depth := 0; v_quote := false; v_start := 1;
    FOR i IN 1 .. length(v) LOOP
        c := substr(v, i, 1);
        IF c = '''' THEN v_quote := NOT v_quote;
        ELSIF NOT v_quote AND c = '(' THEN v_depth := v_depth + 1;
        ELSIF NOT v_quote AND c = ')' THEN v_depth := v_depth - 1;
        ELSIF NOT v_quote AND v_depth = 0 AND substr(v, i, 4) = ' OR ' THEN
            RETURN NEXT btrim(substr(v, v_start, i - v_start));
            v_start := i + 4;
        END IF;
    END LOOP;
    RETURN NEXT btrim(substr(v, v_start));
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_disjuncts(text) IS
    'The top-level OR branches of a deparsed expression (one element when it has none). pyretrieve.audit_policies checks each branch of a policy for its own identity check.';

-- Every function a function reaches through the calls it makes (pg_depend for SQL-standard
-- bodies, the pyretrieve.name( calls in any other body), up to six calls deep, with what each
-- reached body does: reads a custom setting (current_setting of anything but role, which
-- only names roles the login role may become), or checks an identity the caller cannot set.
CREATE VIEW pyretrieve.audit_function_reach WITH (security_invoker = true) AS
WITH RECURSIVE fn AS (
    SELECT p.oid, p.proname, p.pronamespace,
           CASE WHEN p.prosqlbody IS NOT NULL THEN pg_catalog.pg_get_functiondef(p.oid)
                ELSE coalesce(p.prosrc, '') END AS src
      FROM pg_catalog.pg_proc p
     WHERE p.pronamespace <> 'pg_catalog'::regnamespace
       AND p.pronamespace <> 'information_schema'::regnamespace
       AND p.prokind IN ('f', 'p')
), edge AS (
    SELECT d.objid AS caller, d.refobjid AS callee
      FROM pg_catalog.pg_depend d
     WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.refclassid = 'pg_catalog.pg_proc'::regclass
       AND d.objid <> d.refobjid
    UNION
    SELECT f.oid, g.oid
      FROM fn f
     CROSS JOIN LATERAL pg_catalog.regexp_matches(f.src, 'pyretrieve\.([a-z_][a-z0-9_]*)\s*\(', 'gi') AS m
      JOIN fn g ON g.pronamespace = 'pyretrieve'::regnamespace AND g.proname = pg_catalog.lower(m[1])
     WHERE g.oid <> f.oid
), reach (root, reached, depth, path) AS (
    SELECT f.oid, f.oid, 0, ARRAY[f.oid] FROM fn f
    UNION ALL
    SELECT r.root, e.callee, r.depth + 1, r.path || e.callee
      FROM reach r JOIN edge e ON e.caller = r.reached
     WHERE r.depth < 6 AND e.callee <> ALL (r.path)
)
SELECT r.root AS function_oid, r.reached AS reached_oid, min(r.depth) AS depth,
       bool_or(f.src ~* 'current_setting\s*\(\s*(?!''role''(::text)?\s*[,)])') AS reads_setting,
       bool_or(f.src ~* '\m(current_user|session_user|current_role|pg_has_role)\M|pyretrieve\.caller\s*\(') AS checks_identity
  FROM reach r JOIN fn f ON f.oid = r.reached
 GROUP BY r.root, r.reached;
COMMENT ON VIEW pyretrieve.audit_function_reach IS
    'For each function outside pg_catalog, every function it reaches through its calls (itself at depth 0, up to six calls deep), and whether each reached body reads a custom setting (current_setting of anything but role) or checks an identity the caller cannot set (current_user, session_user, current_role, pg_has_role, pyretrieve.caller()).';

CREATE VIEW pyretrieve.audit_policies WITH (security_invoker = true) AS
WITH pol AS (
    SELECT p.oid, p.polname, p.polcmd, p.polpermissive, p.polroles, p.polqual, p.polwithcheck,
           pg_catalog.format('%I.%I', n.nspname, c.relname) AS table_name,
           pg_catalog.pg_get_expr(p.polqual, p.polrelid) AS using_expr,
           pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid) AS with_check_expr
      FROM pg_catalog.pg_policy p
      JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'pyretrieve'
)
SELECT pol.table_name,
       pol.polname::text AS policy_name,
       CASE pol.polcmd WHEN '*' THEN 'ALL' WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT'
                       WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' END AS command,
       pol.polpermissive AS permissive,
       ARRAY(SELECT CASE WHEN r.oid = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(r.oid)::text END
               FROM pg_catalog.unnest(pol.polroles) AS r(oid) ORDER BY 1) AS roles,
       pol.using_expr,
       pol.with_check_expr,
       -- Calls evaluated once per row that (SELECT ...) would evaluate once per query: outside
       -- every sub-select, reading no column, not IMMUTABLE (those are folded at planning), and
       -- either a function of another schema (a SQL or PL function runs per row) or one of the
       -- look-ups pg_catalog does not cache per statement.
       ARRAY(SELECT DISTINCT pg_catalog.format('%I.%I(%s)', fn.nspname, f.proname,
                                                pg_catalog.oidvectortypes(f.proargtypes))
               FROM (SELECT * FROM pyretrieve.audit_expression_calls(pol.polqual)
                     UNION ALL
                     SELECT * FROM pyretrieve.audit_expression_calls(pol.polwithcheck)) x
               JOIN pg_catalog.pg_proc f ON f.oid = x.function_oid
               JOIN pg_catalog.pg_namespace fn ON fn.oid = f.pronamespace
              WHERE NOT x.in_subquery AND NOT x.reads_row AND f.provolatile <> 'i'
                AND (f.pronamespace <> 'pg_catalog'::regnamespace
                     OR f.proname = ANY (ARRAY['current_setting', 'pg_has_role', 'has_table_privilege',
                                               'has_column_privilege', 'has_any_column_privilege',
                                               'has_schema_privilege', 'has_function_privilege',
                                               'has_database_privilege', 'row_security_active']::name[]))
              ORDER BY 1) AS per_row_calls,
       -- The branches of the policy that read a custom setting (directly or through the
       -- functions they call, however deep) while neither the branch nor those functions
       -- check an identity the caller cannot set: each branch admits rows on its own, so a
       -- sound branch beside it (OR current_user IS NULL, say) cannot make up for it. Empty
       -- when every branch is sound.
       ARRAY(SELECT DISTINCT pg_catalog.format('%s branch %s', b.kind, b.n)
               FROM (SELECT 'USING' AS kind, d.n, d.branch
                       FROM pg_catalog.unnest(ARRAY(SELECT pyretrieve.audit_disjuncts(pol.using_expr)))
                            WITH ORDINALITY AS d(branch, n)
                     UNION ALL
                     SELECT 'WITH CHECK', d.n, d.branch
                       FROM pg_catalog.unnest(ARRAY(SELECT pyretrieve.audit_disjuncts(pol.with_check_expr)))
                            WITH ORDINALITY AS d(branch, n)) b
              CROSS JOIN LATERAL (
                    SELECT (b.branch ~* 'current_setting\s*\(\s*(?!''role''(::text)?\s*[,)])'
                            OR coalesce(bool_or(r.reads_setting), false)) AS reads,
                           (b.branch ~* '\m(current_user|session_user|current_role|pg_has_role)\M'
                            OR coalesce(bool_or(r.checks_identity), false)) AS checks
                      FROM pg_catalog.pg_proc f
                      JOIN pyretrieve.audit_function_reach r ON r.function_oid = f.oid
                     WHERE f.pronamespace = 'pyretrieve'::regnamespace
                       AND b.branch ~* ('(^|[^a-z0-9_.])(pyretrieve\.)?' || f.proname || '\s*\(')) x
              WHERE x.reads AND NOT x.checks
              ORDER BY 1) AS trusts_settings_in,
       -- Functions whose result depends on a custom setting (through any call) and that the
       -- policy reads in more than one sub-select: PostgreSQL evaluates each sub-select (an
       -- InitPlan) lazily, when a qual first needs it, so a caller that changes the setting
       -- part-way through a scan mixes two answers in one row's check.
       ARRAY(SELECT pg_catalog.format('%I.%I(%s)', fn.nspname, f.proname, pg_catalog.oidvectortypes(f.proargtypes))
               FROM (SELECT x.function_oid
                       FROM (SELECT * FROM pyretrieve.audit_expression_calls(pol.polqual)
                             UNION ALL
                             SELECT * FROM pyretrieve.audit_expression_calls(pol.polwithcheck)) x
                      WHERE x.in_subquery
                      GROUP BY x.function_oid
                     HAVING pg_catalog.count(*) > 1) twice
               JOIN pg_catalog.pg_proc f ON f.oid = twice.function_oid
               JOIN pg_catalog.pg_namespace fn ON fn.oid = f.pronamespace
              WHERE f.pronamespace <> 'pg_catalog'::regnamespace
                AND EXISTS (SELECT FROM pyretrieve.audit_function_reach r
                             WHERE r.function_oid = f.oid AND r.reads_setting)
              ORDER BY 1) AS reads_binding_twice
  FROM pol;
COMMENT ON VIEW pyretrieve.audit_policies IS
    'Each row-level security policy of the pyretrieve schema: command, roles, permissive or restrictive, USING and WITH CHECK text, the calls it evaluates once per row where (SELECT ...) would evaluate them once per query (per_row_calls), where a branch trusts a custom setting without an identity check the caller cannot set (trusts_settings_in: each top-level OR branch and every function it reaches are searched for current_setting and for current_user, session_user, current_role, pg_has_role or pyretrieve.caller()), and the setting-dependent functions it reads in more than one sub-select (reads_binding_twice).';

CREATE VIEW pyretrieve.audit_privileges WITH (security_invoker = true) AS
SELECT 'schema'::text AS object_type,
       pg_catalog.quote_ident(n.nspname) AS object,
       NULL::text AS column_name,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END AS grantee,
       a.privilege_type AS privilege,
       a.is_grantable AS grantable,
       pg_catalog.pg_get_userbyid(a.grantor)::text AS grantor,
       a.grantee = n.nspowner AS grantee_is_owner
  FROM pg_catalog.pg_namespace n,
       LATERAL pg_catalog.aclexplode(coalesce(n.nspacl, pg_catalog.acldefault('n', n.nspowner))) a
 WHERE n.nspname = 'pyretrieve'
UNION ALL
SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view'
                      WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence'
                      ELSE 'foreign table' END,
       pg_catalog.format('%I.%I', n.nspname, c.relname),
       NULL::text,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END,
       a.privilege_type,
       a.is_grantable,
       pg_catalog.pg_get_userbyid(a.grantor)::text,
       a.grantee = c.relowner
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace,
       LATERAL pg_catalog.aclexplode(coalesce(c.relacl, pg_catalog.acldefault(
           CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char", c.relowner))) a
 WHERE n.nspname = 'pyretrieve' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
UNION ALL
SELECT 'column',
       pg_catalog.format('%I.%I', n.nspname, c.relname),
       t.attname::text,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END,
       a.privilege_type,
       a.is_grantable,
       pg_catalog.pg_get_userbyid(a.grantor)::text,
       a.grantee = c.relowner
  FROM pg_catalog.pg_attribute t
  JOIN pg_catalog.pg_class c ON c.oid = t.attrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace,
       LATERAL pg_catalog.aclexplode(t.attacl) a
 WHERE n.nspname = 'pyretrieve' AND t.attacl IS NOT NULL AND NOT t.attisdropped;
COMMENT ON VIEW pyretrieve.audit_privileges IS
    'Privileges on the pyretrieve schema, its relations and their columns, one row per grantee and privilege (PUBLIC for every role), the owner''s implicit ones included (grantee_is_owner). TRUNCATE and REFERENCES matter most: row-level security governs neither.';

CREATE VIEW pyretrieve.audit_functions WITH (security_invoker = true) AS
SELECT pg_catalog.format('%I.%I(%s)', n.nspname, p.proname,
                         pg_catalog.oidvectortypes(p.proargtypes)) AS function_name,
       CASE p.prokind WHEN 'f' THEN 'function' WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate'
                      ELSE 'window' END AS kind,
       pg_catalog.pg_get_userbyid(p.proowner)::text AS owner,
       l.lanname::text AS language,
       CASE p.provolatile WHEN 'i' THEN 'IMMUTABLE' WHEN 's' THEN 'STABLE' ELSE 'VOLATILE' END AS volatility,
       p.prosecdef AS security_definer,
       (SELECT pg_catalog.substr(s, 13) FROM pg_catalog.unnest(p.proconfig) AS s
         WHERE s LIKE 'search_path=%' LIMIT 1) AS search_path,
       p.proleakproof AS leakproof,
       ARRAY(SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                                  ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END
               FROM pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
              WHERE a.privilege_type = 'EXECUTE'
              ORDER BY 1) AS executable_by,
       EXISTS (SELECT FROM pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
                WHERE a.privilege_type = 'EXECUTE' AND a.grantee = 0) AS public_execute,
       pg_catalog.obj_description(p.oid, 'pg_proc') AS description
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
  JOIN pg_catalog.pg_language l ON l.oid = p.prolang
 WHERE n.nspname = 'pyretrieve';
COMMENT ON VIEW pyretrieve.audit_functions IS
    'Each function of the pyretrieve schema: owner, SECURITY DEFINER, the search_path pinned in its configuration (NULL when none), LEAKPROOF, volatility, who may execute it (PUBLIC for every role) and its description, which states the reason for a SECURITY DEFINER.';

CREATE VIEW pyretrieve.audit_views WITH (security_invoker = true) AS
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) AS view_name,
       pg_catalog.pg_get_userbyid(c.relowner)::text AS owner,
       EXISTS (SELECT FROM pg_catalog.unnest(c.reloptions) AS o
                WHERE pg_catalog.lower(o) ~ '^security_invoker=(t|tr|tru|true|y|ye|yes|on|1)$') AS security_invoker,
       EXISTS (SELECT FROM pg_catalog.unnest(c.reloptions) AS o
                WHERE pg_catalog.lower(o) ~ '^security_barrier=(t|tr|tru|true|y|ye|yes|on|1)$') AS security_barrier
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'pyretrieve' AND c.relkind = 'v';
COMMENT ON VIEW pyretrieve.audit_views IS
    'Each view of the pyretrieve schema with its owner and security_invoker (without it a view reads its tables with the owner''s rights and policies) and security_barrier options.';

CREATE VIEW pyretrieve.audit_keys WITH (security_invoker = true) AS
WITH k AS (
    SELECT i.indexrelid, t.oid AS relid, t.relowner, t.relacl, i.indisprimary,
           pg_catalog.format('%I.%I', n.nspname, t.relname) AS table_name,
           pg_catalog.format('%I.%I', n.nspname, ic.relname) AS index_name,
           EXISTS (SELECT FROM pg_catalog.pg_constraint co WHERE co.conindid = i.indexrelid
                      AND co.contype IN ('p', 'u')) AS is_constraint,
           ARRAY(SELECT i.indkey[g.pos] FROM pg_catalog.generate_series(0, i.indnkeyatts - 1) AS g(pos)
                  ORDER BY g.pos) AS attnums
      FROM pg_catalog.pg_index i
      JOIN pg_catalog.pg_class t ON t.oid = i.indrelid
      JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
      JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace
     WHERE n.nspname = 'pyretrieve' AND i.indisunique AND t.relkind IN ('r', 'p')
)
SELECT k.table_name,
       k.index_name,
       CASE WHEN k.indisprimary THEN 'PRIMARY KEY' WHEN k.is_constraint THEN 'UNIQUE'
            ELSE 'UNIQUE INDEX' END AS kind,
       ARRAY(SELECT coalesce(a.attname::text, '(expression)')
               FROM pg_catalog.unnest(k.attnums) WITH ORDINALITY AS u(attnum, ord)
               LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = k.relid AND a.attnum = u.attnum
              ORDER BY u.ord) AS key_columns,
       EXISTS (SELECT FROM pg_catalog.pg_attribute a
                WHERE a.attrelid = k.relid AND a.attname = 'workspace_id' AND NOT a.attisdropped) AS table_has_workspace_id,
       coalesce((SELECT a.attname = 'workspace_id' FROM pg_catalog.pg_attribute a
                  WHERE a.attrelid = k.relid AND a.attnum = k.attnums[1]), false) AS leads_with_workspace_id,
       -- Roles other than the owner that may choose a value of the key (other than
       -- workspace_id): INSERT or UPDATE on the table, or on one of those columns.
       ARRAY(SELECT DISTINCT CASE WHEN x.grantee = 0 THEN 'PUBLIC'
                                  ELSE pg_catalog.pg_get_userbyid(x.grantee)::text END
               FROM (SELECT a.grantee, a.privilege_type
                       FROM pg_catalog.aclexplode(coalesce(k.relacl, pg_catalog.acldefault('r', k.relowner))) a
                     UNION ALL
                     SELECT a.grantee, a.privilege_type
                       FROM pg_catalog.pg_attribute t,
                            LATERAL pg_catalog.aclexplode(t.attacl) a
                      WHERE t.attrelid = k.relid AND t.attacl IS NOT NULL
                        AND t.attnum = ANY (k.attnums) AND t.attname <> 'workspace_id') x
              WHERE x.privilege_type IN ('INSERT', 'UPDATE') AND x.grantee <> k.relowner
              ORDER BY 1) AS writable_by
  FROM k;
COMMENT ON VIEW pyretrieve.audit_keys IS
    'Each primary key and unique index on a pyretrieve table: its key columns, whether it leads with workspace_id (so a unique violation cannot reveal another workspace''s key), and which roles other than the owner can choose a value of its other columns (writable_by).';

CREATE VIEW pyretrieve.audit_roles WITH (security_invoker = true) AS
WITH RECURSIVE edge AS (
    SELECT DISTINCT m.member, m.roleid FROM pg_catalog.pg_auth_members m
), reach (member, target, path) AS (
    SELECT e.member, e.roleid, ARRAY[e.member, e.roleid] FROM edge e
    UNION ALL
    SELECT r.member, e.roleid, r.path || e.roleid
      FROM reach r JOIN edge e ON e.member = r.target
     WHERE e.roleid <> ALL (r.path)
), named AS (
    SELECT r.member, r.target, t.rolname AS target_name, t.rolsuper, t.rolbypassrls,
           pg_catalog.cardinality(r.path) AS hops,
           pg_catalog.array_to_string(ARRAY(SELECT pg_catalog.pg_get_userbyid(u.oid)::text
                                              FROM pg_catalog.unnest(r.path) WITH ORDINALITY AS u(oid, ord)
                                             ORDER BY u.ord), ' -> ') AS path_text
      FROM reach r JOIN pg_catalog.pg_roles t ON t.oid = r.target
), per_role AS (
    SELECT r.oid, r.rolname::text AS role_name, r.rolcanlogin, r.rolsuper, r.rolbypassrls,
           ARRAY(SELECT g.g FROM pg_catalog.unnest(ARRAY['pyretrieve_admin', 'pyretrieve_reader',
                                                         'pyretrieve_writer']) AS g(g)
                  WHERE g.g = r.rolname
                     OR EXISTS (SELECT FROM named x WHERE x.member = r.oid AND x.target_name = g.g)
                  ORDER BY 1) AS app_groups,
           (SELECT x.path_text FROM named x WHERE x.member = r.oid AND x.rolsuper
             ORDER BY x.hops, x.path_text LIMIT 1) AS superuser_via,
           (SELECT x.path_text FROM named x WHERE x.member = r.oid AND x.rolbypassrls
             ORDER BY x.hops, x.path_text LIMIT 1) AS bypassrls_via,
           (SELECT x.path_text FROM named x
             WHERE x.member = r.oid AND x.target_name IN ('pyretrieve_owner', 'pyretrieve_api')
             ORDER BY x.hops, x.path_text LIMIT 1) AS owner_via
      FROM pg_catalog.pg_roles r
     WHERE r.rolname !~ '^pg_'
)
SELECT p.role_name,
       p.rolcanlogin AS can_login,
       p.rolsuper AS superuser,
       p.rolbypassrls AS bypassrls,
       p.rolsuper OR p.superuser_via IS NOT NULL AS reaches_superuser,
       p.superuser_via,
       p.rolbypassrls OR p.bypassrls_via IS NOT NULL AS reaches_bypassrls,
       p.bypassrls_via,
       p.app_groups,
       p.role_name = 'pyretrieve_owner' OR pg_catalog.cardinality(p.app_groups) > 0 AS bound_by_rls,
       p.role_name <> 'pyretrieve_owner'
           AND (p.rolsuper OR p.superuser_via IS NOT NULL OR p.owner_via IS NOT NULL) AS can_become_owner,
       p.owner_via,
       (SELECT pg_catalog.count(*) FROM pyretrieve.audit_objects o WHERE o.owner = p.role_name)::integer AS owned_objects
  FROM per_role p
 WHERE p.role_name IN ('pyretrieve_owner', 'pyretrieve_reader', 'pyretrieve_writer', 'pyretrieve_admin')
    OR pg_catalog.cardinality(p.app_groups) > 0
    OR p.rolsuper OR p.superuser_via IS NOT NULL
    OR p.rolbypassrls OR p.bypassrls_via IS NOT NULL
    OR p.owner_via IS NOT NULL
    OR EXISTS (SELECT FROM pyretrieve.audit_objects o WHERE o.owner = p.role_name);
COMMENT ON VIEW pyretrieve.audit_roles IS
    'The roles that matter to pyretrieve: the owner and group roles, every member of a group (app_groups, through any chain of memberships), every role that reaches SUPERUSER or BYPASSRLS directly or through memberships (the shortest chain in superuser_via / bypassrls_via), the roles that can SET ROLE to pyretrieve_owner or pyretrieve_api (owner_via), and the owners of schema objects. Memberships are followed over pg_auth_members whatever their INHERIT and SET options, so a reach may be overstated, never missed.';

CREATE VIEW pyretrieve.audit_access WITH (security_invoker = true) AS
SELECT p.rolname::text AS principal,
       h.rolname::text AS granted_to,
       p.oid <> h.oid AS through_membership,
       g.workspace_id::text AS workspace_id,
       g.project_id::text AS project_id,
       g.purpose::text AS purpose,
       pg_catalog.pg_has_role(p.oid, 'pyretrieve_reader', 'USAGE') AS can_read,
       pg_catalog.pg_has_role(p.oid, 'pyretrieve_writer', 'USAGE') AS can_write,
       g.ceiling,
       g.max_age,
       g.semantic_policy,
       g.expires_at,
       g.expires_at IS NULL OR g.expires_at > pg_catalog.now() AS live,
       g.grant_id
  FROM pyretrieve.grants g
  JOIN pg_catalog.pg_roles h ON h.oid = g.principal
  JOIN pg_catalog.pg_roles p
    ON p.rolname !~ '^pg_' AND NOT p.rolsuper AND pg_catalog.pg_has_role(p.oid, h.oid, 'USAGE');
COMMENT ON VIEW pyretrieve.audit_access IS
    'The access matrix: for each principal (a role that holds a grant or inherits one, resolved with pg_has_role(..., ''USAGE'') exactly as the policies resolve it), each workspace/project and purpose it is granted, whether it may read (member of pyretrieve_reader) and write (member of pyretrieve_writer), the ceiling, max_age, semantic policy, expiry and whether the grant is live now. Superusers are left out: they bypass every policy (see audit_roles). Complete only for admins and superusers, who see every grant.';

CREATE VIEW pyretrieve.audit_findings WITH (security_invoker = true) AS
WITH f (severity, code, object_type, object, evidence, fix) AS (
    -- Row-level security on every table, forced, with policies.
    SELECT 'error', 'rls_disabled', 'table', t.table_name,
           'row-level security is disabled: every role with a table privilege reads and writes all rows',
           pg_catalog.format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;', t.table_name)
      FROM pyretrieve.audit_tables t WHERE NOT t.rls_enabled
    UNION ALL
    SELECT 'error', 'rls_not_forced', 'table', t.table_name,
           pg_catalog.format('row-level security is not forced: the owner %s, and every SECURITY DEFINER function it owns, bypasses the policies', t.owner),
           pg_catalog.format('ALTER TABLE %s FORCE ROW LEVEL SECURITY;', t.table_name)
      FROM pyretrieve.audit_tables t WHERE t.rls_enabled AND NOT t.rls_forced
    UNION ALL
    SELECT 'warning', 'table_without_policy', 'table', t.table_name,
           CASE WHEN t.rls_enabled THEN 'no policy: every query by a role other than the owner returns no rows'
                ELSE 'no policy, and row-level security is disabled' END,
           pg_catalog.format('CREATE POLICY ... ON %s TO <the group roles that use it> USING (...); or drop the table', t.table_name)
      FROM pyretrieve.audit_tables t WHERE t.policies = 0 AND t.partition_of IS NULL
    UNION ALL
    -- Policies.
    SELECT 'warning', 'overlapping_permissive_policies', 'table', a.table_name,
           pg_catalog.format('policies %s (%s) and %s (%s) are both permissive for %s: a row either one allows is allowed',
                             a.policy_name, a.command, b.policy_name, b.command,
                             pg_catalog.array_to_string(
                                 CASE WHEN 'PUBLIC' = ANY (a.roles) THEN b.roles
                                      WHEN 'PUBLIC' = ANY (b.roles) THEN a.roles
                                      ELSE ARRAY(SELECT r FROM pg_catalog.unnest(a.roles) AS r
                                                  WHERE r = ANY (b.roles) ORDER BY 1) END, ', ')),
           pg_catalog.format('merge %s and %s into one policy, or recreate the narrower condition AS RESTRICTIVE so that both must pass', a.policy_name, b.policy_name)
      FROM pyretrieve.audit_policies a
      JOIN pyretrieve.audit_policies b
        ON b.table_name = a.table_name AND a.policy_name < b.policy_name
     WHERE a.permissive AND b.permissive
       AND (a.command = b.command OR a.command = 'ALL' OR b.command = 'ALL')
       AND (a.roles && b.roles OR 'PUBLIC' = ANY (a.roles) OR 'PUBLIC' = ANY (b.roles))
    UNION ALL
    SELECT 'error', 'policy_trusts_setting', 'policy',
           pg_catalog.format('%s on %s', p.policy_name, p.table_name),
           pg_catalog.format('reads current_setting() (in %s) and checks no identity the caller cannot set (current_user, session_user, pg_has_role): any role can change a custom setting with set_config()',
                             pg_catalog.array_to_string(p.trusts_settings_in, ', ')),
           'take the identity from current_user (SET ROLE from an authenticator) and let the setting only select among what that identity was granted, e.g. add AND pg_has_role(<the role granted this row>, ''USAGE'')'
      FROM pyretrieve.audit_policies p WHERE pg_catalog.cardinality(p.trusts_settings_in) > 0
    UNION ALL
    SELECT 'warning', 'policy_per_row_call', 'policy',
           pg_catalog.format('%s on %s', p.policy_name, p.table_name),
           pg_catalog.format('calls %s once per row: outside a sub-select and independent of the row',
                             pg_catalog.array_to_string(p.per_row_calls, ', ')),
           'write each such call as a sub-select, (SELECT f(...)), so the planner evaluates it once per query (an InitPlan)'
      FROM pyretrieve.audit_policies p WHERE pg_catalog.cardinality(p.per_row_calls) > 0
    UNION ALL
    SELECT 'error', 'policy_reads_binding_twice', 'policy',
           pg_catalog.format('%s on %s', p.policy_name, p.table_name),
           pg_catalog.format('reads %s, whose result depends on a custom setting, in more than one sub-select: each sub-select is an InitPlan that PostgreSQL evaluates when a qual first needs it, so a caller that changes the setting part-way through a scan (set_config in a LATERAL, or between FETCHes of a cursor) checks one row against two bindings',
                             pg_catalog.array_to_string(p.reads_binding_twice, ', ')),
           'bind one decision per transaction in a table keyed by the transaction (never by a setting) and read it there; or read every field of the binding in one sub-select'
      FROM pyretrieve.audit_policies p WHERE pg_catalog.cardinality(p.reads_binding_twice) > 0
    UNION ALL
    SELECT 'error', 'policy_true_for_principals', 'policy',
           pg_catalog.format('%s on %s', p.policy_name, p.table_name),
           pg_catalog.format('%s is %s for %s: every row of every workspace',
                             CASE WHEN p.using_expr = 'true' THEN 'USING' ELSE 'WITH CHECK' END,
                             'true', pg_catalog.array_to_string(p.roles, ', ')),
           pg_catalog.format('DROP POLICY %I ON %s; principals reach the tables only through the SQL API (pyretrieve_api)', p.policy_name, p.table_name)
      FROM pyretrieve.audit_policies p
     WHERE (p.using_expr = 'true' OR p.with_check_expr = 'true')
       AND EXISTS (SELECT FROM pg_catalog.unnest(p.roles) AS x(r)
                    WHERE x.r = 'PUBLIC'
                       OR x.r IN (SELECT ar.role_name FROM pyretrieve.audit_roles ar
                                   WHERE pg_catalog.cardinality(ar.app_groups) > 0))
    UNION ALL
    -- The function-only door: principals hold no privilege on any table, view or sequence.
    SELECT 'error', 'principal_table_privilege', pr.object_type,
           pr.object || coalesce('.' || pg_catalog.quote_ident(pr.column_name), ''),
           pg_catalog.format('%s holds %s: principals must reach the data only through the SQL API, with row-level security as the second wall', pr.grantee, pr.privilege),
           pg_catalog.format('REVOKE %s%s ON %s FROM %s;', pr.privilege,
                             coalesce(' (' || pg_catalog.quote_ident(pr.column_name) || ')', ''), pr.object,
                             CASE WHEN pr.grantee = 'PUBLIC' THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pr.grantee) END)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.object_type IN ('table', 'view', 'materialized view', 'sequence', 'foreign table', 'column')
       AND NOT pr.grantee_is_owner
       AND (pr.grantee = 'PUBLIC'
            OR pr.grantee IN (SELECT ar.role_name FROM pyretrieve.audit_roles ar
                               WHERE pg_catalog.cardinality(ar.app_groups) > 0))
    UNION ALL
    SELECT 'error', 'decisions_mutable', pr.object_type, pr.object,
           pg_catalog.format('%s holds %s on an audit log that must be append-only', pr.grantee, pr.privilege),
           pg_catalog.format('REVOKE %s ON %s FROM %s;', pr.privilege, pr.object,
                             CASE WHEN pr.grantee = 'PUBLIC' THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pr.grantee) END)
      FROM pyretrieve.audit_privileges pr
     WHERE (pr.object IN ('pyretrieve.decisions', 'pyretrieve.write_bindings')
            OR pr.object IN (SELECT t.table_name FROM pyretrieve.audit_tables t
                              WHERE t.partition_of IN ('pyretrieve.decisions', 'pyretrieve.write_bindings')))
       AND pr.privilege IN ('UPDATE', 'DELETE', 'TRUNCATE') AND NOT pr.grantee_is_owner
    UNION ALL
    SELECT 'error', 'decisions_mutable', 'policy',
           pg_catalog.format('%s on %s', p.policy_name, p.table_name),
           pg_catalog.format('a %s policy on an audit log that must be append-only', p.command),
           pg_catalog.format('DROP POLICY %I ON %s;', p.policy_name, p.table_name)
      FROM pyretrieve.audit_policies p
     WHERE (p.table_name IN ('pyretrieve.decisions', 'pyretrieve.write_bindings')
            OR p.table_name IN (SELECT t.table_name FROM pyretrieve.audit_tables t
                                 WHERE t.partition_of IN ('pyretrieve.decisions', 'pyretrieve.write_bindings')))
       AND p.command IN ('UPDATE', 'DELETE', 'ALL')
    UNION ALL
    SELECT 'error', 'content_updatable', pr.object_type,
           pr.object || coalesce('.' || pg_catalog.quote_ident(pr.column_name), ''),
           pg_catalog.format('%s may UPDATE %s: a fragment''s body and classification are fixed once written (new content supersedes), and its digest, postings and embeddings are derived from them',
                             pr.grantee, coalesce(pr.column_name, 'every column')),
           pg_catalog.format('REVOKE UPDATE%s ON %s FROM %s;',
                             coalesce(' (' || pg_catalog.quote_ident(pr.column_name) || ')', ''), pr.object,
                             CASE WHEN pr.grantee = 'PUBLIC' THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pr.grantee) END)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.object = 'pyretrieve.fragments' AND pr.privilege = 'UPDATE' AND NOT pr.grantee_is_owner
       AND (pr.column_name IS NULL OR pr.column_name IN ('body', 'classification', 'workspace_id', 'project_id'))
    UNION ALL
    SELECT 'error', 'principal_can_become_owner', 'role', r.role_name,
           pg_catalog.format('%s (%s) can SET ROLE to %s: as that role it reaches the tables past the SQL API',
                             r.role_name, pg_catalog.array_to_string(r.app_groups, ', '), r.owner_via),
           pg_catalog.format('REVOKE %I FROM %I; (the first membership of %s)',
                             pg_catalog.split_part(r.owner_via, ' -> ', 2), r.role_name, r.owner_via)
      FROM pyretrieve.audit_roles r
     WHERE pg_catalog.cardinality(r.app_groups) > 0 AND NOT r.can_login AND r.owner_via IS NOT NULL
       AND r.role_name NOT IN ('pyretrieve_owner', 'pyretrieve_api')
    UNION ALL
    -- Doors outside the schema: a definer function or an owner-rights view elsewhere that
    -- reads pyretrieve's tables and that principals may use.
    SELECT 'error', 'definer_outside_schema', 'function',
           pg_catalog.format('%I.%I(%s)', n.nspname, f.proname, pg_catalog.oidvectortypes(f.proargtypes)),
           pg_catalog.format('SECURITY DEFINER (runs as %s) outside the pyretrieve schema, reads pyretrieve objects and is executable by %s',
                             pg_catalog.pg_get_userbyid(f.proowner),
                             CASE WHEN pg_catalog.has_function_privilege('public', f.oid, 'EXECUTE') THEN 'PUBLIC'
                                  ELSE 'a principal group' END),
           pg_catalog.format('DROP FUNCTION %I.%I(%s); or REVOKE EXECUTE ON it FROM PUBLIC and the principals: the SQL API is the only door',
                             n.nspname, f.proname, pg_catalog.oidvectortypes(f.proargtypes))
      FROM pg_catalog.pg_proc f
      JOIN pg_catalog.pg_namespace n ON n.oid = f.pronamespace
     WHERE f.prosecdef AND n.nspname NOT IN ('pyretrieve', 'pg_catalog', 'information_schema')
       AND (coalesce(f.prosrc, '') ~* '\mpyretrieve\.'
            OR EXISTS (SELECT FROM pg_catalog.pg_depend d
                        JOIN pg_catalog.pg_class c ON c.oid = d.refobjid
                       WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = f.oid
                         AND d.refclassid = 'pg_catalog.pg_class'::regclass
                         AND c.relnamespace = 'pyretrieve'::regnamespace))
       AND (pg_catalog.has_function_privilege('public', f.oid, 'EXECUTE')
            OR pg_catalog.has_function_privilege('pyretrieve_reader', f.oid, 'EXECUTE')
            OR pg_catalog.has_function_privilege('pyretrieve_writer', f.oid, 'EXECUTE')
            OR pg_catalog.has_function_privilege('pyretrieve_admin', f.oid, 'EXECUTE'))
    UNION ALL
    SELECT 'error', 'view_outside_schema', 'view',
           pg_catalog.format('%I.%I', n.nspname, v.relname),
           pg_catalog.format('a view outside the pyretrieve schema reads pyretrieve tables with its owner''s (%s) rights and policies, not the caller''s, and principals may read it',
                             pg_catalog.pg_get_userbyid(v.relowner)),
           pg_catalog.format('ALTER VIEW %I.%I SET (security_invoker = true); or DROP VIEW it',
                             n.nspname, v.relname)
      FROM pg_catalog.pg_class v
      JOIN pg_catalog.pg_namespace n ON n.oid = v.relnamespace
     WHERE v.relkind = 'v' AND n.nspname NOT IN ('pyretrieve', 'pg_catalog', 'information_schema')
       AND NOT coalesce('security_invoker=true' = ANY (v.reloptions)
                        OR 'security_invoker=on' = ANY (v.reloptions), false)
       AND EXISTS (SELECT FROM pg_catalog.pg_rewrite w
                     JOIN pg_catalog.pg_depend d
                       ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = w.oid
                      AND d.refclassid = 'pg_catalog.pg_class'::regclass
                     JOIN pg_catalog.pg_class c ON c.oid = d.refobjid
                    WHERE w.ev_class = v.oid AND c.relnamespace = 'pyretrieve'::regnamespace)
       AND (pg_catalog.has_table_privilege('public', v.oid, 'SELECT')
            OR pg_catalog.has_table_privilege('pyretrieve_reader', v.oid, 'SELECT')
            OR pg_catalog.has_table_privilege('pyretrieve_writer', v.oid, 'SELECT')
            OR pg_catalog.has_table_privilege('pyretrieve_admin', v.oid, 'SELECT'))
    UNION ALL
    -- Keys.
    SELECT CASE WHEN pg_catalog.cardinality(k.writable_by) > 0 THEN 'warning' ELSE 'info' END,
           'unique_key_not_workspace_first', 'index', k.index_name,
           CASE WHEN pg_catalog.cardinality(k.writable_by) > 0
                THEN pg_catalog.format('%s (%s) on %s does not start with workspace_id and %s may write its columns: a unique violation reveals that another workspace holds the key',
                                       k.kind, pg_catalog.array_to_string(k.key_columns, ', '), k.table_name,
                                       pg_catalog.array_to_string(k.writable_by, ', '))
                ELSE pg_catalog.format('%s (%s) on %s does not start with workspace_id, but no role other than the owner can write its columns (their values come from defaults), so no caller can provoke a violation',
                                       k.kind, pg_catalog.array_to_string(k.key_columns, ', '), k.table_name) END,
           CASE WHEN pg_catalog.cardinality(k.writable_by) > 0
                THEN pg_catalog.format('recreate the key as (workspace_id, %s)',
                                       pg_catalog.array_to_string(pg_catalog.array_remove(k.key_columns, 'workspace_id'), ', '))
                ELSE 'none while its columns stay unwritable; lead it with workspace_id if they ever become writable' END
      FROM pyretrieve.audit_keys k
     WHERE k.table_has_workspace_id AND NOT k.leads_with_workspace_id
    UNION ALL
    -- Functions.
    SELECT 'error', 'definer_without_search_path', 'function', fn.function_name,
           pg_catalog.format('SECURITY DEFINER (runs as %s) without a pinned search_path: the caller''s search_path resolves its names', fn.owner),
           pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp;', fn.function_name)
      FROM pyretrieve.audit_functions fn WHERE fn.security_definer AND fn.search_path IS NULL
    UNION ALL
    -- A principal may turn index scans off (or make sequential scans look cheap) before it
    -- calls: a function that plans with the caller's settings then reads every tenant's rows.
    SELECT 'warning', 'definer_follows_caller_planner', 'function', fn.function_name,
           'SECURITY DEFINER, executable by a principal group, and planned with the caller''s settings: a caller that turns index scans off makes its statements scan every tenant''s rows whole, a time that grows with what the other tenants hold',
           pg_catalog.format('ALTER FUNCTION %1$s SET enable_seqscan = off; ALTER FUNCTION %1$s SET enable_indexscan = on; ALTER FUNCTION %1$s SET enable_bitmapscan = on;', fn.function_name)
      FROM pyretrieve.audit_functions fn
      JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure(fn.function_name)
     WHERE fn.security_definer
       AND (pg_catalog.has_function_privilege('pyretrieve_reader', p.oid, 'EXECUTE')
            OR pg_catalog.has_function_privilege('pyretrieve_writer', p.oid, 'EXECUTE'))
       AND NOT coalesce(p.proconfig, '{}') @> ARRAY['enable_seqscan=off', 'enable_indexscan=on',
                                                    'enable_bitmapscan=on']
    UNION ALL
    -- How a function's statements are planned is its own choice, never the caller's or the
    -- plan cache's: planned for the values at hand they follow statistics that lag a growing
    -- scope, planned generically they keep a plan made when the table was small.
    SELECT 'warning', 'definer_plan_cache_mode_unpinned', 'function', fn.function_name,
           'SECURITY DEFINER, executable by a principal group, and planned as the caller''s plan_cache_mode and the plan cache decide: for each call''s values at first, whose statistics lag a growing scope (planned for a scope they take for one row, a look-up of one key read the scope whole), then generically',
           pg_catalog.format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan; (or force_custom_plan, with the reason in a comment)', fn.function_name)
      FROM pyretrieve.audit_functions fn
      JOIN pg_catalog.pg_proc p ON p.oid = pg_catalog.to_regprocedure(fn.function_name)
     WHERE fn.security_definer
       AND (pg_catalog.has_function_privilege('pyretrieve_reader', p.oid, 'EXECUTE')
            OR pg_catalog.has_function_privilege('pyretrieve_writer', p.oid, 'EXECUTE'))
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proconfig) AS c(setting)
                        WHERE c.setting LIKE 'plan\_cache\_mode=force\_%')
    UNION ALL
    SELECT 'warning', 'definer_search_path_unsafe', 'function', fn.function_name,
           pg_catalog.format('SECURITY DEFINER with search_path = %s, which does not end with pg_temp: temporary objects are searched first', fn.search_path),
           pg_catalog.format('ALTER FUNCTION %s SET search_path = <trusted schemas>, pg_temp;', fn.function_name)
      FROM pyretrieve.audit_functions fn
     WHERE fn.security_definer AND fn.search_path IS NOT NULL
       AND fn.search_path !~ '(^|,)\s*"?pg_temp"?\s*$'
    UNION ALL
    SELECT 'error', 'definer_public_execute', 'function', fn.function_name,
           pg_catalog.format('SECURITY DEFINER (runs as %s) and executable by PUBLIC, that is by every role', fn.owner),
           pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC; then GRANT EXECUTE to the roles that need it', fn.function_name)
      FROM pyretrieve.audit_functions fn WHERE fn.security_definer AND fn.public_execute
    UNION ALL
    SELECT 'info', 'security_definer', 'function', fn.function_name,
           pg_catalog.format('SECURITY DEFINER: runs as %s, search_path = %s, executable by %s. Reason: %s',
                             fn.owner, coalesce(fn.search_path, '(none)'),
                             pg_catalog.array_to_string(fn.executable_by, ', '),
                             coalesce(fn.description, '(no COMMENT ON FUNCTION states one)')),
           'none while the reason holds; keep EXECUTE limited to the roles listed'
      FROM pyretrieve.audit_functions fn WHERE fn.security_definer
    UNION ALL
    SELECT 'warning', 'leakproof_function', 'function', fn.function_name,
           'LEAKPROOF: the planner may run it on rows before the policies filter them',
           pg_catalog.format('ALTER FUNCTION %s NOT LEAKPROOF; unless it provably cannot raise an error or reveal its arguments', fn.function_name)
      FROM pyretrieve.audit_functions fn WHERE fn.leakproof
    UNION ALL
    -- Views.
    SELECT 'error', 'view_without_security_invoker', 'view', v.view_name,
           pg_catalog.format('the view reads its tables as its owner %s, with the owner''s privileges and policies, not the caller''s', v.owner),
           pg_catalog.format('ALTER VIEW %s SET (security_invoker = true);', v.view_name)
      FROM pyretrieve.audit_views v WHERE NOT v.security_invoker
    UNION ALL
    -- Privileges RLS does not govern, and PUBLIC.
    SELECT 'error', 'truncate_granted', pr.object_type, pr.object,
           pg_catalog.format('%s holds TRUNCATE, which ignores row-level security: it can empty every workspace at once', pr.grantee),
           pg_catalog.format('REVOKE TRUNCATE ON %s FROM %s;', pr.object, pr.grantee)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.privilege = 'TRUNCATE' AND NOT pr.grantee_is_owner
    UNION ALL
    SELECT 'warning', 'references_granted', pr.object_type,
           pr.object || coalesce('.' || pg_catalog.quote_ident(pr.column_name), ''),
           pg_catalog.format('%s holds REFERENCES: a foreign key it creates can probe which keys exist in every workspace (foreign-key checks ignore row-level security)', pr.grantee),
           pg_catalog.format('REVOKE REFERENCES%s ON %s FROM %s;',
                             coalesce(' (' || pg_catalog.quote_ident(pr.column_name) || ')', ''), pr.object, pr.grantee)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.privilege = 'REFERENCES' AND NOT pr.grantee_is_owner
    UNION ALL
    SELECT 'warning', 'public_privilege', pr.object_type,
           pr.object || coalesce('.' || pg_catalog.quote_ident(pr.column_name), ''),
           pg_catalog.format('PUBLIC (every role) holds %s', pr.privilege),
           pg_catalog.format('REVOKE %s%s ON %s%s FROM PUBLIC;', pr.privilege,
                             coalesce(' (' || pg_catalog.quote_ident(pr.column_name) || ')', ''),
                             CASE WHEN pr.object_type = 'schema' THEN 'SCHEMA ' ELSE '' END, pr.object)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.grantee = 'PUBLIC'
    UNION ALL
    SELECT 'warning', 'schema_create_granted', 'schema', pr.object,
           pg_catalog.format('%s may create objects in the schema', pr.grantee),
           pg_catalog.format('REVOKE CREATE ON SCHEMA %s FROM %s;', pr.object, pr.grantee)
      FROM pyretrieve.audit_privileges pr
     WHERE pr.object_type = 'schema' AND pr.privilege = 'CREATE' AND NOT pr.grantee_is_owner
       AND pr.grantee <> 'PUBLIC'
    UNION ALL
    -- Roles.
    SELECT 'error', 'app_role_superuser', 'role', r.role_name,
           CASE WHEN r.superuser
                THEN pg_catalog.format('%s (%s) is SUPERUSER and bypasses every policy', r.role_name,
                                       coalesce(pg_catalog.array_to_string(r.app_groups, ', '), ''))
                ELSE pg_catalog.format('%s reaches SUPERUSER through %s and can SET ROLE past every policy', r.role_name, r.superuser_via) END,
           CASE WHEN r.superuser THEN pg_catalog.format('ALTER ROLE %I NOSUPERUSER;', r.role_name)
                ELSE pg_catalog.format('REVOKE %I FROM %I; (the first membership of %s)',
                                       pg_catalog.split_part(r.superuser_via, ' -> ', 2), r.role_name, r.superuser_via) END
      FROM pyretrieve.audit_roles r WHERE r.bound_by_rls AND r.reaches_superuser
    UNION ALL
    SELECT 'error', 'app_role_bypassrls', 'role', r.role_name,
           CASE WHEN r.bypassrls
                THEN pg_catalog.format('%s has BYPASSRLS and ignores every policy', r.role_name)
                ELSE pg_catalog.format('%s reaches BYPASSRLS through %s and can SET ROLE past every policy', r.role_name, r.bypassrls_via) END,
           CASE WHEN r.bypassrls THEN pg_catalog.format('ALTER ROLE %I NOBYPASSRLS;', r.role_name)
                ELSE pg_catalog.format('REVOKE %I FROM %I; (the first membership of %s)',
                                       pg_catalog.split_part(r.bypassrls_via, ' -> ', 2), r.role_name, r.bypassrls_via) END
      FROM pyretrieve.audit_roles r WHERE r.bound_by_rls AND r.reaches_bypassrls
    UNION ALL
    SELECT 'info', 'login_can_become_owner', 'role', r.role_name,
           pg_catalog.format('%s can log in and SET ROLE pyretrieve_owner (%s): as the owner it can alter or drop every table, policy and function',
                             r.role_name, coalesce(r.owner_via, 'superuser')),
           'keep this to the deployment (migration) role; otherwise REVOKE pyretrieve_owner FROM it'
      FROM pyretrieve.audit_roles r WHERE r.can_login AND r.can_become_owner AND NOT r.superuser
    -- Ownership.
    UNION ALL
    SELECT 'error', 'app_role_owns_objects', o.object_type, o.object,
           pg_catalog.format('owned by %s, a member of %s: as owner it can alter its policies and grants', o.owner,
                             pg_catalog.array_to_string(r.app_groups, ', ')),
           pg_catalog.format('ALTER %s %s OWNER TO pyretrieve_owner;', pg_catalog.upper(o.object_type), o.object)
      FROM pyretrieve.audit_objects o
      JOIN pyretrieve.audit_roles r ON r.role_name = o.owner
     WHERE pg_catalog.cardinality(r.app_groups) > 0 AND o.object_type <> 'index'
    UNION ALL
    SELECT 'error', 'owned_by_login_role', o.object_type, o.object,
           pg_catalog.format('owned by %s, a role that can log in: its sessions are the owner, which may alter or drop the object and its policies', o.owner),
           pg_catalog.format('ALTER %s %s OWNER TO pyretrieve_owner;', pg_catalog.upper(o.object_type), o.object)
      FROM pyretrieve.audit_objects o WHERE o.owner_can_login AND o.object_type <> 'index'
    UNION ALL
    SELECT 'warning', 'unexpected_owner', o.object_type, o.object,
           pg_catalog.format('owned by %s, not by pyretrieve_owner', o.owner),
           pg_catalog.format('ALTER %s %s OWNER TO pyretrieve_owner;', pg_catalog.upper(o.object_type), o.object)
      FROM pyretrieve.audit_objects o
     WHERE o.owner <> 'pyretrieve_owner' AND NOT o.owner_can_login AND o.object_type <> 'index'
       -- The SQL API's SECURITY DEFINER functions are owned by pyretrieve_api by design.
       AND NOT (o.owner = 'pyretrieve_api' AND o.object_type = 'function')
       AND NOT EXISTS (SELECT FROM pyretrieve.audit_roles r
                        WHERE r.role_name = o.owner AND pg_catalog.cardinality(r.app_groups) > 0)
    UNION ALL
    -- Grants naming a role that no longer exists.
    SELECT 'warning', 'grant_to_dropped_role', 'grant',
           pg_catalog.format('%s/%s purpose %s', g.workspace_id, g.project_id, g.purpose),
           pg_catalog.format('grant %s names role OID %s, which no longer exists: a role created later with the same OID would hold it',
                             g.grant_id, g.principal::oid),
           pg_catalog.format('DELETE FROM pyretrieve.grants WHERE workspace_id = %L AND grant_id = %L;', g.workspace_id, g.grant_id)
      FROM pyretrieve.grants g
     WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid = g.principal::oid)
    UNION ALL
    -- The server.
    SELECT 'warning', 'server_version_below_minimum', 'server', s.server_version,
           pg_catalog.format('PostgreSQL %s is below %s, the first %s.x release with the fixes for %s',
                             s.server_version, coalesce(s.minimum_version, '(a supported major version)'), s.major, s.fixes),
           pg_catalog.format('upgrade to %s or later (a minor upgrade: replace the binaries and restart)',
                             coalesce(s.minimum_version, '18'))
      FROM pyretrieve.audit_server s WHERE NOT s.meets_minimum
)
SELECT f.severity::text, f.code::text, f.object_type::text, f.object::text, f.evidence::text, f.fix::text
  FROM f
 ORDER BY CASE f.severity WHEN 'error' THEN 1 WHEN 'warning' THEN 2 ELSE 3 END, f.code, f.object, f.evidence;
COMMENT ON VIEW pyretrieve.audit_findings IS
    'Every finding that weakens isolation, derived from the other audit views: severity (error | warning | info), a stable code, the object, the evidence and a fix. The shipped schema has no error or warning. `pyretrieve audit --fail-on error|warning` exits 1 when one exists.';

REVOKE ALL ON pyretrieve.audit_server, pyretrieve.audit_objects, pyretrieve.audit_tables,
    pyretrieve.audit_policies, pyretrieve.audit_privileges, pyretrieve.audit_functions,
    pyretrieve.audit_views, pyretrieve.audit_keys, pyretrieve.audit_roles, pyretrieve.audit_access,
    pyretrieve.audit_findings FROM PUBLIC;
REVOKE ALL ON FUNCTION pyretrieve.audit_expression_calls(pg_node_tree), pyretrieve.audit_disjuncts(text) FROM PUBLIC;
REVOKE ALL ON pyretrieve.audit_function_reach FROM PUBLIC;
GRANT SELECT ON pyretrieve.audit_function_reach TO pyretrieve_api;
GRANT EXECUTE ON FUNCTION pyretrieve.audit_disjuncts(text) TO pyretrieve_api;
-- The views run as their caller; admins reach them through the functions below (principals hold
-- no privilege on any view), which run as pyretrieve_api.
GRANT SELECT ON pyretrieve.audit_server, pyretrieve.audit_objects, pyretrieve.audit_tables,
    pyretrieve.audit_policies, pyretrieve.audit_privileges, pyretrieve.audit_functions,
    pyretrieve.audit_views, pyretrieve.audit_keys, pyretrieve.audit_roles, pyretrieve.audit_access,
    pyretrieve.audit_findings TO pyretrieve_api;
GRANT EXECUTE ON FUNCTION pyretrieve.audit_expression_calls(pg_node_tree) TO pyretrieve_api;

-- SECURITY DEFINER, written reason: principals hold no privilege on any view, and the access
-- matrix reads pyretrieve.grants; each function checks that the caller is an admin and returns
-- its view's rows, computed as pyretrieve_api (whose grants policy shows admins every grant).
SET LOCAL ROLE pyretrieve_api;
CREATE FUNCTION pyretrieve.audit_server()
RETURNS SETOF pyretrieve.audit_server
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_server;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_server() IS
    'The rows of the view pyretrieve.audit_server, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_objects()
RETURNS SETOF pyretrieve.audit_objects
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_objects;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_objects() IS
    'The rows of the view pyretrieve.audit_objects, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_tables()
RETURNS SETOF pyretrieve.audit_tables
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_tables;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_tables() IS
    'The rows of the view pyretrieve.audit_tables, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_policies()
RETURNS SETOF pyretrieve.audit_policies
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_policies;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_policies() IS
    'The rows of the view pyretrieve.audit_policies, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_privileges()
RETURNS SETOF pyretrieve.audit_privileges
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_privileges;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_privileges() IS
    'The rows of the view pyretrieve.audit_privileges, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_functions()
RETURNS SETOF pyretrieve.audit_functions
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_functions;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_functions() IS
    'The rows of the view pyretrieve.audit_functions, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_views()
RETURNS SETOF pyretrieve.audit_views
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_views;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_views() IS
    'The rows of the view pyretrieve.audit_views, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_keys()
RETURNS SETOF pyretrieve.audit_keys
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_keys;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_keys() IS
    'The rows of the view pyretrieve.audit_keys, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_roles()
RETURNS SETOF pyretrieve.audit_roles
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_roles;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_roles() IS
    'The rows of the view pyretrieve.audit_roles, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_access()
RETURNS SETOF pyretrieve.audit_access
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_access;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_access() IS
    'The rows of the view pyretrieve.audit_access, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
CREATE FUNCTION pyretrieve.audit_findings()
RETURNS SETOF pyretrieve.audit_findings
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pyretrieve.require_admin();
    RETURN QUERY SELECT * FROM pyretrieve.audit_findings;
END;
$$;
COMMENT ON FUNCTION pyretrieve.audit_findings() IS
    'The rows of the view pyretrieve.audit_findings, for admins. SECURITY DEFINER (runs as pyretrieve_api): principals hold no privilege on any view.';
REVOKE ALL ON FUNCTION pyretrieve.audit_server(), pyretrieve.audit_objects(), pyretrieve.audit_tables(), pyretrieve.audit_policies(), pyretrieve.audit_privileges(), pyretrieve.audit_functions(), pyretrieve.audit_views(), pyretrieve.audit_keys(), pyretrieve.audit_roles(), pyretrieve.audit_access(), pyretrieve.audit_findings()
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.audit_server(), pyretrieve.audit_objects(), pyretrieve.audit_tables(), pyretrieve.audit_policies(), pyretrieve.audit_privileges(), pyretrieve.audit_functions(), pyretrieve.audit_views(), pyretrieve.audit_keys(), pyretrieve.audit_roles(), pyretrieve.audit_access(), pyretrieve.audit_findings()
    TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;

-- ==== sql/schema/90_epilogue.sql ====
-- The decisions log's partitions: this month and the next two.
SELECT pg_catalog.count(*) AS decision_partitions FROM pyretrieve.ensure_decision_partitions();

INSERT INTO pyretrieve.installation (schema_version, created_vector)
VALUES ('0059', pg_catalog.current_setting('pyretrieve.install_creates_vector')::boolean);

RESET ROLE;
-- pyretrieve_api created the API functions; it may not create anything else.
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;
