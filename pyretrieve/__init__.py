"""pyretrieve: policy-filtered hybrid retrieval inside Postgres.

SQL callers use the functions of the ``pyretrieve`` schema; Python applications use
:class:`Retriever` (or :class:`AsyncRetriever` under asyncio), which calls them in a fixed
order and ranks with the pure ranker.
"""

from typing import TYPE_CHECKING, Any

from pyretrieve.errors import (
    AccessDenied,
    Conflict,
    DatabaseUnavailable,
    IntegrityViolation,
    InternalError,
    InvalidDecision,
    InvalidEmbedding,
    InvalidInput,
    LexicalFailure,
    LimitExceeded,
    ModelFileMismatch,
    NotFound,
    PrivilegedCaller,
    PyretrieveError,
    SemanticRequired,
    Timeout,
    UnknownModel,
)
from pyretrieve.types import Scope, SearchResult, SemanticStatus, Weights

if TYPE_CHECKING:
    from pyretrieve.client import AsyncRetriever, Retriever, SearchRequest
    from pyretrieve.embedders.registry import get_embedder, register_model


def __getattr__(name: str) -> Any:
    # The client pulls in psycopg; loading it lazily keeps `import pyretrieve.ranking` free
    # of any database module.
    if name in ("AsyncRetriever", "Retriever", "SearchRequest"):
        from pyretrieve import client

        return getattr(client, name)
    if name in ("register_model", "get_embedder"):
        from pyretrieve.embedders import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'pyretrieve' has no attribute {name!r}")


__all__ = [
    "AccessDenied",
    "AsyncRetriever",
    "Conflict",
    "DatabaseUnavailable",
    "IntegrityViolation",
    "InternalError",
    "InvalidDecision",
    "InvalidEmbedding",
    "InvalidInput",
    "LexicalFailure",
    "LimitExceeded",
    "ModelFileMismatch",
    "NotFound",
    "PrivilegedCaller",
    "PyretrieveError",
    "Retriever",
    "Scope",
    "SearchRequest",
    "SearchResult",
    "SemanticRequired",
    "SemanticStatus",
    "Timeout",
    "UnknownModel",
    "Weights",
    "get_embedder",
    "register_model",
]
