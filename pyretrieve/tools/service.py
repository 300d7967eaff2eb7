"""Tool registration, discovery and rediscovery through the SQL API.

* ``register_tools``: one write transaction as a writer; each tool goes through
  ``pyretrieve.put_tool`` (a fragment plus a tools row; unchanged tools write nothing, a changed
  schema supersedes the fragment and bumps ``schema_version``), then, for every embedder given,
  the embeddings of new fragments through ``put_embedding``.
* ``discover``: one read transaction, the search path (authorize, lexical and vector legs,
  authoritative records, the ranker's rechecks and fusion) for a pool of ``POOL`` candidates,
  then ``tool_entries`` (metadata of the tools among them the decision admits) and
  ``tool_rollout``; penalties, confidence and K in pure Python (``select``); then
  ``tool_schemas`` for the chosen K only, under the same decision.
* ``rediscover``: a model named a tool it was not offered. A new transaction with a new
  authorization; ``tool_by_name`` under it. Authorised: its schema is queued for the next
  round. Unauthorised or absent: one and the same rejection. At most one retry per request.
  Nothing is ever executed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb

from pyretrieve import ranking, telemetry
from pyretrieve.client import Row, SearchRequest, build_request
from pyretrieve.db import queries
from pyretrieve.db.errors import translate
from pyretrieve.db.steps import Call, Steps
from pyretrieve.db.steps import rows as _rows
from pyretrieve.embedders import Embedder
from pyretrieve.errors import AccessDenied, InvalidInput, PyretrieveError
from pyretrieve.request import authorize_call
from pyretrieve.tools import context, events, select
from pyretrieve.tools.definitions import NAME_RE, ToolDefinition, definitions
from pyretrieve.types import Scope, SearchResult, Weights
from pyretrieve.vectors import canonical_embedding, to_pgvector_text

if TYPE_CHECKING:
    from pyretrieve.client import AsyncRetriever, Retriever

CLASSIFICATIONS = ("public", "internal", "confidential", "restricted")
MAX_RETRIES = 1
EMBED_BATCH = 32


# ---------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Registered:
    name: str
    fragment_id: UUID
    schema_version: int
    status: str  # created | superseded | updated | unchanged


@dataclass(frozen=True, slots=True)
class RegistrationReport:
    tools: tuple[Registered, ...]
    embedded: int

    def count(self, status: str) -> int:
        return sum(1 for t in self.tools if t.status == status)

    def to_plain(self) -> dict[str, Any]:
        return {
            "tools": len(self.tools),
            **{s: self.count(s) for s in ("created", "superseded", "updated", "unchanged")},
            "embedded": self.embedded,
        }


def register_tools(
    source: psycopg.Connection[Any],
    tools: Iterable[ToolDefinition | Mapping[str, Any]],
    *,
    workspace: str,
    project: str,
    classification: str = "internal",
    principal: str | None = None,
    embedders: Sequence[Embedder] = (),
    expires_at: Any = None,
    observed_at: Any = None,
) -> RegistrationReport:
    """Register tools in one transaction as ``principal`` (a writer), embedding new fragments."""
    if classification not in CLASSIFICATIONS:
        raise InvalidInput("invalid classification")
    defs = definitions(tools)
    if source.info.transaction_status != TransactionStatus.IDLE:
        raise InvalidInput("the connection is inside a transaction; a request needs its own")
    done: list[Registered] = []
    embedded = 0
    try:
        with source.transaction(), source.cursor(row_factory=dict_row) as cur:
            if principal is not None:
                cur.execute(queries.set_local_role(principal))
            fresh: list[tuple[UUID, dict[str, Any]]] = []
            for d in defs:
                row = cur.execute(
                    queries.PUT_TOOL,
                    (
                        workspace,
                        project,
                        Jsonb(d.schema),
                        d.operation,
                        list(d.tags),
                        d.server,
                        classification,
                        expires_at,
                        observed_at,
                    ),
                ).fetchone()
                assert row is not None
                done.append(
                    Registered(d.name, row["fragment_id"], row["schema_version"], row["status"])
                )
                if row["status"] in ("created", "superseded"):
                    fresh.append((row["fragment_id"], d.schema))
            for embedder in embedders:
                embedded += _embed(cur, workspace, project, embedder, fresh)
    except PyretrieveError:
        raise
    except psycopg.Error as exc:
        raise translate(exc) from None
    return RegistrationReport(tools=tuple(done), embedded=embedded)


def _embed(
    cur: psycopg.Cursor[Row],
    workspace: str,
    project: str,
    embedder: Embedder,
    fresh: list[tuple[UUID, dict[str, Any]]],
) -> int:
    if not fresh:
        return 0
    ids = [fid for fid, _ in fresh]
    needed = cur.execute(
        queries.EMBEDDINGS_NEEDED,
        (workspace, project, embedder.model_id, ids),
    ).fetchall()
    wanted = {r["fragment_id"] for r in needed}
    todo = [(fid, schema) for fid, schema in fresh if fid in wanted]
    if not todo:
        return 0
    # In batches: the write transaction must not sit idle while a slow model embeds every
    # tool at once (a request's idle_in_transaction_session_timeout is 60 s).
    for start in range(0, len(todo), EMBED_BATCH):
        batch = todo[start : start + EMBED_BATCH]
        bodies = [
            str(cur.execute(queries.TOOL_TEXT, (Jsonb(s),)).fetchone()["t"])  # type: ignore[index]
            for _, s in batch
        ]
        vectors = embedder.embed_documents(bodies)
        for (fid, _), body, vector in zip(batch, bodies, vectors, strict=True):
            cur.execute(
                queries.PUT_EMBEDDING,
                (
                    workspace,
                    project,
                    fid,
                    embedder.model_id,
                    to_pgvector_text(canonical_embedding(vector)),
                    hashlib.sha256(body.encode("utf-8")).digest(),
                ),
            )
    return len(todo)


def set_rollout(conn: psycopg.Connection[Any], workspace: str, project: str, stage: str) -> str:
    """Set a project's rollout stage as the connection's (admin) role."""
    try:
        row = (
            conn.cursor(row_factory=tuple_row)
            .execute(queries.SET_TOOL_ROLLOUT, (workspace, project, stage))
            .fetchone()
        )
    except psycopg.Error as exc:
        raise translate(exc) from None
    assert row is not None
    return str(row[0])


# ---------------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DiscoveredTool:
    name: str
    fragment_id: UUID
    schema_version: int
    operation: str
    rank: int
    chosen: bool
    explanation: Mapping[str, Any]
    schema: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToolOmission:
    name: str
    fragment_id: UUID
    position: int
    reason: str  # cut_by_k
    score: float


@dataclass(frozen=True, slots=True)
class Discovery:
    retrieval_id: str
    decision_id: UUID
    query_digest: str
    policy: str
    stage: str
    applied: bool  # whether the adaptive K was applied (else the baseline K)
    confidence: select.Confidence
    k: int
    ranked: tuple[DiscoveredTool, ...]  # every authorised tool candidate, in order
    omissions: tuple[ToolOmission, ...]
    fingerprint: str
    schema_tokens: int
    token_method: str

    @property
    def chosen(self) -> tuple[DiscoveredTool, ...]:
        return tuple(t for t in self.ranked if t.chosen)

    @property
    def schemas(self) -> list[Mapping[str, Any]]:
        return [t.schema for t in self.chosen if t.schema is not None]

    def openai_tools(self) -> list[dict[str, Any]]:
        return context.openai_tools(self.schemas)

    def anthropic_tools(self) -> list[dict[str, Any]]:
        return context.anthropic_tools(self.schemas)

    def mcp_tools_list(self) -> dict[str, Any]:
        return context.mcp_tools_list(self.schemas)

    def document(self) -> dict[str, Any]:
        """The discovery as ``pyretrieve.discover_tools(...)`` returns it to SQL callers: the
        same keys and values (its canonical JSON is byte-identical for the same request and
        decision). Everything but the retrieval id and the token count, which only the client
        computes."""
        plain = self.to_plain()
        for key in ("retrieval_id", "schema_tokens", "token_method"):
            del plain[key]
        plain["schemas"] = [dict(s) for s in self.schemas]
        return plain

    def to_plain(self) -> dict[str, Any]:
        return {
            "retrieval_id": self.retrieval_id,
            "decision_id": str(self.decision_id),
            "query_digest": self.query_digest,
            "policy": self.policy,
            "stage": self.stage,
            "applied": self.applied,
            "confidence": self.confidence.to_plain(),
            "k": self.k,
            "fingerprint": self.fingerprint,
            "schema_tokens": self.schema_tokens,
            "token_method": self.token_method,
            "tools": [
                {"name": t.name, "schema_version": t.schema_version, **t.explanation}
                for t in self.ranked
            ],
            "omissions": [
                {
                    "name": o.name,
                    "fragment_id": str(o.fragment_id),
                    "position": o.position,
                    "reason": o.reason,
                    "score": o.score,
                }
                for o in self.omissions
            ],
        }


def _candidates(result: SearchResult, entries: dict[UUID, Row]) -> list[select.Candidate]:
    out = []
    for r in result.results:
        e = entries.get(r.fragment_id)
        if e is None:  # not a tool (an ordinary fragment of the project) or not admitted
            continue
        out.append(
            select.Candidate(
                fragment_id=r.fragment_id,
                name=e["name"],
                operation=e["operation"],
                schema_version=e["schema_version"],
                fused_rank=r.fused_rank,
                score=r.final_score,
                lexical_rank=None if r.lexical is None else r.lexical.rank,
                vector_rank=None if r.vector is None else r.vector.rank,
                schema_chars=e["schema_chars"],
                entities=frozenset(e["entities"]),
                lexical_score=None if r.lexical is None else r.lexical.score,
                vector_distance=None if r.vector is None else r.vector.distance,
            )
        )
    return out


def _explanation(s: select.Scored, k: int, adaptive_k: int, applied: bool) -> dict[str, Any]:
    c = s.candidate
    why: str | None = None
    if s.rank > k:
        why = "cut_by_k" if applied or k == adaptive_k else "cut_by_baseline_k"
    return {
        "rank": s.rank,
        "fused_rank": c.fused_rank,
        "lexical_rank": c.lexical_rank,
        "vector_rank": c.vector_rank,
        "lexical_score": c.lexical_score,
        "vector_distance": c.vector_distance,
        "operation": c.operation,
        "fused_score": c.score,
        "normalized_score": s.normalized,
        "adjusted_score": s.adjusted,
        "penalties": [p.to_plain() for p in s.penalties],
        "chosen": s.rank <= k,
        "cut": why,
        "formula": "normalized = fused / ideal fused score (1-based RRF, k = 60); "
        "adjusted = normalized * product of penalty factors",
    }


def discovery_request(
    query: str,
    *,
    scope: Scope,
    mode: str = "hybrid",
    model: str | None = None,
    embedding: Sequence[float] | NDArray[np.floating] | None = None,
    weights: Weights | None = None,
) -> SearchRequest:
    """The search a discovery runs: a pool of ``POOL`` fused candidates from ``CANDIDATES``
    per leg (what ``pyretrieve.discover_tools`` runs in SQL too)."""
    return build_request(
        query,
        scope=scope,
        mode=mode,
        limit=select.POOL,
        candidate_limit=select.CANDIDATES,
        model=model,
        embedding=embedding,
        # The selector's confidence levels and K were calibrated on RRF scores normalised by
        # the RRF ideal, so discovery fuses by RRF, at equal weights unless asked otherwise,
        # whatever the model's registered defaults for plain search.
        weights=weights or Weights(),
        fusion="rrf",
    )


@dataclass(frozen=True, kw_only=True)
class _Options:
    """How a discovery picks its tools (``discover``'s keyword arguments after the search's)."""

    policy: str | None = None
    protect: bool = True
    adaptive: bool | None = None
    master: bool = True


def discover(
    retriever: Retriever,
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
    request = discovery_request(
        query, scope=scope, mode=mode, model=model, embedding=embedding, weights=weights
    )
    options = _Options(policy=policy, protect=protect, adaptive=adaptive, master=master)
    then, attributes = _discovery(request, options)
    with telemetry.span("discover_tools", **attributes) as span:
        discovery: Discovery = retriever._execute(request, then)
        _discovered(span, discovery)
    return discovery


async def adiscover(
    retriever: AsyncRetriever,
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
    """:func:`discover`, awaited: the same steps on an async connection or pool."""
    request = discovery_request(
        query, scope=scope, mode=mode, model=model, embedding=embedding, weights=weights
    )
    options = _Options(policy=policy, protect=protect, adaptive=adaptive, master=master)
    then, attributes = _discovery(request, options)
    with telemetry.span("discover_tools", **attributes) as span:
        discovery: Discovery = await retriever._aexecute(request, then)
        _discovered(span, discovery)
    return discovery


def _discovery(
    request: SearchRequest, options: _Options
) -> tuple[Callable[[SearchResult], Steps[Discovery]], dict[str, Any]]:
    # The policy is checked before anything is sent.
    policy = _check_policy(options.policy)

    def then(result: SearchResult) -> Steps[Discovery]:
        return select_tools(
            result,
            request,
            policy=policy,
            protect=options.protect,
            adaptive=options.adaptive,
            master=options.master,
        )

    return then, {**telemetry.request_attributes(request), "policy": policy}


def _discovered(span: telemetry.Span, discovery: Discovery) -> None:
    span.set(**telemetry.discovery_attributes(discovery))
    _discovery_events(discovery)


def _check_policy(policy: str | None) -> str:
    policy = policy or select.DEFAULT_POLICY
    if policy not in select.POLICIES:
        raise InvalidInput(f"policy must be one of {', '.join(select.POLICIES)}")
    return policy


def select_tools(
    result: SearchResult,
    request: SearchRequest,
    *,
    policy: str | None = None,
    protect: bool = True,
    adaptive: bool | None = None,
    master: bool = True,
) -> Steps[Discovery]:
    """After the search, in its transaction and under its decision: the tools among the
    results, penalties, confidence, K (by policy and rollout) and the chosen schemas."""
    policy = _check_policy(policy)
    query = request.query
    decision = result.decision
    ids = [r.fragment_id for r in result.results]
    entries = {
        e["fragment_id"]: e
        for e in _rows(
            (
                yield Call(
                    step="tool_entries",
                    query=queries.TOOL_ENTRIES,
                    params=(decision.decision_id, ids),
                )
            )
        )
    }
    rollout = yield Call(
        step="tool_rollout", query=queries.TOOL_ROLLOUT, params=(decision.decision_id,)
    )
    stage = str(_rows(rollout)[0]["s"])
    ideal = ranking.ideal_score(
        result.weights, lexical_ran=result.lexical_ran, vector_ran=result.vector_ran
    )
    scored = select.score(query, _candidates(result, entries), ideal, protect=protect)
    conf = select.assess(scored, policy)
    baseline = select.recommended_k(select.BASELINE_POLICY, conf.level, scored)
    if policy in select.FIXED_POLICIES:
        applied = True
    elif adaptive is not None:
        applied = adaptive and master
    else:
        applied = select.adaptive_applies(
            stage, decision.workspace_id, decision.principal, master=master
        )
    # Adaptive K only truncates: it is never more than the baseline or the candidates.
    k = min(conf.recommended_k, baseline) if applied else baseline
    chosen_ids = [s.candidate.fragment_id for s in scored[:k]]
    schemas = {
        r["fragment_id"]: r["schema"]
        for r in _rows(
            (
                yield Call(
                    step="tool_schemas",
                    query=queries.TOOL_SCHEMAS,
                    params=(decision.decision_id, chosen_ids),
                )
            )
        )
    }
    ranked = tuple(
        DiscoveredTool(
            name=s.candidate.name,
            fragment_id=s.candidate.fragment_id,
            schema_version=s.candidate.schema_version,
            operation=s.candidate.operation,
            rank=s.rank,
            chosen=s.rank <= k and s.candidate.fragment_id in schemas,
            explanation=_explanation(s, k, conf.recommended_k, applied),
            schema=schemas.get(s.candidate.fragment_id) if s.rank <= k else None,
        )
        for s in scored
    )
    omissions = tuple(
        ToolOmission(
            name=s.candidate.name,
            fragment_id=s.candidate.fragment_id,
            position=s.rank,
            reason="cut_by_k",
            score=s.adjusted,
        )
        for s in scored[k:]
    )
    chosen = [t for t in ranked if t.chosen]
    tokens, method = context.schema_tokens([t.schema for t in chosen if t.schema])
    return Discovery(
        retrieval_id=result.retrieval_id,
        decision_id=decision.decision_id,
        query_digest=request.query_digest.hex(),
        policy=policy,
        stage=stage,
        applied=applied,
        confidence=conf,
        k=len(chosen),
        ranked=ranked,
        omissions=omissions,
        fingerprint=context.tool_context_fingerprint((t.name, t.schema_version) for t in chosen),
        schema_tokens=tokens,
        token_method=method,
    )


def _discovery_events(d: Discovery) -> None:
    common = {"query_digest": d.query_digest, "decision_id": str(d.decision_id)}
    events.emit(
        "tool_discovery",
        **common,
        candidates=len(d.ranked),
        k=d.k,
        recommended_k=d.confidence.recommended_k,
        policy=d.policy,
        level=d.confidence.level,
        stage=d.stage,
        applied=d.applied,
        omissions=len(d.omissions),
    )
    if not d.ranked:
        events.emit("empty_discovery", **common)
    elif d.confidence.level in ("low", "fail"):
        events.emit("tool_discovery_miss", **common, level=d.confidence.level)
    events.emit(
        "tool_schema_round",
        **common,
        schemas=len(d.schemas),
        schema_tokens=d.schema_tokens,
        token_method=d.token_method,
        fingerprint=d.fingerprint,
    )


# ---------------------------------------------------------------------------------------------
# Rediscovery
# ---------------------------------------------------------------------------------------------
@dataclass
class ToolSession:
    """One agent request: what it was offered, its retry budget, schemas queued for next round."""

    offered: set[str] = field(default_factory=set)
    retries: int = 0
    pending: list[Mapping[str, Any]] = field(default_factory=list)

    @classmethod
    def after(cls, discovery: Discovery) -> ToolSession:
        return cls(offered={t.name for t in discovery.chosen})

    def next_round(self) -> list[Mapping[str, Any]]:
        """The queued schemas, handed over once."""
        out, self.pending = self.pending, []
        return out


@dataclass(frozen=True, slots=True)
class Rediscovery:
    status: str  # queued | rejected | retry_limit | already_offered
    message: str
    schema_version: int | None = None


# The rediscovery decision's semantic intent, embedding digest and requested limit.
REJECTED = Rediscovery(status="rejected", message="tool not available")


def rediscover(
    retriever: Retriever, name: str, *, scope: Scope, session: ToolSession
) -> Rediscovery:
    with telemetry.span("rediscover_tool", **telemetry.scope_attributes(scope)) as span:
        outcome = _precheck(name, session)
        if outcome is None:
            try:
                row = retriever._run(_tool_by_name(name, scope))
            except AccessDenied:
                row = None
            outcome = _queue(row, name, session)
        _rediscovered(span, outcome, name, session)
    return outcome


async def arediscover(
    retriever: AsyncRetriever, name: str, *, scope: Scope, session: ToolSession
) -> Rediscovery:
    """:func:`rediscover`, awaited: the same steps on an async connection or pool."""
    with telemetry.span("rediscover_tool", **telemetry.scope_attributes(scope)) as span:
        outcome = _precheck(name, session)
        if outcome is None:
            try:
                row = await retriever._arun(_tool_by_name(name, scope))
            except AccessDenied:
                row = None
            outcome = _queue(row, name, session)
        _rediscovered(span, outcome, name, session)
    return outcome


def _precheck(name: str, session: ToolSession) -> Rediscovery | None:
    """The outcome decided without the database, or None when the name must be looked up
    (which spends the request's one retry)."""
    if isinstance(name, str) and name in session.offered:
        return Rediscovery(status="already_offered", message="tool already offered")
    if session.retries >= MAX_RETRIES:
        return Rediscovery(status="retry_limit", message="no more rediscovery in this request")
    session.retries += 1
    if not isinstance(name, str) or not NAME_RE.match(name):
        return REJECTED
    return None


def _tool_by_name(name: str, scope: Scope) -> Steps[Row | None]:
    # A new transaction, so a new authorization, lexical only: the name is the query.
    request = build_request(name, scope=scope, mode="lexical", semantic="disabled", limit=1)
    decision = _rows((yield authorize_call(request, intent="disabled", embedding_digest=None)))[0]
    found = _rows(
        (
            yield Call(
                step="tool_by_name",
                query=queries.TOOL_BY_NAME,
                params=(decision["decision_id"], name),
            )
        )
    )
    return found[0] if found else None


def _queue(row: Row | None, name: str, session: ToolSession) -> Rediscovery:
    # Unauthorised and absent are one and the same rejection.
    if row is None:
        return REJECTED
    session.pending.append(row["schema"])
    session.offered.add(name)
    return Rediscovery(
        status="queued",
        message="schema queued for the next round",
        schema_version=row["schema_version"],
    )


def _rediscovered(
    span: telemetry.Span, outcome: Rediscovery, name: str, session: ToolSession
) -> None:
    span.set(outcome=outcome.status, retries=session.retries)
    events.emit(
        "tool_rediscovery",
        name_digest=events.digest(name) if isinstance(name, str) else None,
        outcome=outcome.status,
        retries=session.retries,
    )
