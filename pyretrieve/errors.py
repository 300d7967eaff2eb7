"""Typed errors with stable codes.

Every error carries a stable machine-readable ``code`` and a message that is safe to
show to a caller: it never holds SQL text, driver text or stored content, because
error messages end up in logs and API responses that sit outside the policy boundary.
"""

from __future__ import annotations

import re
from typing import ClassVar
from uuid import UUID

__all__ = [
    "AccessDenied",
    "AuthenticationFailed",
    "Conflict",
    "DatabaseUnavailable",
    "IntegrityViolation",
    "InternalError",
    "InvalidDecision",
    "InvalidEmbedding",
    "InvalidFusion",
    "InvalidInput",
    "LexicalFailure",
    "LimitExceeded",
    "ModelFileMismatch",
    "NotFound",
    "PrivilegedCaller",
    "PyretrieveError",
    "SchemaMissing",
    "SemanticRequired",
    "ServerUnreachable",
    "Timeout",
    "UnknownModel",
    "UnknownPrincipal",
]

# Check names and field names are interpolated into messages, so they are restricted
# to identifiers: nothing read from a row's content can ride along.
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]{0,62}")


class PyretrieveError(Exception):
    """Base class: a stable ``code`` plus a safe, human-readable message."""

    code: ClassVar[str] = "VES_MEMORY_INTERNAL"
    default_message: ClassVar[str] = "internal error"
    # The SQLSTATE behind an error translated from the database, for diagnosis only.
    sqlstate: str | None = None

    def __init__(self, message: str | None = None) -> None:
        self.message: str = self.default_message if message is None else message
        super().__init__(self.message)

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class AccessDenied(PyretrieveError):
    code = "VES_MEMORY_ACCESS_DENIED"
    default_message = "access denied"


class InvalidDecision(PyretrieveError):
    code = "VES_MEMORY_INVALID_DECISION"
    default_message = "the authorization decision is invalid or no longer applies"


class InvalidInput(PyretrieveError):
    code = "VES_MEMORY_INVALID_INPUT"
    default_message = "invalid input"


class InvalidFusion(InvalidInput):
    """A fusion setting refused: an unknown fusion, or a model's default weights not both
    given, not finite or outside (0, 1000]. An :class:`InvalidInput`, with its own code and
    SQLSTATE (``contract.INVALID_FUSION_SQLSTATE``)."""

    code = "VES_MEMORY_INVALID_FUSION"
    default_message = "invalid fusion setting"


class InvalidEmbedding(PyretrieveError):
    code = "VES_MEMORY_INVALID_EMBEDDING"
    default_message = "invalid embedding"


class UnknownModel(PyretrieveError):
    code = "VES_MEMORY_UNKNOWN_MODEL"
    default_message = "unknown embedding model"


class ModelFileMismatch(PyretrieveError):
    """A model file on disk is not the one its embedder is pinned to (its sha256 differs).

    Raised when an embedder loads, before the file is run: vectors from any other file would
    be stored under a model id that promises this one's.
    """

    code = "VES_MEMORY_MODEL_FILE_MISMATCH"
    default_message = "a model file does not match its pinned sha256"


class NotFound(PyretrieveError):
    code = "VES_MEMORY_NOT_FOUND"
    default_message = "not found"


class Conflict(PyretrieveError):
    code = "VES_MEMORY_CONFLICT"
    default_message = "conflicting concurrent change"


class IntegrityViolation(PyretrieveError):
    """Data returned by the database contradicts the contract; nothing is returned.

    ``check`` names the failed check (for example ``digest_mismatch``). The optional
    ``field`` and ``fragment_id`` locate the breach without quoting any content.
    """

    code = "VES_MEMORY_INTEGRITY_VIOLATION"
    default_message = "integrity check failed"

    def __init__(
        self,
        check: str,
        *,
        field: str | None = None,
        fragment_id: UUID | None = None,
    ) -> None:
        if not _IDENTIFIER.fullmatch(check):
            raise ValueError("integrity check names must be lowercase identifiers")
        if field is not None and not _IDENTIFIER.fullmatch(field):
            # An unrecognised key may be anything; keep it out of the message.
            field = "unnamed"
        self.check: str = check
        self.field: str | None = field
        self.fragment_id: UUID | None = fragment_id
        message = f"integrity check failed: {check}"
        if field is not None:
            message += f" (field {field})"
        if fragment_id is not None:
            message += f" (fragment {fragment_id})"
        super().__init__(message)

    def as_dict(self) -> dict[str, str]:
        out = super().as_dict()
        out["check"] = self.check
        return out


class SemanticRequired(PyretrieveError):
    code = "VES_MEMORY_SEMANTIC_REQUIRED"
    default_message = "semantic retrieval is required by policy but was not available"


class LexicalFailure(PyretrieveError):
    code = "VES_MEMORY_LEXICAL_FAILURE"
    default_message = "lexical retrieval failed"


class PrivilegedCaller(PyretrieveError):
    """The principal is a superuser or bypasses row-level security (directly or by membership).

    Such a role passes every policy and holds every grant, so pyretrieve refuses to search or
    write as it: act as an ordinary principal role.
    """

    code = "VES_MEMORY_PRIVILEGED_CALLER"
    default_message = (
        "the principal is a superuser or bypasses row-level security; act as an ordinary"
        " principal role"
    )


class LimitExceeded(PyretrieveError):
    """A value is within pyretrieve's documented limits but beyond one of the database's."""

    code = "VES_MEMORY_LIMIT_EXCEEDED"
    default_message = "a value exceeds a limit of the database"


class Timeout(PyretrieveError):
    """A statement, lock wait or idle transaction ran past its timeout; nothing was kept."""

    code = "VES_MEMORY_TIMEOUT"
    default_message = "the request timed out"


class DatabaseUnavailable(PyretrieveError):
    code = "VES_MEMORY_DATABASE_UNAVAILABLE"
    default_message = "database unavailable"


class ServerUnreachable(DatabaseUnavailable):
    """No server answered where the connection string points (refused, no socket, no host)."""

    code = "VES_MEMORY_SERVER_UNREACHABLE"
    default_message = (
        "no database server answers at the address of the connection string: is it running"
        " (`pyretrieve db status`), and are --dsn or PYRETRIEVE_DSN right?"
    )


class AuthenticationFailed(DatabaseUnavailable):
    """The server answered but refused the login (password, unknown login role, pg_hba)."""

    code = "VES_MEMORY_AUTHENTICATION_FAILED"
    default_message = (
        "the server refused the login: check the user and password of --dsn or"
        " PYRETRIEVE_DSN (and that the login role exists)"
    )


class SchemaMissing(PyretrieveError):
    """The database has no pyretrieve schema, or an older one without a function called."""

    code = "VES_MEMORY_SCHEMA_MISSING"
    default_message = (
        "the pyretrieve schema is not installed in this database, or is older than this"
        " client: run `pyretrieve install` (with the same --dsn)"
    )


class UnknownPrincipal(PyretrieveError):
    """``--as`` (or ``principal=``) names a role that does not exist, or one the login role
    may not act as; the two are answered alike."""

    code = "VES_MEMORY_UNKNOWN_PRINCIPAL"
    default_message = (
        "no such principal for this login: the role does not exist or the login role may not"
        " SET ROLE to it (create it with `pyretrieve principals create NAME --reader`)"
    )


class InternalError(PyretrieveError):
    code = "VES_MEMORY_INTERNAL"
    default_message = "internal error"
