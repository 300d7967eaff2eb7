"""The query embedding as one value (no database)."""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest

from pyretrieve.client import build_request
from pyretrieve.errors import InvalidEmbedding
from pyretrieve.types import DegradationReason, Scope, SemanticOutcome
from pyretrieve.vectors import QueryEmbedding

SCOPE = Scope(workspace="acme", project="docs", purpose="support")
VALUES = [0.8125, 0.0625, 0.123456, 0.0, 0.5]


def test_of_holds_the_canonical_array_and_its_float32_le_digest() -> None:
    qe = QueryEmbedding.of(VALUES, model="m5")
    assert qe.values is not None
    assert qe.values.dtype == np.dtype("<f4")
    raw = struct.pack("<5f", *VALUES)
    assert qe.digest == hashlib.sha256(raw).digest()
    assert qe.ready
    assert qe.status is None
    assert qe.model == "m5"
    assert qe.pgvector_text() == "[0.8125,0.0625,0.12345600128173828,0.0,0.5]"


def test_the_array_cannot_be_changed_behind_the_digest() -> None:
    qe = QueryEmbedding.of(VALUES, model="m5")
    assert qe.values is not None
    with pytest.raises(ValueError, match="read-only"):
        qe.values[0] = 1.0


def test_equal_values_in_any_input_form_are_one_value() -> None:
    as_list = QueryEmbedding.of(VALUES, model="m5")
    as_array = QueryEmbedding.of(np.array(VALUES, dtype=np.float64), model="m5")
    assert as_list == as_array
    assert hash(as_list) == hash(as_array)
    assert as_list != QueryEmbedding.of(VALUES, model="other")
    assert as_list != QueryEmbedding.of([*VALUES[:-1], 0.25], model="m5")


def test_invalid_values_are_refused() -> None:
    for bad in ([0.0, 0.0], [float("nan")], [], [1e-40]):
        with pytest.raises(InvalidEmbedding):
            QueryEmbedding.of(bad, model="m5")


def test_the_states_without_a_vector() -> None:
    none = QueryEmbedding.not_requested()
    assert (none.values, none.digest, none.model) == (None, None, None)
    assert none.status is not None
    assert none.status.status is SemanticOutcome.NOT_REQUESTED
    assert not none.ready
    missing = QueryEmbedding.missing("m5")
    assert missing.status is not None
    assert missing.status.reason is DegradationReason.MISSING_EMBEDDING
    assert missing.status.evidence == {"model": "m5", "embedder_registered": False}
    failed = QueryEmbedding.adapter_failed("m5")
    assert failed.status is not None
    assert failed.status.reason is DegradationReason.ADAPTER_FAILURE
    assert failed.status.evidence == {"model": "m5"}
    for qe in (none, missing, failed):
        assert not qe.ready
        with pytest.raises(InvalidEmbedding):
            qe.pgvector_text()


def test_build_request_builds_the_value_once() -> None:
    request = build_request("q", scope=SCOPE, embedding=VALUES, model="m5")
    assert request.embedding == QueryEmbedding.of(VALUES, model="m5")
    assert build_request("q", scope=SCOPE).embedding is None
