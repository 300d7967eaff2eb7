from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from ranking_factories import (
    EVALUATED_AT,
    MAX_AGE,
    decision_row,
    lexical_row,
    record_row,
    run,
    vector_row,
)

from pyretrieve.ranking import freshness_factor, rrf_contribution
from pyretrieve.types import SearchResult, Weights

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)
MAX_AGE_US = MAX_AGE // timedelta(microseconds=1)


@dataclass
class Scenario:
    records: list[dict[str, Any]]
    lexical: list[dict[str, Any]] | None
    vector: list[dict[str, Any]] | None
    limit: int
    weights: Weights
    seed: int

    def shuffled(self, seed: int) -> Scenario:
        rng = random.Random(seed)

        def mix(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
            if rows is None:
                return None
            copy = [dict(row) for row in rows]
            rng.shuffle(copy)
            return copy

        records = mix(self.records)
        assert records is not None
        return Scenario(
            records=records,
            lexical=mix(self.lexical),
            vector=mix(self.vector),
            limit=self.limit,
            weights=self.weights,
            seed=seed,
        )

    def run(self) -> SearchResult:
        return run(
            records=self.records,
            lexical=self.lexical,
            vector=self.vector,
            limit=self.limit,
            weights=self.weights,
        )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    size = draw(st.integers(min_value=0, max_value=12))
    lexical_ran = draw(st.booleans())
    vector_ran = draw(st.booleans()) if lexical_ran else True
    # Few distinct bodies and ages so exact score ties, and identity tie-breaks, occur.
    bodies = draw(st.lists(st.text(max_size=20), min_size=size, max_size=size))
    ages = draw(
        st.lists(
            st.sampled_from([0, 1, MAX_AGE_US // 3, MAX_AGE_US // 2, MAX_AGE_US])
            | st.integers(min_value=0, max_value=MAX_AGE_US),
            min_size=size,
            max_size=size,
        )
    )
    records = [
        record_row(
            n,
            body=f"{n}:{bodies[n]}",
            observed_at=EVALUATED_AT - timedelta(microseconds=ages[n]),
        )
        for n in range(size)
    ]
    membership = [
        draw(
            st.sampled_from(
                [(True, True), (True, False), (False, True)]
                if lexical_ran and vector_ran
                else [(lexical_ran, vector_ran)]
            )
        )
        for _ in range(size)
    ]
    in_lexical = [r for r, (lex, _) in zip(records, membership, strict=True) if lex]
    in_vector = [r for r, (_, vec) in zip(records, membership, strict=True) if vec]
    lexical_order = draw(st.permutations(in_lexical))
    vector_order = draw(st.permutations(in_vector))
    weight = st.sampled_from([0.5, 1.0, 2.0]) | st.floats(min_value=0.01, max_value=4.0)
    return Scenario(
        records=records,
        lexical=[lexical_row(r, i + 1) for i, r in enumerate(lexical_order)]
        if lexical_ran
        else None,
        vector=[vector_row(r, i + 1) for i, r in enumerate(vector_order)] if vector_ran else None,
        limit=draw(st.integers(min_value=1, max_value=14)),
        weights=Weights(lexical=draw(weight), vector=draw(weight)),
        seed=0,
    )


@PROPERTY_SETTINGS
@given(scenarios(), st.integers(min_value=0, max_value=2**32))
def test_to_json_is_byte_identical_under_permutation(scenario: Scenario, seed: int) -> None:
    first = scenario.run()
    second = scenario.shuffled(seed).run()
    assert first.to_json().encode("utf-8") == second.to_json().encode("utf-8")
    assert first.retrieval_id == second.retrieval_id


@PROPERTY_SETTINGS
@given(scenarios())
def test_results_and_omissions_partition_the_eligible_set(scenario: Scenario) -> None:
    out = scenario.run()
    returned = [r.fragment_id for r in out.results]
    omitted = [o.fragment_id for o in out.omissions]
    eligible = {r["fragment_id"] for r in scenario.records}
    assert not set(returned) & set(omitted)
    assert set(returned) | set(omitted) == eligible
    assert len(returned) + len(omitted) == len(eligible)
    assert len(returned) == min(scenario.limit, len(eligible))
    assert {o.reason.value for o in out.omissions} <= {"result_limit"}


@PROPERTY_SETTINGS
@given(scenarios())
def test_positions_are_contiguous_and_order_is_total(scenario: Scenario) -> None:
    out = scenario.run()
    positions = [r.fused_rank for r in out.results] + [o.position for o in out.omissions]
    assert positions == list(range(1, len(positions) + 1))
    keys = [(-r.final_score, -r.rrf_score, r.tie_break) for r in out.results]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)


@PROPERTY_SETTINGS
@given(scenarios())
def test_scores_are_bounded(scenario: Scenario) -> None:
    out = scenario.run()
    for result in out.results:
        assert 0.0 <= result.confidence <= 1.0
        assert 0.5 <= result.freshness <= 1.0
        assert result.final_score == result.rrf_score * result.freshness
    for omission in out.omissions:
        assert 0.0 <= omission.confidence <= 1.0
        assert 0.5 <= omission.freshness <= 1.0


@PROPERTY_SETTINGS
@given(scenarios())
def test_trust_is_constant_whatever_the_body(scenario: Scenario) -> None:
    out = scenario.run()
    plain = json.loads(out.to_json())
    for result in plain["results"]:
        assert result["content"]["trust"] == "untrusted-data"
    bodies = {r["fragment_id"]: r["body"] for r in scenario.records}
    for result in out.results:
        assert result.text == bodies[result.fragment_id]


@PROPERTY_SETTINGS
@given(
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False),
    st.integers(min_value=1, max_value=10_000),
)
def test_rrf_contribution_is_monotone_in_rank(weight: float, position: int) -> None:
    assert rrf_contribution(weight, position) >= rrf_contribution(weight, position + 1)


@PROPERTY_SETTINGS
@given(st.integers(min_value=1, max_value=40))
def test_single_modality_rrf_non_increasing_in_rank(size: int) -> None:
    records = [record_row(n) for n in range(size)]
    out = run(
        records=records,
        lexical=[lexical_row(r, i + 1) for i, r in enumerate(records)],
        vector=None,
        limit=size,
        decision=decision_row(max_age=None),
    )
    by_rank = sorted(out.results, key=lambda r: r.lexical.rank if r.lexical else 0)
    scores = [r.rrf_score for r in by_rank]
    assert scores == sorted(scores, reverse=True)
    assert [r.fused_rank for r in by_rank] == list(range(1, size + 1))


@PROPERTY_SETTINGS
@given(
    st.integers(min_value=0, max_value=2 * MAX_AGE_US),
    st.integers(min_value=0, max_value=2 * MAX_AGE_US),
)
def test_freshness_is_monotone_and_bounded(age_a: int, age_b: int) -> None:
    young, old = sorted((age_a, age_b))
    fresh_young = freshness_factor(timedelta(microseconds=young), MAX_AGE)
    fresh_old = freshness_factor(timedelta(microseconds=old), MAX_AGE)
    assert 0.5 <= fresh_old <= fresh_young <= 1.0


@PROPERTY_SETTINGS
@given(scenarios())
def test_confidence_non_increasing_within_equal_scores(scenario: Scenario) -> None:
    # With equal rrf and freshness, a later position may never claim more confidence.
    out = scenario.run()
    results = list(out.results)
    for earlier, later in itertools.pairwise(results):
        if earlier.rrf_score == later.rrf_score and earlier.freshness == later.freshness:
            assert earlier.confidence >= later.confidence
