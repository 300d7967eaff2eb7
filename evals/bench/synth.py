"""A synthetic corpus for the scale benchmark: realistic text and clustered 384-d embeddings.

Text is sampled word by word from a vocabulary with real frequencies: the words of a BEIR
collection (SciFact's abstracts by default, read from ``../shared/datasets/`` at run time)
or, when none is given or found, a Zipf vocabulary of made-up words. Each document belongs to
one of ``clusters`` topics; a quarter of its words come from that topic's own word list, the
rest from the global distribution, so lexical and vector neighbours overlap as in real data.
Its embedding is the topic's centre plus Gaussian noise, L2-normalised (cosine similarity to
the centre about 0.7, to a sibling about 0.5).

Everything is a pure function of the seed, the scope name and the document's position, so a
scope can be regenerated (for queries, or the exact-search ground truth) without keeping the
corpus in memory.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

DIMENSION = 384
TOPIC_SHARE = 0.25
TOPIC_WORDS = 300
NOISE = 1.0
_WORD = re.compile(r"[a-z][a-z]+")
_SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]


def _seed(*parts: object) -> int:
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little")


@dataclass(frozen=True)
class Vocabulary:
    words: list[str]
    probabilities: NDArray[np.float64]
    source: str


def vocabulary_from_corpus(path: Path, *, max_words: int = 30_000) -> Vocabulary:
    """Word frequencies of a BEIR ``corpus.jsonl[.gz]`` (title and text, lower-cased)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    counts: Counter[str] = Counter()
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                doc = json.loads(line)
                counts.update(_WORD.findall(f"{doc.get('title') or ''} {doc['text']}".lower()))
    common = counts.most_common(max_words)
    freq = np.array([c for _, c in common], dtype=np.float64)
    return Vocabulary([w for w, _ in common], freq / freq.sum(), f"word frequencies of {path.name}")


def zipf_vocabulary(size: int = 30_000, *, exponent: float = 1.07, seed: int = 7) -> Vocabulary:
    """Made-up words of two to four syllables with Zipf-distributed frequencies."""
    rng = np.random.default_rng(seed)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        word = "".join(rng.choice(_SYLLABLES, size=int(rng.integers(2, 5))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    ranks = np.arange(1, size + 1, dtype=np.float64)
    weights = ranks**-exponent
    return Vocabulary(words, weights / weights.sum(), f"zipf(s={exponent}) over {size} words")


class Generator:
    """Documents, embeddings and queries for named scopes, deterministic in the seed."""

    def __init__(self, vocabulary: Vocabulary, *, clusters: int, seed: int = 1) -> None:
        self.vocabulary = vocabulary
        self.clusters = clusters
        self.seed = seed
        rng = np.random.default_rng(_seed(seed, "centres"))
        centres = rng.standard_normal((clusters, DIMENSION))
        self.centres = (centres / np.linalg.norm(centres, axis=1, keepdims=True)).astype(np.float32)
        # Topic words: drawn from the middle of the frequency ranking (not stop words, not hapax).
        n = len(vocabulary.words)
        low, high = min(100, n // 10), max(min(n, 20_000), min(100, n // 10) + TOPIC_WORDS)
        self.topics = np.stack(
            [
                rng.choice(np.arange(low, min(high, n)), size=TOPIC_WORDS, replace=False)
                for _ in range(clusters)
            ]
        )
        self._cdf = np.cumsum(vocabulary.probabilities)
        self._words = np.array(vocabulary.words, dtype=object)

    def _sample_words(self, rng: np.random.Generator, count: int, cluster: int) -> list[str]:
        topical = rng.random(count) < TOPIC_SHARE
        ids = np.searchsorted(self._cdf, rng.random(count) * self._cdf[-1])
        ids = np.minimum(ids, len(self._cdf) - 1)
        ids[topical] = self.topics[cluster][rng.integers(0, TOPIC_WORDS, int(topical.sum()))]
        return list(self._words[ids])

    def scope(
        self, name: str, count: int, *, start: int = 0
    ) -> tuple[list[str], NDArray[np.float32], NDArray[np.int64]]:
        """Bodies, embeddings (count x 384 float32) and cluster ids of a scope's documents."""
        rng = np.random.default_rng(_seed(self.seed, "scope", name, start))
        clusters = rng.integers(0, self.clusters, count)
        lengths = rng.integers(40, 161, count)
        bodies = []
        for i in range(count):
            words = self._sample_words(rng, int(lengths[i]), int(clusters[i]))
            # A title of a few topical words, then the text: the shape of an abstract.
            bodies.append(" ".join(words[:6]).capitalize() + "\n\n" + " ".join(words[6:]) + ".")
        noise = rng.standard_normal((count, DIMENSION)).astype(np.float32)
        noise *= NOISE / np.sqrt(DIMENSION)
        vectors = self.centres[clusters] + noise
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return bodies, vectors.astype(np.float32), clusters

    def queries(self, name: str, count: int) -> list[tuple[str, NDArray[np.float32]]]:
        """Short queries (3 to 8 words) with embeddings near a topic centre."""
        rng = np.random.default_rng(_seed(self.seed, "queries", name))
        out = []
        for _ in range(count):
            cluster = int(rng.integers(0, self.clusters))
            words = self._sample_words(rng, int(rng.integers(3, 9)), cluster)
            vector = self.centres[cluster] + rng.standard_normal(DIMENSION).astype(
                np.float32
            ) * np.float32(NOISE / np.sqrt(DIMENSION))
            vector /= np.linalg.norm(vector)
            out.append((" ".join(words), vector.astype(np.float32)))
        return out


def chunks(total: int, size: int) -> Iterator[tuple[int, int]]:
    for start in range(0, total, size):
        yield start, min(size, total - start)
