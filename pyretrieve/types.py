"""Result types, enums and the canonical JSON rendering.

Rows coming back from the database are parsed strictly by the ``from_row``
constructors: an unknown key, a missing key or a value of the wrong type raises
:class:`~pyretrieve.errors.IntegrityViolation`, because a row that does not match
the contract cannot be trusted to have been policy-filtered either.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from itertools import pairwise
from typing import Any, Final, TypeAlias, TypeVar
from uuid import UUID

from pyretrieve.contract import (
    CLASSIFICATION_ORDER,
    DEFAULT_WEIGHT,
    DEGRADED_CONFIDENCE_FACTOR,
    FRESHNESS_FLOOR,
    MAX_WEIGHT,
    RANK_BASE,
    RRF_FORMULA,
    RRF_K,
    TRUST_LABEL,
)
from pyretrieve.errors import IntegrityViolation, InvalidInput

__all__ = [
    "DEGRADED_CONFIDENCE_FACTOR",
    "DIGEST_SIZE",
    "FRESHNESS_FLOOR",
    "RANK_BASE",
    "RRF_FORMULA",
    "RRF_K",
    "TRUST_LABEL",
    "Classification",
    "Decision",
    "DegradationReason",
    "FragmentRecord",
    "FragmentState",
    "Fusion",
    "FusionSettings",
    "JsonValue",
    "LexicalCandidate",
    "Omission",
    "OmissionReason",
    "Result",
    "Scope",
    "SearchResult",
    "SemanticOutcome",
    "SemanticPolicy",
    "SemanticStatus",
    "VectorCandidate",
    "VectorSearch",
    "Weights",
    "WeightsSource",
    "canonical_json",
    "hex_digest",
    "iso_utc",
    "micros",
]

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None

# The contract constants live in pyretrieve.contract; they are re-exported here, where the
# ranker and the explanations have always found them.
DIGEST_SIZE: Final = 32

_ONE_MICROSECOND: Final = timedelta(microseconds=1)


# --------------------------------------------------------------------------- enums


class Classification(StrEnum):
    """Sensitivity, ordered public < internal < confidential < restricted.

    Comparison operators follow the sensitivity order. They refuse plain strings,
    since falling back to ``str`` ordering would put ``confidential`` below
    ``internal``.
    """

    PUBLIC = "public"
    INTERNAL = "internal"
    CONFIDENTIAL = "confidential"
    RESTRICTED = "restricted"

    @property
    def level(self) -> int:
        return _CLASSIFICATION_ORDER.index(self)

    def at_most(self, ceiling: Classification) -> bool:
        """True when this classification may be shown under ``ceiling``."""
        return self.level <= ceiling.level

    def _level_of(self, other: object) -> int:
        if not isinstance(other, Classification):
            raise TypeError("classifications compare only with classifications")
        return other.level

    def __lt__(self, other: object) -> bool:
        return self.level < self._level_of(other)

    def __le__(self, other: object) -> bool:
        return self.level <= self._level_of(other)

    def __gt__(self, other: object) -> bool:
        return self.level > self._level_of(other)

    def __ge__(self, other: object) -> bool:
        return self.level >= self._level_of(other)


_CLASSIFICATION_ORDER: Final = tuple(Classification(value) for value in CLASSIFICATION_ORDER)


class FragmentState(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    RETRACTED = "retracted"


class SemanticPolicy(StrEnum):
    DISABLED = "disabled"
    OPTIONAL = "optional"
    REQUIRED = "required"


class SemanticOutcome(StrEnum):
    USED = "used"
    NOT_REQUESTED = "not_requested"
    DEGRADED = "degraded"


class DegradationReason(StrEnum):
    DISABLED = "disabled"
    UNAVAILABLE = "unavailable"
    STALE = "stale"
    CORRUPT = "corrupt"
    MISSING_EMBEDDING = "missing_embedding"
    ADAPTER_FAILURE = "adapter_failure"


class OmissionReason(StrEnum):
    RESULT_LIMIT = "result_limit"


class Fusion(StrEnum):
    """How the two legs' candidates are fused (``pyretrieve.contract.FUSIONS``).

    ``rrf``: canonical weighted Reciprocal Rank Fusion, ``w / (60 + rank)`` per leg, 1-based
    ranks. ``dbsf``: distribution-based score fusion, each leg's scores mapped from the mean
    -/+ 3 sample standard deviations of that leg's candidates for the query to 0 and 1,
    floored at 0, then weighted and summed (see ``pyretrieve.contract.DBSF_FORMULA``).
    """

    RRF = "rrf"
    DBSF = "dbsf"


class VectorSearch(StrEnum):
    """How the vector leg searched (``pyretrieve.contract.VECTOR_SEARCHES``): the exact scan of
    the scope (recall 1), or the scope's own HNSW index (approximate)."""

    EXACT = "exact"
    HNSW = "hnsw"


class WeightsSource(StrEnum):
    """Where a search's weights (or its fusion) came from: the request, the model's registered
    defaults, or the built-in default (1.0 each, and RRF) when the request named no registered
    model."""

    REQUEST = "request"
    MODEL = "model"
    DEFAULT = "default"


# ------------------------------------------------------------------ JSON rendering


def iso_utc(value: datetime) -> str:
    """ISO 8601 in UTC, always with microseconds and a ``Z`` suffix."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("naive datetimes have no canonical rendering")
    # In UTC the offset is written "+00:00", which the "Z" replaces (cheaper than making the
    # datetime naive first: a search writes up to four of these per result).
    return value.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def micros(value: timedelta) -> int:
    """A timedelta as an exact integer count of microseconds."""
    return value // _ONE_MICROSECOND


def hex_digest(value: bytes) -> str:
    return value.hex()


def canonical_json(value: JsonValue) -> str:
    """The one JSON rendering used for output and for hashing."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _plain_json(value: object, depth: int = 0) -> JsonValue:
    """Deep-copy ``value`` if, and only if, it is made of plain JSON values."""
    if depth > 32:
        raise InvalidInput("evidence is nested too deeply")
    # Exact types only: a str or int subclass (an enum, say) could render differently.
    if value is None or type(value) is bool or type(value) is int or type(value) is str:
        return value
    if type(value) is float:
        if not math.isfinite(value):
            raise InvalidInput("evidence must not hold non-finite numbers")
        return value
    if type(value) is list:
        return [_plain_json(item, depth + 1) for item in value]
    if type(value) is dict:
        out: dict[str, JsonValue] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise InvalidInput("evidence keys must be strings")
            out[key] = _plain_json(item, depth + 1)
        return out
    raise InvalidInput("evidence must hold plain JSON values only")


# ------------------------------------------------------------------ strict parsing

_Parser: TypeAlias = Callable[[str, object], Any]


def _type_error(name: str) -> IntegrityViolation:
    return IntegrityViolation("field_type", field=name)


def _value_error(name: str) -> IntegrityViolation:
    return IntegrityViolation("field_value", field=name)


def _p_uuid(name: str, value: object) -> UUID:
    if not isinstance(value, UUID):
        raise _type_error(name)
    return value


def _p_str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise _type_error(name)
    return str(value)


def _p_ident(name: str, value: object) -> str:
    text = _p_str(name, value)
    if not text:
        raise _value_error(name)
    return text


def _p_int(name: str, value: object) -> int:
    # bool is an int subclass; a boolean where a count belongs is a contract breach.
    if not isinstance(value, int) or isinstance(value, bool):
        raise _type_error(name)
    return int(value)


def _p_rank(name: str, value: object) -> int:
    number = _p_int(name, value)
    if number < RANK_BASE:
        raise _value_error(name)
    return number


def _p_generation(name: str, value: object) -> int:
    number = _p_int(name, value)
    if number < 0:
        raise _value_error(name)
    return number


def _p_float(name: str, value: object) -> float:
    if not isinstance(value, float):
        raise _type_error(name)
    number = float(value)
    if not math.isfinite(number):
        raise _value_error(name)
    return number


def _p_distance(name: str, value: object) -> float:
    # pgvector clamps cosine similarity to [-1, 1], so the distance lives in [0, 2].
    number = _p_float(name, value)
    if not 0.0 <= number <= 2.0:
        raise _value_error(name)
    return number


def _p_digest(name: str, value: object) -> bytes:
    if not isinstance(value, bytes):
        raise _type_error(name)
    if len(value) != DIGEST_SIZE:
        raise _value_error(name)
    return bytes(value)


def _p_datetime(name: str, value: object) -> datetime:
    if not isinstance(value, datetime):
        raise _type_error(name)
    if value.tzinfo is None or value.utcoffset() is None:
        raise _value_error(name)
    return value


def _p_max_age(name: str, value: object) -> timedelta | None:
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise _type_error(name)
    # Zero or negative would make every fragment too old and divide by zero.
    if value <= timedelta(0):
        raise _value_error(name)
    return value


def _p_body(name: str, value: object) -> str:
    text = _p_str(name, value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _value_error(name) from None
    return text


def _p_enum(kind: type[StrEnum]) -> _Parser:
    # The members by value: what kind(value) finds, without its call machinery.
    members: dict[str, StrEnum] = {member.value: member for member in kind}

    def parse(name: str, value: object) -> StrEnum:
        if not isinstance(value, str):
            raise _type_error(name)
        member = members.get(value)
        if member is None:
            raise _value_error(name)
        return member

    _MEMBERS[parse] = members
    return parse


def _optional(parser: _Parser) -> _Parser:
    def parse(name: str, value: object) -> Any:
        return None if value is None else parser(name, value)

    inner = _GUARDS.get(parser)
    if inner is not None:
        _GUARDS[parse] = f"v is None or ({inner})"
    return parse


# When a value passes a parser's guard (an expression in ``v``), the parser would return ``v``
# itself: exact types only, and the parser's own conditions, no weaker. The generated row
# parsers (:func:`_row_parser`) store such a value without calling the parser, and call it for
# anything else, so it alone converts or names what is wrong. tests/unit/test_types.py checks
# each guard against its parser.
_GUARDS: dict[_Parser, str] = {
    _p_uuid: "type(v) is UUID",
    _p_str: "type(v) is str",
    _p_ident: "type(v) is str and v != ''",
    _p_int: "type(v) is int",
    _p_rank: "type(v) is int and v >= RANK_BASE",
    _p_generation: "type(v) is int and v >= 0",
    _p_float: "type(v) is float and isfinite(v)",
    _p_distance: "type(v) is float and 0.0 <= v <= 2.0",
    _p_digest: "type(v) is bytes and len(v) == DIGEST_SIZE",
    # UTC (what psycopg gives under TimeZone UTC) always has an offset: no call to ask it.
    _p_datetime: (
        "type(v) is datetime"
        " and (v.tzinfo is UTC or v.tzinfo is not None and v.utcoffset() is not None)"
    ),
    # Text that is ASCII encodes to UTF-8; the parser's own check finds lone surrogates.
    _p_body: "type(v) is str and v.isascii()",
}
# The members of each enum parser by value: a str found there is that member.
_MEMBERS: dict[_Parser, Mapping[str, StrEnum]] = {}


def _check_keys(row: object, spec: Mapping[str, _Parser]) -> Mapping[str, object]:
    # A dict (what the driver returns) first: the abstract-class check costs more.
    if type(row) is not dict and not isinstance(row, Mapping):
        raise IntegrityViolation("row_type")
    # One set comparison for the usual row; the key-by-key walk only to name what is wrong,
    # in the same order as always (unknown fields first, then missing ones).
    if row.keys() != spec.keys():
        for key in row:
            if key not in spec:
                raise IntegrityViolation(
                    "unknown_field", field=key if isinstance(key, str) else None
                )
        for key in spec:
            if key not in row:
                raise IntegrityViolation("missing_field", field=key)
    return row


_T = TypeVar("_T")


def _row_parser(cls: type[_T], spec: Mapping[str, _Parser]) -> Callable[[object], _T]:
    """The strict parser of one row into ``cls``: the keys checked (:func:`_check_keys`), then
    each field parsed in the spec's order (the first that fails names itself), then the instance
    built from the parsed values.

    A search parses hundreds of rows. A frozen dataclass's generated ``__init__`` sets each
    field through ``object.__setattr__``, which cost more than the parsing itself (about 8 us
    for a record of 16 fields), so the values are stored in its slots as that ``__init__``
    would store them, through a twin of the class (:func:`_twin`); ``spec`` must name every
    field (checked here), so no default is skipped, and ``cls`` has no ``__post_init__``. And a
    call per field cost as much again, so the parser is generated, as dataclasses generates
    ``__init__``: one function with each field's guard (``_GUARDS``) written in, calling the
    field's parser only for a value outside its guard, and for an enum a look-up of its members.
    """
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    if set(spec) != names or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: the spec must name every field, and nothing else")
    namespace: dict[str, Any] = {
        "UUID": UUID,
        "datetime": datetime,
        "UTC": UTC,
        "isfinite": math.isfinite,
        "RANK_BASE": RANK_BASE,
        "DIGEST_SIZE": DIGEST_SIZE,
        "KEYS": spec.keys(),
        "SPEC": spec,
        "check_keys": _check_keys,
        "new": object.__new__,
        "twin": _twin(cls),
        "cls": cls,
    }
    lines = [
        "def parse(row):",
        "    if type(row) is not dict or row.keys() != KEYS:",
        "        row = check_keys(row, SPEC)",
        "    made = new(twin)",
    ]
    for i, (name, parser) in enumerate(spec.items()):
        namespace[f"parse_{i}"] = parser
        lines.append(f"    v = row[{name!r}]")
        guard = _GUARDS.get(parser)
        if parser in _MEMBERS:
            namespace[f"members_{i}"] = _MEMBERS[parser]
            lines.append(f"    m = members_{i}.get(v) if type(v) is str else None")
            lines.append(f"    v = parse_{i}({name!r}, v) if m is None else m")
        elif guard is None:
            lines.append(f"    v = parse_{i}({name!r}, v)")
        else:
            lines.append(f"    if not ({guard}):")
            lines.append(f"        v = parse_{i}({name!r}, v)")
        lines.append(f"    made.{name} = v")
    lines += ["    made.__class__ = cls", "    return made"]
    exec("\n".join(lines), namespace)  # noqa: S102 - source built above from the spec only
    parse: Callable[[object], _T] = namespace["parse"]
    return parse


def _twin(cls: type) -> type:
    """A class with the slots of ``cls`` (a frozen dataclass of slots) and nothing else, to
    build instances of ``cls`` in: Python stores an attribute in a slot of the twin in place,
    where ``cls`` itself refuses it (frozen), and even its slot descriptors cost a call per
    field. Once every slot is set, the instance becomes a ``cls`` (``made.__class__ = cls``:
    the two lay their instances out alike), the same object ``cls(...)`` would have made."""
    twin = type(f"{cls.__name__}Slots", (), {"__slots__": vars(cls)["__slots__"]})
    # A layout that differs fails here, when the module loads, not at the first row.
    probe: Any = object.__new__(twin)
    probe.__class__ = cls
    return twin


def _slot_builder(cls: type[_T]) -> Callable[..., _T]:
    """``cls(**values)`` for a frozen dataclass of slots, built in its twin (:func:`_twin`) as
    :func:`_row_parser` builds its instances: the ranker builds an omission for every candidate
    past the limit, and the generated ``__init__``'s ``object.__setattr__`` per field cost
    more than twice what the stores do. Each field is a keyword argument without a default, as in
    ``cls(...)`` (a field named wrongly or left out is a ``TypeError``); ``cls`` has no
    ``__post_init__`` and none of its fields a default, so the generated ``__init__`` does no
    more than store them."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    if hasattr(cls, "__post_init__") or any(
        f.default is not MISSING or f.default_factory is not MISSING
        for f in fields(cls)  # type: ignore[arg-type]
    ):
        raise TypeError(f"{cls.__name__}: fields with defaults, or a __post_init__")
    namespace: dict[str, Any] = {"new": object.__new__, "twin": _twin(cls), "cls": cls}
    lines = [f"def build(*, {', '.join(names)}):", "    made = new(twin)"]
    lines += [f"    made.{name} = {name}" for name in names]
    lines += ["    made.__class__ = cls", "    return made"]
    exec("\n".join(lines), namespace)  # noqa: S102 - source built above from the fields only
    build: Callable[..., _T] = namespace["build"]
    return build


# ------------------------------------------------------------------- dataclasses


@dataclass(frozen=True, kw_only=True, slots=True)
class Scope:
    """Where a request reads and why: a workspace, a project in it and a purpose, each an
    identifier (``pyretrieve.contract.IDENTIFIER_PATTERN``). A grant names all three."""

    workspace: str
    project: str
    purpose: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """An authorization decision as returned by ``pyretrieve.authorize``."""

    decision_id: UUID
    principal: str
    workspace_id: str
    project_id: str
    purpose: str
    evaluated_at: datetime
    ceiling: Classification
    max_age: timedelta | None
    semantic_policy: SemanticPolicy
    candidate_limit: int
    grant_id: UUID

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> Decision:
        decision = _parse_decision(row)
        if decision.candidate_limit < 1:
            raise _value_error("candidate_limit")
        return decision

    @property
    def scope(self) -> Scope:
        return Scope(workspace=self.workspace_id, project=self.project_id, purpose=self.purpose)

    def to_plain(self) -> dict[str, JsonValue]:
        return {
            "decision_id": str(self.decision_id),
            "principal": self.principal,
            "workspace_id": self.workspace_id,
            "project_id": self.project_id,
            "purpose": self.purpose,
            "evaluated_at": iso_utc(self.evaluated_at),
            "ceiling": self.ceiling.value,
            "max_age_us": None if self.max_age is None else micros(self.max_age),
            "semantic_policy": self.semantic_policy.value,
            "candidate_limit": self.candidate_limit,
            "grant_id": str(self.grant_id),
        }


_DECISION_SPEC: Final[Mapping[str, _Parser]] = {
    "decision_id": _p_uuid,
    "principal": _p_ident,
    "workspace_id": _p_ident,
    "project_id": _p_ident,
    "purpose": _p_ident,
    "evaluated_at": _p_datetime,
    "ceiling": _p_enum(Classification),
    "max_age": _p_max_age,
    "semantic_policy": _p_enum(SemanticPolicy),
    "candidate_limit": _p_int,
    "grant_id": _p_uuid,
}
_parse_decision = _row_parser(Decision, _DECISION_SPEC)


@dataclass(frozen=True, kw_only=True, slots=True)
class LexicalTerm:
    """Why a lexical hit scored: one matched query term (BM25's parts for it)."""

    term: str
    idf: float
    tf: int
    query_tf: int
    length_norm: float
    contribution: float

    def to_plain(self) -> dict[str, JsonValue]:
        return {
            "term": self.term,
            "idf": self.idf,
            "tf": self.tf,
            "query_tf": self.query_tf,
            "length_norm": self.length_norm,
            "contribution": self.contribution,
        }


def _p_number(name: str, value: object) -> float:
    # JSON carries numbers without a float/int distinction: 2.0 may arrive as 2.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _type_error(name)
    number = float(value)
    if not math.isfinite(number):
        raise _value_error(name)
    return number


_GUARDS[_p_number] = "type(v) is float and isfinite(v)"

_TERM_SPEC: Final[Mapping[str, _Parser]] = {
    "term": _p_ident,
    "idf": _p_number,
    "tf": _p_rank,
    "query_tf": _p_rank,
    "length_norm": _p_number,
    "contribution": _p_number,
}
_parse_term = _row_parser(LexicalTerm, _TERM_SPEC)


def _p_terms(name: str, value: object) -> tuple[LexicalTerm, ...]:
    if not isinstance(value, list):
        raise _type_error(name)
    terms = tuple(map(_parse_term, value))
    # The database lists each matched term once, in lexeme order: each term before the next.
    for before, after in pairwise(terms):
        if not before.term < after.term:
            raise _value_error(name)
    return terms


@dataclass(frozen=True, kw_only=True, slots=True)
class LexicalCandidate:
    """One row of ``pyretrieve.lexical_candidates``."""

    rank: int
    fragment_id: UUID
    content_digest: bytes
    score: float
    lexical_generation: int
    terms: tuple[LexicalTerm, ...] = ()

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> LexicalCandidate:
        return _parse_lexical(row)


_LEXICAL_SPEC: Final[Mapping[str, _Parser]] = {
    "rank": _p_rank,
    "fragment_id": _p_uuid,
    "content_digest": _p_digest,
    "score": _p_float,
    "lexical_generation": _p_generation,
    "terms": _p_terms,
}
_parse_lexical = _row_parser(LexicalCandidate, _LEXICAL_SPEC)


@dataclass(frozen=True, kw_only=True, slots=True)
class VectorCandidate:
    """One row of ``pyretrieve.vector_candidates``."""

    rank: int
    fragment_id: UUID
    content_digest: bytes
    distance: float
    source_digest: bytes
    vector_generation: int
    lexical_generation: int
    search: VectorSearch

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> VectorCandidate:
        return _parse_vector(row)


_VECTOR_SPEC: Final[Mapping[str, _Parser]] = {
    "rank": _p_rank,
    "fragment_id": _p_uuid,
    "content_digest": _p_digest,
    "distance": _p_distance,
    "source_digest": _p_digest,
    "vector_generation": _p_generation,
    "lexical_generation": _p_generation,
    "search": _p_enum(VectorSearch),
}
_parse_vector = _row_parser(VectorCandidate, _VECTOR_SPEC)


@dataclass(frozen=True, kw_only=True, slots=True)
class FragmentRecord:
    """One row of ``pyretrieve.fragments``."""

    workspace_id: str
    project_id: str
    fragment_id: UUID
    body: str
    content_digest: bytes
    classification: Classification
    state: FragmentState
    superseded_by: UUID | None
    observed_at: datetime
    expires_at: datetime | None
    ingested_at: datetime
    source_uri: str | None
    source_revision: str | None
    manifest_id: str | None
    ts_config: str
    lexical_generation: int

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> FragmentRecord:
        return _parse_record(row)

    @property
    def identity(self) -> str:
        """Content-bound tie-break identity: ``<digest hex>:<fragment uuid>``."""
        return _identity(self.content_digest.hex(), str(self.fragment_id))

    @property
    def byte_size(self) -> int:
        body = self.body
        # ASCII text is one byte a character (isascii reads a flag; encoding copies the text).
        return len(body) if body.isascii() else len(body.encode("utf-8"))


def _identity(digest_hex: str, fragment_text: str) -> str:
    """:attr:`FragmentRecord.identity` from the record's digest and id as text (the ranker and
    the explanation have them already)."""
    return digest_hex + ":" + fragment_text


_RECORD_SPEC: Final[Mapping[str, _Parser]] = {
    "workspace_id": _p_ident,
    "project_id": _p_ident,
    "fragment_id": _p_uuid,
    "body": _p_body,
    "content_digest": _p_digest,
    "classification": _p_enum(Classification),
    "state": _p_enum(FragmentState),
    "superseded_by": _optional(_p_uuid),
    "observed_at": _p_datetime,
    "expires_at": _optional(_p_datetime),
    "ingested_at": _p_datetime,
    "source_uri": _optional(_p_str),
    "source_revision": _optional(_p_str),
    "manifest_id": _optional(_p_str),
    "ts_config": _p_ident,
    "lexical_generation": _p_generation,
}
_parse_record = _row_parser(FragmentRecord, _RECORD_SPEC)


@dataclass(frozen=True, kw_only=True, slots=True)
class Weights:
    """Per-modality fusion weights; finite, 0 to ``contract.MAX_WEIGHT`` (as ``search()`` in
    SQL)."""

    lexical: float = DEFAULT_WEIGHT
    vector: float = DEFAULT_WEIGHT

    def __post_init__(self) -> None:
        for name in ("lexical", "vector"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise InvalidInput(f"weight {name} must be a number")
            number = float(value)
            if not math.isfinite(number) or number < 0.0:
                raise InvalidInput(f"weight {name} must be finite and non-negative")
            if number > MAX_WEIGHT:
                raise InvalidInput(f"weight {name} must be at most {MAX_WEIGHT:g}")
            # Stored as float so the JSON and the arithmetic never see an int.
            object.__setattr__(self, name, number)

    def to_plain(self) -> dict[str, JsonValue]:
        return {"lexical": self.lexical, "vector": self.vector}


@dataclass(frozen=True, kw_only=True, slots=True)
class FusionSettings:
    """How one search fused its legs: the method and the weights, and where each came from
    (``model`` / ``fusion_model`` name the registered model whose defaults they are, for that
    source only)."""

    method: Fusion = Fusion.RRF
    weights: Weights = field(default_factory=Weights)
    source: WeightsSource = WeightsSource.DEFAULT
    model: str | None = None
    fusion_source: WeightsSource = WeightsSource.DEFAULT
    fusion_model: str | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "method", Fusion(self.method))
            object.__setattr__(self, "source", WeightsSource(self.source))
            object.__setattr__(self, "fusion_source", WeightsSource(self.fusion_source))
        except ValueError:
            raise InvalidInput("unknown fusion or source") from None
        if not isinstance(self.weights, Weights):
            raise InvalidInput("weights must be Weights")
        if (self.source is WeightsSource.MODEL) != (self.model is not None):
            raise InvalidInput("a model is named exactly when the weights are the model's")
        if (self.fusion_source is WeightsSource.MODEL) != (self.fusion_model is not None):
            raise InvalidInput("a model is named exactly when the fusion is the model's")

    def weights_plain(self) -> dict[str, JsonValue]:
        """The weights as every explanation states them, with their source."""
        return {**self.weights.to_plain(), "source": self.source.value, "model": self.model}

    def fusion_plain(self) -> dict[str, JsonValue]:
        """The fusion method with its source."""
        return {
            "method": self.method.value,
            "source": self.fusion_source.value,
            "model": self.fusion_model,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class SemanticStatus:
    """What happened to the semantic modality, and why.

    ``used``: vector candidates took part. ``not_requested``: the caller asked for no
    semantic query (lexical mode, or semantic disabled by the caller). ``degraded``: a
    semantic query was wanted but did not take part; ``reason`` says why (``disabled``
    when the grant's policy disables it) and confidence is lowered.
    """

    status: SemanticOutcome
    reason: DegradationReason | None = None
    evidence: Mapping[str, JsonValue] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        try:
            status = SemanticOutcome(self.status)
            reason = None if self.reason is None else DegradationReason(self.reason)
        except ValueError:
            raise InvalidInput("unknown semantic status or reason") from None
        if status is SemanticOutcome.USED and reason is not None:
            raise InvalidInput("a used semantic modality has no degradation reason")
        if status is SemanticOutcome.DEGRADED and reason is None:
            raise InvalidInput("a degraded semantic modality needs a reason")
        if status is SemanticOutcome.NOT_REQUESTED and reason is not None:
            raise InvalidInput("a semantic query that was not requested cannot degrade")
        if not isinstance(self.evidence, Mapping):
            raise InvalidInput("evidence must be a mapping")
        evidence = _plain_json(dict(self.evidence))
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "evidence", evidence)

    @classmethod
    def used(cls, evidence: Mapping[str, JsonValue] | None = None) -> SemanticStatus:
        return cls(status=SemanticOutcome.USED, evidence=evidence or {})

    @classmethod
    def not_requested(cls, evidence: Mapping[str, JsonValue] | None = None) -> SemanticStatus:
        return cls(status=SemanticOutcome.NOT_REQUESTED, evidence=evidence or {})

    @classmethod
    def degraded(
        cls,
        reason: DegradationReason,
        evidence: Mapping[str, JsonValue] | None = None,
    ) -> SemanticStatus:
        return cls(status=SemanticOutcome.DEGRADED, reason=reason, evidence=evidence or {})

    @property
    def lowers_confidence(self) -> bool:
        return self.status is SemanticOutcome.DEGRADED

    def to_plain(self) -> dict[str, JsonValue]:
        return {
            "status": self.status.value,
            "reason": None if self.reason is None else self.reason.value,
            "evidence": _plain_json(dict(self.evidence)),
            "lowers_confidence": self.lowers_confidence,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Result:
    """One returned fragment with its scores and its explanation."""

    fused_rank: int
    record: FragmentRecord
    lexical: LexicalCandidate | None
    vector: VectorCandidate | None
    fused_score: float
    freshness: float
    final_score: float
    confidence: float
    tie_break: str
    explanation: Mapping[str, JsonValue] = field(hash=False)

    @property
    def rrf_score(self) -> float:
        """The fused score under its earlier name (RRF was the only fusion)."""
        return self.fused_score

    @property
    def fragment_id(self) -> UUID:
        return self.record.fragment_id

    @property
    def text(self) -> str:
        return self.record.body

    @property
    def trust(self) -> str:
        return TRUST_LABEL

    def to_plain(self) -> dict[str, JsonValue]:
        plain = _plain_json(dict(self.explanation))
        assert isinstance(plain, dict)
        return plain


_new_result = _slot_builder(Result)


@dataclass(frozen=True, kw_only=True, slots=True)
class Omission:
    """An eligible fragment left out because the result limit was reached."""

    workspace_id: str
    project_id: str
    fragment_id: UUID
    content_digest: bytes
    position: int
    reason: OmissionReason
    byte_estimate: int
    freshness: float
    confidence: float

    def to_plain(self) -> dict[str, JsonValue]:
        return {
            "workspace_id": self.workspace_id,
            "project_id": self.project_id,
            "fragment_id": str(self.fragment_id),
            "content_digest": hex_digest(self.content_digest),
            "position": self.position,
            "reason": self.reason.value,
            "byte_estimate": self.byte_estimate,
            "freshness": self.freshness,
            "confidence": self.confidence,
        }


_new_omission = _slot_builder(Omission)


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchResult:
    """What one search returns: the results (explained), the omissions past the limit, the
    decision it ran under, the semantic status and the query's digests.

    ``retrieval_id`` is the sha256 of the inputs that determine the output, so two searches
    with the same id returned the same thing. ``to_plain()`` / ``to_json()`` give the
    canonical rendering (:func:`canonical_json`); each result's part of it is the explanation
    ``pyretrieve.search()`` returns in SQL, byte for byte.
    """

    retrieval_id: str
    decision: Decision
    semantic: SemanticStatus
    results: tuple[Result, ...]
    omissions: tuple[Omission, ...]
    query_digest: bytes
    embedding_digest: bytes | None
    limit: int
    fusion: FusionSettings
    lexical_ran: bool
    vector_ran: bool
    retrieved_at: datetime

    @property
    def weights(self) -> Weights:
        """The weights the search used (``fusion.source`` says where they came from)."""
        return self.fusion.weights

    def to_plain(self) -> dict[str, JsonValue]:
        return {
            "retrieval_id": self.retrieval_id,
            "decision": self.decision.to_plain(),
            "semantic": self.semantic.to_plain(),
            "query": {
                "query_digest": hex_digest(self.query_digest),
                "embedding_digest": (
                    None if self.embedding_digest is None else hex_digest(self.embedding_digest)
                ),
                "limit": self.limit,
                "fusion": self.fusion.fusion_plain(),
                "weights": self.fusion.weights_plain(),
                "modalities_ran": {"lexical": self.lexical_ran, "vector": self.vector_ran},
            },
            "retrieved_at": iso_utc(self.retrieved_at),
            "results": [result.to_plain() for result in self.results],
            "omissions": [omission.to_plain() for omission in self.omissions],
        }

    def to_json(self) -> str:
        return canonical_json(self.to_plain())
