"""Which authorised tools to offer, and how sure we are: pure, no database.

Input is the authorised, fused candidate list (already rechecked by the ranker) with each
tool's metadata. Steps, each explained per tool:

1. **Similar-tool penalties** (write tools only). A delete/update/create tool whose family
   the request did not ask for (``delete`` asked, ``create`` offered) has its score multiplied
   by ``CONTRADICTION_FACTOR``; a write tool of an asked family whose name and description
   share no entity word with the request by ``NO_ENTITY_FACTOR``. Read tools are never penalised. The order is then by
   adjusted score, ties by the fused rank.
2. **Confidence** from the normalised top score ``s1`` (adjusted score / the ideal fused score:
   1.0 means rank 1 in every leg that ran), the second ``s2`` and the gap ``s1 - s2``:
   ``none`` (no candidate), ``high`` (s1 >= 0.9 and gap >= 0.1), ``normal`` (s1 >= 0.6),
   ``low`` (s1 >= 0.4), else ``fail``.
3. **K.** A policy recommends K; adaptive K only truncates the candidate list, never adds.
   ``near`` (the default) keeps every tool up to the last one whose own leg score is close to
   that leg's best in the pool: BM25 at least ``a`` times the best BM25, or cosine distance at
   most ``b`` above the best distance; at least ``kmin``. Near-identical tools score alike, so
   they are kept or cut together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from pyretrieve.tools.definitions import (
    WRITE_FAMILIES,
    entity_words,
    query_operations,
)

CONTRADICTION_FACTOR = 0.5
NO_ENTITY_FACTOR = 0.8
FIXED_POLICIES = {"fixed-10": 10, "fixed-15": 15, "fixed-20": 20, "fixed-48": 48}
ADAPTIVE_POLICIES = ("tight", "gap", "wide", "near")
POLICIES = (*FIXED_POLICIES, *ADAPTIVE_POLICIES)
# Chosen by evals/tools (docs/tools.md), cross-validated on BFCL tools with all-MiniLM-L6-v2-int8:
# the policy and parameters with the smallest average K whose recall stays within 1 point of K=48.
DEFAULT_POLICY = "near"
# near: (BM25 ratio a, cosine-distance margin b, kmin), chosen the same way.
NEAR_DEFAULT = (0.7, 0.1, 8)
# The parameters the evaluation cross-validates, per adaptive family.
FAMILY_GRIDS: dict[str, tuple[tuple[float, float, int], ...]] = {
    "near": tuple(
        (a, b, kmin)
        for a in (0.5, 0.6, 0.7, 0.8, 0.9)
        for b in (0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15)
        for kmin in (1, 3, 5, 8)
    ),
}
BASELINE_POLICY = "fixed-48"
POOL = 48
# Candidates per leg: the depth both legs search before fusion.
CANDIDATES = 100
LEVELS = ("none", "high", "normal", "low", "fail")
_TIGHT = {"none": 0, "high": 3, "normal": 5, "low": 10, "fail": 15}
_WIDE = {"none": 0, "high": 5, "normal": 8, "low": 12, "fail": 15}
STAGES = ("off", "eval", "canary", "majority", "full")
_STAGE_PERCENT = {"off": 0, "eval": 0, "canary": 5, "majority": 50, "full": 100}


@dataclass(frozen=True, slots=True)
class Candidate:
    fragment_id: UUID
    name: str
    operation: str
    schema_version: int
    fused_rank: int
    score: float
    lexical_rank: int | None
    vector_rank: int | None
    schema_chars: int
    # The entity words of the tool's name and description (definitions.tool_entities), as the
    # database stores them with the tool.
    entities: frozenset[str]
    lexical_score: float | None = None  # BM25 of the lexical leg
    vector_distance: float | None = None  # cosine distance of the vector leg


@dataclass(frozen=True, slots=True)
class Penalty:
    code: str  # operation_contradiction | no_shared_entity
    factor: float
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_plain(self) -> dict[str, Any]:
        return {"code": self.code, "factor": self.factor, **dict(self.detail)}


@dataclass(frozen=True, slots=True)
class Scored:
    candidate: Candidate
    rank: int  # 1-based, after penalties
    normalized: float  # score / ideal, before penalties
    adjusted: float  # normalized times every penalty factor
    penalties: tuple[Penalty, ...]


@dataclass(frozen=True, slots=True)
class Confidence:
    level: str
    score: float
    reason: str
    recommended_k: int
    top_score: float | None
    second_score: float | None
    gap: float | None

    def to_plain(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "score": self.score,
            "reason": self.reason,
            "recommended_k": self.recommended_k,
            "top_score": self.top_score,
            "second_score": self.second_score,
            "gap": self.gap,
        }


def penalties_for(query: str, candidate: Candidate) -> tuple[Penalty, ...]:
    return _penalties(query_operations(query), entity_words(query), candidate)


def _penalties(
    asked: frozenset[str], query_entities: frozenset[str], candidate: Candidate
) -> tuple[Penalty, ...]:
    family = candidate.operation
    if not asked or family == "other":
        return ()
    # Only write tools are protected: a delete/update/create tool the request did not ask
    # for is contradicted; read tools are never penalised (requests mix reads with writes,
    # "find a restaurant and book a table", and a read tool offered in excess does no harm).
    if family not in WRITE_FAMILIES:
        return ()
    if family not in asked:
        return (
            Penalty(
                "operation_contradiction",
                CONTRADICTION_FACTOR,
                {"asked": sorted(asked), "tool_family": family},
            ),
        )
    # The description counts too: names are terse ("reschedule", "MakePayment") and a request
    # names what the description is about ("move my event", "send money"); reading the name
    # alone penalised the right tool in 30 of BFCL's 204 write requests (docs/tools.md).
    if not (candidate.entities & query_entities):
        return (Penalty("no_shared_entity", NO_ENTITY_FACTOR, {"tool_family": family}),)
    return ()


def score(
    query: str, candidates: Sequence[Candidate], ideal: float, *, protect: bool = True
) -> list[Scored]:
    """Normalise, penalise and re-order. ``protect=False`` skips the penalties (for evals)."""
    # The request is read once, not once per candidate (about 25 us each for a long request).
    asked, query_entities = query_operations(query), entity_words(query)
    rows = []
    for c in candidates:
        normalized = c.score / ideal if ideal > 0 else 0.0
        pens = _penalties(asked, query_entities, c) if protect else ()
        adjusted = normalized
        for p in pens:
            adjusted *= p.factor
        rows.append((c, normalized, adjusted, pens))
    rows.sort(key=lambda r: (-r[2], r[0].fused_rank))
    return [
        Scored(candidate=c, rank=i, normalized=n, adjusted=a, penalties=p)
        for i, (c, n, a, p) in enumerate(rows, 1)
    ]


def confidence(scored: Sequence[Scored]) -> tuple[str, float, str, float | None, float | None]:
    if not scored:
        return "none", 0.0, "no authorised tool matched", None, None
    s1 = scored[0].adjusted
    s2 = scored[1].adjusted if len(scored) > 1 else 0.0
    gap = s1 - s2
    if s1 >= 0.9 and gap >= 0.1:
        return "high", s1, "top tool ranked first by every leg, clear gap to the next", s1, s2
    if s1 >= 0.6:
        return "normal", s1, "top tool ranked high by the legs that ran", s1, s2
    if s1 >= 0.4:
        return "low", s1, "top tool found by one leg only or ranked low", s1, s2
    return "fail", s1, "no tool ranked high by any leg", s1, s2


def _gap_k(scored: Sequence[Scored], low: int = 3, high: int = 20) -> int:
    """Cut after the largest drop in adjusted score among the first ``high`` positions."""
    values = [s.adjusted for s in scored[:high]]
    if len(values) <= low:
        return len(values)
    drops = [(values[i - 1] - values[i], i) for i in range(low, len(values))]
    best = max(drops, key=lambda d: (d[0], -d[1]))
    return best[1] if best[0] > 0 else len(values)


def _near_k(scored: Sequence[Scored], a: float, b: float, kmin: int) -> int:
    """Up to the last tool whose BM25 is at least ``a`` times the pool's best, or whose cosine
    distance is at most the best plus ``b``; at least ``kmin``. One double operation per
    comparison, so SQL reproduces it exactly."""
    lexical = [s.candidate.lexical_score for s in scored if s.candidate.lexical_score is not None]
    vector = [
        s.candidate.vector_distance for s in scored if s.candidate.vector_distance is not None
    ]
    best_lexical = max(lexical) if lexical else None
    best_vector = min(vector) if vector else None
    last = 0
    for s in scored:
        c = s.candidate
        near_lexical = (
            c.lexical_score is not None
            and best_lexical is not None
            and best_lexical > 0
            and c.lexical_score >= a * best_lexical
        )
        near_vector = (
            c.vector_distance is not None
            and best_vector is not None
            and c.vector_distance <= best_vector + b
        )
        if near_lexical or near_vector:
            last = s.rank
    return max(kmin, last)


def recommended_k(
    policy: str,
    level: str,
    scored: Sequence[Scored],
    *,
    params: tuple[float, float, int] | None = None,
) -> int:
    """K for a policy; never more than the candidates there are. ``params`` overrides the
    ``near`` parameters (for the evaluation's cross-validation)."""
    if policy in FIXED_POLICIES:
        k = FIXED_POLICIES[policy]
    elif policy == "tight":
        k = _TIGHT[level]
    elif policy == "wide":
        k = _WIDE[level]
    elif policy == "gap":
        k = 0 if level == "none" else _gap_k(scored)
    elif policy == "near":
        a, b, kmin = params or NEAR_DEFAULT
        k = 0 if level == "none" else _near_k(scored, a, b, kmin)
    else:
        raise ValueError(f"unknown K policy {policy!r}")
    return min(k, len(scored))


def assess(scored: Sequence[Scored], policy: str) -> Confidence:
    level, value, reason, s1, s2 = confidence(scored)
    return Confidence(
        level=level,
        score=value,
        reason=reason,
        recommended_k=recommended_k(policy, level, scored),
        top_score=s1,
        second_score=s2,
        gap=None if s1 is None or s2 is None else s1 - s2,
    )


def rollout_bucket(workspace: str, principal: str) -> int:
    """A stable bucket 0..99 for (workspace, principal)."""
    digest = hashlib.sha256(f"{workspace}\x00{principal}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


def adaptive_applies(stage: str, workspace: str, principal: str, *, master: bool = True) -> bool:
    """Whether adaptive K is applied for this principal at this stage (eval: computed only)."""
    if stage not in STAGES:
        raise ValueError(f"unknown rollout stage {stage!r}")
    return master and rollout_bucket(workspace, principal) < _STAGE_PERCENT[stage]
