"""The Ingestor: reads an input, plans each batch, and has a writer carry it out."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

import psycopg
from psycopg import Cursor
from psycopg.rows import TupleRow, tuple_row

from pyretrieve import contract, telemetry
from pyretrieve.db import queries, session
from pyretrieve.embedders import Embedder
from pyretrieve.errors import (
    AccessDenied,
    IntegrityViolation,
    InvalidEmbedding,
    InvalidInput,
    NotFound,
    UnknownModel,
)
from pyretrieve.ingest.chunking import DEFAULT_MAX_CHARS
from pyretrieve.ingest.executor import (
    BatchWriter,
    BulkWriter,
    RowWriter,
    retract_surplus,
)
from pyretrieve.ingest.executor import retract as retract_fragments
from pyretrieve.ingest.plan import (
    document_of,
    documents_removed,
    legacy_firsts,
    like_prefix,
    lookup_uris,
    plan_batch,
    select_gone,
    select_legacy,
    tally,
)
from pyretrieve.ingest.records import CLASSIFICATIONS, MAX_SOURCE_URI, Record, body_digest
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
from pyretrieve.ingest.sources import Source, checked, open_source

__all__ = ["DEFAULT_BATCH_SIZE", "Ingestor", "WritePath", "ingest"]

DEFAULT_BATCH_SIZE = 256
_IDENT = contract.IDENTIFIER_RE
_NIL_UUID = UUID(int=0)  # sorts before every other uuid in PostgreSQL too
# How many uris one probe sends (the SQL functions take up to 100,000).
_PROBE_CHUNK = 10_000

# "bulk": COPY into a staging table, one set-based call per batch; "rows": one call per record.
WritePath = Literal["bulk", "rows"]


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


def _writer(path: WritePath) -> BatchWriter:
    if path == "rows":
        return RowWriter()
    if path == "bulk":
        return BulkWriter()
    raise InvalidInput("write_path must be 'bulk' or 'rows'")


class Ingestor:
    """Writes fragments (and, with an embedder, their embeddings) into one scope at a time.

    ``conn_or_pool``: a psycopg connection that is idle (no open transaction), or a
    ``psycopg_pool.ConnectionPool``. ``principal``: a writer role to act as in every
    transaction (``SET LOCAL ROLE``); without it the connection's own role writes.
    ``embedder``: embeds every new or changed fragment (and any whose embedding for that model
    is missing or stale); its model must be registered in the database. ``batch_size``:
    records per transaction. ``write_path``: ``"bulk"`` (the default) copies each batch into
    a temporary staging table of the writer's own and writes it with one set-based call
    (``pyretrieve.ingest_batch``); ``"rows"`` calls the SQL API once per record. Both write
    the same rows. ``compact``: compact the scope's lexical index after each ``ingest_path``
    and ``retract`` that wrote, and every ``contract.LEXICAL_MAX_PENDING_PAGES`` batches of a
    run, whenever ``compact_lexical_index``'s share rule says so (the default); turn it off when many small runs go into one
    scope and a maintenance job calls :meth:`compact` (or ``pyretrieve.compact_lexical_index``)
    instead: searches return the same results either way.

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
        write_path: WritePath = "bulk",
        compact: bool = True,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInput("batch_size must be a positive integer")
        self._source = conn_or_pool
        self._principal = principal
        self._embedder = embedder
        self._batch_size = batch_size
        self._writer = _writer(write_path)
        if not isinstance(compact, bool):
            raise InvalidInput("compact must be True or False")
        self._compact_after = compact

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
        input_source = open_source(target, classification, max_chars, source)
        embedder = self._embedder
        counts = _Counts()
        errors: list[IngestIssue] = []
        with self._connection() as conn:
            ceiling, _dimension = self._preflight(conn, workspace, project, embedder)
            if CLASSIFICATIONS.index(classification) > CLASSIFICATIONS.index(ceiling):
                raise AccessDenied("the default classification is above the writer's ceiling")
            total = self._total(input_source, ceiling, strict=strict, progress=progress)
            if progress is not None:
                progress(0, total)
            batch: list[Record] = []
            seen: set[str] = set()
            for item in checked(input_source.records(), ceiling):
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
                    if (
                        self._compact_after
                        and counts.batches % contract.LEXICAL_MAX_PENDING_PAGES == 0
                    ):
                        # A bulk batch leaves a pending page per bucket, each read by the leg
                        # for every term of its bucket until compaction merges it.
                        self._compact(conn, workspace, project, contract.LEXICAL_COMPACT_MIN_SHARE)
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
            if self._compact_after and (counts.inserted or counts.superseded or counts.retracted):
                self._compact(conn, workspace, project, contract.LEXICAL_COMPACT_MIN_SHARE)
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
                for uri, fid, _digest, _cls in cur.execute(
                    queries.INGEST_ACTIVE_SOURCES, (workspace, project, uris)
                ):
                    found[str(uri)].add(fid)
            documents = [u for u in uris if "#" not in u]
            if documents:
                patterns = [like_prefix(f"{u}#") for u in documents]
                for fid, uri in cur.execute(
                    queries.INGEST_ACTIVE_LIKE, (workspace, project, patterns)
                ):
                    document = str(uri).rpartition("#")[0]
                    while document not in found and "#" in document:
                        document = document.rpartition("#")[0]
                    if document in found:
                        found[document].add(fid)
            if prefixes:
                patterns = [like_prefix(p) for p in prefixes]
                for fid, uri in cur.execute(
                    queries.INGEST_ACTIVE_LIKE, (workspace, project, patterns)
                ):
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
            retract_fragments(cur, workspace, project, ids)
        if self._compact_after:
            with self._connection() as conn:
                self._compact(conn, workspace, project, contract.LEXICAL_COMPACT_MIN_SHARE)
        return RetractReport(
            workspace=workspace,
            project=project,
            retracted={u: len(fids) for u, fids in [*found.items(), *by_prefix.items()]},
        )

    def compact(self, *, workspace: str, project: str) -> CompactReport:
        """Compact the scope's lexical index for this writer's classifications: rare lexemes'
        postings move from a block each into pages shared by many. ``ingest_path`` and
        ``retract`` do it after they write, once the postings waiting in blocks are at least
        ``contract.LEXICAL_COMPACT_MIN_SHARE`` of those in pages; this call always does.
        Searches give the same results before and after; rows another transaction holds are
        left for a later run."""
        _check_scope(workspace, project)
        with self._connection() as conn:
            return self._compact(conn, workspace, project, 0.0)

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
            pattern = like_prefix(prefix or "")
            for _fid, uri in cur.execute(
                queries.INGEST_ACTIVE_LIKE, (workspace, project, [pattern])
            ):
                document = document_of(str(uri))
                documents[document] = documents.get(document, 0) + 1
        return SourceList(
            workspace=workspace, project=project, documents=dict(sorted(documents.items()))
        )

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
    ) -> Iterator[tuple[Cursor[TupleRow], str]]:
        """One transaction as the principal with the write scope bound; yields the ceiling."""
        with (
            session.as_principal(conn, self._principal),
            conn.cursor(row_factory=tuple_row) as cur,
        ):
            row = cur.execute(queries.INGEST_BIND_WRITE_SCOPE, (workspace, project)).fetchone()
            assert row is not None
            yield cur, str(row[0])

    def _compact(
        self, conn: psycopg.Connection[Any], workspace: str, project: str, min_share: float
    ) -> CompactReport:
        with self._transaction(conn, workspace, project) as (cur, _ceiling):
            row = cur.execute(queries.INGEST_COMPACT, (workspace, project, min_share)).fetchone()
        assert row is not None
        return CompactReport(
            workspace=workspace,
            project=project,
            rows_read=int(row[0]),
            rows_written=int(row[1]),
            postings=int(row[2]),
        )

    def _preflight(
        self, conn: psycopg.Connection[Any], workspace: str, project: str, embedder: Embedder | None
    ) -> tuple[str, int | None]:
        """Fail early, before reading any input: access to the scope and the model's registration."""
        with self._transaction(conn, workspace, project) as (cur, ceiling):
            if embedder is None:
                return ceiling, None
            row = cur.execute(queries.INGEST_MODEL_DIMENSION, (embedder.model_id,)).fetchone()
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

    @staticmethod
    def _total(
        input_source: Source, ceiling: str, *, strict: bool, progress: Progress | None
    ) -> int | None:
        """Strict mode validates the whole input first; otherwise a cheap bound for progress."""
        if not strict:
            return input_source.lines() if progress is not None else None
        total = 0
        problems: list[IngestIssue] = []
        for item in checked(input_source.records(), ceiling):
            if isinstance(item, IngestIssue):
                problems.append(item)
            else:
                total += 1
        if problems:
            raise MalformedInput(problems)
        return total

    # -- batches ----------------------------------------------------------------------------

    def _write_batch(
        self,
        conn: psycopg.Connection[Any],
        workspace: str,
        project: str,
        batch: Sequence[Record],
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
        batch: Sequence[Record],
        embedder: Embedder | None,
        counts: _Counts,
    ) -> None:
        model = None if embedder is None else embedder.model_id
        with self._transaction(conn, workspace, project) as (cur, _ceiling):
            existing = self._writer.lookup(cur, workspace, project, lookup_uris(batch), model)
            plan = plan_batch(batch, existing, model=embedder is not None)
            outcomes = self._writer.apply(cur, workspace, project, plan, embedder)
            counts.retracted += retract_surplus(cur, workspace, project, plan)
        result = tally(plan, outcomes)
        counts.inserted += result.inserted
        counts.unchanged += result.unchanged
        counts.superseded += result.superseded
        counts.embedded += result.embedded
        counts.batches += 1

    def _legacy(
        self,
        conn: psycopg.Connection[Any],
        workspace: str,
        project: str,
        source: Source,
        seen: set[str],
        counts: _Counts,
        *,
        retract: bool,
    ) -> list[str]:
        """The folder's files still active under their names from before source names
        (``<relative path>#<n>``), retracted too when ``retract``; the documents found.

        A document is found by its first fragment, then all its positions by prefix."""
        if source.legacy_names is None:
            return []
        names = source.legacy_names()
        if not names:
            return []
        with self._transaction(conn, workspace, project) as (cur, _ceiling):
            present: list[str] = []
            for start in range(0, len(names), _PROBE_CHUNK):
                firsts = legacy_firsts(names[start : start + _PROBE_CHUNK])
                rows = cur.execute(
                    queries.INGEST_ACTIVE_SOURCES, (workspace, project, firsts)
                ).fetchall()
                present.extend(document_of(str(uri)) for uri, *_ in rows if uri not in seen)
            if not present:
                return []
            wanted = set(present)
            gone: list[UUID] = []
            for start in range(0, len(present), _PROBE_CHUNK):
                patterns = [like_prefix(f"{n}#") for n in present[start : start + _PROBE_CHUNK]]
                rows = cur.execute(
                    queries.INGEST_ACTIVE_LIKE, (workspace, project, patterns)
                ).fetchall()
                gone += select_legacy(
                    ((fid, str(uri)) for fid, uri in rows), documents=wanted, seen=seen
                )
            if retract:
                retract_fragments(cur, workspace, project, gone)
        if retract:
            counts.retracted += len(gone)
        return sorted(wanted)

    def _sync(
        self,
        conn: psycopg.Connection[Any],
        workspace: str,
        project: str,
        source: Source,
        seen: set[str],
        errors: Sequence[IngestIssue],
        counts: _Counts,
    ) -> list[str]:
        """Retract the source's active fragments that this run's input no longer holds."""
        if errors and source.kind != "text":
            return []
        with self._transaction(conn, workspace, project) as (cur, _ceiling):
            rows = cur.execute(
                queries.INGEST_ACTIVE_LIKE, (workspace, project, [like_prefix(source.prefix)])
            ).fetchall()
            gone = select_gone(
                ((fid, str(uri)) for fid, uri in rows), seen=seen, errors=errors, kind=source.kind
            )
            retract_fragments(cur, workspace, project, [fid for fid, _ in gone])
        counts.retracted += len(gone)
        return documents_removed(gone, kind=source.kind)

    def _count_stale(
        self, conn: psycopg.Connection[Any], workspace: str, project: str, model: str
    ) -> int:
        with self._transaction(conn, workspace, project) as (cur, _ceiling):
            row = cur.execute(
                queries.INGEST_COUNT_STALE, (workspace, project, model, None, None)
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
                queries.INGEST_STALE,
                (workspace, project, embedder.model_id, after or _NIL_UUID, size),
            ).fetchall()
            if not rows:
                return 0, after
            items: list[tuple[UUID, str]] = []
            for fid, body, digest, missing in rows:
                if bytes(digest) != body_digest(str(body)):
                    raise IntegrityViolation("digest_mismatch", fragment_id=fid)
                items.append((fid, str(body)))
                if missing:
                    counts.missing += 1
                else:
                    counts.stale += 1
            counts.embedded += self._writer.store_embeddings(
                cur, workspace, project, embedder, items
            )
        counts.batches += 1
        return len(rows), rows[-1][0]


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
    write_path: WritePath = "bulk",
) -> IngestReport:
    """One call: ``Ingestor(...).ingest_path(...)``; ``embedder`` may be a model id."""
    if isinstance(embedder, str):
        from pyretrieve.embedders.registry import get_embedder

        embedder = get_embedder(embedder)
    return Ingestor(
        conn_or_pool,
        principal=principal,
        embedder=embedder,
        batch_size=batch_size,
        write_path=write_path,
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
