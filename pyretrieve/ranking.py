"""The pure ranker: recheck, fuse, order, cut.

The database already filters by policy; this module rechecks every one of those
guarantees on the rows it is handed and refuses to return anything when one fails,
so a bug or a tampered function in the database cannot leak a fragment through the
ranker. It imports no database module.

The arithmetic is written so that SQL can reproduce it bit for bit: every step is a
single IEEE-754 double operation in a fixed order (see the functions below). Sums over a leg's
candidates (the DBSF mean and variance) run in rank order, one addition at a time.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple
from uuid import UUID

from pyretrieve.contract import DBSF_DEGENERATE, DBSF_SPREAD, FRESHNESS_SLOPE, is_stale
from pyretrieve.errors import IntegrityViolation, PyretrieveError, SemanticRequired
from pyretrieve.explain import PartExplanation, explain_result
from pyretrieve.types import (
    DEGRADED_CONFIDENCE_FACTOR,
    DIGEST_SIZE,
    FRESHNESS_FLOOR,
    RANK_BASE,
    RRF_K,
    Decision,
    DegradationReason,
    FragmentRecord,
    FragmentState,
    Fusion,
    FusionSettings,
    JsonValue,
    LexicalCandidate,
    Omission,
    OmissionReason,
    Result,
    SearchResult,
    SemanticOutcome,
    SemanticPolicy,
    SemanticStatus,
    VectorCandidate,
    Weights,
    WeightsSource,
    canonical_json,
    hex_digest,
    micros,
)

__all__ = [
    "Distribution",
    "confidence",
    "distribution",
    "freshness_factor",
    "fuse",
    "fused_order",
    "ideal_score",
    "leg_contributions",
    "rank",
    "retrieval_id",
    "rrf_contribution",
]

Row = Mapping[str, object]

# 60 + 1: the RRF denominator of a first-ranked candidate.
_TOP_RANK_DENOMINATOR = float(RRF_K + RANK_BASE)


# ----------------------------------------------------------------- the arithmetic


def rrf_contribution(weight: float, rank: int) -> float:
    """``w / (60 + rank)``: the integer sum is exact, then one float division."""
    return weight / (RRF_K + rank)


@dataclass(frozen=True, kw_only=True, slots=True)
class Distribution:
    """One leg's candidate scores for one query, as DBSF normalises them: the count, the mean,
    the sample standard deviation and the range ``mean -/+ 3 std``."""

    candidates: int
    mean: float
    std: float
    lower: float
    upper: float

    def normalize(self, value: float) -> float:
        """``(value - lower) / (upper - lower)``, at least 0 (above 1 beyond ``upper``); the
        mean's value, 0.5, when the range is empty (one candidate, or all scores equal)."""
        if not self.upper > self.lower:
            return DBSF_DEGENERATE
        return max(0.0, (value - self.lower) / (self.upper - self.lower))

    def to_plain(self) -> dict[str, JsonValue]:
        return {
            "candidates": self.candidates,
            "mean": self.mean,
            "std": self.std,
            "lower": self.lower,
            "upper": self.upper,
        }


def distribution(values: Sequence[float]) -> Distribution | None:
    """The DBSF distribution of a leg's values given in rank order; None for no candidates.

    Sums run in the given order, one double addition at a time, as ``search()`` in SQL
    loops over the candidates: summing in another order could change the last bit."""
    count = len(values)
    if count == 0:
        return None
    total = 0.0
    for value in values:
        total += value
    mean = total / float(count)
    std = 0.0
    if count > 1:
        squares = 0.0
        for value in values:
            delta = value - mean
            squares += delta * delta
        std = math.sqrt(squares / float(count - 1))
    spread = DBSF_SPREAD * std
    return Distribution(
        candidates=count, mean=mean, std=std, lower=mean - spread, upper=mean + spread
    )


def lexical_input(score: float) -> float:
    """What DBSF normalises for the lexical leg: its score (higher is better)."""
    return score


def vector_input(distance: float) -> float:
    """What DBSF normalises for the vector leg: cosine similarity, ``1 - distance``."""
    return 1.0 - distance


class _Part(NamedTuple):
    """One candidate's share of the fused score, and for DBSF how it was normalised (a named
    tuple: a search makes one per candidate, and a frozen dataclass costs several times more
    to build)."""

    contribution: float
    value: float | None = None  # DBSF: the normalised input
    normalized: float | None = None
    distribution: Distribution | None = None


def leg_contributions(
    method: Fusion, weight: float, candidates: Sequence[tuple[int, float]]
) -> list[_Part]:
    """Each candidate's contribution, for candidates given as ``(rank, input)`` in rank order
    (``input`` from :func:`lexical_input` / :func:`vector_input`; RRF reads only the rank)."""
    if method is Fusion.RRF:
        return [_Part(contribution=rrf_contribution(weight, rank)) for rank, _ in candidates]
    dist = distribution([value for _, value in candidates])
    if dist is None:
        return []
    parts = []
    for _, value in candidates:
        normalized = dist.normalize(value)
        parts.append(
            _Part(
                contribution=weight * normalized,
                value=value,
                normalized=normalized,
                distribution=dist,
            )
        )
    return parts


def _parts_by_key(
    method: Fusion, weight: float, rows: Sequence[tuple[Hashable, int, float]]
) -> dict[Hashable, _Part]:
    """Each candidate's part, keyed, for ``(key, rank, input)`` rows given in rank order."""
    parts = leg_contributions(method, weight, [(rank, value) for _, rank, value in rows])
    return {key: part for (key, _, _), part in zip(rows, parts, strict=True)}


def fused_order(
    *,
    method: Fusion | str,
    weights: Weights,
    lexical: Sequence[tuple[Hashable, int, float]] | None,
    vector: Sequence[tuple[Hashable, int, float]] | None,
    identity: Mapping[Hashable, str],
) -> list[tuple[Hashable, float]]:
    """The fused order of two candidate lists, as :func:`rank` computes it without freshness:
    ``(key, rank, lexical score)`` and ``(key, rank, cosine distance)`` rows in rank order,
    ``identity`` the tie-break identity of each key. Returns ``(key, fused score)`` best first.

    This is :func:`rank`'s own arithmetic (the evaluations re-fuse collected candidates with
    it to compare fusions and weights without searching again)."""
    fusion = Fusion(method)
    scores: dict[Hashable, list[float | None]] = {}
    for position, (rows, convert) in enumerate(((lexical, lexical_input), (vector, vector_input))):
        if rows is None:
            continue
        weight = weights.lexical if position == 0 else weights.vector
        parts = _parts_by_key(fusion, weight, [(k, r, convert(v)) for k, r, v in rows])
        for key, part in parts.items():
            scores.setdefault(key, [None, None])[position] = part.contribution
    fused = [(key, fuse(lex, vec)) for key, (lex, vec) in scores.items()]
    fused.sort(key=lambda item: (-item[1], identity[item[0]]))
    return fused


def fuse(lexical_contribution: float | None, vector_contribution: float | None) -> float:
    """Sum contributions in the fixed order lexical, then vector; absent adds 0."""
    rrf = 0.0
    rrf += 0.0 if lexical_contribution is None else lexical_contribution
    rrf += 0.0 if vector_contribution is None else vector_contribution
    return rrf


def freshness_factor(age: timedelta, max_age: timedelta | None) -> float:
    """Linear decay from 1.0 (age 0) to 0.5 (age == max_age), clamped to [0.5, 1.0].

    Both durations are reduced to integer microseconds first so the only inexact
    steps are the int-to-double conversions and three double operations.
    """
    if max_age is None:
        return 1.0
    age_us = micros(age)
    max_us = micros(max_age)
    if max_us <= 0:
        raise ValueError("max_age must be positive")
    factor = 1.0 - FRESHNESS_SLOPE * (float(age_us) / float(max_us))
    return min(1.0, max(FRESHNESS_FLOOR, factor))


def ideal_score(
    weights: Weights, *, lexical_ran: bool, vector_ran: bool, method: Fusion = Fusion.RRF
) -> float:
    """The fused score of a fragment best in every modality that ran: ranked first (RRF), or
    at 3 std above its leg's mean, normalised to 1 (DBSF; confidence is capped at 1 beyond)."""
    ideal = 0.0
    if method is Fusion.RRF:
        if lexical_ran:
            ideal += weights.lexical / _TOP_RANK_DENOMINATOR
        if vector_ran:
            ideal += weights.vector / _TOP_RANK_DENOMINATOR
        return ideal
    if lexical_ran:
        ideal += weights.lexical
    if vector_ran:
        ideal += weights.vector
    return ideal


def confidence(
    *,
    rrf_score: float,
    ideal: float,
    freshness: float,
    fused_rank: int,
    degraded: bool,
) -> float:
    """Bounded to [0, 1]; multiplied left to right exactly as written."""
    if ideal <= 0.0:
        raise ValueError("ideal score must be positive")
    semantic_factor = DEGRADED_CONFIDENCE_FACTOR if degraded else 1.0
    rank_decay = _TOP_RANK_DENOMINATOR / (float(RRF_K) + fused_rank)
    value = (rrf_score / ideal) * freshness * rank_decay * semantic_factor
    return min(1.0, max(0.0, value))


def retrieval_id(
    *,
    decision: Decision,
    query_digest: bytes,
    embedding_digest: bytes | None,
    limit: int,
    fusion: FusionSettings,
    lexical: Iterable[LexicalCandidate] | None,
    vector: Iterable[VectorCandidate] | None,
    records: Iterable[FragmentRecord],
) -> str:
    """Hex SHA-256 of the canonical JSON of the inputs that determine the output.

    Candidates are listed in rank order and records in fragment-id order, so any
    permutation of the input rows yields the same id. ``null`` (did not run) and
    ``[]`` (ran, found nothing) are different inputs and give different ids.
    """
    # Each fragment's text form once (records and both legs name the same fragments). A UUID's
    # text sorts as its integer does (fixed-width lower-case hex), so records sort by id.
    text: dict[UUID, str] = {}

    def fid(value: UUID) -> str:
        known = text.get(value)
        if known is None:
            known = text[value] = str(value)
        return known

    payload: dict[str, JsonValue] = {
        "decision_id": str(decision.decision_id),
        "query_digest": hex_digest(query_digest),
        "embedding_digest": None if embedding_digest is None else hex_digest(embedding_digest),
        "limit": limit,
        "fusion": fusion.fusion_plain(),
        "weights": fusion.weights_plain(),
        "lexical": (
            None
            if lexical is None
            else [
                [c.rank, fid(c.fragment_id), hex_digest(c.content_digest), c.lexical_generation]
                for c in sorted(lexical, key=_by_rank)
            ]
        ),
        "vector": (
            None
            if vector is None
            else [
                [
                    c.rank,
                    fid(c.fragment_id),
                    hex_digest(c.content_digest),
                    c.vector_generation,
                    c.lexical_generation,
                    c.search.value,
                ]
                for c in sorted(vector, key=_by_rank)
            ]
        ),
        "records": [
            [fid(r.fragment_id), hex_digest(r.content_digest), r.lexical_generation]
            for r in sorted(records, key=_by_fragment_id)
        ],
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------ checks


def _check_digest_arg(value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, bytes) or len(value) != DIGEST_SIZE:
        raise IntegrityViolation("invalid_digest")


def _check_semantic(
    decision: Decision,
    semantic: SemanticStatus,
    *,
    vector_ran: bool,
    embedding_digest: bytes | None,
) -> None:
    if not isinstance(semantic, SemanticStatus):
        raise IntegrityViolation("semantic_status")
    used = semantic.status is SemanticOutcome.USED
    if decision.semantic_policy is SemanticPolicy.REQUIRED and not used:
        raise SemanticRequired()
    if vector_ran != used:
        raise IntegrityViolation("semantic_status")
    if used and embedding_digest is None:
        raise IntegrityViolation("semantic_status")
    if semantic.status is SemanticOutcome.NOT_REQUESTED and embedding_digest is not None:
        raise IntegrityViolation("semantic_status")
    # Under a disabling policy the semantic leg cannot have run: it was either not requested
    # or wanted and degraded for exactly that reason, which is only truthful under that policy.
    disabled_by_policy = decision.semantic_policy is SemanticPolicy.DISABLED
    if disabled_by_policy and not (
        semantic.status is SemanticOutcome.NOT_REQUESTED
        or semantic.reason is DegradationReason.DISABLED
    ):
        raise IntegrityViolation("semantic_status")
    if semantic.reason is DegradationReason.DISABLED and not disabled_by_policy:
        raise IntegrityViolation("semantic_status")


def _check_ranks(ranks: list[int]) -> None:
    if len(set(ranks)) != len(ranks):
        raise IntegrityViolation("duplicate_rank")
    if sorted(ranks) != list(range(RANK_BASE, RANK_BASE + len(ranks))):
        raise IntegrityViolation("rank_gap")


def _check_unique_fragments(ids: Iterable[UUID]) -> None:
    seen: set[UUID] = set()
    for fragment_id in ids:
        if fragment_id in seen:
            raise IntegrityViolation("duplicate_fragment")
        seen.add(fragment_id)


def _check_modality(candidates: list[LexicalCandidate] | list[VectorCandidate], cap: int) -> None:
    if len(candidates) > cap:
        raise IntegrityViolation("too_many_candidates")
    _check_unique_fragments(c.fragment_id for c in candidates)
    _check_ranks([c.rank for c in candidates])


def _check_record(record: FragmentRecord, decision: Decision) -> None:
    fid = record.fragment_id
    if hashlib.sha256(record.body.encode("utf-8")).digest() != record.content_digest:
        raise IntegrityViolation("digest_mismatch", fragment_id=fid)
    if record.workspace_id != decision.workspace_id or record.project_id != decision.project_id:
        raise IntegrityViolation("foreign_scope", fragment_id=fid)
    if not record.classification.at_most(decision.ceiling):
        raise IntegrityViolation("above_ceiling", fragment_id=fid)
    if record.state is not FragmentState.ACTIVE:
        raise IntegrityViolation("inactive_state", fragment_id=fid)
    if record.superseded_by is not None:
        raise IntegrityViolation("superseded_link", fragment_id=fid)
    evaluated_at = decision.evaluated_at
    if record.observed_at > evaluated_at:
        raise IntegrityViolation("observed_in_future", fragment_id=fid)
    if decision.max_age is not None and record.observed_at < evaluated_at - decision.max_age:
        raise IntegrityViolation("too_old", fragment_id=fid)
    if record.expires_at is not None and record.expires_at <= evaluated_at:
        raise IntegrityViolation("expired", fragment_id=fid)


def _check_bindings(
    records: dict[UUID, FragmentRecord],
    lexical: dict[UUID, LexicalCandidate],
    vector: dict[UUID, VectorCandidate],
) -> None:
    for fid, lex in lexical.items():
        vec = vector.get(fid)
        if vec is not None and vec.content_digest != lex.content_digest:
            raise IntegrityViolation("cross_modality_digest_mismatch", fragment_id=lex.fragment_id)
    for lex in lexical.values():
        record = records.get(lex.fragment_id)
        if record is None:
            raise IntegrityViolation("candidate_without_record", fragment_id=lex.fragment_id)
        if lex.content_digest != record.content_digest:
            raise IntegrityViolation("candidate_digest_mismatch", fragment_id=lex.fragment_id)
        if lex.lexical_generation != record.lexical_generation:
            raise IntegrityViolation("generation_mismatch", fragment_id=lex.fragment_id)
    for vec in vector.values():
        record = records.get(vec.fragment_id)
        if record is None:
            raise IntegrityViolation("candidate_without_record", fragment_id=vec.fragment_id)
        if vec.content_digest != record.content_digest:
            raise IntegrityViolation("candidate_digest_mismatch", fragment_id=vec.fragment_id)
        if vec.lexical_generation != record.lexical_generation:
            raise IntegrityViolation("generation_mismatch", fragment_id=vec.fragment_id)
        # An embedding of some other text, or one stamped before the fragment's current
        # lexical generation, would rank this fragment on words it may no longer hold.
        if is_stale(
            source_digest=vec.source_digest,
            content_digest=record.content_digest,
            vector_generation=vec.vector_generation,
            lexical_generation=record.lexical_generation,
        ):
            raise IntegrityViolation("stale_embedding", fragment_id=vec.fragment_id)
    for fid, record in records.items():
        if fid not in lexical and fid not in vector:
            raise IntegrityViolation("record_without_candidate", fragment_id=record.fragment_id)


# ---------------------------------------------------------------------- ranking


class _Scored(NamedTuple):
    """One record with its candidates, parts and scores (a named tuple, as :class:`_Part`)."""

    record: FragmentRecord
    lexical: LexicalCandidate | None
    vector: VectorCandidate | None
    lexical_part: _Part | None
    vector_part: _Part | None
    fused_score: float
    age_us: int
    freshness: float
    final_score: float

    def order_key(self) -> tuple[float, float, str]:
        return (-self.final_score, -self.fused_score, self.record.identity)


def _parse_decision(decision: Decision | Row) -> Decision:
    if isinstance(decision, Decision):
        return decision
    return Decision.from_row(decision)


def rank(
    *,
    decision: Decision | Row,
    lexical: Iterable[Row] | None,
    vector: Iterable[Row] | None,
    records: Iterable[Row],
    limit: int,
    semantic: SemanticStatus,
    query_digest: bytes,
    embedding_digest: bytes | None,
    weights: Weights | None = None,
    retrieved_at: datetime | None = None,
    fusion: Fusion | str | None = None,
    weights_source: WeightsSource | str | None = None,
    weights_model: str | None = None,
    fusion_source: WeightsSource | str | None = None,
    fusion_model: str | None = None,
) -> SearchResult:
    """Recheck, fuse and order candidates; return the first ``limit`` of them.

    ``lexical``/``vector`` are ``None`` when that modality did not run and a
    (possibly empty) list of rows when it did. Any inconsistency raises
    :class:`IntegrityViolation` before anything is returned; a required semantic
    modality that did not take part raises :class:`SemanticRequired`.

    ``fusion``: ``rrf`` (canonical RRF, also when None) or ``dbsf``. ``weights_source`` (and,
    for ``model``, ``weights_model``) is what the explanations say about where ``weights`` came
    from: by default ``request`` when weights are given and ``default`` (1.0 each) when not;
    ``fusion_source`` / ``fusion_model`` likewise for ``fusion``.

    Three steps: :func:`_validate` (parse and recheck every input), :func:`_score` (fuse,
    freshness, total order) and :func:`_cut` (confidence, results and omissions).
    """
    checked = _validate(
        decision=decision,
        lexical=lexical,
        vector=vector,
        records=records,
        limit=limit,
        semantic=semantic,
        query_digest=query_digest,
        embedding_digest=embedding_digest,
        weights=weights,
        retrieved_at=retrieved_at,
        fusion=fusion,
        weights_source=weights_source,
        weights_model=weights_model,
        fusion_source=fusion_source,
        fusion_model=fusion_model,
    )
    results, omissions = _cut(checked, _score(checked))
    return SearchResult(
        retrieval_id=retrieval_id(
            decision=checked.decision,
            query_digest=query_digest,
            embedding_digest=embedding_digest,
            limit=limit,
            fusion=checked.fusion,
            lexical=checked.lexical if checked.lexical_ran else None,
            vector=checked.vector if checked.vector_ran else None,
            records=checked.records,
        ),
        decision=checked.decision,
        semantic=semantic,
        results=tuple(results),
        omissions=tuple(omissions),
        query_digest=query_digest,
        embedding_digest=embedding_digest,
        limit=limit,
        fusion=checked.fusion,
        lexical_ran=checked.lexical_ran,
        vector_ran=checked.vector_ran,
        retrieved_at=checked.retrieved_at,
    )


@dataclass(frozen=True, slots=True)
class _Checked:
    """The ranker's inputs, parsed and rechecked: everything :func:`_score` and :func:`_cut`
    may rely on."""

    decision: Decision
    fusion: FusionSettings
    limit: int
    semantic: SemanticStatus
    embedding_digest: bytes | None
    retrieved_at: datetime
    lexical_ran: bool
    vector_ran: bool
    ideal: float
    lexical: list[LexicalCandidate]
    vector: list[VectorCandidate]
    records: list[FragmentRecord]
    lexical_by_id: dict[UUID, LexicalCandidate]
    vector_by_id: dict[UUID, VectorCandidate]


def _validate(
    *,
    decision: Decision | Row,
    lexical: Iterable[Row] | None,
    vector: Iterable[Row] | None,
    records: Iterable[Row],
    limit: int,
    semantic: SemanticStatus,
    query_digest: bytes,
    embedding_digest: bytes | None,
    weights: Weights | None,
    retrieved_at: datetime | None,
    fusion: Fusion | str | None,
    weights_source: WeightsSource | str | None,
    weights_model: str | None,
    fusion_source: WeightsSource | str | None,
    fusion_model: str | None,
) -> _Checked:
    """Parse every row strictly and recheck it against the decision; raise on the first
    inconsistency (the checks run in a fixed order, so the same input names the same check)."""
    parsed_decision = _parse_decision(decision)
    if weights_source is None:
        weights_source = WeightsSource.DEFAULT if weights is None else WeightsSource.REQUEST
    if fusion_source is None:
        fusion_source = WeightsSource.DEFAULT if fusion is None else WeightsSource.REQUEST
    weights = Weights() if weights is None else weights
    if not isinstance(weights, Weights):
        raise IntegrityViolation("invalid_weights")
    try:
        settings = FusionSettings(
            method=Fusion.RRF if fusion is None else Fusion(fusion),
            weights=weights,
            source=WeightsSource(weights_source),
            model=weights_model,
            fusion_source=WeightsSource(fusion_source),
            fusion_model=fusion_model,
        )
    except (ValueError, PyretrieveError):
        raise IntegrityViolation("invalid_fusion") from None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise IntegrityViolation("invalid_limit")
    _check_digest_arg(query_digest, optional=False)
    _check_digest_arg(embedding_digest, optional=True)
    evaluated_at = parsed_decision.evaluated_at
    if retrieved_at is None:
        retrieved_at = evaluated_at
    if (
        not isinstance(retrieved_at, datetime)
        or retrieved_at.tzinfo is None
        or retrieved_at.utcoffset() is None
        or retrieved_at < evaluated_at
    ):
        raise IntegrityViolation("invalid_retrieved_at")

    lexical_ran = lexical is not None
    vector_ran = vector is not None
    _check_semantic(
        parsed_decision, semantic, vector_ran=vector_ran, embedding_digest=embedding_digest
    )
    ideal = ideal_score(
        weights, lexical_ran=lexical_ran, vector_ran=vector_ran, method=settings.method
    )
    if ideal <= 0.0:
        raise IntegrityViolation("nothing_ran")

    lexical_rows = [] if lexical is None else [LexicalCandidate.from_row(r) for r in lexical]
    vector_rows = [] if vector is None else [VectorCandidate.from_row(r) for r in vector]
    record_rows = [FragmentRecord.from_row(r) for r in records]

    cap = parsed_decision.candidate_limit
    _check_modality(lexical_rows, cap)
    _check_modality(vector_rows, cap)
    _check_unique_fragments(r.fragment_id for r in record_rows)
    for record in record_rows:
        _check_record(record, parsed_decision)
    by_id: dict[UUID, FragmentRecord] = {r.fragment_id: r for r in record_rows}
    lexical_by_id: dict[UUID, LexicalCandidate] = {c.fragment_id: c for c in lexical_rows}
    vector_by_id: dict[UUID, VectorCandidate] = {c.fragment_id: c for c in vector_rows}
    _check_bindings(by_id, lexical_by_id, vector_by_id)
    return _Checked(
        decision=parsed_decision,
        fusion=settings,
        limit=limit,
        semantic=semantic,
        embedding_digest=embedding_digest,
        retrieved_at=retrieved_at,
        lexical_ran=lexical_ran,
        vector_ran=vector_ran,
        ideal=ideal,
        lexical=lexical_rows,
        vector=vector_rows,
        records=record_rows,
        lexical_by_id=lexical_by_id,
        vector_by_id=vector_by_id,
    )


def _score(checked: _Checked) -> list[_Scored]:
    """Fuse each record's contributions, apply freshness, and sort into the total order."""
    weights = checked.fusion.weights
    method = checked.fusion.method
    # Each leg's parts are computed over all of its candidates, in rank order (DBSF's
    # distribution is the whole leg's).
    lexical_parts = _parts_by_key(
        method,
        weights.lexical,
        [
            (c.fragment_id, c.rank, lexical_input(c.score))
            for c in sorted(checked.lexical, key=_by_rank)
        ],
    )
    vector_parts = _parts_by_key(
        method,
        weights.vector,
        [
            (c.fragment_id, c.rank, vector_input(c.distance))
            for c in sorted(checked.vector, key=_by_rank)
        ],
    )
    evaluated_at = checked.decision.evaluated_at
    scored: list[_Scored] = []
    for record in checked.records:
        lex = checked.lexical_by_id.get(record.fragment_id)
        vec = checked.vector_by_id.get(record.fragment_id)
        lex_part = None if lex is None else lexical_parts[record.fragment_id]
        vec_part = None if vec is None else vector_parts[record.fragment_id]
        fused = fuse(
            None if lex_part is None else lex_part.contribution,
            None if vec_part is None else vec_part.contribution,
        )
        age = evaluated_at - record.observed_at
        fresh = freshness_factor(age, checked.decision.max_age)
        scored.append(
            _Scored(
                record=record,
                lexical=lex,
                vector=vec,
                lexical_part=lex_part,
                vector_part=vec_part,
                fused_score=fused,
                age_us=micros(age),
                freshness=fresh,
                final_score=fused * fresh,
            )
        )
    scored.sort(key=_Scored.order_key)
    return scored


def _by_rank(candidate: LexicalCandidate | VectorCandidate) -> int:
    return candidate.rank


def _by_fragment_id(record: FragmentRecord) -> UUID:
    return record.fragment_id


def _plain_part(part: _Part | None) -> PartExplanation | None:
    if part is None:
        return None
    normalization: dict[str, JsonValue] | None = None
    if part.distribution is not None:
        normalization = {
            "input": part.value,
            **part.distribution.to_plain(),
            "normalized": part.normalized,
        }
    return PartExplanation(contribution=part.contribution, normalization=normalization)


def _cut(checked: _Checked, scored: list[_Scored]) -> tuple[list[Result], list[Omission]]:
    """Confidence for every position; the first ``limit`` become explained results, the rest
    omissions."""
    degraded = checked.semantic.lowers_confidence
    max_age = checked.decision.max_age
    max_age_us = None if max_age is None else micros(max_age)
    results: list[Result] = []
    omissions: list[Omission] = []
    for position, item in enumerate(scored, start=RANK_BASE):
        conf = confidence(
            rrf_score=item.fused_score,
            ideal=checked.ideal,
            freshness=item.freshness,
            fused_rank=position,
            degraded=degraded,
        )
        record = item.record
        if position - RANK_BASE < checked.limit:
            results.append(
                Result(
                    fused_rank=position,
                    record=record,
                    lexical=item.lexical,
                    vector=item.vector,
                    fused_score=item.fused_score,
                    freshness=item.freshness,
                    final_score=item.final_score,
                    confidence=conf,
                    tie_break=record.identity,
                    explanation=explain_result(
                        fused_rank=position,
                        record=record,
                        lexical=item.lexical,
                        vector=item.vector,
                        fusion=checked.fusion,
                        lexical_part=_plain_part(item.lexical_part),
                        vector_part=_plain_part(item.vector_part),
                        fused_score=item.fused_score,
                        freshness=item.freshness,
                        age_us=item.age_us,
                        max_age_us=max_age_us,
                        final_score=item.final_score,
                        confidence=conf,
                        decision=checked.decision,
                        retrieved_at=checked.retrieved_at,
                        embedding_digest=checked.embedding_digest,
                        semantic=checked.semantic,
                    ),
                )
            )
        else:
            omissions.append(
                Omission(
                    workspace_id=record.workspace_id,
                    project_id=record.project_id,
                    fragment_id=record.fragment_id,
                    content_digest=record.content_digest,
                    position=position,
                    reason=OmissionReason.RESULT_LIMIT,
                    byte_estimate=record.byte_size,
                    freshness=item.freshness,
                    confidence=conf,
                )
            )
    return results, omissions
