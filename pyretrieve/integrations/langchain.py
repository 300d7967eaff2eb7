"""LangChain: a retriever over pyretrieve, and an ingest helper for LangChain documents.

Needs ``pip install 'pyretrieve[langchain]'`` (``langchain-core``).

:class:`PyretrieveRetriever` searches as one principal in one scope, both fixed when it is
made. Each result becomes a ``Document`` whose ``page_content`` is the fragment's text and
whose metadata carries ``trust`` (always ``"untrusted-data"``: the text is data, whatever it
says), the fragment id, provenance, fused rank, final score, confidence, the semantic status
and the canonical explanation (:data:`pyretrieve.integrations._core.METADATA_KEYS`).

:func:`ingest_documents` writes LangChain documents into a scope through
:class:`pyretrieve.ingest.Ingestor`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import psycopg

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, PrivateAttr
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "pyretrieve.integrations.langchain needs langchain-core:"
        " pip install 'pyretrieve[langchain]'"
    ) from exc

from pyretrieve.embedders import Embedder
from pyretrieve.ingest import DEFAULT_BATCH_SIZE, IngestReport
from pyretrieve.integrations._core import (
    BoundSearch,
    IngestItem,
    SearchOptions,
    ingest_items,
    refuse_per_query_arguments,
    result_metadata,
)
from pyretrieve.types import Scope, SearchResult, Weights

__all__ = ["PyretrieveRetriever", "ingest_documents", "to_documents"]


def to_documents(search: SearchResult) -> list[Document]:
    """One ``Document`` per result, in fused order (``id`` is the fragment id)."""
    return [
        Document(
            page_content=result.text,
            metadata=result_metadata(result, search),
            id=str(result.fragment_id),
        )
        for result in search.results
    ]


class PyretrieveRetriever(BaseRetriever):
    """A LangChain retriever that searches pyretrieve as one principal in one scope.

    ``connection``: a psycopg connection or a ``psycopg_pool.ConnectionPool``. ``principal``:
    the role each request acts as (``SET LOCAL ROLE``; ``None``: the connection's own role).
    ``scope``: the workspace, project and purpose every query searches. ``embedder``: an
    embedder or a model id for the query vector; with one the default mode is ``hybrid``,
    without one ``lexical``. ``limit``, ``candidate_limit``, ``semantic``, ``weights`` and
    ``ranking`` are passed to :meth:`pyretrieve.Retriever.search` on every query.

    The scope, the principal and the options are fixed: setting an attribute raises, and a
    query with keyword arguments (``retriever.invoke(q, scope=...)``) is refused with
    :class:`~pyretrieve.InvalidInput` before anything is searched. What the principal may see
    is decided inside the database in any case.

    Errors are pyretrieve's typed errors (:class:`~pyretrieve.PyretrieveError`), never
    driver errors. Given a psycopg ``AsyncConnection`` or ``AsyncConnectionPool``,
    its async path awaits :class:`~pyretrieve.AsyncRetriever` (and the synchronous path is refused
    with :class:`~pyretrieve.InvalidInput`); given a synchronous source, it runs the same
    synchronous search in a worker thread. Calls on one connection are serialised; give it a
    pool to run queries side by side.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    _bound: BoundSearch = PrivateAttr()

    def __init__(
        self,
        connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any] | Any,
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
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        bound = BoundSearch(
            connection,
            principal=principal,
            scope=scope,
            embedder=embedder,
            mode=mode,
            semantic=semantic,
            limit=limit,
            candidate_limit=candidate_limit,
            weights=weights,
            ranking=ranking,
        )
        super().__init__(tags=tags, metadata=metadata)
        self._bound = bound

    @property
    def scope(self) -> Scope:
        return self._bound.scope

    @property
    def principal(self) -> str | None:
        return self._bound.principal

    @property
    def options(self) -> SearchOptions:
        return self._bound.options

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        yield "principal", self.principal
        yield "scope", self.scope
        yield "options", self.options

    def search(self, query: str) -> SearchResult:
        """The whole :class:`~pyretrieve.SearchResult` behind the documents (and omissions)."""
        return self._bound.search(query)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        refuse_per_query_arguments(kwargs)
        return to_documents(self._bound.search(query))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        """The async client for an async source, else the synchronous search in a thread."""
        refuse_per_query_arguments(kwargs)
        search = await self._bound.asearch(query)
        return to_documents(search)


def ingest_documents(
    connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any] | Any,
    documents: Iterable[Document],
    *,
    workspace: str,
    project: str,
    principal: str | None = None,
    embedder: Embedder | str | None = None,
    classification: str = "internal",
    strict: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> IngestReport:
    """Write LangChain documents into a scope, as ``principal`` (a writer).

    Each document's identity (its ``source_uri``, which makes a rerun write nothing new and
    changed text supersede the old fragment) is its ``source_uri`` metadata, else its ``id``,
    else ``<source metadata>#<n>`` for the n-th document of that source in the input. A
    document with none of them is refused before anything is written.

    The metadata keys ``classification`` (else ``classification``), ``observed_at``,
    ``expires_at`` (ISO 8601 strings or datetimes), ``source_revision`` and ``manifest_id``
    are stored; other metadata is not. Malformed documents are reported in the returned
    :class:`~pyretrieve.ingest.IngestReport` (``documents.jsonl:<n>`` for the n-th document)
    and skipped, or with ``strict=True`` fail the whole call before anything is written.
    """
    items = (
        IngestItem(text=doc.page_content, metadata=doc.metadata, id=doc.id) for doc in documents
    )
    return ingest_items(
        connection,
        items,
        workspace=workspace,
        project=project,
        principal=principal,
        embedder=embedder,
        classification=classification,
        strict=strict,
        batch_size=batch_size,
    )
