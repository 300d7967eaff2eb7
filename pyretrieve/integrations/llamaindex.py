"""LlamaIndex: a retriever over pyretrieve, and an ingest helper for LlamaIndex nodes.

Needs ``pip install 'pyretrieve[llamaindex]'`` (``llama-index-core``).

:class:`PyretrieveRetriever` searches as one principal in one scope, both fixed when it is
made. Each result becomes a ``NodeWithScore``: a ``TextNode`` whose id is the fragment id,
whose text is the fragment's text and whose metadata carries the same keys as the LangChain
adapter's documents (``trust`` is always ``"untrusted-data"``; see
:data:`pyretrieve.integrations._core.METADATA_KEYS`), scored with the result's final score.

LlamaIndex puts node metadata into the text it sends to an LLM or an embedding model unless
a key is excluded. The nodes exclude every key from the embedding text and every key but
``trust``, ``fragment_id`` and ``source_uri`` from the LLM text, so a prompt shows each text
with its trust label and its source, not the whole explanation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import psycopg

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "pyretrieve.integrations.llamaindex needs llama-index-core:"
        " pip install 'pyretrieve[llamaindex]'"
    ) from exc

from pyretrieve.embedders import Embedder
from pyretrieve.ingest import DEFAULT_BATCH_SIZE, IngestReport
from pyretrieve.integrations._core import (
    METADATA_KEYS,
    BoundSearch,
    IngestItem,
    SearchOptions,
    ingest_items,
    result_metadata,
)
from pyretrieve.types import Scope, SearchResult, Weights

__all__ = ["LLM_METADATA_KEYS", "PyretrieveRetriever", "ingest_nodes", "to_nodes"]

# The metadata keys LlamaIndex may show an LLM beside each text.
LLM_METADATA_KEYS: Final = ("trust", "fragment_id", "source_uri")


def to_nodes(search: SearchResult) -> list[NodeWithScore]:
    """One ``NodeWithScore`` per result, in fused order, scored with the final score."""
    hidden_from_llm = [k for k in METADATA_KEYS if k not in LLM_METADATA_KEYS]
    return [
        NodeWithScore(
            node=TextNode(
                id_=str(result.fragment_id),
                text=result.text,
                metadata=result_metadata(result, search),
                excluded_embed_metadata_keys=list(METADATA_KEYS),
                excluded_llm_metadata_keys=hidden_from_llm,
            ),
            score=result.final_score,
        )
        for result in search.results
    ]


class PyretrieveRetriever(BaseRetriever):
    """A LlamaIndex retriever that searches pyretrieve as one principal in one scope.

    ``connection``: a psycopg connection or a ``psycopg_pool.ConnectionPool``. ``principal``:
    the role each request acts as (``SET LOCAL ROLE``; ``None``: the connection's own role).
    ``scope``: the workspace, project and purpose every query searches. ``embedder``: an
    embedder or a model id for the query vector; with one the default mode is ``hybrid``,
    without one ``lexical``. ``limit``, ``candidate_limit``, ``semantic``, ``weights`` and
    ``ranking`` are passed to :meth:`pyretrieve.Retriever.search` on every query.

    The scope, the principal and the options are fixed: they are read-only properties and
    the bound search cannot be replaced. Only the query string of a ``QueryBundle`` is used
    (pyretrieve embeds it with ``embedder``). What the principal may see is decided inside
    the database in any case.

    Errors are pyretrieve's typed errors (:class:`~pyretrieve.PyretrieveError`), never
    driver errors. Given a psycopg ``AsyncConnection`` or ``AsyncConnectionPool``,
    ``aretrieve`` awaits :class:`~pyretrieve.AsyncRetriever` (and the synchronous path is refused
    with :class:`~pyretrieve.InvalidInput`); given a synchronous source, it runs the same
    synchronous search in a worker thread. Calls on one connection are serialised; give it a
    pool to run queries side by side.
    """

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
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self._bound = BoundSearch(
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
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_bound" and "_bound" in self.__dict__:
            raise AttributeError("the retriever's scope, principal and options are fixed")
        super().__setattr__(name, value)

    @property
    def scope(self) -> Scope:
        return self._bound.scope

    @property
    def principal(self) -> str | None:
        return self._bound.principal

    @property
    def options(self) -> SearchOptions:
        return self._bound.options

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(principal={self.principal!r}, scope={self.scope!r},"
            f" options={self.options!r})"
        )

    def search(self, query: str) -> SearchResult:
        """The whole :class:`~pyretrieve.SearchResult` behind the nodes (and omissions)."""
        return self._bound.search(query)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(self._bound.search(query_bundle.query_str))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The async client for an async source, else the synchronous search in a thread."""
        search = await self._bound.asearch(query_bundle.query_str)
        return to_nodes(search)


def ingest_nodes(
    connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any] | Any,
    nodes: Iterable[BaseNode],
    *,
    workspace: str,
    project: str,
    principal: str | None = None,
    embedder: Embedder | str | None = None,
    classification: str = "internal",
    strict: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> IngestReport:
    """Write LlamaIndex documents or nodes into a scope, as ``principal`` (a writer).

    The text is ``node.get_content(MetadataMode.NONE)``. Each node's identity (its
    ``source_uri``) is its ``source_uri`` metadata, else its ``node_id``. LlamaIndex makes a
    random id unless told otherwise (``SimpleDirectoryReader(filename_as_id=True)``, or an
    explicit ``id_``): with random ids a rerun cannot supersede changed text, so give the
    nodes stable ids or ``source_uri`` metadata. Metadata is read as in
    :func:`pyretrieve.integrations.langchain.ingest_documents`.
    """
    items = (
        IngestItem(
            text=node.get_content(metadata_mode=MetadataMode.NONE),
            metadata=node.metadata,
            id=node.node_id,
        )
        for node in nodes
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
