"""The thin client: one request is one transaction, in a fixed order.

authorize → lexical candidates → vector candidates (when mode, intent and policy allow and an
embedding exists) → authoritative records → the pure ranker. Nothing but digests and intent
reaches authorize(); a deny or an error ends the request before any candidate query runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast
from uuid import UUID

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg.rows import dict_row

from pyretrieve import contract, ranking
from pyretrieve.db.errors import translate
from pyretrieve.db.session import ConnectionSource, principal_transaction
from pyretrieve.embedders import Embedder
from pyretrieve.errors import (
    InvalidEmbedding,
    InvalidInput,
    LexicalFailure,
    PyretrieveError,
    SemanticRequired,
    UnknownModel,
)
from pyretrieve.types import (
    DegradationReason,
    Fusion,
    FusionSettings,
    JsonValue,
    Scope,
    SearchResult,
    SemanticStatus,
    Weights,
    WeightsSource,
)
from pyretrieve.vectors import canonical_embedding, embedding_digest, to_pgvector_text

Mode = Literal["hybrid", "lexical", "vector"]
SemanticIntent = Literal["optional", "required", "disabled"]
Ranking = Literal["bm25", "ts_rank"]

MAX_QUERY_CHARS = contract.MAX_QUERY_CHARS
MAX_LIMIT = contract.MAX_LIMIT

Row = dict[str, Any]
T = TypeVar("T")

if TYPE_CHECKING:
    from pyretrieve.tools.service import Discovery, Rediscovery, ToolSession


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchRequest:
    """A validated, frozen request. The query text goes only to the lexical function."""

    query: str
    scope: Scope
    mode: Mode
    semantic: SemanticIntent
    limit: int
    candidate_limit: int | None
    model: str | None
    embedding: bytes | None  # float32 little-endian, canonical
    # None: the model's registered defaults (or 1.0 each), resolved in the request's transaction.
    weights: Weights | None
    query_digest: bytes
    ranking: Ranking = "bm25"
    # None: the model's registered default (or RRF), resolved in the request's transaction.
    fusion: Fusion | None = None

    @property
    def wants_vector(self) -> bool:
        return self.mode != "lexical" and self.semantic != "disabled"

    @property
    def wants_lexical(self) -> bool:
        return self.mode != "vector"


@dataclass(frozen=True, kw_only=True, slots=True)
class _VectorLeg:
    rows: list[Row] | None
    status: SemanticStatus
    digest: bytes | None


def _check_ident(value: object, what: str) -> str:
    if not isinstance(value, str) or not contract.is_identifier(value):
        raise InvalidInput(f"invalid {what}")
    return value


def _check_int(value: object, what: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidInput(f"{what} must be an integer between {low} and {high}")
    return value


def build_request(
    query: str,
    *,
    scope: Scope,
    mode: str = "hybrid",
    semantic: str = "optional",
    limit: int = 10,
    candidate_limit: int | None = None,
    embedding: Sequence[float] | NDArray[np.floating] | None = None,
    model: str | None = None,
    weights: Weights | None = None,
    ranking: str = "bm25",
    fusion: str | None = None,
) -> SearchRequest:
    """Validate everything that can be validated before touching the database."""
    if not isinstance(query, str) or not 1 <= len(query) <= MAX_QUERY_CHARS:
        raise InvalidInput(f"query must be 1 to {MAX_QUERY_CHARS} characters")
    if not isinstance(scope, Scope):
        raise InvalidInput("scope must be a Scope")
    _check_ident(scope.workspace, "workspace")
    _check_ident(scope.project, "project")
    _check_ident(scope.purpose, "purpose")
    if mode not in ("hybrid", "lexical", "vector"):
        raise InvalidInput("mode must be hybrid, lexical or vector")
    if semantic not in ("optional", "required", "disabled"):
        raise InvalidInput("semantic must be optional, required or disabled")
    if ranking not in ("bm25", "ts_rank"):
        raise InvalidInput("ranking must be bm25 or ts_rank")
    if fusion is not None and fusion not in contract.FUSIONS:
        raise InvalidInput(f"fusion must be {' or '.join(contract.FUSIONS)}")
    if mode == "vector" and semantic == "disabled":
        raise InvalidInput("vector mode needs semantic retrieval")
    _check_int(limit, "limit", 1, MAX_LIMIT)
    if candidate_limit is not None:
        _check_int(candidate_limit, "candidate_limit", 1, MAX_LIMIT)
    if model is not None and (
        not isinstance(model, str) or not 1 <= len(model) <= contract.MAX_MODEL_ID_CHARS
    ):
        raise InvalidInput("invalid model id")
    if weights is not None and not isinstance(weights, Weights):
        raise InvalidInput("weights must be Weights")
    vector_bytes = None
    if embedding is not None:
        vector_bytes = canonical_embedding(embedding).tobytes()
    return SearchRequest(
        query=query,
        scope=scope,
        mode=cast(Mode, mode),
        semantic=cast(SemanticIntent, semantic),
        limit=limit,
        candidate_limit=candidate_limit,
        model=model,
        embedding=vector_bytes,
        weights=weights,
        query_digest=hashlib.sha256(query.encode("utf-8")).digest(),
        ranking=cast(Ranking, ranking),
        fusion=None if fusion is None else Fusion(fusion),
    )


class Retriever:
    """Policy-filtered hybrid search over a psycopg connection or pool.

    ``principal``: a role to act as for each request (``SET LOCAL ROLE`` inside the
    request's transaction); without it the connection's own role is the principal.
    ``embedders``: embedders by model id, used when a search names a ``model`` and passes no
    ``embedding``.
    """

    def __init__(
        self,
        source: ConnectionSource | Any,
        *,
        principal: str | None = None,
        embedders: Iterable[Embedder] = (),
    ) -> None:
        self._source = source
        self._principal = principal
        self._embedders: dict[str, Embedder] = {e.model_id: e for e in embedders}
        self._owned = False

    @classmethod
    def connect(
        cls, dsn: str, *, principal: str | None = None, embedders: Iterable[Embedder] = ()
    ) -> Retriever:
        try:
            conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as exc:
            raise translate(exc) from None
        retriever = cls(conn, principal=principal, embedders=embedders)
        retriever._owned = True
        return retriever

    def close(self) -> None:
        if self._owned and isinstance(self._source, psycopg.Connection):
            self._source.close()

    def __enter__(self) -> Retriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register_embedder(self, embedder: Embedder) -> None:
        self._embedders[embedder.model_id] = embedder

    def search(
        self,
        query: str,
        *,
        scope: Scope,
        mode: str = "hybrid",
        semantic: str = "optional",
        limit: int = 10,
        candidate_limit: int | None = None,
        embedding: Sequence[float] | NDArray[np.floating] | None = None,
        model: str | None = None,
        weights: Weights | None = None,
        ranking: str = "bm25",
        fusion: str | None = None,
    ) -> SearchResult:
        """Search ``scope`` for ``query`` as the retriever's principal, in one transaction.

        ``mode``: ``hybrid`` (both legs, fused), ``lexical`` or ``vector``. ``semantic``:
        ``optional`` (a semantic leg that cannot run degrades, lowering confidence),
        ``required`` (it raises :class:`SemanticRequired` instead) or ``disabled``; the grant's
        semantic policy can require or disable it too. ``limit``: results to return
        (1..1000); the rest of the eligible fragments come back as omissions.
        ``candidate_limit``: candidates per leg, at most the decision's cap. ``embedding``:
        the query's vector for ``model``; without it the embedder registered for ``model``
        embeds the query. ``fusion``: ``rrf`` (canonical Reciprocal Rank Fusion) or ``dbsf``
        (distribution-based score fusion); ``weights``: per-leg fusion weights. Without them,
        the defaults registered with ``model`` (``register_model``), or RRF and 1.0 each when
        no registered model is named; every explanation says which and from where.
        ``ranking``: ``bm25`` or ``ts_rank`` (for comparison).

        Raises :class:`InvalidInput` before anything is sent when an argument breaks the
        contract, :class:`AccessDenied` when the principal holds no grant for the scope, and
        the other typed errors of ``docs/errors.md``; never a driver error.
        """
        request = build_request(
            query,
            scope=scope,
            mode=mode,
            semantic=semantic,
            limit=limit,
            candidate_limit=candidate_limit,
            embedding=embedding,
            model=model,
            weights=weights,
            ranking=ranking,
            fusion=fusion,
        )
        return self.execute(request)

    def execute(self, request: SearchRequest) -> SearchResult:
        """Run a validated request: one transaction, as the principal (a superuser session is
        refused), in the fixed order authorize, lexical, vector, fragments, then the ranker."""
        result: SearchResult = self._execute(request, None)
        return result

    def _execute(
        self, request: SearchRequest, then: Callable[[psycopg.Cursor[Row], SearchResult], T] | None
    ) -> Any:
        """Run one request; ``then`` runs after the ranker, in the same transaction and under
        the same decision (tool discovery loads its metadata and schemas there)."""
        # The query is embedded before any connection is taken: a slow model holds no
        # transaction open.
        vector_input, adapter_status = self._query_embedding(request)
        digest = None if vector_input is None else embedding_digest(vector_input)
        try:
            with principal_transaction(
                self._source, self._principal, needs="a request", privileged_ok=False
            ) as conn:
                result = self._run(conn, request, vector_input, digest, adapter_status)
                if then is None:
                    return result
                return then(conn.cursor(row_factory=dict_row), result)
        except PyretrieveError:
            raise
        except Exception as exc:
            raise translate(exc) from None

    def _execute_in_transaction(
        self, conn: psycopg.Connection[Any], request: SearchRequest
    ) -> SearchResult:
        """The request's steps inside the current transaction, which must act as the principal
        and hold no decision yet (its one decision is the request's)."""
        vector_input, adapter_status = self._query_embedding(request)
        digest = None if vector_input is None else embedding_digest(vector_input)
        return self._run(conn, request, vector_input, digest, adapter_status)

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
    ) -> Discovery:
        """Ranked authorised tools for a request, with confidence, K and the chosen schemas.

        See ``pyretrieve.tools.service.discover``.
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
        )

    def rediscover_tool(self, name: str, *, scope: Scope, session: ToolSession) -> Rediscovery:
        """A model named a tool it was not offered: check it again in a new transaction.

        See ``pyretrieve.tools.service.rediscover``.
        """
        from pyretrieve.tools import service

        return service.rediscover(self, name, scope=scope, session=session)

    # ------------------------------------------------------------------------------------

    def _query_embedding(
        self, request: SearchRequest
    ) -> tuple[NDArray[np.float32] | None, SemanticStatus | None]:
        if not request.wants_vector:
            return None, None
        if request.embedding is not None:
            return np.frombuffer(request.embedding, dtype="<f4"), None
        embedder = self._embedders.get(request.model) if request.model else None
        if embedder is None:
            return None, SemanticStatus.degraded(
                DegradationReason.MISSING_EMBEDDING,
                {"model": request.model, "embedder_registered": False},
            )
        try:
            return canonical_embedding(embedder.embed_query(request.query)), None
        except Exception:
            # The adapter is outside our control; its error text may quote the query.
            return None, SemanticStatus.degraded(
                DegradationReason.ADAPTER_FAILURE, {"model": request.model}
            )

    def _run(
        self,
        conn: psycopg.Connection[Any],
        request: SearchRequest,
        vector_input: NDArray[np.float32] | None,
        digest: bytes | None,
        adapter_status: SemanticStatus | None,
    ) -> SearchResult:
        cur = conn.cursor(row_factory=dict_row)
        intent = contract.semantic_intent(request.mode, request.semantic)
        decision = _one(
            cur.execute(
                "SELECT * FROM pyretrieve.authorize(p_workspace => %s, p_project => %s,"
                " p_purpose => %s, p_query_digest => %s, p_semantic_intent => %s,"
                " p_embedding_digest => %s, p_requested_limit => %s)",
                (
                    request.scope.workspace,
                    request.scope.project,
                    request.scope.purpose,
                    request.query_digest,
                    intent,
                    digest,
                    request.limit,
                ),
            ).fetchall()
        )
        decision_id: UUID = decision["decision_id"]
        cap = int(decision["candidate_limit"])
        per_leg = min(cap, request.candidate_limit or cap)

        lexical_rows: list[Row] | None = None
        if request.wants_lexical:
            lexical_rows = self._lexical(cur, decision_id, request, per_leg)

        leg = self._vector(conn, request, decision, vector_input, digest, adapter_status, per_leg)

        fusion = self._fusion(cur, request)
        ids = sorted(
            {r["fragment_id"] for r in lexical_rows or []}
            | {r["fragment_id"] for r in leg.rows or []},
            key=str,
        )
        records = cur.execute(
            "SELECT * FROM pyretrieve.fragments(p_decision => %s, p_ids => %s)",
            (decision_id, ids),
        ).fetchall()
        return ranking.rank(
            decision=decision,
            lexical=lexical_rows,
            vector=leg.rows,
            records=records,
            limit=request.limit,
            semantic=leg.status,
            query_digest=request.query_digest,
            embedding_digest=leg.digest,
            weights=fusion.weights,
            fusion=fusion.method,
            weights_source=fusion.source,
            weights_model=fusion.model,
            fusion_source=fusion.fusion_source,
            fusion_model=fusion.fusion_model,
        )

    @staticmethod
    def _fusion(cur: psycopg.Cursor[Row], request: SearchRequest) -> FusionSettings:
        """The request's fusion and weights, else the named model's registered defaults, else
        RRF and 1.0 each (``pyretrieve.search()`` in SQL resolves them by the same rule)."""
        defaults: Row | None = None
        if request.model is not None and (request.fusion is None or request.weights is None):
            defaults = cur.execute(
                "SELECT * FROM pyretrieve.model_defaults(p_model => %s)", (request.model,)
            ).fetchone()
        model = None if defaults is None else request.model
        if request.fusion is not None:
            method, fusion_source, fusion_model = request.fusion, WeightsSource.REQUEST, None
        elif defaults is not None:
            method, fusion_source, fusion_model = (
                Fusion(defaults["fusion"]),
                WeightsSource.MODEL,
                model,
            )
        else:
            method, fusion_source, fusion_model = Fusion.RRF, WeightsSource.DEFAULT, None
        if request.weights is not None:
            weights, source, weights_model = request.weights, WeightsSource.REQUEST, None
        elif defaults is not None:
            weights = Weights(lexical=defaults["lexical_weight"], vector=defaults["vector_weight"])
            source, weights_model = WeightsSource.MODEL, model
        else:
            weights, source, weights_model = Weights(), WeightsSource.DEFAULT, None
        return FusionSettings(
            method=method,
            weights=weights,
            source=source,
            model=weights_model,
            fusion_source=fusion_source,
            fusion_model=fusion_model,
        )

    @staticmethod
    def _lexical(
        cur: psycopg.Cursor[Row], decision_id: UUID, request: SearchRequest, limit: int
    ) -> list[Row]:
        try:
            return cur.execute(
                "SELECT * FROM pyretrieve.lexical_candidates(p_decision => %s, p_query => %s,"
                " p_limit => %s, p_ranking => %s)",
                (decision_id, request.query, limit, request.ranking),
            ).fetchall()
        except psycopg.Error as exc:
            error = translate(exc)
            if isinstance(error, InvalidInput | LexicalFailure) or error.code.endswith("DECISION"):
                raise error from None
            raise LexicalFailure() from None

    def _vector(
        self,
        conn: psycopg.Connection[Any],
        request: SearchRequest,
        decision: Row,
        vector_input: NDArray[np.float32] | None,
        digest: bytes | None,
        adapter_status: SemanticStatus | None,
        limit: int,
    ) -> _VectorLeg:
        required = (
            request.mode == "vector"
            or request.semantic == "required"
            or decision["semantic_policy"] == "required"
        )

        def degrade(reason: DegradationReason, evidence: Mapping[str, JsonValue]) -> _VectorLeg:
            if required:
                raise SemanticRequired()
            return _VectorLeg(
                rows=None, status=SemanticStatus.degraded(reason, evidence), digest=digest
            )

        if not request.wants_vector:
            return _VectorLeg(rows=None, status=SemanticStatus.not_requested(), digest=None)
        if decision["semantic_policy"] == "disabled":
            return degrade(DegradationReason.DISABLED, {"policy": "disabled"})
        if adapter_status is not None:
            if required:
                raise SemanticRequired()
            return _VectorLeg(rows=None, status=adapter_status, digest=digest)
        if vector_input is None or request.model is None:
            return degrade(DegradationReason.MISSING_EMBEDDING, {"model": request.model})
        failure: PyretrieveError | None = None
        try:
            # A savepoint: a failed vector leg must not abort the request's transaction.
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                rows = cur.execute(
                    "SELECT * FROM pyretrieve.vector_candidates(p_decision => %s, p_model => %s,"
                    " p_embedding => %s::public.vector, p_limit => %s)",
                    (decision["decision_id"], request.model, to_pgvector_text(vector_input), limit),
                ).fetchall()
        except psycopg.Error as exc:
            failure = translate(exc)
        # Decided outside the except block, so a SemanticRequired raised here carries no
        # driver exception as its context (its traceback would print SQL and function names).
        if isinstance(failure, UnknownModel):
            return degrade(
                DegradationReason.UNAVAILABLE, {"model": request.model, "cause": "unknown_model"}
            )
        if isinstance(failure, InvalidEmbedding):
            return degrade(
                DegradationReason.CORRUPT, {"model": request.model, "cause": "invalid_embedding"}
            )
        if failure is not None:
            return degrade(
                DegradationReason.UNAVAILABLE, {"model": request.model, "cause": failure.code}
            )
        stale = [
            r
            for r in rows
            if contract.is_stale(
                source_digest=r["source_digest"],
                content_digest=r["content_digest"],
                vector_generation=r["vector_generation"],
                lexical_generation=r["lexical_generation"],
            )
        ]
        if stale:
            return degrade(
                DegradationReason.STALE,
                {"model": request.model, "stale_candidates": len(stale), "candidates": len(rows)},
            )
        return _VectorLeg(
            rows=rows, status=SemanticStatus.used({"model": request.model}), digest=digest
        )


def _one(rows: list[Row]) -> Row:
    if len(rows) != 1:
        raise InvalidInput("authorization returned no decision")
    return rows[0]
