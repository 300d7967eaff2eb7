from __future__ import annotations

import ast
import hashlib
import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ranking_factories import (
    EMBEDDING_DIGEST,
    EVALUATED_AT,
    MAX_AGE,
    decision_row,
    fid,
    hybrid_corpus,
    lexical_row,
    record_row,
    run,
    sha,
    vector_row,
)

from pyretrieve import ranking as ranking_module
from pyretrieve.errors import IntegrityViolation, SemanticRequired
from pyretrieve.ranking import (
    confidence,
    freshness_factor,
    fuse,
    ideal_score,
    rrf_contribution,
)
from pyretrieve.types import (
    Decision,
    DegradationReason,
    FragmentRecord,
    JsonValue,
    LexicalCandidate,
    OmissionReason,
    SemanticStatus,
    VectorCandidate,
    Weights,
    canonical_json,
)

# ------------------------------------------------------------------ RRF numbers


def test_rrf_hand_worked_lexical_1_vector_3() -> None:
    record, second, third = record_row(1), record_row(2), record_row(3)
    out = run(
        records=[record, second, third],
        lexical=[lexical_row(record, 1)],
        vector=[vector_row(second, 1), vector_row(third, 2), vector_row(record, 3)],
    )
    result = next(r for r in out.results if r.fragment_id == fid(1))
    assert result.rrf_score == 0.0 + 1.0 / 61 + 1.0 / 63
    assert result.rrf_score == pytest.approx(0.032266458495966696, rel=0, abs=1e-18)
    modalities = result.explanation["modalities"]
    assert isinstance(modalities, dict)
    assert modalities["lexical"] == {
        "rank": 1,
        "score": 1.0,
        "terms": [
            {
                "term": "fox",
                "idf": 1.5,
                "tf": 2,
                "query_tf": 1,
                "length_norm": 0.9,
                "contribution": 1.0,
            }
        ],
        "contribution": 1.0 / 61,
        "weight": 1.0,
    }
    vector = modalities["vector"]
    assert isinstance(vector, dict)
    assert vector["contribution"] == 1.0 / 63
    assert vector["rank"] == 3


def test_rrf_contribution_uses_weight_over_60_plus_rank() -> None:
    assert rrf_contribution(2.0, 2) == 2.0 / 62
    assert rrf_contribution(1.0, 1) == 1.0 / 61
    assert rrf_contribution(0.0, 5) == 0.0


def test_fuse_sums_lexical_then_vector_and_absent_adds_zero() -> None:
    assert fuse(None, None) == 0.0
    assert fuse(1.0 / 61, None) == 1.0 / 61
    assert fuse(None, 1.0 / 63) == 1.0 / 63
    assert fuse(0.1, 0.2) == (0.0 + 0.1) + 0.2


def test_missing_modality_contributes_zero() -> None:
    a, b = record_row(1), record_row(2)
    out = run(records=[a, b], lexical=[lexical_row(a, 1)], vector=[vector_row(b, 1)])
    by_id = {r.fragment_id: r for r in out.results}
    assert by_id[fid(1)].rrf_score == 1.0 / 61
    assert by_id[fid(2)].rrf_score == 1.0 / 61
    assert by_id[fid(1)].vector is None
    assert by_id[fid(2)].lexical is None


def test_weights_scale_contributions() -> None:
    a, b = record_row(1), record_row(2)
    out = run(
        records=[a, b],
        lexical=[lexical_row(a, 1)],
        vector=[vector_row(b, 1)],
        weights=Weights(lexical=1.0, vector=2.0),
    )
    assert [r.fragment_id for r in out.results] == [fid(2), fid(1)]
    assert out.results[0].rrf_score == 2.0 / 61


def test_candidate_input_order_is_ignored() -> None:
    records, lexical, vector = hybrid_corpus(6)
    vector = [vector_row(r, i + 1) for i, r in enumerate(records)]
    forward = run(records=records, lexical=lexical, vector=vector)
    backward = run(records=records[::-1], lexical=lexical[::-1], vector=vector[::-1])
    assert [r.fragment_id for r in forward.results] == [fid(n) for n in range(1, 7)]
    assert forward.to_json() == backward.to_json()


# ------------------------------------------------------------------- ordering


def _body_pair_with_identity_order() -> tuple[str, str]:
    """Two bodies whose tie-break identities order as (first, second)."""
    first, second = sorted(["tie body x", "tie body y"], key=lambda body: sha(body).hex())
    return first, second


def test_ties_broken_by_content_bound_identity() -> None:
    low, high = _body_pair_with_identity_order()
    # fragment 1 gets the higher identity, so fragment-id order and identity order differ.
    a, b = record_row(1, body=high), record_row(2, body=low)
    out = run(records=[a, b], lexical=[lexical_row(a, 1)], vector=[vector_row(b, 1)])
    assert out.results[0].rrf_score == out.results[1].rrf_score
    assert out.results[0].final_score == out.results[1].final_score
    assert [r.fragment_id for r in out.results] == [fid(2), fid(1)]
    assert out.results[0].tie_break == sha(low).hex() + ":" + str(fid(2))
    assert out.results[0].tie_break < out.results[1].tie_break

    swapped_a, swapped_b = record_row(1, body=low), record_row(2, body=high)
    swapped = run(
        records=[swapped_a, swapped_b],
        lexical=[lexical_row(swapped_a, 1)],
        vector=[vector_row(swapped_b, 1)],
    )
    assert [r.fragment_id for r in swapped.results] == [fid(1), fid(2)]


def test_equal_final_scores_ordered_by_rrf_before_identity() -> None:
    low, high = _body_pair_with_identity_order()
    # a: rrf 1/61 at freshness 0.5; b: rrf 0.5/61 at freshness 1.0 -> same final score.
    a = record_row(1, body=high, observed_at=EVALUATED_AT - MAX_AGE)
    b = record_row(2, body=low, observed_at=EVALUATED_AT)
    out = run(
        records=[a, b],
        lexical=[lexical_row(a, 1)],
        vector=[vector_row(b, 1)],
        weights=Weights(lexical=1.0, vector=0.5),
    )
    first, second = out.results
    assert first.final_score == second.final_score
    assert first.rrf_score > second.rrf_score
    assert first.fragment_id == fid(1)
    assert first.tie_break > second.tie_break


def test_final_score_includes_freshness() -> None:
    a = record_row(1, observed_at=EVALUATED_AT - MAX_AGE / 2)
    out = run(records=[a], lexical=[lexical_row(a, 1)], vector=None)
    (result,) = out.results
    assert result.freshness == 0.75
    assert result.final_score == (1.0 / 61) * 0.75


def test_fresher_fragment_can_outrank_better_ranked_stale_one() -> None:
    old = record_row(1, observed_at=EVALUATED_AT - MAX_AGE)
    new = record_row(2, observed_at=EVALUATED_AT)
    out = run(records=[old, new], lexical=[lexical_row(old, 1), lexical_row(new, 2)], vector=None)
    assert [r.fragment_id for r in out.results] == [fid(2), fid(1)]


def test_no_max_age_means_no_decay() -> None:
    a = record_row(1, observed_at=EVALUATED_AT - timedelta(days=9000))
    out = run(
        records=[a], lexical=[lexical_row(a, 1)], vector=None, decision=decision_row(max_age=None)
    )
    assert out.results[0].freshness == 1.0
    assert out.results[0].final_score == out.results[0].rrf_score


# -------------------------------------------------------------------- freshness


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (timedelta(0), 1.0),
        (MAX_AGE / 4, 0.875),
        (MAX_AGE / 2, 0.75),
        (MAX_AGE, 0.5),
        (MAX_AGE * 3, 0.5),
        (timedelta(microseconds=-5), 1.0),
    ],
    ids=["age-zero", "quarter", "half", "full", "beyond", "clamped-above"],
)
def test_freshness_factor_values(age: timedelta, expected: float) -> None:
    assert freshness_factor(age, MAX_AGE) == expected


def test_freshness_factor_without_max_age_is_one() -> None:
    assert freshness_factor(timedelta(days=10_000), None) == 1.0


def test_freshness_factor_uses_integer_microseconds() -> None:
    max_age = timedelta(microseconds=3)
    assert freshness_factor(timedelta(microseconds=1), max_age) == 1.0 - 0.5 * (1.0 / 3.0)


# ------------------------------------------------------------------- confidence


def test_confidence_is_one_for_top_of_every_modality() -> None:
    a = record_row(1)
    out = run(
        records=[a],
        lexical=[lexical_row(a, 1)],
        vector=[vector_row(a, 1)],
        decision=decision_row(max_age=None),
    )
    assert out.results[0].confidence == 1.0


def test_confidence_lowered_when_semantic_degraded() -> None:
    a = record_row(1)
    out = run(
        records=[a],
        lexical=[lexical_row(a, 1)],
        vector=None,
        decision=decision_row(max_age=None),
        semantic=SemanticStatus.degraded(DegradationReason.UNAVAILABLE),
        embedding_digest=None,
    )
    assert out.semantic.lowers_confidence
    assert out.results[0].confidence == 0.75


def test_confidence_penalises_only_ran_modalities() -> None:
    a = record_row(1)
    lexical_only = run(
        records=[a], lexical=[lexical_row(a, 1)], vector=None, decision=decision_row(max_age=None)
    )
    both = run(
        records=[a], lexical=[lexical_row(a, 1)], vector=[], decision=decision_row(max_age=None)
    )
    assert lexical_only.results[0].confidence == 1.0
    assert both.results[0].confidence == (1.0 / 61) / (1.0 / 61 + 1.0 / 61)


def test_confidence_formula_and_rank_decay() -> None:
    ideal = ideal_score(Weights(), lexical_ran=True, vector_ran=True)
    assert ideal == 1.0 / 61.0 + 1.0 / 61.0
    value = confidence(rrf_score=1.0 / 62, ideal=ideal, freshness=0.9, fused_rank=3, degraded=False)
    assert value == ((1.0 / 62) / ideal) * 0.9 * (61.0 / 63.0) * 1.0


@pytest.mark.parametrize(
    ("rrf_score", "freshness", "fused_rank", "degraded", "expected"),
    [
        (10.0, 1.0, 1, False, 1.0),
        (0.0, 1.0, 1, False, 0.0),
        (-1.0, 1.0, 1, False, 0.0),
    ],
    ids=["clamped-high", "zero", "clamped-low"],
)
def test_confidence_is_clamped(
    rrf_score: float, freshness: float, fused_rank: int, degraded: bool, expected: float
) -> None:
    assert (
        confidence(
            rrf_score=rrf_score,
            ideal=1.0 / 61,
            freshness=freshness,
            fused_rank=fused_rank,
            degraded=degraded,
        )
        == expected
    )


def test_confidence_bounded_across_corpus() -> None:
    records, lexical, vector = hybrid_corpus(20)
    out = run(records=records, lexical=lexical, vector=vector, limit=5)
    values = [r.confidence for r in out.results] + [o.confidence for o in out.omissions]
    assert len(values) == 20
    assert all(0.0 <= v <= 1.0 for v in values)


# --------------------------------------------------------- results and omissions


def test_results_cut_at_limit_and_rest_are_omissions() -> None:
    records = [record_row(n, body=f"é body {n}") for n in range(1, 6)]
    lexical = [lexical_row(r, i + 1) for i, r in enumerate(records)]
    out = run(records=records, lexical=lexical, vector=None, limit=2)
    assert [r.fused_rank for r in out.results] == [1, 2]
    assert [r.fragment_id for r in out.results] == [fid(1), fid(2)]
    assert [o.fragment_id for o in out.omissions] == [fid(3), fid(4), fid(5)]
    assert [o.position for o in out.omissions] == [3, 4, 5]
    assert {o.reason for o in out.omissions} == {OmissionReason.RESULT_LIMIT}
    for omission in out.omissions:
        assert omission.byte_estimate == len(f"é body {omission.position}".encode())
        assert omission.byte_estimate == len(f"é body {omission.position}") + 1


def test_no_omissions_when_limit_covers_everything() -> None:
    records, lexical, vector = hybrid_corpus(3)
    out = run(records=records, lexical=lexical, vector=vector, limit=3)
    assert len(out.results) == 3
    assert out.omissions == ()


def test_empty_modalities_return_nothing() -> None:
    out = run(records=[], lexical=[], vector=[])
    assert out.results == ()
    assert out.omissions == ()


def test_did_not_run_differs_from_ran_empty() -> None:
    ran_empty = run(records=[], lexical=[], vector=[])
    vector_off = run(records=[], lexical=[], vector=None)
    assert ran_empty.vector_ran is True
    assert vector_off.vector_ran is False
    assert ran_empty.retrieval_id != vector_off.retrieval_id


def test_retrieval_id_depends_on_limit_and_candidates() -> None:
    records, lexical, vector = hybrid_corpus(4)
    base = run(records=records, lexical=lexical, vector=vector, limit=2)
    other_limit = run(records=records, lexical=lexical, vector=vector, limit=3)
    assert base.retrieval_id != other_limit.retrieval_id
    assert len(base.retrieval_id) == 64
    assert int(base.retrieval_id, 16) >= 0


def test_retrieval_id_is_the_digest_of_the_canonical_json_of_its_inputs() -> None:
    records, lexical, vector = hybrid_corpus(4)
    vector[0]["search"] = "hnsw"
    out = run(records=records, lexical=lexical, vector=vector, limit=2)
    parsed_lexical = sorted(map(LexicalCandidate.from_row, lexical), key=lambda c: c.rank)
    parsed_vector = sorted(map(VectorCandidate.from_row, vector), key=lambda c: c.rank)
    parsed_records = sorted(map(FragmentRecord.from_row, records), key=lambda r: r.fragment_id)
    payload: dict[str, JsonValue] = {
        "decision_id": str(out.decision.decision_id),
        "query_digest": out.query_digest.hex(),
        "embedding_digest": EMBEDDING_DIGEST.hex(),
        "limit": 2,
        "fusion": out.fusion.fusion_plain(),
        "weights": out.fusion.weights_plain(),
        "lexical": [
            [c.rank, str(c.fragment_id), c.content_digest.hex(), c.lexical_generation]
            for c in parsed_lexical
        ],
        "vector": [
            [
                c.rank,
                str(c.fragment_id),
                c.content_digest.hex(),
                c.vector_generation,
                c.lexical_generation,
                c.search.value,
            ]
            for c in parsed_vector
        ],
        "records": [
            [str(r.fragment_id), r.content_digest.hex(), r.lexical_generation]
            for r in parsed_records
        ],
    }
    expected = hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
    assert out.retrieval_id == expected


@pytest.mark.parametrize("legs", ["both", "lexical", "vector", "empty"])
def test_rank_writes_the_retrieval_id_that_retrieval_id_computes(legs: str) -> None:
    """rank() writes the id's rows itself, from the text of each fragment worked out once;
    retrieval_id() writes them with the JSON encoder. The bytes hashed are the same."""
    records, lexical, vector = hybrid_corpus(0 if legs == "empty" else 6)
    if vector:
        vector[2]["search"] = "hnsw"
    lexical_rows = None if legs == "vector" else lexical[::-1]
    vector_rows = None if legs == "lexical" else vector
    out = run(records=records[::-1], lexical=lexical_rows, vector=vector_rows, limit=2)
    assert out.retrieval_id == ranking_module.retrieval_id(
        decision=out.decision,
        query_digest=out.query_digest,
        embedding_digest=out.embedding_digest,
        limit=out.limit,
        fusion=out.fusion,
        lexical=None if lexical_rows is None else map(LexicalCandidate.from_row, lexical_rows),
        vector=None if vector_rows is None else map(VectorCandidate.from_row, vector_rows),
        records=map(FragmentRecord.from_row, records),
    )


def test_decision_object_accepted_in_place_of_row() -> None:
    records, lexical, vector = hybrid_corpus(3)
    from_row = run(records=records, lexical=lexical, vector=vector)
    from_obj = run(
        records=records,
        lexical=lexical,
        vector=vector,
        decision=Decision.from_row(decision_row()),
    )
    assert from_row.to_json() == from_obj.to_json()


def test_retrieved_at_defaults_to_evaluation_time() -> None:
    records, lexical, _ = hybrid_corpus(1)
    out = run(records=records, lexical=lexical, vector=None)
    assert out.retrieved_at == EVALUATED_AT
    later = EVALUATED_AT + timedelta(seconds=2)
    out_later = run(records=records, lexical=lexical, vector=None, retrieved_at=later)
    provenance = out_later.results[0].explanation["provenance"]
    assert isinstance(provenance, dict)
    assert provenance["retrieved_at"] == "2025-06-01T12:00:02.000000Z"


# ------------------------------------------------------------ integrity checks

Rows = dict[str, Any]
Mutation = Callable[[list[Rows], list[Rows], list[Rows]], None]


def _set(target: str, index: int, **changes: Any) -> Mutation:
    def mutate(records: list[Rows], lexical: list[Rows], vector: list[Rows]) -> None:
        {"records": records, "lexical": lexical, "vector": vector}[target][index].update(changes)

    return mutate


def _digest_mismatch(records: list[Rows], lexical: list[Rows], vector: list[Rows]) -> None:
    records[0]["body"] = "tampered secret body"


def _unknown_field(records: list[Rows], lexical: list[Rows], vector: list[Rows]) -> None:
    lexical[0]["extra_column"] = 1


def _missing_field(records: list[Rows], lexical: list[Rows], vector: list[Rows]) -> None:
    del records[1]["ts_config"]


def _duplicate_fragment(records: list[Rows], lexical: list[Rows], vector: list[Rows]) -> None:
    lexical[1].update(fragment_id=lexical[0]["fragment_id"])


def _duplicate_record(records: list[Rows], lexical: list[Rows], vector: list[Rows]) -> None:
    records.append(dict(records[0]))


def _candidate_without_record(records: list[Rows], lexical: list[Rows], vector: list[Rows]) -> None:
    removed = records.pop(0)
    # keep the fragment out of the other modality so only the lexical row dangles
    vector[:] = [v for v in vector if v["fragment_id"] != removed["fragment_id"]]
    for i, row in enumerate(sorted(vector, key=lambda r: r["rank"])):
        row["rank"] = i + 1


def _record_without_candidate(records: list[Rows], lexical: list[Rows], vector: list[Rows]) -> None:
    records.append(record_row(99))


def _cross_modality(records: list[Rows], lexical: list[Rows], vector: list[Rows]) -> None:
    vector_for_first = next(v for v in vector if v["fragment_id"] == fid(1))
    vector_for_first["content_digest"] = sha("something else")


def _candidate_digest(records: list[Rows], lexical: list[Rows], vector: list[Rows]) -> None:
    other = sha("something else")
    lexical[0]["content_digest"] = other
    next(v for v in vector if v["fragment_id"] == fid(1))["content_digest"] = other


INTEGRITY_CASES: list[tuple[str, Mutation]] = [
    ("digest_mismatch", _digest_mismatch),
    ("duplicate_rank", _set("lexical", 1, rank=1)),
    ("rank_gap", _set("lexical", 2, rank=7)),
    ("unknown_field", _unknown_field),
    ("missing_field", _missing_field),
    ("field_type", _set("lexical", 0, score="0.5")),
    ("field_type", _set("vector", 0, rank=True)),
    ("field_type", _set("records", 0, fragment_id=str(fid(1)))),
    ("field_type", _set("records", 0, content_digest=bytearray(32))),
    ("field_value", _set("records", 0, observed_at=datetime(2025, 5, 1))),
    ("field_value", _set("records", 0, classification="top-secret")),
    ("field_value", _set("lexical", 0, score=float("nan"))),
    ("field_value", _set("vector", 0, distance=2.5)),
    ("field_value", _set("lexical", 0, content_digest=b"\x00" * 31)),
    ("foreign_scope", _set("records", 0, workspace_id="ws-other")),
    ("foreign_scope", _set("records", 0, project_id="proj-other")),
    ("above_ceiling", _set("records", 0, classification="restricted")),
    ("inactive_state", _set("records", 0, state="superseded")),
    ("inactive_state", _set("records", 0, state="retracted")),
    ("superseded_link", _set("records", 0, superseded_by=fid(77))),
    ("expired", _set("records", 0, expires_at=EVALUATED_AT)),
    ("observed_in_future", _set("records", 0, observed_at=EVALUATED_AT + timedelta(seconds=1))),
    ("too_old", _set("records", 0, observed_at=EVALUATED_AT - MAX_AGE - timedelta(microseconds=1))),
    ("duplicate_fragment", _duplicate_fragment),
    ("duplicate_fragment", _duplicate_record),
    ("candidate_without_record", _candidate_without_record),
    ("record_without_candidate", _record_without_candidate),
    ("cross_modality_digest_mismatch", _cross_modality),
    ("candidate_digest_mismatch", _candidate_digest),
    ("generation_mismatch", _set("lexical", 0, lexical_generation=2)),
    ("stale_embedding", _set("vector", 0, source_digest=sha("older text"))),
    ("stale_embedding", _set("vector", 0, vector_generation=0)),
]


@pytest.mark.parametrize(
    ("check", "mutate"),
    INTEGRITY_CASES,
    ids=[f"{check}-{i}" for i, (check, _) in enumerate(INTEGRITY_CASES)],
)
def test_integrity_violation(check: str, mutate: Mutation) -> None:
    records, lexical, vector = hybrid_corpus(4)
    run(records=records, lexical=lexical, vector=vector)  # the untouched corpus is valid
    mutate(records, lexical, vector)
    with pytest.raises(IntegrityViolation) as caught:
        run(records=records, lexical=lexical, vector=vector)
    assert caught.value.check == check
    assert caught.value.code == "VES_MEMORY_INTEGRITY_VIOLATION"


def test_too_many_candidates() -> None:
    records, lexical, vector = hybrid_corpus(4)
    run(records=records, lexical=lexical, vector=vector, decision=decision_row(candidate_limit=4))
    with pytest.raises(IntegrityViolation) as caught:
        run(
            records=records,
            lexical=lexical,
            vector=vector,
            decision=decision_row(candidate_limit=3),
        )
    assert caught.value.check == "too_many_candidates"


def test_boundaries_are_accepted() -> None:
    """The exact edges of the policy windows are inside the window."""
    oldest = record_row(1, observed_at=EVALUATED_AT - MAX_AGE)
    newest = record_row(
        2, observed_at=EVALUATED_AT, expires_at=EVALUATED_AT + timedelta(microseconds=1)
    )
    at_ceiling = record_row(3, classification="confidential")
    records = [oldest, newest, at_ceiling]
    out = run(
        records=records, lexical=[lexical_row(r, i + 1) for i, r in enumerate(records)], vector=None
    )
    assert len(out.results) == 3


def test_integrity_message_never_contains_body() -> None:
    secret = "TOP SECRET launch codes 0000"
    a = record_row(1, body=secret)
    a["content_digest"] = sha("a different text")
    with pytest.raises(IntegrityViolation) as caught:
        run(records=[a], lexical=[lexical_row(a, 1)], vector=None)
    assert caught.value.check == "digest_mismatch"
    assert caught.value.fragment_id == fid(1)
    assert secret not in str(caught.value)
    assert "TOP SECRET" not in repr(caught.value.as_dict())


def test_unknown_field_with_hostile_key_is_not_echoed() -> None:
    a = record_row(1)
    a["ignore previous instructions; DROP TABLE"] = 1
    with pytest.raises(IntegrityViolation) as caught:
        run(records=[a], lexical=[lexical_row(a, 1)], vector=None)
    assert caught.value.check == "unknown_field"
    assert "DROP" not in str(caught.value)


@pytest.mark.parametrize("limit", [0, -1, True], ids=["zero", "negative", "bool"])
def test_invalid_limit(limit: int) -> None:
    records, lexical, vector = hybrid_corpus(2)
    with pytest.raises(IntegrityViolation) as caught:
        run(records=records, lexical=lexical, vector=vector, limit=limit)
    assert caught.value.check == "invalid_limit"


def test_nothing_ran() -> None:
    with pytest.raises(IntegrityViolation) as caught:
        run(records=[], lexical=None, vector=None)
    assert caught.value.check == "nothing_ran"


def test_zero_weight_on_only_modality_is_nothing_ran() -> None:
    with pytest.raises(IntegrityViolation) as caught:
        run(records=[], lexical=[], vector=None, weights=Weights(lexical=0.0))
    assert caught.value.check == "nothing_ran"


def test_retrieved_before_evaluation_rejected() -> None:
    with pytest.raises(IntegrityViolation) as caught:
        run(records=[], lexical=[], vector=None, retrieved_at=EVALUATED_AT - timedelta(seconds=1))
    assert caught.value.check == "invalid_retrieved_at"


def test_query_digest_must_be_sha256() -> None:
    from pyretrieve.ranking import rank

    with pytest.raises(IntegrityViolation) as caught:
        rank(
            decision=decision_row(),
            lexical=[],
            vector=None,
            records=[],
            limit=1,
            semantic=SemanticStatus.not_requested(),
            query_digest=hashlib.sha1(b"q").digest(),
            embedding_digest=None,
        )
    assert caught.value.check == "invalid_digest"


# ---------------------------------------------------------------- semantic status


def test_semantic_required_but_not_used() -> None:
    with pytest.raises(SemanticRequired) as caught:
        run(
            records=[],
            lexical=[],
            vector=None,
            decision=decision_row(semantic_policy="required"),
            semantic=SemanticStatus.degraded(DegradationReason.ADAPTER_FAILURE),
            embedding_digest=None,
        )
    assert caught.value.code == "VES_MEMORY_SEMANTIC_REQUIRED"


@pytest.mark.parametrize(
    ("policy", "semantic", "vector", "embedding"),
    [
        ("optional", SemanticStatus.not_requested(), [], None),
        ("optional", SemanticStatus.used(), None, b"\x01" * 32),
        ("optional", SemanticStatus.used(), [], None),
        ("optional", SemanticStatus.not_requested(), None, b"\x01" * 32),
        ("disabled", SemanticStatus.used(), [], b"\x01" * 32),
        (
            "disabled",
            SemanticStatus.degraded(DegradationReason.UNAVAILABLE),
            None,
            None,
        ),
        ("optional", SemanticStatus.degraded(DegradationReason.DISABLED), None, None),
    ],
    ids=[
        "vector-ran-not-requested",
        "used-without-vector",
        "used-without-embedding",
        "not-requested-with-embedding",
        "disabled-but-used",
        "disabled-but-degraded",
        "reason-disabled-under-optional",
    ],
)
def test_semantic_status_must_match_inputs(
    policy: str, semantic: SemanticStatus, vector: list[Rows] | None, embedding: bytes | None
) -> None:
    with pytest.raises(IntegrityViolation) as caught:
        run(
            records=[],
            lexical=[],
            vector=vector,
            decision=decision_row(semantic_policy=policy),
            semantic=semantic,
            embedding_digest=embedding,
        )
    assert caught.value.check == "semantic_status"


def test_semantic_disabled_by_policy_is_accepted() -> None:
    records, lexical, _ = hybrid_corpus(2)
    out = run(
        records=records,
        lexical=lexical,
        vector=None,
        decision=decision_row(semantic_policy="disabled"),
        semantic=SemanticStatus.degraded(DegradationReason.DISABLED),
        embedding_digest=None,
    )
    plain = json.loads(out.to_json())
    assert plain["semantic"] == {
        "status": "degraded",
        "reason": "disabled",
        "evidence": {},
        "lowers_confidence": True,
    }
    # A semantic query was wanted and the policy refused it: confidence says so.
    assert out.results[0].confidence == pytest.approx(0.75 * (1.0 - 0.5 / 30))


def test_lexical_only_request_under_disabling_policy_is_accepted() -> None:
    records, lexical, _ = hybrid_corpus(2)
    out = run(
        records=records,
        lexical=lexical,
        vector=None,
        decision=decision_row(semantic_policy="disabled"),
        semantic=SemanticStatus.not_requested(),
    )
    assert out.semantic.reason is None
    assert len(out.results) == 2


# ----------------------------------------------------------------- isolation


PURE_MODULES = [
    "pyretrieve.ranking",
    "pyretrieve.explain",
    "pyretrieve.types",
    "pyretrieve.errors",
    "pyretrieve.contract",
]
DATABASE_PACKAGES = ("psycopg", "psycopg_pool", "sqlalchemy", "pgvector", "alembic")

# The package's __init__ re-exports the client for convenience; the pure modules must
# not depend on that, so the probe registers a bare package object and imports the
# module on its own, transitively, in a fresh interpreter.
_IMPORT_PROBE = """
import importlib, sys, types
package = types.ModuleType("pyretrieve")
package.__path__ = [sys.argv[2]]
sys.modules["pyretrieve"] = package
importlib.import_module(sys.argv[1])
assert sys.argv[1] in sys.modules
loaded = sorted(
    name for name in sys.modules
    if name.split(".")[0] in sys.argv[3].split(",") or name.startswith("pyretrieve.db")
)
print(",".join(loaded))
"""


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_modules_import_no_database_module(module: str) -> None:
    package_dir = str(Path(ranking_module.__file__).resolve().parent)
    completed = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, module, package_dir, ",".join(DATABASE_PACKAGES)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.strip() == ""


def test_import_probe_detects_a_database_import() -> None:
    """The probe itself can fail: a module that does import psycopg is reported."""
    package_dir = str(Path(ranking_module.__file__).resolve().parent)
    completed = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, "json", package_dir, "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.strip().split(",")[0] == "json"


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_modules_import_only_stdlib_and_pure_siblings(module: str) -> None:
    source = Path(importlib.import_module(module).__file__ or "").read_text(encoding="utf-8")
    allowed_siblings = {
        "pyretrieve.types",
        "pyretrieve.errors",
        "pyretrieve.explain",
        "pyretrieve.contract",
    }
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            imported.add(node.module)
    assert imported, "the parser found no imports at all"
    for name in imported:
        top = name.split(".")[0]
        assert top in sys.stdlib_module_names or name in allowed_siblings, name


def test_timezone_of_inputs_does_not_change_output() -> None:
    from datetime import timezone

    plus_two = timezone(timedelta(hours=2))
    records, lexical, vector = hybrid_corpus(3)
    utc_out = run(records=records, lexical=lexical, vector=vector)
    shifted = [dict(r, observed_at=r["observed_at"].astimezone(plus_two)) for r in records]
    shifted_decision = decision_row(evaluated_at=EVALUATED_AT.astimezone(plus_two))
    other = run(records=shifted, lexical=lexical, vector=vector, decision=shifted_decision)
    assert other.to_json() == utc_out.to_json()
