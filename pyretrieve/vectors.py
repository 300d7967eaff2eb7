"""Query embeddings: canonical float32 little-endian bytes, their digest, and pgvector's form.

:class:`QueryEmbedding` is a request's query vector as one value: the model, the canonical
float32 array, the digest the decision records, and what is already known about the semantic
leg before the database is asked.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from pyretrieve.contract import MAX_DIMENSION
from pyretrieve.errors import InvalidEmbedding
from pyretrieve.types import DegradationReason, SemanticStatus

__all__ = [
    "MAX_DIMENSION",
    "QueryEmbedding",
    "canonical_embedding",
    "embedding_bytes",
    "embedding_digest",
    "to_pgvector_text",
]


def canonical_embedding(values: Sequence[float] | NDArray[np.floating]) -> NDArray[np.float32]:
    """The embedding as float32, validated: 1..2000 finite values, not all zero."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidEmbedding("embedding must be a sequence of numbers") from None
    if array.ndim != 1 or not 1 <= array.shape[0] <= MAX_DIMENSION:
        raise InvalidEmbedding(f"embedding must have 1 to {MAX_DIMENSION} values")
    if not np.all(np.isfinite(array)):
        raise InvalidEmbedding("embedding must be finite (no NaN or Inf)")
    as32 = array.astype("<f4")
    if not np.all(np.isfinite(as32)):
        raise InvalidEmbedding("embedding values overflow float32")
    if not math.isfinite(float(np.linalg.norm(as32.astype(np.float64)))) or not np.any(as32):
        raise InvalidEmbedding("embedding must be non-zero")
    # Subnormal float32 values lose precision and can make cosine distances NaN; the database
    # refuses them too. Values that round to a subnormal count.
    tiny = np.finfo(np.float32).tiny
    if np.any((as32 != 0) & (np.abs(as32) < tiny)):
        raise InvalidEmbedding("embedding must not hold subnormal values (below 1.18e-38)")
    return as32


def embedding_bytes(vector: NDArray[np.float32]) -> bytes:
    return vector.astype("<f4").tobytes()


def embedding_digest(vector: NDArray[np.float32]) -> bytes:
    """sha256 of the float32 little-endian bytes: what authorize() records, never the values."""
    return hashlib.sha256(embedding_bytes(vector)).digest()


def to_pgvector_text(vector: NDArray[np.float32]) -> str:
    # repr of a float32 widened to float64 round-trips exactly through pgvector's float4 parser.
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


@dataclass(frozen=True, kw_only=True, slots=True)
class QueryEmbedding:
    """A request's query vector as one value, built once, before any connection is taken.

    ``values``: the canonical float32 array (read-only), or ``None`` when there is none.
    ``digest``: sha256 of its float32 little-endian bytes, what ``authorize()`` records and
    the explanation shows, never the values. ``status``: what is already known about the
    semantic leg: ``not_requested`` (the request wants none), a degradation found before the
    database (no embedding and no embedder, the embedder failed), or ``None`` when the vector
    is ready and the vector leg decides. Two values are equal when model, digest and status
    are: the digest stands for the values.
    """

    model: str | None
    values: NDArray[np.float32] | None = field(default=None, compare=False, repr=False)
    digest: bytes | None = None
    status: SemanticStatus | None = None

    @classmethod
    def of(
        cls, values: Sequence[float] | NDArray[np.floating], *, model: str | None
    ) -> QueryEmbedding:
        """Validate ``values`` (:func:`canonical_embedding`) and digest them once."""
        array = canonical_embedding(values)
        array.setflags(write=False)
        return cls(model=model, values=array, digest=embedding_digest(array))

    @classmethod
    def not_requested(cls) -> QueryEmbedding:
        """The request wants no semantic leg: no vector, no digest."""
        return cls(model=None, status=SemanticStatus.not_requested())

    @classmethod
    def missing(cls, model: str | None) -> QueryEmbedding:
        """No embedding was given and no embedder is registered for ``model``."""
        evidence = {"model": model, "embedder_registered": False}
        return cls(
            model=model,
            status=SemanticStatus.degraded(DegradationReason.MISSING_EMBEDDING, evidence),
        )

    @classmethod
    def adapter_failed(cls, model: str | None) -> QueryEmbedding:
        """The embedder raised; its error text (which may quote the query) is dropped."""
        return cls(
            model=model,
            status=SemanticStatus.degraded(DegradationReason.ADAPTER_FAILURE, {"model": model}),
        )

    @property
    def ready(self) -> bool:
        """A vector and a model are there and nothing has ruled the vector leg out yet."""
        return self.values is not None and self.status is None

    def pgvector_text(self) -> str:
        """The values in pgvector's text form (the vector leg's parameter)."""
        if self.values is None:
            raise InvalidEmbedding("no embedding")
        return to_pgvector_text(self.values)
