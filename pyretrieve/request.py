"""The request path, without I/O: validation, the query embedding, then the steps.

One search is one transaction, in a fixed order:

    authorize → the model's defaults (when the request gives no fusion or no weights) →
    lexical candidates → vector candidates (when mode, intent and policy allow and
    an embedding exists) → the checks after the legs → authoritative records → the pure ranker

:func:`build_request` validates everything that can be validated before anything is sent;
:func:`query_embedding` resolves the query vector once, before a connection is taken (a slow
model holds no transaction open); :func:`search_steps` is the rest, a generator of named
statements (:class:`pyretrieve.db.steps.Call`) that :class:`~pyretrieve.Retriever` drives on a
connection and :class:`~pyretrieve.AsyncRetriever` on an async one, with the same statements,
the same degradations and the same errors. Nothing but digests and intent reaches
``authorize()``; a deny or an error ends the request before any candidate query runs.
``pyretrieve.search()`` in SQL takes the same steps (a test compares the two byte for byte).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict, cast
from uuid import UUID

import numpy as np
from numpy.typing import NDArray

from pyretrieve import contract, ranking, telemetry
from pyretrieve.db import queries
from pyretrieve.db.steps import Batch, Call, Failed, Row, Steps, replies, rows
from pyretrieve.embedders import Embedder
from pyretrieve.errors import (
    DatabaseUnavailable,
    InvalidEmbedding,
    InvalidFusion,
    InvalidInput,
    LexicalFailure,
    PyretrieveError,
    SemanticRequired,
    Timeout,
    UnknownModel,
)
from pyretrieve.types import (
    Decision,
    DegradationReason,
    Fusion,
    FusionSettings,
    JsonValue,
    Scope,
    SearchResult,
    SemanticOutcome,
    SemanticPolicy,
    SemanticStatus,
    Weights,
    WeightsSource,
)
from pyretrieve.vectors import QueryEmbedding

__all__ = [
    "SearchOptions",
    "SearchRequest",
    "authorize_call",
    "build_request",
    "calls_embedder",
    "query_embedding",
    "resolve_fusion",
    "search_steps",
]

Mode = Literal["hybrid", "lexical", "vector"]
SemanticIntent = Literal["optional", "required", "disabled"]
Ranking = Literal["bm25", "ts_rank"]

MAX_QUERY_CHARS = contract.MAX_QUERY_CHARS
MAX_LIMIT = contract.MAX_LIMIT


class SearchOptions(TypedDict, total=False):
    """The keyword arguments of ``search()`` besides the query and the scope (the same for
    :class:`~pyretrieve.Retriever` and :class:`~pyretrieve.AsyncRetriever`; see
    :meth:`pyretrieve.Retriever.search`)."""

    mode: str
    semantic: str
    limit: int
    candidate_limit: int | None
    embedding: Sequence[float] | NDArray[np.floating] | None
    model: str | None
    weights: Weights | None
    ranking: str
    fusion: str | None


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
    embedding: QueryEmbedding | None  # the caller's, validated; None: the embedder's, if any
    # None: the model's registered defaults (or 1.0 each), read in the request's transaction.
    weights: Weights | None
    query_digest: bytes
    ranking: Ranking = "bm25"
    # None: the model's registered default (or RRF), read in the request's transaction.
    fusion: Fusion | None = None

    @property
    def wants_vector(self) -> bool:
        return self.mode != "lexical" and self.semantic != "disabled"

    @property
    def wants_lexical(self) -> bool:
        return self.mode != "vector"


def _check_ident(value: object, what: str) -> str:
    if not isinstance(value, str) or not contract.is_identifier(value):
        raise InvalidInput(contract.identifier_error(what))
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
    if fusion is not None and (not isinstance(fusion, str) or fusion not in contract.FUSIONS):
        raise InvalidFusion(contract.FUSION_ERROR)
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
    given = None if embedding is None else QueryEmbedding.of(embedding, model=model)
    return SearchRequest(
        query=query,
        scope=scope,
        mode=cast(Mode, mode),
        semantic=cast(SemanticIntent, semantic),
        limit=limit,
        candidate_limit=candidate_limit,
        model=model,
        embedding=given,
        weights=weights,
        query_digest=hashlib.sha256(query.encode("utf-8")).digest(),
        ranking=cast(Ranking, ranking),
        fusion=None if fusion is None else Fusion(fusion),
    )


# ------------------------------------------------------------------------ the query vector


def calls_embedder(request: SearchRequest, embedders: Mapping[str, Embedder]) -> bool:
    """Whether :func:`query_embedding` will call an embedder (the async client then calls it
    in a worker thread, so a slow model does not block the event loop)."""
    return (
        request.wants_vector
        and request.embedding is None
        and request.model is not None
        and request.model in embedders
    )


def query_embedding(request: SearchRequest, embedders: Mapping[str, Embedder]) -> QueryEmbedding:
    """The request's query vector as one value: the caller's, the embedder's, or why there is
    none."""
    if not request.wants_vector:
        return QueryEmbedding.not_requested()
    if request.embedding is not None:
        return request.embedding
    embedder = embedders.get(request.model) if request.model else None
    if embedder is None:
        return QueryEmbedding.missing(request.model)
    try:
        return QueryEmbedding.of(embedder.embed_query(request.query), model=request.model)
    except Exception:
        # The adapter is outside our control; its error text may quote the query.
        return QueryEmbedding.adapter_failed(request.model)


# -------------------------------------------------------------------------------- the steps


@dataclass(frozen=True, kw_only=True, slots=True)
class _VectorLeg:
    rows: list[Row] | None
    status: SemanticStatus


def search_steps(request: SearchRequest, embedding: QueryEmbedding) -> Steps[SearchResult]:
    """One search, as statements, in the current transaction (which acts as the principal and
    holds no decision yet: its one decision is the request's)."""
    intent = contract.semantic_intent(request.mode, request.semantic)
    authorize = authorize_call(request, intent=intent, embedding_digest=embedding.digest)
    # The model's defaults are read after the decision, as search() in SQL reads them, and in
    # the same round trip: the server runs the second call of a batch only once the first has
    # succeeded, so a denied request reads nothing of the model, and a request that gives both
    # its fusion and its weights reads nothing at all.
    default_rows: list[Row] | None = None
    # Each step is a span of the request's (telemetry: nothing when OpenTelemetry is absent).
    with telemetry.leg("authorize", semantic_intent=intent) as span:
        if request.model is not None and (request.fusion is None or request.weights is None):
            model_defaults = Call(
                step="model_defaults", query=queries.MODEL_DEFAULTS, params=(request.model,)
            )
            decision_rows, default_rows = replies((yield Batch((authorize, model_defaults))), 2)
        else:
            decision_rows = rows((yield authorize))
        decision = _decision(decision_rows)
        span.set(**telemetry.decision_attributes(decision))
    cap = decision.candidate_limit
    per_leg = min(cap, request.candidate_limit or cap)
    defaults = default_rows[0] if default_rows else None
    fusion = resolve_fusion(request, defaults)

    lexical: list[Row] | None = None
    if request.wants_lexical:
        with telemetry.leg("lexical", ranking=request.ranking) as span:
            lexical = yield from _lexical(request, decision, per_leg)
            span.set(candidates=len(lexical))
    with telemetry.leg("vector") as span:
        leg = yield from _vector(request, decision, embedding, per_leg)
        span.set(**telemetry.vector_attributes(leg.rows, leg.status))
    _check_legs(fusion, decision, lexical_ran=lexical is not None, leg=leg)

    ids = _fragment_ids(lexical or [], leg.rows or [])
    with telemetry.leg("records", ids=len(ids)) as span:
        records = rows(
            (
                yield Call(
                    step="fragments", query=queries.FRAGMENTS, params=(decision.decision_id, ids)
                )
            )
        )
        span.set(records=len(records))
    with telemetry.leg("fuse"):
        result = ranking.rank(
            decision=decision,
            lexical=lexical,
            vector=leg.rows,
            records=records,
            limit=request.limit,
            semantic=leg.status,
            query_digest=request.query_digest,
            embedding_digest=embedding.digest,
            weights=fusion.weights,
            fusion=fusion.method,
            weights_source=fusion.source,
            weights_model=fusion.model,
            fusion_source=fusion.fusion_source,
            fusion_model=fusion.fusion_model,
        )
    # The request's span (search or discovery) gets the outcome.
    telemetry.annotate(**telemetry.result_attributes(result))
    return result


def _fragment_ids(lexical: list[Row], vector: list[Row]) -> list[object]:
    """The ids the legs found, each once, in the order of their text."""
    found = [r["fragment_id"] for r in lexical] + [r["fragment_id"] for r in vector]
    if all(type(f) is UUID for f in found):
        # A UUID's text sorts as its integer does (fixed-width lower-case hex), and an integer
        # hashes and sorts without the Python code of UUID.__hash__ and __str__.
        unique = {f.int: f for f in found}
        return [unique[key] for key in sorted(unique)]
    # Another type breaks the contract (the ranker refuses it): such ids go as they always did.
    return sorted({r["fragment_id"] for r in lexical} | {r["fragment_id"] for r in vector}, key=str)


def authorize_call(request: SearchRequest, *, intent: str, embedding_digest: bytes | None) -> Call:
    """The request's ``authorize()`` statement: the scope, the query's digest, the semantic
    intent, the embedding's digest and the limit, and nothing else of the request."""
    scope = request.scope
    return Call(
        step="authorize",
        query=queries.AUTHORIZE,
        params=(
            scope.workspace,
            scope.project,
            scope.purpose,
            request.query_digest,
            intent,
            embedding_digest,
            request.limit,
        ),
    )


def resolve_fusion(request: SearchRequest, defaults: Row | None) -> FusionSettings:
    """The request's fusion and weights, else the named model's registered defaults (its
    ``model_defaults`` row, None for a model not registered or not asked for), else RRF and
    1.0 each: ``pyretrieve.search()`` in SQL resolves them by the same rule."""
    model = None if defaults is None else request.model
    if request.fusion is not None:
        method, fusion_source, fusion_model = request.fusion, WeightsSource.REQUEST, None
    elif defaults is not None:
        method, fusion_source, fusion_model = Fusion(defaults["fusion"]), WeightsSource.MODEL, model
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


def _decision(found: list[Row]) -> Decision:
    """The decision, parsed into its typed value right away (a row that breaks the contract
    ends the request before any candidate is asked for)."""
    if len(found) != 1:
        raise InvalidInput("authorization returned no decision")
    return Decision.from_row(found[0])


# Failures of the session rather than of a leg: a timeout, or a connection that is gone. A leg
# that meets one raises it as it is (the caller can tell a slow or lost database from a broken
# leg, and retry); an optional vector leg that timed out degrades instead, naming the timeout.
_SESSION_FAILURES = Timeout | DatabaseUnavailable


def _lexical(request: SearchRequest, decision: Decision, limit: int) -> Steps[list[Row]]:
    """The lexical leg: a failure ends the request (as LexicalFailure, unless the input, the
    decision or the session was at fault); there is no fallback to the vector leg."""
    reply = yield Call(
        step="lexical",
        query=queries.LEXICAL_CANDIDATES,
        params=(decision.decision_id, request.query, limit, request.ranking),
        on_error="return",
    )
    if isinstance(reply, Failed):
        error = reply.error
        if isinstance(error, InvalidInput | LexicalFailure | _SESSION_FAILURES):
            raise error from None
        if error.code.endswith("DECISION"):
            raise error from None
        raise LexicalFailure() from None
    return rows(reply)


def _vector(
    request: SearchRequest, decision: Decision, embedding: QueryEmbedding, limit: int
) -> Steps[_VectorLeg]:
    """The vector leg, or why it did not take part: a leg the request or the grant requires
    raises instead of degrading."""
    required = (
        request.mode == "vector"
        or request.semantic == "required"
        or decision.semantic_policy is SemanticPolicy.REQUIRED
    )

    def degrade(reason: DegradationReason, evidence: Mapping[str, JsonValue]) -> _VectorLeg:
        if required:
            raise SemanticRequired()
        return _VectorLeg(rows=None, status=SemanticStatus.degraded(reason, evidence))

    model = embedding.model
    if not request.wants_vector:
        return _VectorLeg(rows=None, status=SemanticStatus.not_requested())
    if decision.semantic_policy is SemanticPolicy.DISABLED:
        return degrade(DegradationReason.DISABLED, {"policy": "disabled"})
    if embedding.status is not None:
        if required:
            raise SemanticRequired()
        return _VectorLeg(rows=None, status=embedding.status)
    if not embedding.ready or model is None:
        return degrade(DegradationReason.MISSING_EMBEDDING, {"model": model})
    reply = yield Call(
        step="vector",
        query=queries.VECTOR_CANDIDATES,
        params=(decision.decision_id, model, embedding.pgvector_text(), limit),
        # A savepoint: a failed vector leg must not abort the request's transaction.
        on_error="savepoint",
    )
    if isinstance(reply, Failed):
        error = reply.error
        # A lost connection cannot degrade (the request cannot finish); a required leg that
        # timed out raises the timeout, which says more than SemanticRequired.
        if isinstance(error, DatabaseUnavailable) or (required and isinstance(error, Timeout)):
            raise error from None
        return degrade(*_failure(error, model))
    found = rows(reply)
    stale = [
        r
        for r in found
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
            {"model": model, "stale_candidates": len(stale), "candidates": len(found)},
        )
    return _VectorLeg(rows=found, status=SemanticStatus.used({"model": model}))


def _failure(error: PyretrieveError, model: str) -> tuple[DegradationReason, dict[str, JsonValue]]:
    """Why a vector leg that failed degrades, and the cause it names (``search()`` in SQL names
    the same: ``pyretrieve.error_code``)."""
    if isinstance(error, UnknownModel):
        return DegradationReason.UNAVAILABLE, {"model": model, "cause": "unknown_model"}
    if isinstance(error, InvalidEmbedding):
        return DegradationReason.CORRUPT, {"model": model, "cause": "invalid_embedding"}
    return DegradationReason.UNAVAILABLE, {"model": model, "cause": error.code}


def _check_legs(
    fusion: FusionSettings, decision: Decision, *, lexical_ran: bool, leg: _VectorLeg
) -> None:
    """What ``pyretrieve.search()`` checks after the legs, in its order, before any record is
    read: a grant that requires the semantic leg got it, and a leg that ran carries weight."""
    if (
        decision.semantic_policy is SemanticPolicy.REQUIRED
        and leg.status.status is not SemanticOutcome.USED
    ):
        raise SemanticRequired()
    ideal = ranking.ideal_score(
        fusion.weights,
        lexical_ran=lexical_ran,
        vector_ran=leg.rows is not None,
        method=fusion.method,
    )
    if not ideal > 0.0:
        raise InvalidInput("the weights of the legs that ran are all zero")
