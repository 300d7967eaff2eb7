"""What the framework adapters share: a bound search, result metadata and document ingestion.

Nothing here imports a framework. :class:`BoundSearch` is a :class:`pyretrieve.Retriever`
bound to one principal, one scope and one set of search options; :func:`result_metadata`
turns a result into the plain-JSON metadata both adapters attach; :func:`ingest_items`
writes (text, metadata, id) items into a scope through :class:`pyretrieve.ingest.Ingestor`.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import psycopg

from pyretrieve.client import AsyncRetriever, Retriever
from pyretrieve.client import SearchOptions as ClientOptions
from pyretrieve.db.errors import translate
from pyretrieve.embedders import Embedder
from pyretrieve.errors import InvalidInput, PyretrieveError
from pyretrieve.ingest import DEFAULT_BATCH_SIZE, Ingestor, IngestReport
from pyretrieve.types import TRUST_LABEL, JsonValue, Result, Scope, SearchResult, Weights

__all__ = [
    "INGEST_FILE_NAME",
    "METADATA_KEYS",
    "BoundSearch",
    "IngestItem",
    "SearchOptions",
    "ingest_items",
    "refuse_per_query_arguments",
    "result_metadata",
]

# The keys every adapter puts in a result's metadata, in this order.
METADATA_KEYS: Final = (
    "trust",
    "fragment_id",
    "workspace_id",
    "project_id",
    "classification",
    "source_uri",
    "provenance",
    "fused_rank",
    "final_score",
    "confidence",
    "semantic",
    "retrieval_id",
    "explanation",
)

# Metadata keys of an input document that ingestion reads; every other key is not stored.
_INGEST_KEYS: Final = (
    "classification",
    "observed_at",
    "expires_at",
    "source_revision",
    "manifest_id",
)

# The name of the temporary JSON Lines file, so an ingest issue reads "documents.jsonl:3"
# for the third document of the input.
INGEST_FILE_NAME: Final = "documents.jsonl"

_MODES: Final = ("hybrid", "lexical", "vector")


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchOptions:
    """The search settings an adapter applies to every query (see ``Retriever.search``)."""

    mode: str = "hybrid"
    semantic: str = "optional"
    limit: int = 10
    candidate_limit: int | None = None
    model: str | None = None
    weights: Weights | None = None
    ranking: str = "bm25"


def refuse_per_query_arguments(kwargs: Mapping[str, object]) -> None:
    """Adapters take a query and nothing else: scope, principal and options are fixed."""
    if kwargs:
        raise InvalidInput(
            "this retriever takes no per-query arguments: its scope, principal and search"
            " options are fixed when it is made"
        )


def _check_positive(value: object, what: str) -> None:
    # The upper bounds are the client's; it checks them on every search.
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInput(f"{what} must be a positive integer")


class BoundSearch:
    """A :class:`~pyretrieve.Retriever` bound to one principal, one scope and fixed options.

    ``source`` is a psycopg connection or a ``psycopg_pool.ConnectionPool``. Calls on one
    connection are serialised with a lock (a request is one transaction, and a connection
    holds one transaction at a time); calls through a pool run side by side.

    ``embedder``: an embedder (or a model id for :func:`pyretrieve.get_embedder`) for the
    query vector; without one the search is lexical unless ``mode`` says otherwise.
    Every failure is a :class:`~pyretrieve.PyretrieveError`; driver errors are translated.
    """

    def __init__(
        self,
        source: psycopg.Connection[Any] | Any,
        *,
        principal: str | None,
        scope: Scope,
        embedder: Embedder | str | None = None,
        mode: str | None = None,
        semantic: str = "optional",
        limit: int = 10,
        candidate_limit: int | None = None,
        weights: Weights | None = None,
        ranking: str = "bm25",
    ) -> None:
        if not isinstance(scope, Scope):
            raise InvalidInput("scope must be a Scope")
        if principal is not None and (not isinstance(principal, str) or not principal):
            raise InvalidInput("principal must be a role name or None")
        if mode is not None and mode not in _MODES:
            raise InvalidInput("mode must be hybrid, lexical or vector")
        if semantic not in ("optional", "required", "disabled"):
            raise InvalidInput("semantic must be optional, required or disabled")
        if ranking not in ("bm25", "ts_rank"):
            raise InvalidInput("ranking must be bm25 or ts_rank")
        _check_positive(limit, "limit")
        if candidate_limit is not None:
            _check_positive(candidate_limit, "candidate_limit")
        if weights is not None and not isinstance(weights, Weights):
            raise InvalidInput("weights must be Weights")
        if isinstance(embedder, str):
            from pyretrieve.embedders.registry import get_embedder

            embedder = get_embedder(embedder)
        if embedder is not None and not isinstance(embedder, Embedder):
            raise InvalidInput("embedder must be an Embedder or a model id")
        self._scope = scope
        self._principal = principal
        self._options = SearchOptions(
            mode=mode or ("hybrid" if embedder is not None else "lexical"),
            semantic=semantic,
            limit=limit,
            candidate_limit=candidate_limit,
            model=None if embedder is None else embedder.model_id,
            weights=weights,
            ranking=ranking,
        )
        embedders = () if embedder is None else (embedder,)
        # An async source (AsyncConnection or AsyncConnectionPool) gets the async client, so
        # the framework's async path awaits the database instead of borrowing a thread.
        self._async = isinstance(source, psycopg.AsyncConnection) or _is_async_pool(source)
        self._client: Retriever | None = None
        self._aclient: AsyncRetriever | None = None
        if self._async:
            self._aclient = AsyncRetriever(source, principal=principal, embedders=embedders)
        else:
            self._client = Retriever(source, principal=principal, embedders=embedders)
        self._lock = threading.Lock() if isinstance(source, psycopg.Connection) else None
        self._alock = asyncio.Lock() if isinstance(source, psycopg.AsyncConnection) else None

    @property
    def scope(self) -> Scope:
        return self._scope

    @property
    def principal(self) -> str | None:
        return self._principal

    @property
    def options(self) -> SearchOptions:
        return self._options

    @property
    def is_async(self) -> bool:
        """Whether the source is asynchronous (then only :meth:`asearch` searches)."""
        return self._async

    def search(self, query: str) -> SearchResult:
        """One search as the bound principal in the bound scope."""
        if self._client is None:
            raise InvalidInput("this retriever holds an async source: use its async methods")
        if self._lock is None:
            return self._search(self._client, query)
        with self._lock:
            return self._search(self._client, query)

    async def asearch(self, query: str) -> SearchResult:
        """:meth:`search`, awaited: the async client for an async source, else the
        synchronous search in a worker thread."""
        if self._aclient is None:
            return await asyncio.to_thread(self.search, query)
        if self._alock is None:
            return await self._asearch(self._aclient, query)
        async with self._alock:
            return await self._asearch(self._aclient, query)

    def _search(self, client: Retriever, query: str) -> SearchResult:
        try:
            return client.search(query, scope=self._scope, **self._search_options())
        except PyretrieveError:
            raise
        except psycopg.Error as exc:
            # A pool that cannot hand out a connection raises before the client's own
            # translation applies.
            raise translate(exc) from None

    async def _asearch(self, client: AsyncRetriever, query: str) -> SearchResult:
        try:
            return await client.search(query, scope=self._scope, **self._search_options())
        except PyretrieveError:
            raise
        except psycopg.Error as exc:
            raise translate(exc) from None

    def _search_options(self) -> ClientOptions:
        o = self._options
        return ClientOptions(
            mode=o.mode,
            semantic=o.semantic,
            limit=o.limit,
            candidate_limit=o.candidate_limit,
            model=o.model,
            weights=o.weights,
            ranking=o.ranking,
        )


def _is_async_pool(source: object) -> bool:
    try:
        from psycopg_pool import AsyncConnectionPool
    except ImportError:  # pragma: no cover - psycopg_pool is a dependency
        return False
    return isinstance(source, AsyncConnectionPool)


def result_metadata(result: Result, search: SearchResult) -> dict[str, JsonValue]:
    """The metadata of one result: who may see it, where it came from, why it ranked.

    ``explanation`` is the canonical explanation (``Result.to_plain()``); the other keys
    repeat parts of it at the top level for frameworks that filter on flat keys. ``trust``
    is the constant label for untrusted data, never derived from the content.
    """
    explanation = result.to_plain()
    provenance = explanation["provenance"]
    record = result.record
    return {
        "trust": TRUST_LABEL,
        "fragment_id": str(record.fragment_id),
        "workspace_id": record.workspace_id,
        "project_id": record.project_id,
        "classification": record.classification.value,
        "source_uri": record.source_uri,
        "provenance": provenance,
        "fused_rank": result.fused_rank,
        "final_score": result.final_score,
        "confidence": result.confidence,
        "semantic": search.semantic.to_plain(),
        "retrieval_id": search.retrieval_id,
        "explanation": explanation,
    }


@dataclass(frozen=True, kw_only=True, slots=True)
class IngestItem:
    """One text to ingest, the metadata it came with and the framework's id for it."""

    text: str
    metadata: Mapping[str, Any]
    id: str | None = None


def _source_uris(items: Sequence[IngestItem]) -> list[str]:
    """Each item's identity: ``source_uri`` metadata, else its id, else ``<source>#<n>``."""
    uris: list[str] = []
    positions: dict[str, int] = {}
    for number, item in enumerate(items, start=1):
        uri = item.metadata.get("source_uri")
        if uri is None and item.id:
            uri = item.id
        if uri is None and isinstance(item.metadata.get("source"), str):
            source = str(item.metadata["source"])
            positions[source] = positions.get(source, 0) + 1
            uri = f"{source}#{positions[source]}"
        if not isinstance(uri, str) or not uri:
            raise InvalidInput(
                f"document {number} has no identity: give it a source_uri or source"
                " metadata value, or an id"
            )
        uris.append(uri)
    return uris


def _json_value(number: int, key: str, value: object) -> object:
    if isinstance(value, datetime):
        # Naive datetimes are read as UTC, as ingestion reads timestamps without an offset.
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return aware.isoformat()
    if value is None or isinstance(value, str):
        return value
    raise InvalidInput(f"document {number}: metadata {key} must be a string or a datetime")


def ingest_items(
    source: psycopg.Connection[Any] | Any,
    items: Iterable[IngestItem],
    *,
    workspace: str,
    project: str,
    principal: str | None = None,
    embedder: Embedder | str | None = None,
    classification: str = "internal",
    strict: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> IngestReport:
    """Write items into one scope through ``Ingestor.ingest_path`` (a temporary JSONL file).

    The JSON Lines file lives in a private temporary folder for the duration of the call.
    Line ``n`` of it is the ``n``-th item, so an issue's line number is the item's position.
    """
    listed = list(items)
    uris = _source_uris(listed)
    if isinstance(embedder, str):
        from pyretrieve.embedders.registry import get_embedder

        embedder = get_embedder(embedder)
    with tempfile.TemporaryDirectory(prefix="pyretrieve-ingest-") as folder:
        path = Path(folder) / INGEST_FILE_NAME
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for number, (item, uri) in enumerate(zip(listed, uris, strict=True), start=1):
                if not isinstance(item.text, str):
                    raise InvalidInput(f"document {number}: its text must be a string")
                record: dict[str, object] = {"id": number, "text": item.text, "source_uri": uri}
                for key in _INGEST_KEYS:
                    value = _json_value(number, key, item.metadata.get(key))
                    if value is not None:
                        record[key] = value
                # ASCII escapes: a lone surrogate reaches the ingest checks as text to
                # refuse with an issue, instead of failing to encode here.
                out.write(json.dumps(record) + "\n")
        ingestor = Ingestor(source, principal=principal, embedder=embedder, batch_size=batch_size)
        try:
            report = ingestor.ingest_path(
                path,
                workspace=workspace,
                project=project,
                classification=classification,
                strict=strict,
            )
        except PyretrieveError:
            raise
        except psycopg.Error as exc:
            raise translate(exc) from None
    # The temporary file is gone: the report names the input as the issues do.
    return replace(report, path=INGEST_FILE_NAME)
