"""A disk cache of embeddings for evaluation runs, keyed by model id and text.

Embedding a collection is the slow part of a quality run (SciFact with the int8 MiniLM takes
about ten minutes on one of our two cores); the vectors depend only on the model and the text,
so every run after the first reads them back. The cache is one SQLite file per model under
``evals/.cache/`` (ignored by git), holding float32 little-endian bytes by sha256 of the text:
exactly what the embedder returned, so a cached run indexes the same vectors as a fresh one.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pyretrieve.embedders import Embedder

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "evals" / ".cache"


class CachedEmbedder:
    """An :class:`Embedder` that asks ``inner`` only for texts it has not seen before.

    Same ``model_id`` and ``dimension`` as ``inner``: the database cannot tell them apart.
    Queries and documents are cached apart (a model may embed them differently).
    """

    def __init__(self, inner: Embedder, folder: Path = CACHE) -> None:
        self._inner = inner
        folder.mkdir(parents=True, exist_ok=True)
        name = inner.model_id.replace("/", "_")
        self._db = sqlite3.connect(folder / f"embeddings-{name}.sqlite")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (kind TEXT, digest BLOB, vector BLOB,"
            " PRIMARY KEY (kind, digest))"
        )
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def _get(self, kind: str, digests: list[bytes]) -> dict[bytes, list[float]]:
        found: dict[bytes, list[float]] = {}
        for start in range(0, len(digests), 500):
            chunk = digests[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for digest, blob in self._db.execute(
                f"SELECT digest, vector FROM vectors WHERE kind = ? AND digest IN ({marks})",
                (kind, *chunk),
            ):
                found[digest] = np.frombuffer(blob, dtype="<f4").astype(float).tolist()
        return found

    def _put(self, kind: str, rows: list[tuple[bytes, list[float]]]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
            [(kind, d, np.asarray(v, dtype="<f4").tobytes()) for d, v in rows],
        )
        self._db.commit()

    def _embed(self, kind: str, texts: Sequence[str]) -> list[list[float]]:
        digests = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
        found = self._get(kind, list(set(digests)))
        missing = [i for i, d in enumerate(digests) if d not in found]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            if kind == "query":
                fresh = [self._inner.embed_query(texts[i]) for i in missing]
            else:
                fresh = self._inner.embed_documents([texts[i] for i in missing])
            rows = [(digests[i], list(v)) for i, v in zip(missing, fresh, strict=True)]
            self._put(kind, rows)
            # Read back through float32, as a cache hit would be.
            found.update(self._get(kind, [d for d, _ in rows]))
        return [found[d] for d in digests]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._embed("document", texts)

    def embed_query(self, text: str) -> list[float]:
        return self._embed("query", [text])[0]
