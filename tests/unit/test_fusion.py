"""Fusion in the pure ranker: DBSF's arithmetic, the weights' source in every explanation,
and the one fused order the evaluations re-fuse candidates with."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ranking_factories import decision_row, fid, lexical_row, record_row, run, vector_row

from pyretrieve.contract import DBSF_DEGENERATE, DBSF_FORMULA, DBSF_SPREAD
from pyretrieve.errors import IntegrityViolation, InvalidInput
from pyretrieve.ranking import distribution, fused_order, ideal_score
from pyretrieve.types import Fusion, FusionSettings, Weights, WeightsSource

# ------------------------------------------------------------------ the distribution


def test_distribution_is_mean_and_sample_std_summed_in_order() -> None:
    dist = distribution([1.0, 2.0, 4.0])
    assert dist is not None
    mean = ((0.0 + 1.0) + 2.0 + 4.0) / 3.0
    squares = (0.0 + (1.0 - mean) * (1.0 - mean)) + (2.0 - mean) * (2.0 - mean)
    squares += (4.0 - mean) * (4.0 - mean)
    std = math.sqrt(squares / 2.0)
    assert (dist.candidates, dist.mean, dist.std) == (3, mean, std)
    assert dist.lower == mean - DBSF_SPREAD * std
    assert dist.upper == mean + DBSF_SPREAD * std
    assert distribution([]) is None


def test_normalize_is_affine_and_floored_at_zero() -> None:
    dist = distribution([0.0, 1.0, 2.0, 3.0, 100.0])
    assert dist is not None
    assert dist.normalize(dist.mean) == pytest.approx(0.5)
    assert dist.normalize(dist.lower - 5.0) == 0.0
    assert dist.normalize(dist.lower) == 0.0
    assert dist.normalize(dist.upper) == pytest.approx(1.0)
    # Not capped: beyond mean + 3 std a score keeps counting, so the leg's best stay apart.
    assert dist.normalize(dist.upper + 5.0) > dist.normalize(dist.upper) > 0.99


def test_dbsf_keeps_a_single_legs_order_even_past_three_std() -> None:
    """A cap at 1 tied every candidate beyond mean + 3 std, and the tie-break (identity) then
    reordered the best of a leg that ran alone (a vector-mode search under DBSF did not return
    the vector order)."""
    records = [record_row(n) for n in range(1, 31)]
    # One far outlier and a tight pack: the first two lie beyond mean + 3 std.
    distances = [0.0, 0.01, *[0.5 + 0.001 * i for i in range(28)]]
    vector = [
        vector_row(r, i + 1, distance=d)
        for i, (r, d) in enumerate(zip(records, distances, strict=True))
    ]
    out = run(records=records, lexical=None, vector=vector, fusion="dbsf", limit=30)
    assert [r.fragment_id for r in out.results] == [r["fragment_id"] for r in records]
    top = out.results[0].explanation["modalities"]["vector"]["normalization"]  # type: ignore[index]
    assert top["normalized"] > 1.0


@pytest.mark.parametrize("values", [[0.7], [2.0, 2.0, 2.0]], ids=["one", "all_equal"])
def test_an_empty_range_maps_every_candidate_to_the_mean_value(values: list[float]) -> None:
    dist = distribution(values)
    assert dist is not None
    assert dist.std == 0.0
    assert dist.normalize(values[0]) == DBSF_DEGENERATE == 0.5


def test_ideal_scores_per_fusion() -> None:
    weights = Weights(lexical=0.5, vector=2.0)
    assert ideal_score(weights, lexical_ran=True, vector_ran=True) == 0.5 / 61 + 2.0 / 61
    assert ideal_score(weights, lexical_ran=True, vector_ran=True, method=Fusion.DBSF) == 2.5
    assert ideal_score(weights, lexical_ran=False, vector_ran=True, method=Fusion.DBSF) == 2.0


# ----------------------------------------------------------------------- the ranker


def _three() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    a, b, c = record_row(1), record_row(2), record_row(3)
    lexical = [
        lexical_row(a, 1, score=9.0),
        lexical_row(b, 2, score=3.0),
        lexical_row(c, 3, score=1.0),
    ]
    vector = [vector_row(c, 1, distance=0.2), vector_row(a, 2, distance=0.6)]
    return [a, b, c], lexical, vector


def test_dbsf_hand_worked() -> None:
    records, lexical, vector = _three()
    out = run(
        records=records,
        lexical=lexical,
        vector=vector,
        weights=Weights(lexical=1.0, vector=2.0),
        fusion="dbsf",
    )
    lex = distribution([9.0, 3.0, 1.0])
    vec = distribution([1.0 - 0.2, 1.0 - 0.6])
    assert lex is not None
    assert vec is not None
    expected = {
        fid(1): (0.0 + 1.0 * lex.normalize(9.0)) + 2.0 * vec.normalize(1.0 - 0.6),
        fid(2): 0.0 + 1.0 * lex.normalize(3.0),
        fid(3): (0.0 + 1.0 * lex.normalize(1.0)) + 2.0 * vec.normalize(1.0 - 0.2),
    }
    got = {r.fragment_id: r.fused_score for r in out.results}
    assert got == expected
    assert [r.fragment_id for r in out.results] == sorted(expected, key=lambda k: -expected[k])
    top = out.results[0]
    assert top.final_score == top.fused_score * top.freshness
    # Confidence is normalised by the DBSF ideal: every leg's weight (normalised score 1).
    assert top.confidence == min(1.0, (top.fused_score / 3.0) * top.freshness * (61.0 / (60.0 + 1)))


def test_dbsf_explains_each_modalitys_normalization() -> None:
    records, lexical, vector = _three()
    out = run(records=records, lexical=lexical, vector=vector, fusion="dbsf")
    lex = distribution([9.0, 3.0, 1.0])
    assert lex is not None
    for result in out.results:
        fusion = result.explanation["fusion"]
        assert fusion == {
            "method": "dbsf",
            "source": "request",
            "model": None,
            "spread": DBSF_SPREAD,
            "formula": DBSF_FORMULA,
            "weights": {"lexical": 1.0, "vector": 1.0, "source": "default", "model": None},
            "score": result.fused_score,
        }
    second = next(r for r in out.results if r.fragment_id == fid(2))
    modalities = second.explanation["modalities"]
    assert isinstance(modalities, dict)
    assert modalities["vector"] is None
    assert modalities["lexical"]["normalization"] == {  # type: ignore[index]
        "input": 3.0,
        **lex.to_plain(),
        "normalized": lex.normalize(3.0),
    }
    assert modalities["lexical"]["contribution"] == lex.normalize(3.0)  # type: ignore[index]


def test_rrf_explanations_carry_no_normalization() -> None:
    records, lexical, vector = _three()
    out = run(records=records, lexical=lexical, vector=vector)
    for result in out.results:
        for part in result.explanation["modalities"].values():  # type: ignore[union-attr]
            assert part is None or "normalization" not in part
        assert result.explanation["fusion"]["method"] == "rrf"  # type: ignore[index]


def test_the_explanation_says_where_the_weights_came_from() -> None:
    records, lexical, vector = _three()
    cases = [
        ({}, {"lexical": 1.0, "vector": 1.0, "source": "default", "model": None}),
        (
            {"weights": Weights(lexical=2.0, vector=0.5)},
            {"lexical": 2.0, "vector": 0.5, "source": "request", "model": None},
        ),
        (
            {
                "weights": Weights(lexical=0.3, vector=1.0),
                "weights_source": "model",
                "weights_model": "m1",
            },
            {"lexical": 0.3, "vector": 1.0, "source": "model", "model": "m1"},
        ),
    ]
    for kwargs, expected in cases:
        out = run(records=records, lexical=lexical, vector=vector, **kwargs)
        assert out.to_plain()["query"]["weights"] == expected  # type: ignore[index]
        for result in out.results:
            assert result.explanation["fusion"]["weights"] == expected  # type: ignore[index]


def test_the_explanation_says_where_the_fusion_came_from() -> None:
    records, lexical, vector = _three()
    cases = [
        ({}, {"method": "rrf", "source": "default", "model": None}),
        ({"fusion": "dbsf"}, {"method": "dbsf", "source": "request", "model": None}),
        (
            {"fusion": "dbsf", "fusion_source": "model", "fusion_model": "m1"},
            {"method": "dbsf", "source": "model", "model": "m1"},
        ),
    ]
    for kwargs, expected in cases:
        out = run(records=records, lexical=lexical, vector=vector, **kwargs)
        assert out.to_plain()["query"]["fusion"] == expected  # type: ignore[index]
        for result in out.results:
            section = result.explanation["fusion"]
            assert {k: section[k] for k in ("method", "source", "model")} == expected  # type: ignore[index]


def test_fusion_and_source_change_the_retrieval_id() -> None:
    records, lexical, vector = _three()
    ids = {
        run(records=records, lexical=lexical, vector=vector).retrieval_id,
        run(records=records, lexical=lexical, vector=vector, fusion="dbsf").retrieval_id,
        run(records=records, lexical=lexical, vector=vector, weights=Weights()).retrieval_id,
    }
    assert len(ids) == 3


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fusion": "linear"},
        {"weights_source": "guess"},
        {"weights_source": "model"},  # a model's weights name the model
        {"weights_model": "m1"},  # and only a model's do
        {"fusion_source": "model"},
        {"fusion": "dbsf", "fusion_model": "m1"},
    ],
)
def test_bad_fusion_settings_raise_before_anything_is_returned(kwargs: dict[str, Any]) -> None:
    records, lexical, vector = _three()
    with pytest.raises(IntegrityViolation, match="invalid_fusion"):
        run(records=records, lexical=lexical, vector=vector, **kwargs)


def test_fusion_settings_validate() -> None:
    with pytest.raises(InvalidInput):
        FusionSettings(method="linear")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        FusionSettings(source=WeightsSource.MODEL)
    with pytest.raises(InvalidInput):
        FusionSettings(fusion_source=WeightsSource.MODEL)
    settings_ = FusionSettings(method="dbsf", source="model", model="m")  # type: ignore[arg-type]
    assert settings_.method is Fusion.DBSF
    assert settings_.source is WeightsSource.MODEL


# ---------------------------------------------------- the order the evaluations re-fuse

_score = st.floats(min_value=0.0, max_value=30.0, allow_nan=False).map(lambda x: round(x, 2))
_distance = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.5, 0.75, 1.0, 1.5])


@st.composite
def _legs(draw: st.DrawFn) -> tuple[list[int], list[int], list[float], list[float]]:
    size = draw(st.integers(1, 12))
    ids = list(range(1, size + 1))
    lexical = draw(st.permutations(ids))[: draw(st.integers(0, size))]
    # Every record is a candidate of at least one leg.
    missing = [i for i in ids if i not in lexical]
    others = [i for i in draw(st.permutations(ids)) if i not in missing]
    vector = draw(st.permutations(missing + others[: draw(st.integers(0, len(others)))]))
    scores = sorted((draw(_score) for _ in lexical), reverse=True)
    distances = sorted(draw(_distance) for _ in vector)
    return lexical, vector, scores, distances


@settings(max_examples=150, deadline=None)
@given(
    legs=_legs(),
    method=st.sampled_from(["rrf", "dbsf"]),
    weights=st.tuples(st.sampled_from([0.05, 0.3, 1.0, 2.5]), st.sampled_from([0.1, 1.0, 4.0])),
)
def test_fused_order_is_the_rankers_order(
    legs: tuple[list[int], list[int], list[float], list[float]],
    method: str,
    weights: tuple[float, float],
) -> None:
    """The evaluations compare fusions by re-fusing collected candidates with fused_order: it
    must give exactly rank()'s order and scores (no max_age, so freshness is 1)."""
    lexical_ids, vector_ids, scores, distances = legs
    records = {n: record_row(n) for n in sorted({*lexical_ids, *vector_ids})}
    lexical = [
        lexical_row(records[n], r, score=s)
        for r, (n, s) in enumerate(zip(lexical_ids, scores, strict=True), start=1)
    ]
    vector = [
        vector_row(records[n], r, distance=d)
        for r, (n, d) in enumerate(zip(vector_ids, distances, strict=True), start=1)
    ]
    chosen = Weights(lexical=weights[0], vector=weights[1])
    out = run(
        records=list(records.values()),
        lexical=lexical,
        vector=vector,
        weights=chosen,
        fusion=method,
        limit=len(records),
        decision=decision_row(max_age=None),
    )
    identity = {
        n: r["content_digest"].hex() + ":" + str(r["fragment_id"]) for n, r in records.items()
    }
    order = fused_order(
        method=method,
        weights=chosen,
        lexical=[
            (n, r, s) for r, (n, s) in enumerate(zip(lexical_ids, scores, strict=True), start=1)
        ],
        vector=[
            (n, r, d) for r, (n, d) in enumerate(zip(vector_ids, distances, strict=True), start=1)
        ],
        identity=identity,
    )
    assert [(fid(n), score) for n, score in order] == [
        (r.fragment_id, r.fused_score) for r in out.results
    ]
