"""pyretrieve: policy-filtered hybrid retrieval inside Postgres.

SQL callers use the functions of the ``pyretrieve`` schema; Python applications use
:class:`Retriever`, which calls them in a fixed order and ranks with the pure ranker.
"""

from pyretrieve.client import Retriever, SearchRequest
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
    NotFound,
    PyretrieveError,
    SemanticRequired,
    UnknownModel,
)
from pyretrieve.types import Scope, SearchResult, SemanticStatus, Weights

__all__ = [
    "AccessDenied",
    "Conflict",
    "DatabaseUnavailable",
    "IntegrityViolation",
    "InternalError",
    "InvalidDecision",
    "InvalidEmbedding",
    "InvalidInput",
    "LexicalFailure",
    "NotFound",
    "PyretrieveError",
    "Retriever",
    "Scope",
    "SearchRequest",
    "SearchResult",
    "SemanticRequired",
    "SemanticStatus",
    "UnknownModel",
    "Weights",
]
