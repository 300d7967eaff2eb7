"""Real passages and real queries for the vector benches, embedded by a real model.

Synthetic clustered vectors (``evals.bench.synth``) say how the index behaves on a
distribution we chose; these say how it behaves on the distribution a deployment has. The
texts are the shared collections (SciFact, Cranfield, BFCL tools), read at run time and
never copied: each document gives its whole body, each sentence of it, and each window of two
consecutive sentences, as a chunker would. Overlapping chunks make near-duplicate vectors,
which real corpora have too. Queries are the collections' judged queries.

Vectors come from :class:`evals.quality.cache.CachedEmbedder`, so the first run embeds
(about ten minutes for the default model on two cores) and later runs read them back.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from evals.quality import datasets
from evals.quality.cache import CachedEmbedder
from pyretrieve.embedders.registry import get_embedder

COLLECTIONS = ("scifact", "cranfield", "bfcl-tools")
MODEL = "all-MiniLM-L6-v2-int8"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
MIN_CHARS = 20
BATCH = 4096


def chunks(body: str) -> Iterator[str]:
    """The body, its sentences (at least ``MIN_CHARS`` long) and its two-sentence windows."""
    yield body
    sentences = [s for s in _SENTENCE_END.split(body) if len(s) >= MIN_CHARS]
    if len(sentences) > 1:
        yield from sentences
        for a, b in itertools.pairwise(sentences):
            yield f"{a} {b}"


@dataclass(frozen=True, kw_only=True)
class Passages:
    """Distinct passage texts and query texts with their unit vectors (float32, one per row)."""

    model: str
    texts: list[str]
    vectors: NDArray[np.float32]
    queries: list[str]
    query_vectors: NDArray[np.float32]


def texts(collections: tuple[str, ...] = COLLECTIONS) -> tuple[list[str], list[str]]:
    """Distinct passages in corpus order, and the judged queries, of the named collections."""
    seen: set[str] = set()
    passages: list[str] = []
    queries: list[str] = []
    for name in collections:
        collection = datasets.load(name)
        for doc_id in collection.docs:
            for text in chunks(collection.body(doc_id)):
                if text.strip() and text not in seen:
                    seen.add(text)
                    passages.append(text)
        queries.extend(collection.queries.values())
    return passages, queries


def load(
    *,
    model: str = MODEL,
    collections: tuple[str, ...] = COLLECTIONS,
    limit: int | None = None,
    queries: int | None = None,
    seed: int = 1,
) -> Passages:
    """The first ``limit`` passages of ``collections`` and ``queries`` of their judged queries
    (drawn with ``seed``; all when None), embedded by ``model`` through the cache."""
    passages, pool = texts(collections)
    passages = passages[:limit]
    if queries is not None:
        picked = np.random.default_rng(seed).choice(len(pool), queries, replace=False)
        pool = [pool[i] for i in sorted(picked)]
    embedder = CachedEmbedder(get_embedder(model))
    # In batches, so an interrupted first run keeps what it embedded.
    vectors = np.concatenate(
        [
            np.asarray(embedder.embed_documents(passages[i : i + BATCH]), dtype=np.float32)
            for i in range(0, len(passages), BATCH)
        ]
    )
    query_vectors = np.asarray([embedder.embed_query(q) for q in pool], dtype=np.float32)
    return Passages(
        model=model, texts=passages, vectors=vectors, queries=pool, query_vectors=query_vectors
    )


if __name__ == "__main__":
    loaded = load(queries=0)
    print(f"{len(loaded.texts)} passages embedded by {loaded.model}")
