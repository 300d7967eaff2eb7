"""Row factories shaped exactly like the database functions' dict rows."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from pyretrieve.ranking import rank
from pyretrieve.types import Decision, SearchResult, SemanticStatus, Weights

WORKSPACE = "ws-alpha"
PROJECT = "proj-one"
EVALUATED_AT = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
MAX_AGE = timedelta(days=30)
QUERY_DIGEST = hashlib.sha256(b"query text").digest()
EMBEDDING_DIGEST = hashlib.sha256(b"query embedding").digest()
DECISION_ID = UUID("6f1c2a4e-0000-4000-8000-00000000d001")
GRANT_ID = UUID("6f1c2a4e-0000-4000-8000-00000000a001")


def fid(n: int) -> UUID:
    return UUID(int=(0xF0 << 120) | n)


def sha(body: str) -> bytes:
    return hashlib.sha256(body.encode("utf-8")).digest()


def decision_row(**overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "decision_id": DECISION_ID,
        "principal": "user:alice",
        "workspace_id": WORKSPACE,
        "project_id": PROJECT,
        "purpose": "answering",
        "evaluated_at": EVALUATED_AT,
        "ceiling": "confidential",
        "max_age": MAX_AGE,
        "semantic_policy": "optional",
        "candidate_limit": 50,
        "grant_id": GRANT_ID,
    }
    row.update(overrides)
    return row


def record_row(n: int, body: str | None = None, **overrides: Any) -> dict[str, Any]:
    text = f"fragment number {n}" if body is None else body
    row: dict[str, Any] = {
        "workspace_id": WORKSPACE,
        "project_id": PROJECT,
        "fragment_id": fid(n),
        "body": text,
        "content_digest": sha(text),
        "classification": "internal",
        "state": "active",
        "superseded_by": None,
        "observed_at": EVALUATED_AT - timedelta(days=1),
        "expires_at": None,
        "ingested_at": EVALUATED_AT - timedelta(hours=20),
        "source_uri": f"file:///docs/{n}.md",
        "source_revision": "rev-1",
        "manifest_id": "manifest-1",
        "ts_config": "english",
        "lexical_generation": 1,
    }
    row.update(overrides)
    return row


def lexical_row(record: Mapping[str, Any], rank: int, **overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "rank": rank,
        "fragment_id": record["fragment_id"],
        "content_digest": record["content_digest"],
        "score": 1.0 / rank,
        "lexical_generation": record["lexical_generation"],
        "terms": [
            {
                "term": "fox",
                "idf": 1.5,
                "tf": 2,
                "query_tf": 1,
                "length_norm": 0.9,
                "contribution": 1.0 / rank,
            }
        ],
    }
    row.update(overrides)
    return row


def vector_row(record: Mapping[str, Any], rank: int, **overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "rank": rank,
        "fragment_id": record["fragment_id"],
        "content_digest": record["content_digest"],
        "distance": 0.1 * rank,
        "source_digest": record["content_digest"],
        "vector_generation": 3,
        "lexical_generation": record["lexical_generation"],
        "search": "exact",
    }
    row.update(overrides)
    return row


def run(
    *,
    records: Iterable[Mapping[str, Any]],
    lexical: Iterable[Mapping[str, Any]] | None,
    vector: Iterable[Mapping[str, Any]] | None,
    limit: int = 10,
    decision: Decision | Mapping[str, Any] | None = None,
    semantic: SemanticStatus | None = None,
    embedding_digest: bytes | str | None = "auto",
    weights: Weights | None = None,
    retrieved_at: datetime | None = None,
    **fusion: Any,
) -> SearchResult:
    """Call the ranker with consistent defaults for the semantic arguments; ``fusion``:
    ``fusion``, ``weights_source`` and ``weights_model`` as :func:`rank` takes them."""
    if semantic is None:
        semantic = SemanticStatus.used() if vector is not None else SemanticStatus.not_requested()
    if embedding_digest == "auto":
        embedding_digest = EMBEDDING_DIGEST if vector is not None else None
    assert not isinstance(embedding_digest, str)
    return rank(
        decision=decision_row() if decision is None else decision,
        lexical=None if lexical is None else list(lexical),
        vector=None if vector is None else list(vector),
        records=list(records),
        limit=limit,
        semantic=semantic,
        query_digest=QUERY_DIGEST,
        embedding_digest=embedding_digest,
        weights=weights,
        retrieved_at=retrieved_at,
        **fusion,
    )


def hybrid_corpus(
    size: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """``size`` fragments; lexical ranks ascend with n, vector ranks descend."""
    records = [record_row(n) for n in range(1, size + 1)]
    lexical = [lexical_row(r, i + 1) for i, r in enumerate(records)]
    vector = [vector_row(r, size - i) for i, r in enumerate(records)]
    return records, lexical, vector
