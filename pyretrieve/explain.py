"""Per-result explanations: plain JSON dicts, built without touching the database.

The explanation's shape is fixed by this module (``pyretrieve.search()`` in SQL builds the same
document, byte for byte, in canonical JSON). The retrieved body appears in
exactly one place, ``content.text``, as an opaque string; nothing else in the
explanation is read from or influenced by the body, so text that imitates
instructions or metadata cannot change how a result is labelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from pyretrieve.contract import DBSF_FORMULA, DBSF_SPREAD
from pyretrieve.types import (
    RANK_BASE,
    RRF_FORMULA,
    RRF_K,
    TRUST_LABEL,
    Decision,
    FragmentRecord,
    Fusion,
    FusionSettings,
    JsonValue,
    LexicalCandidate,
    SemanticStatus,
    VectorCandidate,
    _identity,
    hex_digest,
    iso_utc,
)

__all__ = ["PartExplanation", "explain_result", "fusion_section"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PartExplanation:
    """One modality's share of a result's fused score: the contribution, and for DBSF how
    the modality's input was normalised (input, the leg's distribution, normalised value)."""

    contribution: float
    normalization: Mapping[str, JsonValue] | None = None


def fusion_section(fusion: FusionSettings, fused_score: float) -> dict[str, JsonValue]:
    """The explanation's ``fusion`` part: which fusion ran and where that choice came from, its
    parameters, the weights and where they came from, and the result's fused score."""
    parameters: dict[str, JsonValue]
    if fusion.method is Fusion.RRF:
        parameters = {"k": RRF_K, "rank_base": RANK_BASE, "formula": RRF_FORMULA}
    else:
        parameters = {"spread": DBSF_SPREAD, "formula": DBSF_FORMULA}
    return {
        **fusion.fusion_plain(),
        **parameters,
        "weights": fusion.weights_plain(),
        "score": fused_score,
    }


def _opt_iso(value: datetime | None) -> str | None:
    return None if value is None else iso_utc(value)


def explain_result(
    *,
    fused_rank: int,
    record: FragmentRecord,
    lexical: LexicalCandidate | None,
    vector: VectorCandidate | None,
    fusion: FusionSettings,
    lexical_part: PartExplanation | None,
    vector_part: PartExplanation | None,
    fused_score: float,
    freshness: float,
    age_us: int,
    max_age_us: int | None,
    final_score: float,
    confidence: float,
    decision: Decision,
    retrieved_at: datetime,
    embedding_digest: bytes | None,
    semantic: SemanticStatus,
) -> dict[str, JsonValue]:
    """Explain one ranked fragment.

    ``lexical``/``vector`` are the fragment's own candidate rows, or ``None`` when the
    fragment was absent from that modality (or the modality did not run); the
    matching part must then be ``None`` too. ``semantic`` is the request's semantic
    status, repeated in every result because it explains the result's confidence. Under
    DBSF each modality also says how its input was normalised (``normalization``).

    ``pyretrieve.search()`` in SQL builds the same document: for the same request and
    decision, the canonical JSON of both is byte-identical.
    """
    if (lexical is None) != (lexical_part is None):
        raise ValueError("lexical candidate and contribution must be given together")
    if (vector is None) != (vector_part is None):
        raise ValueError("vector candidate and contribution must be given together")
    dbsf = fusion.method is Fusion.DBSF
    for part in (lexical_part, vector_part):
        if part is not None and (part.normalization is not None) != dbsf:
            raise ValueError("a normalization is given exactly under DBSF")

    lexical_plain: JsonValue = None
    if lexical is not None and lexical_part is not None:
        lexical_plain = {
            "rank": lexical.rank,
            "score": lexical.score,
            "terms": [t.to_plain() for t in lexical.terms],
            "contribution": lexical_part.contribution,
            "weight": fusion.weights.lexical,
        }
        if lexical_part.normalization is not None:
            lexical_plain["normalization"] = dict(lexical_part.normalization)
    vector_plain: JsonValue = None
    if vector is not None and vector_part is not None:
        vector_plain = {
            "rank": vector.rank,
            "distance": vector.distance,
            "metric": "cosine_distance",
            "search": vector.search.value,
            "contribution": vector_part.contribution,
            "weight": fusion.weights.vector,
        }
        if vector_part.normalization is not None:
            vector_plain["normalization"] = dict(vector_part.normalization)

    # The record's id and digest as text once: its identity is made of the two.
    fragment_text = str(record.fragment_id)
    digest_hex = hex_digest(record.content_digest)
    return {
        "fused_rank": fused_rank,
        "decision_id": str(decision.decision_id),
        "fragment": {
            "workspace_id": record.workspace_id,
            "project_id": record.project_id,
            "fragment_id": fragment_text,
            "classification": record.classification.value,
        },
        "content": {"text": record.body, "trust": TRUST_LABEL},
        "provenance": {
            "source_uri": record.source_uri,
            "source_revision": record.source_revision,
            "manifest_id": record.manifest_id,
            "observed_at": iso_utc(record.observed_at),
            "retrieved_at": iso_utc(retrieved_at),
            "expires_at": _opt_iso(record.expires_at),
            "ingested_at": iso_utc(record.ingested_at),
            "content_digest": digest_hex,
        },
        "modalities": {"lexical": lexical_plain, "vector": vector_plain},
        "fusion": fusion_section(fusion, fused_score),
        "freshness": {"factor": freshness, "age_us": age_us, "max_age_us": max_age_us},
        "final_score": final_score,
        "confidence": confidence,
        "tie_break": _identity(digest_hex, fragment_text),
        "generations": {
            "lexical_generation": record.lexical_generation,
            "vector_generation": None if vector is None else vector.vector_generation,
        },
        "semantic": semantic.to_plain(),
        "semantic_query_digest": (
            None if embedding_digest is None else hex_digest(embedding_digest)
        ),
    }
