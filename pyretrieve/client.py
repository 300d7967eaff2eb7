"""The thin clients: one request is one transaction, in a fixed order.

:class:`Retriever` (a ``psycopg.Connection`` or ``psycopg_pool.ConnectionPool``) and
:class:`AsyncRetriever` (a ``psycopg.AsyncConnection`` or ``psycopg_pool.AsyncConnectionPool``)
share everything but the awaiting: the validation and the query embedding
(:mod:`pyretrieve.request`), the request path as statements
(:func:`pyretrieve.request.search_steps`), and the session boundary's decisions
(:mod:`pyretrieve.db.session`). Each drives the same steps with its own thin driver
(:mod:`pyretrieve.db.steps`), so both send the same statements, degrade alike and raise the
same typed errors, and their results are byte-identical.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

import numpy as np
import psycopg
from numpy.typing import NDArray

from pyretrieve import telemetry
from pyretrieve.db import steps as driver
from pyretrieve.db.errors import translate
from pyretrieve.db.session import (
    AsyncConnectionSource,
    ConnectionSource,
    async_pipelined_principal_transaction,
    async_principal_transaction,
    pipelined_principal_transaction,
    principal_transaction,
    refuse_privileged,
)
from pyretrieve.db.steps import Row, Steps
from pyretrieve.embedders import Embedder
from pyretrieve.errors import InvalidInput, PyretrieveError
from pyretrieve.request import (
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    SearchOptions,
    SearchRequest,
    build_request,
    calls_embedder,
    query_embedding,
    search_steps,
)
from pyretrieve.types import Scope, SearchResult, Weights
from pyretrieve.vectors import QueryEmbedding

__all__ = [
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "AsyncRetriever",
    "Retriever",
    "Row",
    "SearchOptions",
    "SearchRequest",
    "build_request",
]

T = TypeVar("T")
# What runs after the ranker, in the same transaction and under the same decision: more
# statements (tool discovery loads its metadata and schemas there).
Then = Callable[[SearchResult], Steps[T]]

if TYPE_CHECKING:
    from pyretrieve.tools.service import Discovery, Rediscovery, ToolSession


class _Client:
    """What both clients hold: the source, the principal and the embedders."""

    # The connection class of the other flavour: refused, because it would fail only at the
    # first request, and not with a typed error.
    _other: type[Any]
    _other_name: str

    def __init__(
        self,
        source: Any,
        *,
        principal: str | None,
        embedders: Iterable[Embedder],
        pipeline: bool = True,
    ) -> None:
        if isinstance(source, self._other):
            raise InvalidInput(f"{type(self).__name__} takes {self._other_name}")
        if not isinstance(pipeline, bool):
            raise InvalidInput("pipeline must be True or False")
        self._source = source
        self._principal = principal
        self._pipeline = pipeline
        self._embedders: dict[str, Embedder] = {e.model_id: e for e in embedders}
        self._owned = False

    def register_embedder(self, embedder: Embedder) -> None:
        """Embed queries for ``embedder.model_id`` with it when a search passes no embedding."""
        self._embedders[embedder.model_id] = embedder

    def _query_embedding(self, request: SearchRequest) -> QueryEmbedding:
        return query_embedding(request, self._embedders)

    @staticmethod
    def _steps(
        request: SearchRequest, embedding: QueryEmbedding, then: Then[T] | None
    ) -> Steps[SearchResult | T]:
        result = yield from search_steps(request, embedding)
        if then is None:
            return result
        return (yield from then(result))


class Retriever(_Client):
    """Policy-filtered hybrid search over a psycopg connection or connection pool.

    ``source``: a ``psycopg.Connection`` (used for one request at a time) or a
    ``psycopg_pool.ConnectionPool`` (each request borrows a connection for its transaction).
    The usual deployment logs in once as an application role that may only ``SET ROLE``, and
    acts as each caller's principal per request (``docs/async.md``).
    ``principal``: a role to act as for each request (``SET LOCAL ROLE`` inside the
    request's transaction); without it the connection's own role is the principal.
    ``embedders``: embedders by model id, used when a search names a ``model`` and passes no
    ``embedding``.
    ``pipeline``: send each request in psycopg's pipeline mode (the default): the statements
    that need no answer in between travel together, so a hybrid search takes five round trips
    to the server instead of ten. ``False`` sends them one by one, the same statements with
    the same results, for a connection path that cannot pipeline.
    """

    _other = psycopg.AsyncConnection
    _other_name = "a psycopg Connection or ConnectionPool (AsyncRetriever takes async ones)"

    def __init__(
        self,
        source: ConnectionSource | Any,
        *,
        principal: str | None = None,
        embedders: Iterable[Embedder] = (),
        pipeline: bool = True,
    ) -> None:
        super().__init__(source, principal=principal, embedders=embedders, pipeline=pipeline)

    @classmethod
    def connect(
        cls,
        dsn: str,
        *,
        principal: str | None = None,
        embedders: Iterable[Embedder] = (),
        pipeline: bool = True,
    ) -> Retriever:
        """A retriever over its own connection to ``dsn`` (closed by :meth:`close`)."""
        try:
            conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as exc:
            raise translate(exc) from None
        retriever = cls(conn, principal=principal, embedders=embedders, pipeline=pipeline)
        retriever._owned = True
        return retriever

    def close(self) -> None:
        """Close the connection :meth:`connect` opened (a source passed in is the caller's)."""
        if self._owned and isinstance(self._source, psycopg.Connection):
            self._source.close()

    def __enter__(self) -> Retriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def search(self, query: str, *, scope: Scope, **options: Unpack[SearchOptions]) -> SearchResult:
        """Search ``scope`` for ``query`` as the retriever's principal, in one transaction.

        ``mode``: ``hybrid`` (both legs, fused; the default), ``lexical`` or ``vector``.
        ``semantic``: ``optional`` (the default: a semantic leg that cannot run degrades,
        lowering confidence), ``required`` (it raises :class:`SemanticRequired` instead) or
        ``disabled``; the grant's semantic policy can require or disable it too. ``limit``:
        results to return (1..1000, default 10); the rest of the eligible fragments come back
        as omissions. ``candidate_limit``: candidates per leg, at most the decision's cap.
        ``embedding``: the query's vector for ``model``; without it the embedder registered
        for ``model`` embeds the query. ``fusion``: ``rrf`` (canonical Reciprocal Rank Fusion)
        or ``dbsf`` (distribution-based score fusion); ``weights``: per-leg fusion weights.
        Without them, the defaults registered with ``model`` (``register_model``), or RRF and
        1.0 each when no registered model is named; every explanation says which fusion ran,
        with its parameters, and where it and the weights came from. ``ranking``: ``bm25``
        (the default) or ``ts_rank`` (for comparison).

        Raises :class:`InvalidInput` before anything is sent when an argument breaks the
        contract, :class:`AccessDenied` when the principal holds no grant for the scope, and
        the other typed errors of ``docs/errors.md``; never a driver error.
        """
        return self.execute(build_request(query, scope=scope, **options))

    def execute(self, request: SearchRequest) -> SearchResult:
        """Run a validated request: one transaction, as the principal (a superuser session is
        refused), in the fixed order authorize, lexical, vector, fragments, then the ranker."""
        with telemetry.span("search", **telemetry.request_attributes(request)):
            result: SearchResult = self._execute(request, None)
            return result

    def _execute(self, request: SearchRequest, then: Then[T] | None) -> Any:
        """Run one request, then ``then``'s statements in the same transaction (tool
        discovery, which traces itself)."""
        # The query is embedded before any connection is taken: a slow model holds no
        # transaction open.
        with telemetry.leg("embed", model=request.model):
            embedding = self._query_embedding(request)
        return self._run(self._steps(request, embedding, then))

    def _run(self, steps: Steps[T]) -> T:
        """Drive ``steps`` in one transaction as the principal (a superuser is refused), in
        pipeline mode: one round trip per yield of the steps, not per statement."""
        try:
            if not self._pipeline:
                with principal_transaction(
                    self._source, self._principal, needs="a request", privileged_ok=False
                ) as conn:
                    return driver.run(conn, steps)
            with pipelined_principal_transaction(
                self._source, self._principal, needs="a request"
            ) as (conn, pipeline):
                return driver.run(conn, steps, pipeline=pipeline, after_first=refuse_privileged)
        except PyretrieveError:
            raise
        except Exception as exc:
            raise translate(exc) from None

    def _execute_in_transaction(
        self, conn: psycopg.Connection[Any], request: SearchRequest
    ) -> SearchResult:
        """The request's steps inside the current transaction, which must act as the principal
        and hold no decision yet (its one decision is the request's)."""
        return driver.run(conn, search_steps(request, self._query_embedding(request)))

    def discover_tools(
        self,
        query: str,
        *,
        scope: Scope,
        policy: str | None = None,
        mode: str = "hybrid",
        model: str | None = None,
        embedding: Sequence[float] | NDArray[np.floating] | None = None,
        protect: bool = True,
        adaptive: bool | None = None,
        master: bool = True,
        weights: Weights | None = None,
    ) -> Discovery:
        """Ranked authorised tools for a request, with confidence, K and the chosen schemas.

        ``weights``: per-leg RRF weights, as for :meth:`search`. See
        ``pyretrieve.tools.service.discover``; SQL callers get the same document from
        ``pyretrieve.discover_tools(...)``.
        """
        from pyretrieve.tools import service

        return service.discover(
            self,
            query,
            scope=scope,
            policy=policy,
            mode=mode,
            model=model,
            embedding=embedding,
            protect=protect,
            adaptive=adaptive,
            master=master,
            weights=weights,
        )

    def rediscover_tool(self, name: str, *, scope: Scope, session: ToolSession) -> Rediscovery:
        """A model named a tool it was not offered: check it again in a new transaction.

        See ``pyretrieve.tools.service.rediscover``.
        """
        from pyretrieve.tools import service

        return service.rediscover(self, name, scope=scope, session=session)


class AsyncRetriever(_Client):
    """:class:`Retriever` for asyncio: the same request path, errors, degradation and results.

    ``source``: a ``psycopg.AsyncConnection`` (one request at a time) or a
    ``psycopg_pool.AsyncConnectionPool``. ``principal`` and ``embedders`` as for
    :class:`Retriever`; an embedder is called in a worker thread, so a slow model does not
    block the event loop (and, as in the synchronous client, holds no transaction open).
    """

    _other = psycopg.Connection
    _other_name = "a psycopg AsyncConnection or AsyncConnectionPool (Retriever takes sync ones)"

    def __init__(
        self,
        source: AsyncConnectionSource | Any,
        *,
        principal: str | None = None,
        embedders: Iterable[Embedder] = (),
        pipeline: bool = True,
    ) -> None:
        super().__init__(source, principal=principal, embedders=embedders, pipeline=pipeline)

    @classmethod
    async def connect(
        cls,
        dsn: str,
        *,
        principal: str | None = None,
        embedders: Iterable[Embedder] = (),
        pipeline: bool = True,
    ) -> AsyncRetriever:
        """An async retriever over its own connection to ``dsn`` (closed by :meth:`close`)."""
        try:
            conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        except psycopg.Error as exc:
            raise translate(exc) from None
        retriever = cls(conn, principal=principal, embedders=embedders, pipeline=pipeline)
        retriever._owned = True
        return retriever

    async def close(self) -> None:
        """Close the connection :meth:`connect` opened (a source passed in is the caller's)."""
        if self._owned and isinstance(self._source, psycopg.AsyncConnection):
            await self._source.close()

    async def __aenter__(self) -> AsyncRetriever:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def search(
        self, query: str, *, scope: Scope, **options: Unpack[SearchOptions]
    ) -> SearchResult:
        """:meth:`Retriever.search`, awaited: the same arguments, result and errors."""
        return await self.execute(build_request(query, scope=scope, **options))

    async def execute(self, request: SearchRequest) -> SearchResult:
        """:meth:`Retriever.execute`, awaited."""
        with telemetry.span("search", **telemetry.request_attributes(request)):
            result: SearchResult = await self._aexecute(request, None)
            return result

    async def discover_tools(
        self,
        query: str,
        *,
        scope: Scope,
        policy: str | None = None,
        mode: str = "hybrid",
        model: str | None = None,
        embedding: Sequence[float] | NDArray[np.floating] | None = None,
        protect: bool = True,
        adaptive: bool | None = None,
        master: bool = True,
        weights: Weights | None = None,
    ) -> Discovery:
        """:meth:`Retriever.discover_tools`, awaited: the same arguments, document and errors."""
        from pyretrieve.tools import service

        return await service.adiscover(
            self,
            query,
            scope=scope,
            policy=policy,
            mode=mode,
            model=model,
            embedding=embedding,
            protect=protect,
            adaptive=adaptive,
            master=master,
            weights=weights,
        )

    async def rediscover_tool(
        self, name: str, *, scope: Scope, session: ToolSession
    ) -> Rediscovery:
        """:meth:`Retriever.rediscover_tool`, awaited."""
        from pyretrieve.tools import service

        return await service.arediscover(self, name, scope=scope, session=session)

    async def _aexecute(self, request: SearchRequest, then: Then[T] | None) -> Any:
        """:meth:`Retriever._execute`, awaited."""
        with telemetry.leg("embed", model=request.model):
            embedding = await self._aquery_embedding(request)
        return await self._arun(self._steps(request, embedding, then))

    async def _arun(self, steps: Steps[T]) -> T:
        """:meth:`Retriever._run`, awaited."""
        try:
            if not self._pipeline:
                async with async_principal_transaction(
                    self._source, self._principal, needs="a request", privileged_ok=False
                ) as conn:
                    return await driver.arun(conn, steps)
            async with async_pipelined_principal_transaction(
                self._source, self._principal, needs="a request"
            ) as (conn, pipeline):
                return await driver.arun(
                    conn, steps, pipeline=pipeline, after_first=refuse_privileged
                )
        except PyretrieveError:
            raise
        except Exception as exc:
            raise translate(exc) from None

    async def _aquery_embedding(self, request: SearchRequest) -> QueryEmbedding:
        if calls_embedder(request, self._embedders):
            return await asyncio.to_thread(self._query_embedding, request)
        return self._query_embedding(request)
