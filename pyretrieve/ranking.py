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
from operator import attrgetter
from typing import NamedTuple, TypeVar
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
    Classification,
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
    _identity,
    _new_omission,
    _new_result,
    _parse_lexical,
    _parse_record,
    _parse_vector,
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

_RANK = attrgetter("rank")
_FRAGMENT_TEXT = attrgetter("fragment_text")


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
    to build). Built with positional arguments: by keyword, it cost three times as much."""

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
        return [_Part(rrf_contribution(weight, rank)) for rank, _ in candidates]
    dist = distribution([value for _, value in candidates])
    if dist is None:
        return []
    parts = []
    for _, value in candidates:
        normalized = dist.normalize(value)
        parts.append(_Part(weight * normalized, value, normalized, dist))
    return parts


def _parts_by_key(
    method: Fusion,
    weight: float,
    keys: Sequence[Hashable],
    candidates: Sequence[tuple[int, float]],
) -> dict[Hashable, _Part]:
    """Each candidate's part by its key, for candidates as :func:`leg_contributions` takes
    them and their keys in the same order."""
    return dict(zip(keys, leg_contributions(method, weight, candidates), strict=True))


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
        parts = _parts_by_key(
            fusion, weight, [k for k, _, _ in rows], [(r, convert(v)) for _, r, v in rows]
        )
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
    return _freshness_us(micros(age), micros(max_age))


def _freshness_us(age_us: int, max_us: int | None) -> float:
    """:func:`freshness_factor` of durations already in microseconds (a search reduces its
    decision's ``max_age`` once, not once per record)."""
    if max_us is None:
        return 1.0
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
    head = _retrieval_head(decision, query_digest, embedding_digest, limit, fusion)
    # Each fragment's text form once (records and both legs name the same fragments).
    text: dict[UUID, str] = {}

    def fid(value: UUID) -> str:
        known = text.get(value)
        if known is None:
            known = text[value] = str(value)
        return known

    lexical_rows: list[JsonValue] | None = (
        None
        if lexical is None
        else [
            [c.rank, fid(c.fragment_id), hex_digest(c.content_digest), c.lexical_generation]
            for c in sorted(lexical, key=_RANK)
        ]
    )
    vector_rows: list[JsonValue] | None = (
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
            for c in sorted(vector, key=_RANK)
        ]
    )
    record_rows: list[JsonValue] = [
        [fid(r.fragment_id), hex_digest(r.content_digest), r.lexical_generation]
        for r in sorted(records, key=_by_fragment_id)
    ]
    return _retrieval_digest(
        head,
        {
            "lexical": canonical_json(lexical_rows),
            "vector": canonical_json(vector_rows),
            "records": canonical_json(record_rows),
        },
    )


def _retrieval_head(
    decision: Decision,
    query_digest: bytes,
    embedding_digest: bytes | None,
    limit: int,
    fusion: FusionSettings,
) -> dict[str, JsonValue]:
    """The retrieval id's inputs besides the rows: the decision, the query and the fusion."""
    return {
        "decision_id": str(decision.decision_id),
        "query_digest": hex_digest(query_digest),
        "embedding_digest": None if embedding_digest is None else hex_digest(embedding_digest),
        "limit": limit,
        "fusion": fusion.fusion_plain(),
        "weights": fusion.weights_plain(),
    }


def _retrieval_digest(head: Mapping[str, JsonValue], rows: Mapping[str, str]) -> str:
    """The hex SHA-256 of the canonical JSON of one object: ``head``'s members and ``rows``'s,
    whose values are given as canonical JSON already (:func:`rank` writes its rows without
    the encoder). The object is written as :func:`canonical_json` writes one: its members
    sorted by key, each key a plain identifier, which JSON quotes and leaves as it is."""
    members = {key: canonical_json(value) for key, value in head.items()}
    members.update(rows)
    text = "{" + ",".join(f'"{key}":{members[key]}' for key in sorted(members)) + "}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
    # Rows arrive in rank order: ranks that are already the run from the base repeat none
    # and skip none, and the two checks below would pass.
    if ranks == list(range(RANK_BASE, RANK_BASE + len(ranks))):
        return
    if len(set(ranks)) != len(ranks):
        raise IntegrityViolation("duplicate_rank")
    if sorted(ranks) != list(range(RANK_BASE, RANK_BASE + len(ranks))):
        raise IntegrityViolation("rank_gap")


_Keyed = TypeVar("_Keyed", LexicalCandidate, VectorCandidate, FragmentRecord)
_Candidate = TypeVar("_Candidate", LexicalCandidate, VectorCandidate)


def _by_fragment(rows: list[_Keyed]) -> dict[int, _Keyed]:
    """The rows by fragment id, each id once. Keyed by the id's integer, which is all that
    UUIDs compare and hash: a UUID hashes in Python, and a search looked ids up thousands of
    times."""
    by_id = {row.fragment_id.int: row for row in rows}
    if len(by_id) != len(rows):
        raise IntegrityViolation("duplicate_fragment")
    return by_id


def _check_modality(candidates: list[_Candidate], cap: int) -> dict[int, _Candidate]:
    if len(candidates) > cap:
        raise IntegrityViolation("too_many_candidates")
    by_id = _by_fragment(candidates)
    _check_ranks([c.rank for c in candidates])
    return by_id


def _check_records(records: list[FragmentRecord], decision: Decision) -> None:
    # The classifications the ceiling admits, once per search rather than twice per record.
    allowed = tuple(c for c in Classification if c.at_most(decision.ceiling))
    for record in records:
        _check_record(record, decision, allowed)


def _check_record(
    record: FragmentRecord, decision: Decision, allowed: tuple[Classification, ...]
) -> None:
    fid = record.fragment_id
    if hashlib.sha256(record.body.encode("utf-8")).digest() != record.content_digest:
        raise IntegrityViolation("digest_mismatch", fragment_id=fid)
    if record.workspace_id != decision.workspace_id or record.project_id != decision.project_id:
        raise IntegrityViolation("foreign_scope", fragment_id=fid)
    if record.classification not in allowed:
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
    records: dict[int, FragmentRecord],
    lexical: dict[int, LexicalCandidate],
    vector: dict[int, VectorCandidate],
) -> None:
    for key, lex in lexical.items():
        vec = vector.get(key)
        if vec is not None and vec.content_digest != lex.content_digest:
            raise IntegrityViolation("cross_modality_digest_mismatch", fragment_id=lex.fragment_id)
    for key, lex in lexical.items():
        record = records.get(key)
        if record is None:
            raise IntegrityViolation("candidate_without_record", fragment_id=lex.fragment_id)
        if lex.content_digest != record.content_digest:
            raise IntegrityViolation("candidate_digest_mismatch", fragment_id=lex.fragment_id)
        if lex.lexical_generation != record.lexical_generation:
            raise IntegrityViolation("generation_mismatch", fragment_id=lex.fragment_id)
    for key, vec in vector.items():
        record = records.get(key)
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
    for key, record in records.items():
        if key not in lexical and key not in vector:
            raise IntegrityViolation("record_without_candidate", fragment_id=record.fragment_id)


# ---------------------------------------------------------------------- ranking


class _Scored(NamedTuple):
    """One record with its candidates, parts and scores (a named tuple built positionally, as
    :class:`_Part`)."""

    record: FragmentRecord
    lexical: LexicalCandidate | None
    vector: VectorCandidate | None
    lexical_part: _Part | None
    vector_part: _Part | None
    fused_score: float
    age_us: int
    freshness: float
    final_score: float
    # The record's text forms, worked out once for the order, the retrieval id and the
    # explanation: its id, its digest and its identity (``FragmentRecord.identity``).
    fragment_text: str
    digest_hex: str
    identity: str

    def order_key(self) -> tuple[float, float, str]:
        return (-self.final_score, -self.fused_score, self.identity)


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
    scored = _score(checked)
    results, omissions = _cut(checked, scored)
    return SearchResult(
        retrieval_id=_retrieval_digest(
            _retrieval_head(
                checked.decision, query_digest, embedding_digest, limit, checked.fusion
            ),
            _retrieval_rows(checked, scored),
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
    # By the integer of the fragment id (see _by_fragment).
    lexical_by_id: dict[int, LexicalCandidate]
    vector_by_id: dict[int, VectorCandidate]


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

    # The parsers behind each class's from_row, called directly (a search parses hundreds).
    lexical_rows = [] if lexical is None else list(map(_parse_lexical, lexical))
    vector_rows = [] if vector is None else list(map(_parse_vector, vector))
    record_rows = list(map(_parse_record, records))

    cap = parsed_decision.candidate_limit
    lexical_by_id = _check_modality(lexical_rows, cap)
    vector_by_id = _check_modality(vector_rows, cap)
    by_id = _by_fragment(record_rows)
    _check_records(record_rows, parsed_decision)
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


def _leg_parts(checked: _Checked) -> tuple[dict[Hashable, _Part], dict[Hashable, _Part]]:
    """Each leg's parts by fragment key, computed over all of the leg's candidates in rank
    order (DBSF's distribution is the whole leg's)."""
    weights = checked.fusion.weights
    method = checked.fusion.method
    lexical = sorted(checked.lexical, key=_RANK)
    vector = sorted(checked.vector, key=_RANK)
    return (
        _parts_by_key(
            method,
            weights.lexical,
            [c.fragment_id.int for c in lexical],
            [(c.rank, lexical_input(c.score)) for c in lexical],
        ),
        _parts_by_key(
            method,
            weights.vector,
            [c.fragment_id.int for c in vector],
            [(c.rank, vector_input(c.distance)) for c in vector],
        ),
    )


def _score(checked: _Checked) -> list[_Scored]:
    """Fuse each record's contributions, apply freshness, and sort into the total order."""
    lexical_parts, vector_parts = _leg_parts(checked)
    evaluated_at = checked.decision.evaluated_at
    max_us = _max_age_us(checked.decision)
    scored: list[_Scored] = []
    for record in checked.records:
        key = record.fragment_id.int
        # A record has a part in a leg exactly when it has a candidate there.
        lex_part = lexical_parts.get(key)
        vec_part = vector_parts.get(key)
        fused = fuse(
            None if lex_part is None else lex_part.contribution,
            None if vec_part is None else vec_part.contribution,
        )
        age_us = micros(evaluated_at - record.observed_at)
        fresh = _freshness_us(age_us, max_us)
        text = str(record.fragment_id)
        digest = record.content_digest.hex()
        scored.append(
            _Scored(
                record,
                checked.lexical_by_id.get(key),
                checked.vector_by_id.get(key),
                lex_part,
                vec_part,
                fused,
                age_us,
                fresh,
                fused * fresh,
                text,
                digest,
                _identity(digest, text),
            )
        )
    scored.sort(key=_Scored.order_key)
    return scored


def _max_age_us(decision: Decision) -> int | None:
    return None if decision.max_age is None else micros(decision.max_age)


def _by_fragment_id(record: FragmentRecord) -> UUID:
    return record.fragment_id


def _retrieval_rows(checked: _Checked, scored: list[_Scored]) -> dict[str, str]:
    """The rows of :func:`retrieval_id`, as the canonical JSON its encoder would write, from
    each fragment's text forms (:func:`_score`). Every value in them is an int (parsed
    strictly: never a bool or a subclass) or the text of a UUID, a digest or a vector search
    (a StrEnum, which formats as its value), none of which JSON escapes. A UUID's text sorts
    as its integer does (fixed-width lower-case hex), so the records are in fragment-id order;
    every candidate has its record, and the record's digest, and the ranks of a leg run from
    the base without a gap, so each candidate has its slot."""
    lexical = [""] * len(checked.lexical)
    vector = [""] * len(checked.vector)
    records: list[str] = []
    for item in sorted(scored, key=_FRAGMENT_TEXT):
        fid, digest = item.fragment_text, item.digest_hex
        records.append(f'["{fid}","{digest}",{item.record.lexical_generation}]')
        lex = item.lexical
        if lex is not None:
            lexical[lex.rank - RANK_BASE] = (
                f'[{lex.rank},"{fid}","{digest}",{lex.lexical_generation}]'
            )
        vec = item.vector
        if vec is not None:
            vector[vec.rank - RANK_BASE] = (
                f'[{vec.rank},"{fid}","{digest}",{vec.vector_generation},'
                f'{vec.lexical_generation},"{vec.search}"]'
            )
    return {
        "lexical": "[" + ",".join(lexical) + "]" if checked.lexical_ran else "null",
        "vector": "[" + ",".join(vector) + "]" if checked.vector_ran else "null",
        "records": "[" + ",".join(records) + "]",
    }


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
    max_age_us = _max_age_us(checked.decision)
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
        if position - RANK_BASE < checked.limit:
            results.append(_result(checked, item, position, conf, max_age_us))
            continue
        record = item.record
        omissions.append(
            _new_omission(
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


def _result(
    checked: _Checked, item: _Scored, position: int, conf: float, max_age_us: int | None
) -> Result:
    record = item.record
    return _new_result(
        fused_rank=position,
        record=record,
        lexical=item.lexical,
        vector=item.vector,
        fused_score=item.fused_score,
        freshness=item.freshness,
        final_score=item.final_score,
        confidence=conf,
        tie_break=item.identity,
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
