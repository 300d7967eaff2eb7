"""Bulk ingestion: JSONL files, BEIR corpora and folders of text or Markdown into one scope.

Every source record has an identity, its ``source_uri``. Re-ingesting unchanged content
writes nothing; changed content for the same ``source_uri`` supersedes the active fragment.
Records are written in batches, one transaction per batch (fragments, then their
embeddings), so an interrupted run leaves whole batches only and a rerun repeats nothing.

Inputs (chosen by what ``path`` is):

* a ``.jsonl`` (or ``.jsonl.gz``) file: one object per line with ``id`` and ``text`` and
  optionally ``title``, ``classification``, ``observed_at``, ``expires_at``, ``source_uri``,
  ``source_revision`` and ``manifest_id``. The body is ``title + "\\n\\n" + text`` when a
  title is given. ``source_uri`` defaults to ``<file name>#<id>``. Timestamps are ISO 8601;
  one without a UTC offset is read as UTC.
* a BEIR folder (``corpus.jsonl`` or ``corpus.jsonl.gz`` with ``_id``, ``title``, ``text``):
  ``source_uri`` is ``<folder name>#<_id>``.
* any other folder: its ``.txt`` and ``.md`` files (hidden ones skipped), each split at
  paragraph and heading boundaries into fragments of at most ``max_chars`` characters (a
  Markdown heading always stays with the text that follows it); ``source_uri`` is
  ``<source>/<relative path>#<position>``, where ``<source>`` is the ``source`` argument
  (default: the folder's own name), so two folders ingested into one project keep apart.
  ``<source>/<relative path>`` names the document. When a file has fewer fragments than
  before, the surplus positions are retracted.

``source`` also replaces the ``<file name>`` / ``<folder name>`` prefix of JSONL and BEIR
inputs. With ``sync=True`` a run also retracts the active fragments under its source that
the input no longer holds (files deleted from the folder, ids gone from the file); a
document with a problem in this run (unreadable, malformed) is left as it was.

Before source names existed, a folder's fragments were named ``<relative path>#<position>``.
A folder run finds its files still active under those names (``IngestReport.legacy``); with
``retract_legacy=True`` it retracts them, since the same files now live under
``<source>/<relative path>``. ``Ingestor.sources`` lists the documents a writer may see in a
scope, and ``Ingestor.retract`` takes documents, fragments or whole prefixes.

Malformed records are reported as (file, line, message) and skipped; with ``strict=True``
the whole input is validated before anything is written and any problem fails the run.
Messages never quote document text.

The package is split by responsibility: ``records`` and ``sources`` read inputs (JSONL, BEIR,
folders; ``chunking`` splits text), ``plan`` decides per record insert, supersede, unchanged
or retract (pure, unit-tested without a server), ``executor`` writes a plan through the SQL
API (in bulk or row by row) and ``ingestor`` drives a run.
"""

from pyretrieve.ingest.chunking import DEFAULT_MAX_CHARS, Chunk, split_text
from pyretrieve.ingest.executor import EMBED_CHUNK
from pyretrieve.ingest.ingestor import DEFAULT_BATCH_SIZE, Ingestor, WritePath, ingest
from pyretrieve.ingest.records import CLASSIFICATIONS, MAX_BODY_CHARS
from pyretrieve.ingest.reports import (
    CompactReport,
    IngestIssue,
    IngestReport,
    MalformedInput,
    Progress,
    ReembedReport,
    RetractReport,
    SourceList,
)

__all__ = [
    "CLASSIFICATIONS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_CHARS",
    "EMBED_CHUNK",
    "MAX_BODY_CHARS",
    "Chunk",
    "CompactReport",
    "IngestIssue",
    "IngestReport",
    "Ingestor",
    "MalformedInput",
    "Progress",
    "ReembedReport",
    "RetractReport",
    "SourceList",
    "WritePath",
    "ingest",
    "split_text",
]
