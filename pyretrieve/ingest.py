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
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NamedTuple, cast
from uuid import UUID

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg.rows import TupleRow, tuple_row
from psycopg.types import TypeInfo

from pyretrieve import contract, telemetry
from pyretrieve.db import session
from pyretrieve.embedders import Embedder
from pyretrieve.errors import (
    AccessDenied,
    IntegrityViolation,
    InternalError,
    InvalidEmbedding,
    InvalidInput,
    NotFound,
    PyretrieveError,
    UnknownModel,
)
from pyretrieve.vectors import canonical_embedding

__all__ = [
    "CLASSIFICATIONS",
    "MAX_BODY_CHARS",
    "Chunk",
    "IngestIssue",
    "IngestReport",
    "Ingestor",
    "MalformedInput",
    "Progress",
    "ReembedReport",
    "RetractReport",
    "SourceList",
    "ingest",
    "split_text",
]

CLASSIFICATIONS = contract.CLASSIFICATION_ORDER
MAX_BODY_CHARS = contract.MAX_BODY_CHARS
MAX_SOURCE_URI = contract.MAX_SOURCE_URI_CHARS
MAX_PROVENANCE = contract.MAX_PROVENANCE_CHARS
DEFAULT_BATCH_SIZE = 256
# Texts embedded per embedder call inside a batch's transaction. Each chunk's vectors are
# stored before the next chunk is embedded, so the session is never idle in its transaction for
# longer than one chunk takes: a whole batch of 256 texts with a slow model on a busy machine
# (all-MiniLM-L6-v2 at 4 texts/s) would stay idle past the 60 s idle-in-transaction timeout
# that bind_write_scope sets, and fail.
EMBED_CHUNK = 32
DEFAULT_MAX_CHARS = 2000
TEXT_SUFFIXES = (".txt", ".md")
_IDENT = contract.IDENTIFIER_RE
# A source name is one path segment: no "/" (the separator of its documents) and no "#".
_SOURCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_NIL_UUID = UUID(int=0)  # sorts before every other uuid in PostgreSQL too

# progress(records done, records in all or None when not known in advance)
Progress = Callable[[int, int | None], None]


class IngestIssue(NamedTuple):
    """A record that was not written: where it is and why (never what it says)."""

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.message}"


class MalformedInput(InvalidInput):
    """Strict mode found malformed records; nothing was written."""

    def __init__(self, issues: Sequence[IngestIssue]) -> None:
        self.issues: tuple[IngestIssue, ...] = tuple(issues)
        first = self.issues[0]
        more = len(self.issues) - 1
        message = f"malformed input, nothing written: {first}"
        if more:
            message += f" (and {more} more)"
        super().__init__(message)


@dataclass(frozen=True, kw_only=True, slots=True)
class IngestReport:
    """What one ``ingest_path`` run did. ``read = inserted + unchanged + superseded + skipped``."""

    path: str
    workspace: str
    project: str
    model: str | None
    read: int
    inserted: int
    unchanged: int
    superseded: int
    retracted: int
    embedded: int
    skipped: int
    errors: tuple[IngestIssue, ...]
    batches: int
    seconds: float
    # The source this run wrote under, and (with sync) the documents it retracted because the
    # input no longer holds them.
    source: str | None = None
    removed: tuple[str, ...] = ()
    # Documents of this folder still active under their names from before source names
    # (``<relative path>``); retracted too (and counted in ``retracted``) with retract_legacy.
    legacy: tuple[str, ...] = ()
    legacy_retracted: bool = False

    @property
    def written(self) -> int:
        return self.inserted + self.superseded


@dataclass(frozen=True, kw_only=True, slots=True)
class RetractReport:
    """What ``Ingestor.retract`` did: fragments retracted per source uri asked for."""

    workspace: str
    project: str
    retracted: dict[str, int]

    @property
    def fragments(self) -> int:
        return sum(self.retracted.values())


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceList:
    """The documents of one scope that a writer may see (active fragments up to its ceiling):
    each document's name, the source uri up to its last ``#`` (the whole uri when it has
    none), with how many active fragments it has."""

    workspace: str
    project: str
    documents: dict[str, int]

    @property
    def fragments(self) -> int:
        return sum(self.documents.values())


@dataclass(frozen=True, kw_only=True, slots=True)
class ReembedReport:
    """What one ``reembed`` run did: ``embedded = missing + stale``."""

    workspace: str
    project: str
    model: str
    missing: int
    stale: int
    embedded: int
    batches: int
    seconds: float


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class _Record:
    source_uri: str
    body: str
    classification: str
    observed_at: datetime | None = None
    expires_at: datetime | None = None
    source_revision: str | None = None
    manifest_id: str | None = None
    file: str
    line: int | None
    # For a text file's last fragment: retract active fragments "<prefix><n>" with n > count.
    retract_beyond: tuple[str, int] | None = None
    digest: bytes = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", hashlib.sha256(self.body.encode("utf-8")).digest())


class _Invalid(Exception):
    """A record-level problem; its message is a fixed text that quotes no content."""


def _check_text(value: str, what: str) -> str:
    if "\x00" in value:
        raise _Invalid(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Invalid(f"{what} is not valid Unicode (lone surrogate)") from None
    return value


def _optional_str(obj: dict[str, Any], key: str, limit: int) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Invalid(f"{key} must be a string")
    if len(value) > limit:
        raise _Invalid(f"{key} is longer than {limit} characters")
    return _check_text(value, key) or None


def _timestamp(obj: dict[str, Any], key: str) -> datetime | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Invalid(f"{key} must be an ISO 8601 string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _Invalid(f"{key} is not an ISO 8601 timestamp") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _classification(obj: dict[str, Any], default: str) -> str:
    value = obj.get("classification")
    if value is None:
        return default
    if value not in CLASSIFICATIONS:
        raise _Invalid("classification must be one of " + ", ".join(CLASSIFICATIONS))
    return str(value)


def _body(title: str | None, text: str) -> str:
    body = f"{title}\n\n{text}" if title and title.strip() else text
    if not body.strip():
        raise _Invalid("empty text")
    if len(body) > MAX_BODY_CHARS:
        raise _Invalid(f"text is longer than {MAX_BODY_CHARS} characters")
    return _check_text(body, "text")


def _check_times(observed: datetime | None, expires: datetime | None) -> None:
    if expires is None:
        return
    if expires <= (observed or datetime.now(UTC)):
        raise _Invalid("expires_at must be after observed_at (or after now)")


@contextmanager
def _open_lines(path: Path) -> Iterator[IO[bytes]]:
    if path.name.endswith(".gz"):
        with gzip.open(path, "rb") as gz:
            yield cast(IO[bytes], gz)
    else:
        with path.open("rb") as fh:
            yield fh


def _jsonl_records(
    path: Path, *, display: str, uri_prefix: str, beir: bool, classification: str
) -> Iterator[_Record | IngestIssue]:
    id_key = "_id" if beir else "id"
    try:
        with _open_lines(path) as fh:
            for number, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                try:
                    yield _jsonl_record(
                        raw,
                        id_key=id_key,
                        beir=beir,
                        uri_prefix=uri_prefix,
                        classification=classification,
                        display=display,
                        number=number,
                    )
                except _Invalid as exc:
                    yield IngestIssue(display, number, str(exc))
    except (OSError, EOFError, gzip.BadGzipFile):
        yield IngestIssue(display, None, "the file could not be read to the end")


def _jsonl_record(
    raw: bytes,
    *,
    id_key: str,
    beir: bool,
    uri_prefix: str,
    classification: str,
    display: str,
    number: int,
) -> _Record:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise _Invalid("line is not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise _Invalid(f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise _Invalid("line is not a JSON object")
    ident = obj.get(id_key)
    if isinstance(ident, bool) or not isinstance(ident, str | int) or str(ident) == "":
        raise _Invalid(f"missing {id_key}")
    text = obj.get("text")
    if not isinstance(text, str):
        raise _Invalid("missing text")
    title = obj.get("title")
    if title is not None and not isinstance(title, str):
        raise _Invalid("title must be a string")
    body = _body(title, text)
    if beir:
        source_uri = f"{uri_prefix}#{ident}"
        revision = manifest = None
        observed = expires = None
        record_classification = classification
    else:
        source_uri = _optional_str(obj, "source_uri", MAX_SOURCE_URI) or f"{uri_prefix}#{ident}"
        revision = _optional_str(obj, "source_revision", MAX_PROVENANCE)
        manifest = _optional_str(obj, "manifest_id", MAX_PROVENANCE)
        observed = _timestamp(obj, "observed_at")
        expires = _timestamp(obj, "expires_at")
        _check_times(observed, expires)
        record_classification = _classification(obj, classification)
    if len(source_uri) > MAX_SOURCE_URI:
        raise _Invalid(f"source uri is longer than {MAX_SOURCE_URI} characters")
    _check_text(source_uri, "id")
    return _Record(
        source_uri=source_uri,
        body=body,
        classification=record_classification,
        observed_at=observed,
        expires_at=expires,
        source_revision=revision,
        manifest_id=manifest,
        file=display,
        line=number,
    )


# ---------------------------------------------------------------------------------------------
# Splitting text and Markdown
# ---------------------------------------------------------------------------------------------


class Chunk(NamedTuple):
    """A fragment of a text file and the 1-based line it starts on."""

    text: str
    line: int


_HEADING = re.compile(r"#{1,6}(\s|$)")
_FENCE = re.compile(r"(```|~~~)")
_SENTENCE_END = re.compile(r"[.!?]['\")\]]*\s|\n")


def _blocks(text: str, markdown: bool) -> Iterator[tuple[str, int, bool]]:
    """(block, first line, is a heading): paragraphs split at blank lines and headings."""
    lines: list[str] = []
    start = 0
    fence: str | None = None

    def flush() -> Iterator[tuple[str, int, bool]]:
        if lines:
            block = "\n".join(lines).rstrip()
            if block.strip():
                yield block, start, False
            lines.clear()

    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.lstrip()
        if markdown and fence is not None:
            lines.append(line)
            if stripped.startswith(fence):
                fence = None
            continue
        if markdown and (m := _FENCE.match(stripped)):
            # A fenced code block is one paragraph even when it holds blank lines.
            fence = m.group(1)
            if not lines:
                start = number
            lines.append(line)
            continue
        if not line.strip():
            yield from flush()
            continue
        if markdown and len(line) - len(stripped) < 4 and _HEADING.match(stripped):
            yield from flush()
            yield line.rstrip(), number, True
            continue
        if not lines:
            start = number
        lines.append(line)
    yield from flush()


def _cut(text: str, max_chars: int) -> int:
    """Where to end a piece of ``text`` no longer than ``max_chars``: at a sentence end if one
    falls in the second half of the window, else at the last whitespace."""
    window = text[: max_chars + 1]
    best = -1
    for m in _SENTENCE_END.finditer(window):
        if m.end() - 1 <= max_chars:
            best = m.end()
    if best > max_chars // 2:
        return min(best, max_chars)
    space = max(window.rfind(" "), window.rfind("\n"), window.rfind("\t"))
    if space > 0:
        return space
    # One "word" longer than the bound (a URL, a hash, base64): the only place left is inside it.
    return max_chars


def _split_long(block: str, line: int, max_chars: int) -> Iterator[Chunk]:
    rest = block
    offset = 0
    while rest:
        if len(rest) <= max_chars:
            yield Chunk(rest, line + block.count("\n", 0, offset))
            return
        end = _cut(rest, max_chars)
        piece = rest[:end].rstrip()
        if piece:
            yield Chunk(piece, line + block.count("\n", 0, offset))
        skipped = len(rest[end:]) - len(rest[end:].lstrip())
        offset += end + skipped
        rest = rest[end:].lstrip()


def split_text(
    text: str, *, max_chars: int = DEFAULT_MAX_CHARS, markdown: bool = False
) -> list[Chunk]:
    """Split a document into fragments of at most ``max_chars`` characters.

    Paragraphs (blank-line separated) are packed together while they fit; in Markdown every
    heading starts a new fragment, which holds the heading and the text after it (never a
    heading alone: when the next paragraph does not fit beside it, the paragraph is cut to
    the room left), and fenced code blocks stay whole when they fit. A paragraph longer than
    the bound is cut at a sentence end or else at whitespace, never inside a word unless the
    word alone is longer than the bound.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    chunks: list[Chunk] = []
    current: list[str] = []
    current_line = 0
    size = 0
    only_headings = False  # current holds headings and no text yet

    def flush() -> None:
        nonlocal current, size, only_headings
        if current:
            chunks.append(Chunk("\n\n".join(current), current_line))
        current = []
        size = 0
        only_headings = False

    for block, line, heading in _blocks(text, markdown):
        if heading and not only_headings:
            flush()
        added = len(block) + (2 if current else 0)
        if current and size + added > max_chars and only_headings and not heading:
            # Keep the headings with the start of this paragraph: cut it to the room left.
            room = max_chars - size - 2
            end = _cut(block, room) if room > 0 else 0
            piece = block[:end].rstrip()
            if piece:
                current.append(piece)
                rest = block[end:].lstrip()
                line += block.count("\n", 0, len(block) - len(rest))
                block = rest
            flush()
            if not block:
                continue
            added = len(block)
        elif current and size + added > max_chars:
            flush()
            added = len(block)
        if len(block) > max_chars:
            pieces = list(_split_long(block, line, max_chars))
            chunks.extend(pieces[:-1])
            block, line = pieces[-1]
            added = len(block)
        if not current:
            current_line = line
            only_headings = heading
        elif not heading:
            only_headings = False
        current.append(block)
        size += added
    if only_headings and chunks and len(chunks[-1].text) + 2 + size <= max_chars:
        # Trailing headings with no text after them: they end the previous fragment.
        last = chunks.pop()
        current.insert(0, last.text)
        current_line = last.line
    flush()
    return chunks


def _text_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if not name.startswith(".") and name.lower().endswith(TEXT_SUFFIXES):
                files.append(Path(dirpath) / name)
    files.sort(key=lambda p: p.relative_to(root).as_posix())
    return files


def _text_records(
    root: Path, *, source: str, classification: str, max_chars: int
) -> Iterator[_Record | IngestIssue]:
    for path in _text_files(root):
        # The document's identity: stable across runs, unique across folders.
        rel = f"{source}/{path.relative_to(root).as_posix()}"
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except OSError:
            yield IngestIssue(rel, None, "the file could not be read")
            continue
        except UnicodeDecodeError:
            yield IngestIssue(rel, None, "the file is not valid UTF-8")
            continue
        chunks = split_text(text, max_chars=max_chars, markdown=rel.lower().endswith(".md"))
        if not chunks:
            yield IngestIssue(rel, None, "the file has no text")
            continue
        prefix = f"{rel}#"
        if len(prefix) + len(str(len(chunks))) > MAX_SOURCE_URI:
            yield IngestIssue(rel, None, "the path is too long for a source uri")
            continue
        for position, chunk in enumerate(chunks, start=1):
            try:
                body = _check_text(chunk.text, "text")
            except _Invalid as exc:
                yield IngestIssue(rel, chunk.line, str(exc))
                continue
            yield _Record(
                source_uri=f"{prefix}{position}",
                body=body,
                classification=classification,
                file=rel,
                line=chunk.line,
                retract_beyond=(prefix, len(chunks)) if position == len(chunks) else None,
            )


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Source:
    kind: str  # "jsonl" | "beir" | "text"
    records: Callable[[], Iterator[_Record | IngestIssue]]
    lines: Callable[[], int | None]  # a cheap upper bound for progress, when one exists
    name: str  # the source: the first part of every source uri it writes
    prefix: str  # what every generated source uri starts with ("name/" or "name#")
    # A folder of text: its files' relative paths, the document names of the old scheme.
    legacy_names: Callable[[], list[str]] | None = None


def _count_lines(path: Path) -> int:
    with _open_lines(path) as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def _source_name(name: str | None, default: str) -> str:
    chosen = default if name is None else name
    if not isinstance(chosen, str) or not _SOURCE_NAME.fullmatch(chosen):
        raise InvalidInput(
            "a source name is 1 to 128 letters, digits, '_', '.' or '-' (no '/' or '#'),"
            " starting with a letter or digit: pass one with source="
        )
    return chosen


def _source(path: Path, classification: str, max_chars: int, name: str | None = None) -> _Source:
    if path.is_file():
        if not path.name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
            raise InvalidInput("a file to ingest must be JSON Lines (.jsonl or .jsonl.gz)")
        display = path.name
        stem = _source_name(name, display.removesuffix(".gz"))
        return _Source(
            "jsonl",
            lambda: _jsonl_records(
                path, display=display, uri_prefix=stem, beir=False, classification=classification
            ),
            lambda: _count_lines(path),
            stem,
            f"{stem}#",
        )
    if path.is_dir():
        corpus = next(
            (c for c in (path / "corpus.jsonl", path / "corpus.jsonl.gz") if c.is_file()), None
        )
        if corpus is not None:
            beir_corpus = corpus
            folder = _source_name(name, path.resolve().name)
            return _Source(
                "beir",
                lambda: _jsonl_records(
                    beir_corpus,
                    display=beir_corpus.name,
                    uri_prefix=folder,
                    beir=True,
                    classification=classification,
                ),
                lambda: _count_lines(beir_corpus),
                folder,
                f"{folder}#",
            )
        source = _source_name(name, path.resolve().name)
        return _Source(
            "text",
            lambda: _text_records(
                path, source=source, classification=classification, max_chars=max_chars
            ),
            lambda: None,
            source,
            f"{source}/",
            lambda: [f.relative_to(path).as_posix() for f in _text_files(path)],
        )
    raise InvalidInput("no such file or folder to ingest")


def _checked(
    items: Iterable[_Record | IngestIssue], ceiling: str
) -> Iterator[_Record | IngestIssue]:
    """Cross-record checks: the writer's ceiling and one record per source uri."""
    allowed = CLASSIFICATIONS[: CLASSIFICATIONS.index(ceiling) + 1]
    seen: dict[str, tuple[str, int | None]] = {}
    for item in items:
        if isinstance(item, IngestIssue):
            yield item
            continue
        if item.classification not in allowed:
            yield IngestIssue(item.file, item.line, "classification is above the writer's ceiling")
            continue
        first = seen.get(item.source_uri)
        if first is not None:
            where = first[0] if first[1] is None else f"{first[0]}:{first[1]}"
            yield IngestIssue(item.file, item.line, f"duplicate source id (first at {where})")
            continue
        seen[item.source_uri] = (item.file, item.line)
        yield item


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Counts:
    read: int = 0
    inserted: int = 0
    unchanged: int = 0
    superseded: int = 0
    retracted: int = 0
    embedded: int = 0
    batches: int = 0
    missing: int = 0
    stale: int = 0


# The writer's look-ups go through the SQL API (principals hold no table privilege); each
# function binds the write scope and probes one key at a time.
_EXISTING = """
SELECT source_uri, fragment_id, content_digest, classification::text
  FROM pyretrieve.active_sources(p_workspace => %s, p_project => %s, p_uris => %s::text[])
"""

# One statement per batch. The functions run once per row in the order of the arrays; each
# binds the write scope and checks the writer's grant itself, so nothing here widens access.
_WRITE = """
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
_CREATED_NOW = """
SELECT fragment_id FROM pyretrieve.created_now(p_workspace => %s, p_project => %s, p_ids => %s::uuid[])
"""

_NEEDS_EMBEDDING = """
SELECT fragment_id, content_digest, missing
  FROM pyretrieve.embeddings_needed(p_workspace => %s, p_project => %s, p_model => %s,
                                    p_ids => %s::uuid[])
"""

_PUT_EMBEDDINGS = """
SELECT pyretrieve.put_embedding(
           p_workspace => %s, p_project => %s, p_fragment_id => t.id, p_model => %s,
           p_embedding => t.v, p_source_digest => t.d)
  FROM unnest(%s::uuid[], %s::public.vector[], %s::bytea[]) AS t(id, v, d)
"""

_STALE = """
SELECT fragment_id, body, content_digest, missing
  FROM pyretrieve.stale_embeddings(p_workspace => %s, p_project => %s, p_model => %s,
                                   p_after => %s, p_limit => %s)
"""

# Positions of a text file are written 1..n together, so a file that had more fragments
# before still has position n + 1: probe that exactly, and scan by prefix only for the files
# where it exists.
_NEXT_POSITION = """
SELECT source_uri FROM pyretrieve.active_sources(p_workspace => %s, p_project => %s, p_uris => %s::text[])
"""

_SURPLUS = """
SELECT fragment_id, source_uri
  FROM pyretrieve.active_sources_like(p_workspace => %s, p_project => %s, p_patterns => %s::text[])
"""

_RETRACT = """
SELECT pyretrieve.retract_fragment(%s, %s, t.id) FROM unnest(%s::uuid[]) AS t(id)
"""


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def document_of(source_uri: str) -> str:
    """The document a fragment belongs to: its source uri up to the last ``#``, or the whole
    uri when it has none (``notes/a.md#2`` -> ``notes/a.md``, ``c.jsonl#doc1`` -> ``c.jsonl``)."""
    document, hash_, _ = source_uri.rpartition("#")
    return document if hash_ else source_uri


# How many uris one probe sends (the SQL functions take up to 100,000).
_PROBE_CHUNK = 10_000


class Ingestor:
    """Writes fragments (and, with an embedder, their embeddings) into one scope at a time.

    ``conn_or_pool``: a psycopg connection that is idle (no open transaction), or a
    ``psycopg_pool.ConnectionPool``. ``principal``: a writer role to act as in every
    transaction (``SET LOCAL ROLE``); without it the connection's own role writes.
    ``embedder``: embeds every new or changed fragment (and any whose embedding for that model
    is missing or stale); its model must be registered in the database. ``batch_size``:
    records per transaction.

    Access to the scope and the model's registration are checked before any input is read.
    Any other failure (a database error, translated to a typed error; an embedder that raises,
    as ``InternalError`` naming only the exception's type) ends the run: the batches already
    committed stay, the failing one leaves nothing, and a rerun picks up where it stopped.
    """

    def __init__(
        self,
        conn_or_pool: psycopg.Connection[Any] | Any,
        *,
        principal: str | None = None,
        embedder: Embedder | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInput("batch_size must be a positive integer")
        self._source = conn_or_pool
        self._principal = principal
        self._embedder = embedder
        self._batch_size = batch_size
        self._vector_info: TypeInfo | None = None

    # -- public -----------------------------------------------------------------------------

    def ingest_path(
        self,
        path: str | os.PathLike[str],
        *,
        workspace: str,
        project: str,
        classification: str = "internal",
        strict: bool = False,
        progress: Progress | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        source: str | None = None,
        sync: bool = False,
        retract_legacy: bool = False,
    ) -> IngestReport:
        """Ingest a JSONL file, a BEIR folder or a folder of .txt/.md files into a scope.

        ``source`` names the input (default: the file's or folder's name) and begins every
        source uri it writes; ``sync`` also retracts what the input no longer holds under it.
        For a folder, the report lists its files still active under their names from before
        source names (``<relative path>#<n>``); ``retract_legacy`` retracts those fragments.
        """
        started = time.perf_counter()
        _check_scope(workspace, project)
        if classification not in CLASSIFICATIONS:
            raise InvalidInput("classification must be one of " + ", ".join(CLASSIFICATIONS))
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise InvalidInput("max_chars must be a positive integer")
        target = Path(path)
        input_source = _source(target, classification, max_chars, source)
        embedder = self._embedder
        counts = _Counts()
        errors: list[IngestIssue] = []
        with self._connection() as conn:
            ceiling, _dimension = self._preflight(conn, workspace, project, embedder)
            if CLASSIFICATIONS.index(classification) > CLASSIFICATIONS.index(ceiling):
                raise AccessDenied("the default classification is above the writer's ceiling")
            total: int | None
            if strict:
                total = 0
                problems: list[IngestIssue] = []
                for item in _checked(input_source.records(), ceiling):
                    if isinstance(item, IngestIssue):
                        problems.append(item)
                    else:
                        total += 1
                if problems:
                    raise MalformedInput(problems)
            else:
                total = input_source.lines() if progress is not None else None
            if progress is not None:
                progress(0, total)
            batch: list[_Record] = []
            seen: set[str] = set()
            for item in _checked(input_source.records(), ceiling):
                if isinstance(item, IngestIssue):
                    errors.append(item)
                    counts.read += 1
                    continue
                seen.add(item.source_uri)
                batch.append(item)
                if len(batch) >= self._batch_size:
                    self._write_batch(conn, workspace, project, batch, embedder, counts)
                    counts.read += len(batch)
                    batch = []
                    if progress is not None:
                        progress(counts.read, total)
            if batch:
                self._write_batch(conn, workspace, project, batch, embedder, counts)
                counts.read += len(batch)
            removed: list[str] = []
            if sync:
                removed = self._sync(conn, workspace, project, input_source, seen, errors, counts)
            legacy = self._legacy(
                conn, workspace, project, input_source, seen, counts, retract=retract_legacy
            )
            if progress is not None:
                progress(counts.read, counts.read)
        return IngestReport(
            path=str(target),
            workspace=workspace,
            project=project,
            model=None if embedder is None else embedder.model_id,
            read=counts.read,
            inserted=counts.inserted,
            unchanged=counts.unchanged,
            superseded=counts.superseded,
            retracted=counts.retracted,
            embedded=counts.embedded,
            skipped=len(errors),
            errors=tuple(errors),
            batches=counts.batches,
            seconds=time.perf_counter() - started,
            source=input_source.name,
            removed=tuple(removed),
            legacy=tuple(legacy),
            legacy_retracted=retract_legacy and bool(legacy),
        )

    def retract(
        self,
        *,
        workspace: str,
        project: str,
        source_uris: Sequence[str] = (),
        source_prefixes: Sequence[str] = (),
    ) -> RetractReport:
        """Retract documents, fragments or whole prefixes by source uri, in one transaction.

        A uri with a ``#`` names one fragment (``notes/a.md#2``, ``c.jsonl#doc1``); one without
        names a document and retracts all its fragments (``notes/a.md``, or ``c.jsonl`` for
        every record of that file). A prefix retracts every active fragment whose source uri
        starts with it (``teamA/``: a whole source). A uri or prefix with no active fragment
        the writer may see fails the call (``NotFound``) and retracts nothing.
        """
        _check_scope(workspace, project)
        uris = list(dict.fromkeys(source_uris))
        prefixes = list(dict.fromkeys(source_prefixes))
        if not uris and not prefixes:
            raise InvalidInput("name 1 or more source uris or prefixes to retract")
        if any(not isinstance(u, str) or not 1 <= len(u) <= MAX_SOURCE_URI for u in uris):
            raise InvalidInput(f"name 1 or more source uris of 1 to {MAX_SOURCE_URI} characters")
        if any(not isinstance(u, str) or not 1 <= len(u) <= MAX_SOURCE_URI for u in prefixes):
            raise InvalidInput(f"a source prefix is 1 to {MAX_SOURCE_URI} characters")
        found: dict[str, set[UUID]] = {u: set() for u in uris}
        by_prefix: dict[str, set[UUID]] = {p: set() for p in prefixes}
        with self._connection() as conn, self._transaction(conn, workspace, project) as (cur, _c):
            if uris:
                for uri, fid, _digest, _cls in cur.execute(_EXISTING, (workspace, project, uris)):
                    found[str(uri)].add(fid)
            documents = [u for u in uris if "#" not in u]
            if documents:
                patterns = [_like_prefix(f"{u}#") for u in documents]
                for fid, uri in cur.execute(_SURPLUS, (workspace, project, patterns)):
                    document = str(uri).rpartition("#")[0]
                    while document not in found and "#" in document:
                        document = document.rpartition("#")[0]
                    if document in found:
                        found[document].add(fid)
            if prefixes:
                patterns = [_like_prefix(p) for p in prefixes]
                for fid, uri in cur.execute(_SURPLUS, (workspace, project, patterns)):
                    for prefix in prefixes:
                        if str(uri).startswith(prefix):
                            by_prefix[prefix].add(fid)
            missing = [u for u, ids in [*found.items(), *by_prefix.items()] if not ids]
            if missing:
                raise NotFound(
                    f"no active fragment under {len(missing)} of the source uris or prefixes"
                    f" (first: {missing[0]!r}); nothing retracted"
                )
            ids = sorted(
                {fid for fids in [*found.values(), *by_prefix.values()] for fid in fids}, key=str
            )
            cur.execute(_RETRACT, (workspace, project, ids))
        return RetractReport(
            workspace=workspace,
            project=project,
            retracted={u: len(fids) for u, fids in [*found.items(), *by_prefix.items()]},
        )

    def sources(self, *, workspace: str, project: str, prefix: str | None = None) -> SourceList:
        """The documents of a scope that this writer may see, with their active fragments:
        what ``retract`` can name. ``prefix`` keeps those whose source uri starts with it.
        Fragments above the writer's ceiling, or in a scope it holds no grant for (that
        fails with ``AccessDenied``, as a scope that does not exist), are never listed."""
        _check_scope(workspace, project)
        if prefix is not None and (not isinstance(prefix, str) or len(prefix) > MAX_SOURCE_URI):
            raise InvalidInput(f"a source prefix is at most {MAX_SOURCE_URI} characters")
        documents: dict[str, int] = {}
        with self._connection() as conn, self._transaction(conn, workspace, project) as (cur, _c):
            pattern = _like_prefix(prefix or "")
            for _fid, uri in cur.execute(_SURPLUS, (workspace, project, [pattern])):
                document = document_of(str(uri))
                documents[document] = documents.get(document, 0) + 1
        return SourceList(
            workspace=workspace, project=project, documents=dict(sorted(documents.items()))
        )

    def _legacy(
        self,
        conn: psycopg.Connection[Any],
        workspace: str,
        project: str,
        source: _Source,
        seen: set[str],
        counts: _Counts,
        *,
        retract: bool,
    ) -> list[str]:
        """The folder's files still active under their names from before source names
        (``<relative path>#<n>``), retracted too when ``retract``; the documents found.

        A document is found by its first fragment (``<relative path>#1``, which every one of
        them had), then all its positions by prefix. Uris this run wrote itself are never
        legacy (a nested ``docs/x.md`` of the old scheme is the new name of ``x.md`` in a
        folder named docs)."""
        if source.legacy_names is None:
            return []
        names = source.legacy_names()
        if not names:
            return []
        with self._transaction(conn, workspace, project) as (cur, _ceiling):
            present: list[str] = []
            for start in range(0, len(names), _PROBE_CHUNK):
                firsts = [f"{n}#1" for n in names[start : start + _PROBE_CHUNK]]
                rows = cur.execute(_NEXT_POSITION, (workspace, project, firsts)).fetchall()
                present.extend(str(uri)[:-2] for (uri,) in rows if uri not in seen)
            if not present:
                return []
            wanted = set(present)
            gone: list[UUID] = []
            for start in range(0, len(present), _PROBE_CHUNK):
                patterns = [_like_prefix(f"{n}#") for n in present[start : start + _PROBE_CHUNK]]
                for fid, uri in cur.execute(_SURPLUS, (workspace, project, patterns)):
                    document, _, position = str(uri).rpartition("#")
                    if document in wanted and position.isdigit() and uri not in seen:
                        gone.append(fid)
            if retract and gone:
                cur.execute(_RETRACT, (workspace, project, gone))
        if retract:
            counts.retracted += len(gone)
        return sorted(wanted)

    def _sync(
        self,
        conn: psycopg.Connection[Any],
        workspace: str,
        project: str,
        source: _Source,
        seen: set[str],
        errors: Sequence[IngestIssue],
        counts: _Counts,
    ) -> list[str]:
        """Retract the source's active fragments that this run's input no longer holds.

        Documents with a problem in this run are kept; for a JSONL or BEIR input, where a
        malformed line may be any document, any problem keeps everything."""
        if errors and source.kind != "text":
            return []
        kept = tuple(f"{issue.file}#" for issue in errors)
        with self._transaction(conn, workspace, project) as (cur, _ceiling):
            rows = cur.execute(_SURPLUS, (workspace, project, [_like_prefix(source.prefix)]))
            gone = [
                (fid, str(uri))
                for fid, uri in rows.fetchall()
                if uri not in seen and not str(uri).startswith(kept)
            ]
            if gone:
                cur.execute(_RETRACT, (workspace, project, [fid for fid, _ in gone]))
        counts.retracted += len(gone)
        if source.kind == "text":
            return sorted({uri.rpartition("#")[0] for _, uri in gone})
        return sorted(uri for _, uri in gone)

    def reembed(
        self,
        *,
        workspace: str,
        project: str,
        model_or_embedder: str | Embedder,
        batch_size: int | None = None,
        progress: Progress | None = None,
    ) -> ReembedReport:
        """(Re)compute the scope's embeddings for a model where they are missing or stale.

        Stale: computed from other content (``source_digest`` differs from the fragment's
        ``content_digest``) or older than the fragment (``vector_generation`` below its
        ``lexical_generation``). Only active fragments are considered.
        """
        started = time.perf_counter()
        _check_scope(workspace, project)
        if isinstance(model_or_embedder, str):
            from pyretrieve.embedders.registry import get_embedder

            embedder = get_embedder(model_or_embedder)
        else:
            embedder = model_or_embedder
        size = self._batch_size if batch_size is None else batch_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidInput("batch_size must be a positive integer")
        counts = _Counts()
        with self._connection() as conn:
            self._preflight(conn, workspace, project, embedder)
            total = self._count_stale(conn, workspace, project, embedder.model_id)
            if progress is not None:
                progress(0, total)
            last: UUID | None = None
            while True:
                done, last = self._reembed_batch(
                    conn, workspace, project, embedder, size, last, counts
                )
                if progress is not None:
                    progress(counts.embedded, total)
                if done < size:
                    break
        return ReembedReport(
            workspace=workspace,
            project=project,
            model=embedder.model_id,
            missing=counts.missing,
            stale=counts.stale,
            embedded=counts.embedded,
            batches=counts.batches,
            seconds=time.perf_counter() - started,
        )

    # -- connections and transactions -------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        # Batches must commit on their own; inside a caller's transaction they could not.
        with session.connection(self._source, needs="ingestion") as conn:
            yield conn

    @contextmanager
    def _transaction(
        self, conn: psycopg.Connection[Any], workspace: str, project: str
    ) -> Iterator[tuple[psycopg.Cursor[TupleRow], str]]:
        """One transaction as the principal with the write scope bound; yields the ceiling."""
        with (
            session.as_principal(conn, self._principal),
            conn.cursor(row_factory=tuple_row) as cur,
        ):
            row = cur.execute(
                "SELECT pyretrieve.bind_write_scope(%s, %s)::text", (workspace, project)
            ).fetchone()
            assert row is not None
            yield cur, str(row[0])

    def _preflight(
        self, conn: psycopg.Connection[Any], workspace: str, project: str, embedder: Embedder | None
    ) -> tuple[str, int | None]:
        """Fail early, before reading any input: access to the scope and the model's registration."""
        with self._transaction(conn, workspace, project) as (cur, ceiling):
            if embedder is None:
                return ceiling, None
            row = cur.execute(
                "SELECT m.dimension FROM pyretrieve.list_models() m WHERE m.model_id = %s",
                (embedder.model_id,),
            ).fetchone()
            if self._vector_info is None:
                self._vector_info = TypeInfo.fetch(conn, "public.vector")
        if row is None:
            raise UnknownModel(
                f"model {embedder.model_id!r} is not registered in this database"
                " (an admin registers it)"
            )
        dimension = int(row[0])
        if dimension != embedder.dimension:
            raise InvalidEmbedding(
                f"the embedder gives {embedder.dimension} values but model"
                f" {embedder.model_id!r} is registered with {dimension}"
            )
        return ceiling, dimension

    # -- batches ----------------------------------------------------------------------------

    def _write_batch(
        self,
        conn: psycopg.Connection[Any],
        workspace: str,
        project: str,
        batch: Sequence[_Record],
        embedder: Embedder | None,
        counts: _Counts,
    ) -> None:
        """One batch in its own transaction, traced as one span with what it changed."""
        model = None if embedder is None else embedder.model_id
        before = replace(counts)
        with telemetry.span(
            "ingest_batch", workspace=workspace, project=project, records=len(batch), model=model
        ) as span:
            self._write_batch_in_transaction(conn, workspace, project, batch, embedder, counts)
            after = asdict(counts)
            span.set(**{k: after[k] - v for k, v in asdict(before).items() if k != "read"})

    def _write_batch_in_transaction(
        self,
        conn: psycopg.Connection[Any],
        workspace: str,
        project: str,
        batch: Sequence[_Record],
        embedder: Embedder | None,
        counts: _Counts,
    ) -> None:
        with self._transaction(conn, workspace, project) as (cur, _ceiling):
            existing: dict[str, list[tuple[UUID, bytes, str]]] = {}
            for uri, fid, digest, cls in cur.execute(
                _EXISTING, (workspace, project, [r.source_uri for r in batch])
            ):
                existing.setdefault(uri, []).append((fid, bytes(digest), cls))

            ids: list[UUID | None] = [None] * len(batch)
            rows: list[tuple[int, UUID | None, _Record]] = []
            puts: set[int] = set()
            superseding: set[int] = set()
            for i, record in enumerate(batch):
                olds = existing.get(record.source_uri, [])
                same = [o for o in olds if o[1] == record.digest and o[2] == record.classification]
                if same:
                    ids[i] = same[0][0]
                    counts.unchanged += 1
                    # Any other active fragment of this source is superseded by the same one.
                    rows.extend((i, o[0], record) for o in olds if o not in same)
                elif olds:
                    superseding.add(i)
                    rows.extend((i, o[0], record) for o in olds)
                else:
                    puts.add(i)
                    rows.append((i, None, record))

            if rows:
                for i, fid in cur.execute(_WRITE, _write_params(workspace, project, rows)):
                    ids[i] = fid
            counts.superseded += len(superseding)
            if puts:
                put_ids = [ids[i] for i in sorted(puts)]
                created = {
                    fid
                    for (fid,) in cur.execute(
                        _CREATED_NOW, (workspace, project, put_ids)
                    ).fetchall()
                }
                seen: set[UUID] = set()
                for i in sorted(puts):
                    fid = ids[i]
                    assert fid is not None
                    # A body identical to another active fragment at the same classification
                    # (another source, or earlier in this batch) returns that fragment.
                    if fid in created and fid not in seen:
                        counts.inserted += 1
                    else:
                        counts.unchanged += 1
                    seen.add(fid)

            retract = [r.retract_beyond for r in batch if r.retract_beyond is not None]
            if retract:
                counts.retracted += self._retract_surplus(cur, workspace, project, retract)

            if embedder is not None:
                bodies: dict[UUID, _Record] = {}
                for i, record in enumerate(batch):
                    fid = ids[i]
                    assert fid is not None
                    bodies.setdefault(fid, record)
                targets = cur.execute(
                    _NEEDS_EMBEDDING, (workspace, project, embedder.model_id, list(bodies))
                ).fetchall()
                items = [
                    (fid, bodies[fid].body, bytes(digest), bodies[fid].digest)
                    for fid, digest, _missing in targets
                ]
                counts.embedded += self._embed(cur, workspace, project, embedder, items)
        counts.batches += 1

    def _retract_surplus(
        self,
        cur: psycopg.Cursor[TupleRow],
        workspace: str,
        project: str,
        limits: Sequence[tuple[str, int]],
    ) -> int:
        keep = dict(limits)
        next_uri = {f"{p}{n + 1}": p for p, n in keep.items()}
        grown = cur.execute(_NEXT_POSITION, (workspace, project, list(next_uri))).fetchall()
        if not grown:
            return 0
        keep = {next_uri[uri]: keep[next_uri[uri]] for (uri,) in grown}
        found = cur.execute(
            _SURPLUS, (workspace, project, [_like_prefix(p) for p in keep])
        ).fetchall()
        surplus: list[UUID] = []
        for fid, uri in found:
            prefix, _, position = str(uri).rpartition("#")
            limit = keep.get(prefix + "#")
            if limit is not None and position.isdigit() and int(position) > limit:
                surplus.append(fid)
        if surplus:
            cur.execute(_RETRACT, (workspace, project, surplus))
        return len(surplus)

    def _embed(
        self,
        cur: psycopg.Cursor[TupleRow],
        workspace: str,
        project: str,
        embedder: Embedder,
        items: Sequence[tuple[UUID, str, bytes, bytes]],
    ) -> int:
        """Embed (id, body, content digest, body digest) items and store them, one statement
        per chunk of :data:`EMBED_CHUNK` (all in the caller's transaction)."""
        if not items:
            return 0
        for fid, _body, content_digest, body_digest in items:
            if content_digest != body_digest:
                raise IntegrityViolation("digest_mismatch", fragment_id=fid)
        self._use_vectors(cur)
        for start in range(0, len(items), EMBED_CHUNK):
            chunk = items[start : start + EMBED_CHUNK]
            vectors = self._vectors(embedder, [body for _, body, _, _ in chunk])
            cur.execute(
                _PUT_EMBEDDINGS,
                (
                    workspace,
                    project,
                    embedder.model_id,
                    [fid for fid, _, _, _ in chunk],
                    vectors,
                    [digest for _, _, _, digest in chunk],
                ),
            )
        return len(items)

    @staticmethod
    def _vectors(embedder: Embedder, texts: list[str]) -> list[NDArray[np.float32]]:
        try:
            raw = embedder.embed_documents(texts)
        except PyretrieveError:
            raise
        except Exception as exc:
            # The embedder is outside our control and its message may quote the text.
            raise InternalError(
                f"embedder {embedder.model_id!r} failed ({type(exc).__name__})"
            ) from None
        if len(raw) != len(texts):
            raise InvalidEmbedding("the embedder returned a different number of vectors")
        vectors: list[NDArray[np.float32]] = []
        for values in raw:
            vector = canonical_embedding(values)
            if vector.shape[0] != embedder.dimension:
                raise InvalidEmbedding("the embedder returned a vector of the wrong dimension")
            vectors.append(vector)
        return vectors

    def _use_vectors(self, cur: psycopg.Cursor[TupleRow]) -> None:
        # pgvector's binary dumper, on this cursor only: the caller's connection keeps its own
        # adapters.
        from pgvector.psycopg.vector import register_vector_info

        if self._vector_info is None:
            self._vector_info = TypeInfo.fetch(cur.connection, "public.vector")
        register_vector_info(cast(Any, cur), self._vector_info)

    def _count_stale(
        self, conn: psycopg.Connection[Any], workspace: str, project: str, model: str
    ) -> int:
        with self._transaction(conn, workspace, project) as (cur, _ceiling):
            row = cur.execute(
                "SELECT count(*) FROM (" + _STALE + ") s", (workspace, project, model, None, None)
            ).fetchone()
        assert row is not None
        return int(row[0])

    def _reembed_batch(
        self,
        conn: psycopg.Connection[Any],
        workspace: str,
        project: str,
        embedder: Embedder,
        size: int,
        after: UUID | None,
        counts: _Counts,
    ) -> tuple[int, UUID | None]:
        # Keyset pagination by id: one pass over the scope, even if a write fails to fix a row.
        with self._transaction(conn, workspace, project) as (cur, _ceiling):
            rows = cur.execute(
                _STALE, (workspace, project, embedder.model_id, after or _NIL_UUID, size)
            ).fetchall()
            if not rows:
                return 0, after
            items = []
            for fid, body, digest, missing in rows:
                items.append(
                    (fid, str(body), bytes(digest), hashlib.sha256(body.encode("utf-8")).digest())
                )
                if missing:
                    counts.missing += 1
                else:
                    counts.stale += 1
            counts.embedded += self._embed(cur, workspace, project, embedder, items)
        counts.batches += 1
        return len(rows), rows[-1][0]


def _write_params(
    workspace: str, project: str, rows: Sequence[tuple[int, UUID | None, _Record]]
) -> dict[str, Any]:
    return {
        "ws": workspace,
        "pj": project,
        "i": [i for i, _, _ in rows],
        "old": [old for _, old, _ in rows],
        "body": [r.body for _, _, r in rows],
        "cls": [r.classification for _, _, r in rows],
        "obs": [r.observed_at for _, _, r in rows],
        "exp": [r.expires_at for _, _, r in rows],
        "uri": [r.source_uri for _, _, r in rows],
        "rev": [r.source_revision for _, _, r in rows],
        "man": [r.manifest_id for _, _, r in rows],
    }


def _check_scope(workspace: str, project: str) -> None:
    if not isinstance(workspace, str) or not _IDENT.fullmatch(workspace):
        raise InvalidInput(contract.identifier_error("workspace"))
    if not isinstance(project, str) or not _IDENT.fullmatch(project):
        raise InvalidInput(contract.identifier_error("project"))


def ingest(
    conn_or_pool: psycopg.Connection[Any] | Any,
    path: str | os.PathLike[str],
    *,
    workspace: str,
    project: str,
    principal: str | None = None,
    embedder: Embedder | str | None = None,
    classification: str = "internal",
    strict: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    source: str | None = None,
    sync: bool = False,
    retract_legacy: bool = False,
) -> IngestReport:
    """One call: ``Ingestor(...).ingest_path(...)``; ``embedder`` may be a model id."""
    if isinstance(embedder, str):
        from pyretrieve.embedders.registry import get_embedder

        embedder = get_embedder(embedder)
    return Ingestor(
        conn_or_pool, principal=principal, embedder=embedder, batch_size=batch_size
    ).ingest_path(
        path,
        workspace=workspace,
        project=project,
        classification=classification,
        strict=strict,
        progress=progress,
        max_chars=max_chars,
        source=source,
        sync=sync,
        retract_legacy=retract_legacy,
    )
