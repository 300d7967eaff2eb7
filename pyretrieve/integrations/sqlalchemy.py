"""SQLAlchemy Core constructs for pyretrieve's SQL API.

An application that holds a SQLAlchemy ``Engine``, ``Connection`` or ``Session`` calls the SQL
API inside its own transaction, next to its own tables::

    from sqlalchemy import select
    from pyretrieve.integrations import sqlalchemy as pyretrieve_sa

    hits = pyretrieve_sa.search(workspace="acme", project="docs", purpose="support",
                                query="rotate credentials")
    with pyretrieve_sa.translated(), engine.begin() as conn:
        pyretrieve_sa.act_as(conn, "alice")
        rows = conn.execute(select(hits.c.rank, hits.c.body).select_from(hits)).all()

The table-valued functions (:func:`authorize`, :func:`search`, :func:`lexical_candidates`,
:func:`vector_candidates`, :func:`fragments`) return a ``TableValuedAlias`` whose columns
carry the SQL result types; the writers (:func:`put_fragment`, :func:`supersede_fragment`,
:func:`retract_fragment`, :func:`put_embedding`) return typed scalar function calls, used as
``select(pyretrieve_sa.put_fragment(...))``. Every argument is passed by name
(``p_workspace => ...``) with an explicit cast to the SQL parameter type; an argument left at
:data:`DEFAULT` is not passed at all, so the SQL default applies and cannot drift from a copy
here. ``tests/db/test_sqlalchemy.py`` checks every name and type against the installed
catalog.

Nothing here widens access: the constructs only call the API functions, which decide inside
the database (one decision per transaction, row-level security as a second wall) exactly as
they do for :class:`pyretrieve.Retriever`. :func:`translated` turns the database's errors into
pyretrieve's typed errors, sanitised and unchained as everywhere else in the package.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Final, Literal, TypeAlias

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import (
    BigInteger,
    Double,
    Integer,
    LargeBinary,
    Text,
    Uuid,
    cast,
    column,
    func,
    literal,
    text,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection
from sqlalchemy.exc import StatementError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement, ColumnElement
from sqlalchemy.sql.functions import Function
from sqlalchemy.sql.selectable import TableValuedAlias
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TIMESTAMP, TypeEngine, UserDefinedType

from pyretrieve import contract
from pyretrieve.db import queries
from pyretrieve.db.errors import translate
from pyretrieve.errors import InternalError, InvalidInput, PyretrieveError
from pyretrieve.vectors import canonical_embedding, to_pgvector_text

__all__ = [
    "CLASSIFICATION",
    "DEFAULT",
    "FRAGMENT_STATE",
    "FUNCTIONS",
    "SEMANTIC_POLICY",
    "VECTOR",
    "Default",
    "NamedArgument",
    "SqlFunction",
    "act_as",
    "authorize",
    "fragments",
    "lexical_candidates",
    "put_embedding",
    "put_fragment",
    "retract_fragment",
    "search",
    "supersede_fragment",
    "translated",
    "typed_error",
    "vector_candidates",
]


# ---------------------------------------------------------------------------------------------
# Types of the schema
# ---------------------------------------------------------------------------------------------
class _Vector(UserDefinedType[str]):
    """pgvector's ``public.vector``, schema-qualified (an application's search_path may not
    hold ``public``). Bound values are validated as the client validates a query embedding."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "public.vector"

    def bind_processor(self, dialect: Any) -> Any:
        def process(value: Any) -> str | None:
            if value is None:
                return None
            return to_pgvector_text(canonical_embedding(value))

        return process


class _Name(UserDefinedType[str]):
    """PostgreSQL's ``name`` (role names in a decision), read as a ``str``."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "name"


class _Void(UserDefinedType[None]):
    """The result type of a function that returns nothing (``retract_fragment``)."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "void"

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        # The driver reads a void as an empty string; nothing is what was returned.
        return lambda value: None


VECTOR: Final = _Vector()
CLASSIFICATION: Final = postgresql.ENUM(
    *contract.CLASSIFICATION_ORDER, name="classification", schema="pyretrieve", create_type=False
)
FRAGMENT_STATE: Final = postgresql.ENUM(
    "active", "superseded", "retracted", name="fragment_state", schema="pyretrieve",
    create_type=False,
)  # fmt: skip
SEMANTIC_POLICY: Final = postgresql.ENUM(
    "disabled", "optional", "required", name="semantic_policy", schema="pyretrieve",
    create_type=False,
)  # fmt: skip
_TIMESTAMPTZ: Final = TIMESTAMP(timezone=True)


class Default(enum.Enum):
    """The marker of an argument left out of the call, so that its SQL default applies."""

    DEFAULT = "DEFAULT"


DEFAULT: Final = Default.DEFAULT
Omittable: TypeAlias = "Literal[Default.DEFAULT]"
Embedding: TypeAlias = "Sequence[float] | NDArray[np.floating]"


# ---------------------------------------------------------------------------------------------
# Named arguments: `p_name => value`
# ---------------------------------------------------------------------------------------------
class NamedArgument(ColumnElement[Any]):
    """One argument in PostgreSQL's named notation (``p_workspace => CAST(... AS text)``)."""

    __visit_name__ = "pyretrieve_named_argument"
    inherit_cache = True
    _traverse_internals = [  # noqa: RUF012 - SQLAlchemy's own declaration style
        ("name", InternalTraversal.dp_string),
        ("value", InternalTraversal.dp_clauseelement),
    ]

    def __init__(self, name: str, value: ColumnElement[Any]) -> None:
        self.name = name
        self.value = value
        self.type = value.type


@compiles(NamedArgument)
def _compile_named(element: NamedArgument, compiler: SQLCompiler, **kw: Any) -> str:
    return f"{element.name} => {compiler.process(element.value, **kw)}"


def _typed(value: Any, type_: TypeEngine[Any]) -> ColumnElement[Any]:
    # A value is bound; an expression (a decision id selected in the same statement) is used
    # as it is. Either way the explicit cast picks the one SQL signature.
    if isinstance(value, ClauseElement):
        return cast(value, type_)
    return cast(literal(value, type_), type_)


# ---------------------------------------------------------------------------------------------
# The functions: parameters (Python name, SQL type) in SQL order, and what each returns. The
# catalog test reads these and compares them with pg_proc.
# ---------------------------------------------------------------------------------------------
Columns: TypeAlias = tuple[tuple[str, TypeEngine[Any]], ...]


class SqlFunction:
    """One function of the SQL API as this module calls it."""

    def __init__(
        self,
        name: str,
        parameters: Columns,
        *,
        columns: Columns = (),
        returns: TypeEngine[Any] | None = None,
    ) -> None:
        self.name = name
        self.parameters = parameters
        self.columns = columns
        self.returns = returns
        self._types = dict(parameters)

    def arguments(self, values: Mapping[str, Any]) -> list[NamedArgument]:
        """The named arguments for ``values`` in SQL order, leaving out :data:`DEFAULT`."""
        return [
            NamedArgument(f"p_{name}", _typed(values[name], type_))
            for name, type_ in self.parameters
            if values[name] is not DEFAULT
        ]

    def table(self, values: Mapping[str, Any]) -> TableValuedAlias:
        call = getattr(func.pyretrieve, self.name)(*self.arguments(values))
        return call.table_valued(*(column(name, type_) for name, type_ in self.columns))  # type: ignore[no-any-return]

    def scalar(self, values: Mapping[str, Any]) -> Function[Any]:
        call: Function[Any] = getattr(func.pyretrieve, self.name)(
            *self.arguments(values), type_=self.returns
        )
        return call


_AUTHORIZE = SqlFunction(
    "authorize",
    (
        ("workspace", Text()),
        ("project", Text()),
        ("purpose", Text()),
        ("query_digest", LargeBinary()),
        ("semantic_intent", Text()),
        ("embedding_digest", LargeBinary()),
        ("requested_limit", Integer()),
    ),
    columns=(
        ("decision_id", Uuid()),
        ("principal", _Name()),
        ("workspace_id", Text()),
        ("project_id", Text()),
        ("purpose", Text()),
        ("evaluated_at", _TIMESTAMPTZ),
        ("ceiling", CLASSIFICATION),
        ("max_age", postgresql.INTERVAL()),
        ("semantic_policy", SEMANTIC_POLICY),
        ("candidate_limit", Integer()),
        ("grant_id", Uuid()),
    ),
)
_LEXICAL = SqlFunction(
    "lexical_candidates",
    (("decision", Uuid()), ("query", Text()), ("limit", Integer()), ("ranking", Text())),
    columns=(
        ("rank", Integer()),
        ("fragment_id", Uuid()),
        ("content_digest", LargeBinary()),
        ("score", Double()),
        ("lexical_generation", BigInteger()),
        ("terms", postgresql.JSON()),
    ),
)
_VECTOR = SqlFunction(
    "vector_candidates",
    (("decision", Uuid()), ("model", Text()), ("embedding", VECTOR), ("limit", Integer())),
    columns=(
        ("rank", Integer()),
        ("fragment_id", Uuid()),
        ("content_digest", LargeBinary()),
        ("distance", Double()),
        ("source_digest", LargeBinary()),
        ("vector_generation", BigInteger()),
        ("lexical_generation", BigInteger()),
        ("search", Text()),
    ),
)
_FRAGMENTS = SqlFunction(
    "fragments",
    (("decision", Uuid()), ("ids", postgresql.ARRAY(Uuid()))),
    columns=(
        ("workspace_id", Text()),
        ("project_id", Text()),
        ("fragment_id", Uuid()),
        ("body", Text()),
        ("content_digest", LargeBinary()),
        ("classification", CLASSIFICATION),
        ("state", FRAGMENT_STATE),
        ("superseded_by", Uuid()),
        ("observed_at", _TIMESTAMPTZ),
        ("expires_at", _TIMESTAMPTZ),
        ("ingested_at", _TIMESTAMPTZ),
        ("source_uri", Text()),
        ("source_revision", Text()),
        ("manifest_id", Text()),
        ("ts_config", postgresql.REGCONFIG()),
        ("lexical_generation", BigInteger()),
    ),
)
_SEARCH = SqlFunction(
    "search",
    (
        ("workspace", Text()),
        ("project", Text()),
        ("purpose", Text()),
        ("query", Text()),
        ("embedding", VECTOR),
        ("model", Text()),
        ("limit", Integer()),
        ("mode", Text()),
        ("lexical_weight", Double()),
        ("vector_weight", Double()),
        ("ranking", Text()),
        ("semantic", Text()),
        ("candidate_limit", Integer()),
        ("fusion", Text()),
    ),
    columns=(
        ("rank", Integer()),
        ("fragment_id", Uuid()),
        ("content_digest", LargeBinary()),
        ("body", Text()),
        ("final_score", Double()),
        ("fused_score", Double()),
        ("freshness", Double()),
        ("confidence", Double()),
        ("explanation", postgresql.JSONB()),
    ),
)
_PUT_FRAGMENT = SqlFunction(
    "put_fragment",
    (
        ("workspace", Text()),
        ("project", Text()),
        ("body", Text()),
        ("classification", CLASSIFICATION),
        ("observed_at", _TIMESTAMPTZ),
        ("expires_at", _TIMESTAMPTZ),
        ("source_uri", Text()),
        ("source_revision", Text()),
        ("manifest_id", Text()),
        ("ts_config", postgresql.REGCONFIG()),
    ),
    returns=Uuid(),
)
_SUPERSEDE = SqlFunction(
    "supersede_fragment",
    (
        ("workspace", Text()),
        ("project", Text()),
        ("fragment_id", Uuid()),
        ("body", Text()),
        ("classification", CLASSIFICATION),
        ("observed_at", _TIMESTAMPTZ),
        ("expires_at", _TIMESTAMPTZ),
        ("source_uri", Text()),
        ("source_revision", Text()),
        ("manifest_id", Text()),
    ),
    returns=Uuid(),
)
_RETRACT = SqlFunction(
    "retract_fragment",
    (("workspace", Text()), ("project", Text()), ("fragment_id", Uuid())),
    returns=_Void(),
)
_PUT_EMBEDDING = SqlFunction(
    "put_embedding",
    (
        ("workspace", Text()),
        ("project", Text()),
        ("fragment_id", Uuid()),
        ("model", Text()),
        ("embedding", VECTOR),
        ("source_digest", LargeBinary()),
    ),
    returns=BigInteger(),
)

# The Python construct of each SQL function (the catalog test walks this).
FUNCTIONS: Final[Mapping[str, SqlFunction]] = {
    f.name: f
    for f in (
        _AUTHORIZE,
        _LEXICAL,
        _VECTOR,
        _FRAGMENTS,
        _SEARCH,
        _PUT_FRAGMENT,
        _SUPERSEDE,
        _RETRACT,
        _PUT_EMBEDDING,
    )
}


# ---------------------------------------------------------------------------------------------
# Read API
# ---------------------------------------------------------------------------------------------
def authorize(
    *,
    workspace: str,
    project: str,
    purpose: str,
    query_digest: bytes,
    semantic_intent: str,
    embedding_digest: bytes | None,
    requested_limit: int,
) -> TableValuedAlias:
    """``pyretrieve.authorize``: the transaction's one read decision (a single row).

    ``query_digest`` is the sha256 of the query text (never the text); ``semantic_intent`` is
    ``disabled``, ``optional`` or ``required``; ``embedding_digest`` the sha256 of the query
    embedding's float32 little-endian bytes, or ``None``. Columns: ``decision_id``,
    ``principal``, ``workspace_id``, ``project_id``, ``purpose``, ``evaluated_at``,
    ``ceiling``, ``max_age``, ``semantic_policy``, ``candidate_limit``, ``grant_id``.
    """
    return _AUTHORIZE.table(locals())


def lexical_candidates(
    *, decision: uuid.UUID | ColumnElement[Any], query: str, limit: int,
    ranking: str | Omittable = DEFAULT,
) -> TableValuedAlias:  # fmt: skip
    """``pyretrieve.lexical_candidates`` under the bound ``decision``: ``rank``,
    ``fragment_id``, ``content_digest``, ``score``, ``lexical_generation``, ``terms``."""
    return _LEXICAL.table(locals())


def vector_candidates(
    *, decision: uuid.UUID | ColumnElement[Any], model: str, embedding: Embedding, limit: int
) -> TableValuedAlias:
    """``pyretrieve.vector_candidates`` under the bound ``decision``: ``rank``,
    ``fragment_id``, ``content_digest``, ``distance``, ``source_digest``,
    ``vector_generation``, ``lexical_generation``, ``search`` (``exact`` or ``hnsw``). The
    embedding is validated here as the client validates one
    (:class:`~pyretrieve.InvalidEmbedding`)."""
    return _VECTOR.table(locals())


def fragments(
    *, decision: uuid.UUID | ColumnElement[Any], ids: Sequence[uuid.UUID]
) -> TableValuedAlias:
    """``pyretrieve.fragments``: the authoritative records of ``ids`` visible under the
    bound ``decision`` (absent and invisible ids are left out alike)."""
    return _FRAGMENTS.table({"decision": decision, "ids": list(ids)})


def search(
    *,
    workspace: str,
    project: str,
    purpose: str,
    query: str,
    embedding: Embedding | Omittable | None = DEFAULT,
    model: str | Omittable | None = DEFAULT,
    limit: int | Omittable = DEFAULT,
    mode: str | Omittable = DEFAULT,
    lexical_weight: float | Omittable | None = DEFAULT,
    vector_weight: float | Omittable | None = DEFAULT,
    ranking: str | Omittable = DEFAULT,
    semantic: str | Omittable = DEFAULT,
    candidate_limit: int | Omittable | None = DEFAULT,
    fusion: str | Omittable | None = DEFAULT,
) -> TableValuedAlias:
    """``pyretrieve.search``: one fused, explained search (it authorizes, so it is the
    transaction's one read decision). ``fusion`` (``rrf`` or ``dbsf``) and the two weights
    (both, or neither): the request's, else the defaults registered with ``model``.
    Columns: ``rank``, ``fragment_id``, ``content_digest``, ``body``, ``final_score``,
    ``fused_score``, ``freshness``, ``confidence``, ``explanation`` (the canonical
    explanation as ``jsonb``)."""
    return _SEARCH.table(locals())


# ---------------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------------
def put_fragment(
    *,
    workspace: str,
    project: str,
    body: str,
    classification: str | Omittable = DEFAULT,
    observed_at: datetime | Omittable | None = DEFAULT,
    expires_at: datetime | Omittable | None = DEFAULT,
    source_uri: str | Omittable | None = DEFAULT,
    source_revision: str | Omittable | None = DEFAULT,
    manifest_id: str | Omittable | None = DEFAULT,
    ts_config: str | Omittable | None = DEFAULT,
) -> Function[uuid.UUID]:
    """``pyretrieve.put_fragment``: store a fragment as a writer; the new (or, for the same
    body and classification, the existing) fragment id."""
    return _PUT_FRAGMENT.scalar(locals())


def supersede_fragment(
    *,
    workspace: str,
    project: str,
    fragment_id: uuid.UUID,
    body: str,
    classification: str | Omittable | None = DEFAULT,
    observed_at: datetime | Omittable | None = DEFAULT,
    expires_at: datetime | Omittable | None = DEFAULT,
    source_uri: str | Omittable | None = DEFAULT,
    source_revision: str | Omittable | None = DEFAULT,
    manifest_id: str | Omittable | None = DEFAULT,
) -> Function[uuid.UUID]:
    """``pyretrieve.supersede_fragment``: replace an active fragment; the new id."""
    return _SUPERSEDE.scalar(locals())


def retract_fragment(*, workspace: str, project: str, fragment_id: uuid.UUID) -> Function[None]:
    """``pyretrieve.retract_fragment``: the fragment disappears from every search at once."""
    return _RETRACT.scalar(locals())


def put_embedding(
    *,
    workspace: str,
    project: str,
    fragment_id: uuid.UUID,
    model: str,
    embedding: Embedding,
    source_digest: bytes,
) -> Function[int]:
    """``pyretrieve.put_embedding``: store one fragment's embedding for a registered model,
    with the sha256 of the text it was computed from; its vector generation."""
    return _PUT_EMBEDDING.scalar(locals())


# ---------------------------------------------------------------------------------------------
# Identity and errors
# ---------------------------------------------------------------------------------------------
def act_as(bind: Connection | Session, principal: str) -> None:
    """Act as ``principal`` for the rest of the current transaction (``SET LOCAL ROLE``, which
    the transaction's end undoes), as :class:`pyretrieve.Retriever` does for each request.
    A role that does not exist, or that the login role may not become, raises
    :class:`~pyretrieve.errors.UnknownPrincipal` (inside :func:`translated`)."""
    if not isinstance(principal, str) or not principal or "\x00" in principal:
        raise InvalidInput("invalid principal")
    connection = bind.connection() if isinstance(bind, Session) else bind
    quoted = connection.dialect.identifier_preparer.quote_identifier(principal)
    connection.execute(text(queries.set_local_role_quoted(quoted)))


def typed_error(exc: BaseException) -> PyretrieveError:
    """pyretrieve's typed error for an exception raised through SQLAlchemy: the driver error
    a ``DBAPIError`` wraps is translated by SQLSTATE (:func:`pyretrieve.db.errors.translate`);
    a pyretrieve error raised while binding a value (an invalid embedding) is itself."""
    if isinstance(exc, PyretrieveError):
        return exc
    if isinstance(exc, StatementError):
        orig = exc.orig
        if isinstance(orig, PyretrieveError):
            return orig
        return translate(orig) if orig is not None else InternalError()
    return translate(exc)


@contextmanager
def translated() -> Iterator[None]:
    """Within the block, errors raised through SQLAlchemy become pyretrieve's typed errors.

    SQLAlchemy's own errors quote the statement and its parameters (which may hold a query,
    a body or an embedding); the typed error carries a fixed message and ``sqlstate`` only,
    and is raised ``from None``, so a printed traceback shows neither. Put it outside the
    transaction (``with translated(), engine.begin() as conn:``) so the rollback has run when
    the typed error leaves the block.
    """
    try:
        yield
    except PyretrieveError:
        raise
    except StatementError as exc:
        raise typed_error(exc) from None
