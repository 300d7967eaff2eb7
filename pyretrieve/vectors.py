"""Query embeddings: canonical float32 little-endian bytes, their digest, and pgvector's form."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from pyretrieve.contract import MAX_DIMENSION
from pyretrieve.errors import InvalidEmbedding

__all__ = [
    "MAX_DIMENSION",
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
