"""The one place where database errors become pyretrieve's typed errors.

Only the SQLSTATE is read. Messages come from pyretrieve's own classes (or, for the PR class
the schema raises, from the schema's fixed texts, which name no row, id or content), so no SQL
text, driver message, parameter or stored content crosses this boundary. The original
exception is not chained (``from None``): a traceback printed by the caller shows the typed
error only, while ``sqlstate`` stays available for diagnosis.
"""

from __future__ import annotations

import re
from typing import NoReturn

import psycopg

from pyretrieve import contract
from pyretrieve.errors import (
    AccessDenied,
    AuthenticationFailed,
    Conflict,
    DatabaseUnavailable,
    InternalError,
    InvalidDecision,
    InvalidEmbedding,
    InvalidFusion,
    InvalidInput,
    LimitExceeded,
    NotFound,
    PrivilegedCaller,
    PyretrieveError,
    SchemaMissing,
    SemanticRequired,
    ServerUnreachable,
    Timeout,
    UnknownModel,
    UnknownPrincipal,
)

# SQLSTATEs raised by sql/pyretrieve.sql, with the fixed messages the schema uses.
_SCHEMA_ERRORS: dict[str, type[PyretrieveError]] = {
    "PR001": AccessDenied,
    "PR002": InvalidDecision,
    "PR003": InvalidDecision,
    "PR004": PrivilegedCaller,
    "PR010": InvalidInput,
    "PR011": InvalidEmbedding,
    "PR012": UnknownModel,
    "PR013": Conflict,
    "PR014": LimitExceeded,
    "PR015": InvalidInput,
    contract.INVALID_FUSION_SQLSTATE: InvalidFusion,
    "PR020": NotFound,
    "PR030": SemanticRequired,
}

# The schema's fixed texts for an invalid argument (PR010), embedding (PR011) or fusion
# setting (PR016): each states the rule an argument broke and names no row, id or content, so
# it is shown as it is. Any other text under these codes gets the class's own message. A test
# checks this set against the install script, both ways.
_RULE_STATES = ("PR010", "PR011", contract.INVALID_FUSION_SQLSTATE)
_RULE_MESSAGES: frozenset[str] = frozenset(
    {
        *contract.FUSION_ERRORS,
        "give both weights or neither",
        "a fragment is superseded or kept twice",
        "a project is named with its workspace",
        "a time range: since, and until after it",
        "between 0 and 1000 ids",
        "between 0 and 10000 patterns",
        "between 0 and 10000 rows",
        "between 0 and 100000 ids",
        "between 0 and 100000 source uris",
        "body must be 1 to 1000000 characters",
        "body must be 1 to 1000000 characters (and absent for a kept row)",
        "candidate limit must be between 1 and 1000",
        "candidate limit out of range for this decision",
        "dimension must be between 1 and 2000",
        "embedding digest must be 32 bytes (sha256)",
        "embedding dimension does not match the model",
        "embedding must be finite and non-zero",
        "embedding must not hold subnormal values",
        "every row needs its own ord",
        "expires_at must be after observed_at",
        "invalid model id",
        "invalid operation family",
        "invalid scope",
        "invalid tool schema",
        "invalid tool tags, server or classification",
        "k1 must be in (0, 10] and b in [0, 1]",
        "limit must be between 1 and 100000",
        "max_age must be positive days/hours (no months or years)",
        "min share must be a finite number of at least 0",
        "min_rows must be at least 2",
        "mode must be hybrid, lexical or vector",
        "months ahead must be between 0 and 24",
        "not a decision partition that ended more than a day ago",
        "observed_at must be finite",
        "policy must be one of fixed-10, fixed-15, fixed-20, fixed-48, tight, gap, wide, near",
        "principal, ceiling and semantic policy are required",
        "protect and master must not be null",
        "provenance field too long",
        "query digest must be 32 bytes (sha256)",
        "query must be 1 to 4096 characters",
        "ranking must be bm25 or ts_rank",
        "requested limit must be between 1 and 1000",
        "retention must be at least one day",
        "semantic intent must be disabled, optional or required",
        "semantic must be optional, required or disabled",
        "source digest must be 32 bytes (sha256)",
        "stage must be off, eval, canary, majority or full",
        "the first month must be in the last 20 years",
        "the weights of the modalities that ran are all zero",
        "too many ids for this decision",
        "unknown K policy",
        "tool name must be 1 to 128 characters",
        "vector mode needs semantic retrieval",
        "weights must be between 0 and 1000",
    }
)
# check_identifier's 'invalid ' || p_what, with the rule spelled out.
_IDENTIFIER_MESSAGES = {
    f"invalid {what}": contract.identifier_error(what)
    for what in ("workspace", "project", "purpose")
}

_SAFE_SCHEMA_MESSAGES = {
    "PR003": "transaction already bound to another scope",
    "PR014": "the body has too many distinct words or positions for a text-search vector",
    "PR015": "text-search configuration must be one of pg_catalog or pyretrieve",
}

# Standard SQLSTATEs, most specific first.
_STANDARD_ERRORS: dict[str, type[PyretrieveError]] = {
    "42501": AccessDenied,  # insufficient_privilege, including row-level security violations
    "23505": Conflict,  # unique_violation
    "40001": Conflict,  # serialization_failure
    "40P01": Conflict,  # deadlock_detected
    "55P03": Timeout,  # lock_not_available (lock_timeout)
    "57014": Timeout,  # query_canceled (statement_timeout)
    "25P03": Timeout,  # idle_in_transaction_session_timeout
    "54000": LimitExceeded,  # program_limit_exceeded (vector dimensions, tsvector size)
}

_STANDARD_MESSAGES = {
    "55P03": "a lock wait ran past lock_timeout; another transaction holds the row",
    "57014": "a statement ran past statement_timeout or was cancelled",
    "25P03": "the transaction stayed idle past idle_in_transaction_session_timeout",
    "54000": "a value exceeds a limit of the database (too many vector dimensions, or too many"
    " distinct words in a text)",
}

_STANDARD_CLASSES: dict[str, type[PyretrieveError]] = {
    "08": DatabaseUnavailable,  # connection exception
    "53": DatabaseUnavailable,  # insufficient resources
    "57": DatabaseUnavailable,  # operator intervention
    "22": InvalidInput,  # data exception (bad literal, NaN in a vector, out of range)
    "23": InvalidInput,  # integrity constraint violation (a CHECK on an argument)
}


# Errors whose SQLSTATE alone is too broad: the server's primary message (read here, never
# shown) tells a missing pyretrieve schema or a missing role apart from other causes.
_ROLE_MISSING = re.compile(r'role ".*" does not exist')


def _contextual(state: str, primary: str) -> PyretrieveError | None:
    if state in ("28P01", "28000"):  # invalid_password, invalid_authorization_specification
        return AuthenticationFailed()
    if state == "3F000" and '"pyretrieve"' in primary:  # invalid_schema_name
        return SchemaMissing()
    if state in ("42883", "42P01") and ("pyretrieve." in primary or '"pyretrieve' in primary):
        return SchemaMissing()  # undefined_function / undefined_table in the schema
    if state in ("22023", "42704") and _ROLE_MISSING.fullmatch(primary):
        return UnknownPrincipal()  # SET ROLE / ::regrole to a role that does not exist
    if state == "42501" and primary.startswith("permission denied to set role"):
        return UnknownPrincipal()  # a role the login role may not become: answered alike
    return None


# Connection failures carry no SQLSTATE (libpq reports them before any result exists), so
# the driver's text is classified, and replaced by a fixed message.
_AUTH_FAILURES = (
    "password authentication failed",
    "authentication failed",
    "no pg_hba.conf entry",
    "no password supplied",
    "password is required",
    "does not exist",  # FATAL: role "x" does not exist (database: handled before)
)
_UNREACHABLE = (
    "connection refused",
    "no such file or directory",
    "could not translate host name",
    "name or service not known",
    "temporary failure in name resolution",
    "timeout expired",
    "network is unreachable",
    "no route to host",
    "is the server running",
    "server closed the connection unexpectedly",
)


def _connection_failure(text: str) -> PyretrieveError | None:
    lowered = text.lower()
    if "invalid connection option" in lowered or 'missing "=" after' in lowered:
        return InvalidInput("the connection string is neither libpq key=value pairs nor a URL")
    if "invalid uri" in lowered or "invalid integer value" in lowered:
        return InvalidInput("the connection string is neither libpq key=value pairs nor a URL")
    if "database" in lowered and "does not exist" in lowered and "role" not in lowered:
        return DatabaseUnavailable("the database named in the connection string does not exist")
    if any(marker in lowered for marker in _AUTH_FAILURES):
        return AuthenticationFailed()
    if any(marker in lowered for marker in _UNREACHABLE):
        return ServerUnreachable()
    return None


def rule_messages() -> frozenset[str]:
    """The schema's texts for PR010, PR011 and PR016 that are shown as they are (for the
    test)."""
    return _RULE_MESSAGES | frozenset(_IDENTIFIER_MESSAGES)


def schema_errors() -> dict[str, type[PyretrieveError]]:
    """The SQLSTATEs of class PR that the schema raises, each with the typed error it becomes
    (a test checks this against the installed functions, both ways)."""
    return dict(_SCHEMA_ERRORS)


def standard_errors() -> dict[str, type[PyretrieveError]]:
    """The standard SQLSTATEs (and two-character classes) translated, with their typed errors."""
    return {**_STANDARD_ERRORS, **_STANDARD_CLASSES}


def translate(exc: BaseException) -> PyretrieveError:
    """The typed error for a driver exception (or any exception from the database layer)."""
    if isinstance(exc, PyretrieveError):
        return exc
    if not isinstance(exc, psycopg.Error):
        return InternalError()
    state = exc.sqlstate or ""
    primary = (exc.diag.message_primary or "") if state else ""
    contextual = _contextual(state, primary) if state else _connection_failure(str(exc))
    if contextual is not None:
        contextual.sqlstate = state or None
        return contextual
    schema_error = _SCHEMA_ERRORS.get(state)
    if schema_error is not None:
        return _from_schema(state, schema_error, primary)
    standard = _STANDARD_ERRORS.get(state) or _STANDARD_CLASSES.get(state[:2])
    if standard is not None:
        message = _STANDARD_MESSAGES.get(state)
        error = standard(message) if message else standard()
    elif isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        error = DatabaseUnavailable()
    else:
        error = InternalError()
    error.sqlstate = state or None
    return error


def _from_schema(state: str, cls: type[PyretrieveError], primary: str = "") -> PyretrieveError:
    message = _SAFE_SCHEMA_MESSAGES.get(state)
    if state in _RULE_STATES:
        if primary in _RULE_MESSAGES:
            message = primary
        elif primary in _IDENTIFIER_MESSAGES:
            message = _IDENTIFIER_MESSAGES[primary]
    error = cls(message) if message else cls()
    error.sqlstate = state
    return error


def raise_translated(exc: BaseException) -> NoReturn:
    raise translate(exc) from None
