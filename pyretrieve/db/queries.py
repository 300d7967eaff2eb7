"""Named SQL statements of the package, grouped by the module that runs them.

Every statement calls the SQL API (principals hold no table privilege): the functions bind
the scope and check the caller's grants themselves, so nothing here widens access.
"""

from __future__ import annotations

# --- ingest ---------------------------------------------------------------------------------
# pyretrieve.ingest: the writer's look-ups, the row-by-row path (one function call per record)
# and the bulk path (COPY into a staging table of the writer's own, then one set-based call per
# batch).

# Bind this transaction's write scope; returns the writer's ceiling there.
INGEST_BIND_WRITE_SCOPE = "SELECT pyretrieve.bind_write_scope(%s, %s)::text"

INGEST_MODEL_DIMENSION = "SELECT m.dimension FROM pyretrieve.list_models() m WHERE m.model_id = %s"

# The active fragments of the given source uris (one index probe per key).
INGEST_ACTIVE_SOURCES = """
SELECT source_uri, fragment_id, content_digest, classification::text
  FROM pyretrieve.active_sources(p_workspace => %s, p_project => %s, p_uris => %s::text[])
"""

# One statement per batch. The functions run once per row in the order of the arrays; each
# binds the write scope and checks the writer's grant itself.
INGEST_WRITE_ROWS = """
SELECT t.i,
       CASE WHEN t.old IS NULL THEN
           pyretrieve.put_fragment(
               p_workspace => %(ws)s, p_project => %(pj)s, p_body => t.body,
               p_classification => t.cls::pyretrieve.classification,
               p_observed_at => t.obs, p_expires_at => t.exp, p_source_uri => t.uri,
               p_source_revision => t.rev, p_manifest_id => t.man)
       ELSE
           pyretrieve.supersede_fragment(
               p_workspace => %(ws)s, p_project => %(pj)s, p_fragment_id => t.old,
               p_body => t.body, p_classification => t.cls::pyretrieve.classification,
               p_observed_at => t.obs, p_expires_at => t.exp, p_source_uri => t.uri,
               p_source_revision => t.rev, p_manifest_id => t.man)
       END
  FROM unnest(%(i)s::integer[], %(old)s::uuid[], %(body)s::text[], %(cls)s::text[],
              %(obs)s::timestamptz[], %(exp)s::timestamptz[], %(uri)s::text[],
              %(rev)s::text[], %(man)s::text[])
       AS t(i, old, body, cls, obs, exp, uri, rev, man)
"""

# Fragments created by this transaction (rather than found active with the same content).
INGEST_CREATED_NOW = """
SELECT fragment_id
  FROM pyretrieve.created_now(p_workspace => %s, p_project => %s, p_ids => %s::uuid[])
"""

INGEST_EMBEDDINGS_NEEDED = """
SELECT fragment_id, content_digest, missing
  FROM pyretrieve.embeddings_needed(p_workspace => %s, p_project => %s, p_model => %s,
                                    p_ids => %s::uuid[])
"""

INGEST_PUT_EMBEDDINGS = """
SELECT pyretrieve.put_embedding(
           p_workspace => %s, p_project => %s, p_fragment_id => t.id, p_model => %s,
           p_embedding => t.v, p_source_digest => t.d)
  FROM unnest(%s::uuid[], %s::public.vector[], %s::bytea[]) AS t(id, v, d)
"""

INGEST_STALE = """
SELECT fragment_id, body, content_digest, missing
  FROM pyretrieve.stale_embeddings(p_workspace => %s, p_project => %s, p_model => %s,
                                   p_after => %s, p_limit => %s)
"""

INGEST_COUNT_STALE = "SELECT count(*) FROM (" + INGEST_STALE + ") s"

INGEST_ACTIVE_LIKE = """
SELECT fragment_id, source_uri
  FROM pyretrieve.active_sources_like(p_workspace => %s, p_project => %s,
                                      p_patterns => %s::text[])
"""

INGEST_RETRACT = """
SELECT pyretrieve.retract_fragment(%s, %s, t.id) FROM unnest(%s::uuid[]) AS t(id)
"""

# The active fragments of the given source uris, with whether each embedding for the model
# (or NULL) is current: what a bulk batch is planned from.
INGEST_STATE = """
SELECT source_uri, fragment_id, content_digest, classification::text, embedding_current
  FROM pyretrieve.ingest_state(p_workspace => %s, p_project => %s, p_uris => %s::text[],
                               p_model => %s)
"""

# The staging table is the writer's own (created in its transaction, dropped at commit); the
# rows reach ingest_batch as one array value built here, in the writer's context.
INGEST_STAGING_CREATE = """
CREATE TEMPORARY TABLE pyretrieve_ingest_staging (
    ord integer, source_uri text, body text, classification text, observed_at timestamptz,
    expires_at timestamptz, source_revision text, manifest_id text, replaces uuid[],
    keep uuid, embedding public.vector
) ON COMMIT DROP
"""

INGEST_STAGING_COPY = """
COPY pg_temp.pyretrieve_ingest_staging (ord, source_uri, body, classification, observed_at,
    expires_at, source_revision, manifest_id, replaces, keep, embedding)
FROM STDIN (FORMAT BINARY)
"""

INGEST_BATCH = """
SELECT b.ord, b.fragment_id, b.created, b.embedded
  FROM pyretrieve.ingest_batch(
           p_workspace => %s, p_project => %s,
           p_rows => ARRAY(
               SELECT ROW(s.ord, s.source_uri, s.body,
                          s.classification::pyretrieve.classification, s.observed_at,
                          s.expires_at, s.source_revision, s.manifest_id, s.replaces, s.keep,
                          s.embedding)::pyretrieve.ingest_row
                 FROM pg_temp.pyretrieve_ingest_staging s
                ORDER BY s.ord),
           p_model => %s) AS b
"""

# --- decisions ------------------------------------------------------------------------------
# pyretrieve.cli.decisions: the decisions log's retention and the audit's questions (admins).

DECISIONS_LIST = """
SELECT evaluated_at, principal::text AS principal, workspace_id, project_id, purpose,
       decision_id, ceiling::text AS ceiling, semantic_intent, requested_limit
  FROM pyretrieve.list_decisions(p_since => %s::timestamptz, p_until => %s::timestamptz,
                                 p_workspace => %s, p_project => %s, p_principal => %s,
                                 p_limit => %s)
"""

DECISIONS_PARTITIONS = """
SELECT partition_name, range_start, range_end, decisions FROM pyretrieve.decision_partitions()
"""

DECISIONS_PRUNE = """
SELECT partition_name, range_start, range_end, decisions
  FROM pyretrieve.prune_decisions(p_older_than => %s::interval, p_dry_run => %s)
"""

DECISIONS_ENSURE = """
SELECT name FROM pyretrieve.ensure_decision_partitions(p_months_ahead => %s) AS name
"""

DECISIONS_TIMESTAMP = "SELECT %s::timestamptz AS t"
DECISIONS_RELATIVE = "SELECT now() + %s::interval AS t"
