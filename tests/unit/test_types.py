from __future__ import annotations

import json
import operator
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from uuid import UUID

import pytest
from ranking_factories import (
    DECISION_ID,
    EMBEDDING_DIGEST,
    QUERY_DIGEST,
    decision_row,
    hybrid_corpus,
    lexical_row,
    record_row,
    run,
    vector_row,
)

from pyretrieve import errors
from pyretrieve import types as types_module
from pyretrieve.errors import IntegrityViolation, InvalidInput, PyretrieveError
from pyretrieve.types import (
    Classification,
    Decision,
    DegradationReason,
    FragmentRecord,
    FragmentState,
    LexicalCandidate,
    LexicalTerm,
    Omission,
    OmissionReason,
    SemanticOutcome,
    SemanticPolicy,
    SemanticStatus,
    VectorCandidate,
    Weights,
    canonical_json,
    iso_utc,
    micros,
)

# ------------------------------------------------------------- classification


def test_classification_order() -> None:
    ordered = [
        Classification.PUBLIC,
        Classification.INTERNAL,
        Classification.CONFIDENTIAL,
        Classification.RESTRICTED,
    ]
    assert sorted(reversed(ordered)) == ordered
    assert [c.level for c in ordered] == [0, 1, 2, 3]
    # String order would put confidential below internal; sensitivity order does not.
    assert Classification.INTERNAL < Classification.CONFIDENTIAL
    assert Classification.RESTRICTED >= Classification.RESTRICTED
    assert not Classification.CONFIDENTIAL <= Classification.INTERNAL


def test_classification_at_most() -> None:
    assert Classification.INTERNAL.at_most(Classification.CONFIDENTIAL)
    assert Classification.CONFIDENTIAL.at_most(Classification.CONFIDENTIAL)
    assert not Classification.RESTRICTED.at_most(Classification.CONFIDENTIAL)


def test_classification_refuses_string_comparison() -> None:
    with pytest.raises(TypeError):
        _ = Classification.INTERNAL < "restricted"
    with pytest.raises(TypeError):
        # the reflected operand is the enum, which must refuse as well
        operator.gt("internal", Classification.CONFIDENTIAL)


# ------------------------------------------------------------- canonical JSON


def test_iso_utc_always_has_microseconds_and_z() -> None:
    assert iso_utc(datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2025-01-02T03:04:05.000000Z"
    plus_five = timezone(timedelta(hours=5, minutes=30))
    value = datetime(2025, 1, 2, 3, 4, 5, 123, tzinfo=plus_five)
    assert iso_utc(value) == "2025-01-01T21:34:05.000123Z"


def test_iso_utc_refuses_naive() -> None:
    with pytest.raises(ValueError, match="naive"):
        iso_utc(datetime(2025, 1, 1))


def test_micros_is_exact_integer() -> None:
    assert micros(timedelta(days=30)) == 30 * 86_400 * 1_000_000
    assert micros(timedelta(microseconds=7)) == 7
    assert isinstance(micros(timedelta(seconds=1.5)), int)


def test_canonical_json_format() -> None:
    text = canonical_json({"b": [1, 2.5, None], "a": "é", "c": {"z": True, "y": 0.1}})
    assert text == '{"a":"é","b":[1,2.5,null],"c":{"y":0.1,"z":true}}'


def test_canonical_json_refuses_nan() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        canonical_json({"x": float("nan")})


def test_search_result_json_renders_types_canonically() -> None:
    records, lexical, vector = hybrid_corpus(2)
    out = run(records=records, lexical=lexical, vector=vector, limit=1)
    text = out.to_json()
    assert text == canonical_json(json.loads(text))
    plain = json.loads(text)
    assert plain["decision"]["decision_id"] == str(DECISION_ID)
    assert plain["decision"]["decision_id"] == plain["decision"]["decision_id"].lower()
    assert plain["decision"]["evaluated_at"] == "2025-06-01T12:00:00.000000Z"
    assert plain["decision"]["max_age_us"] == 30 * 86_400 * 1_000_000
    assert plain["query"]["query_digest"] == QUERY_DIGEST.hex()
    assert plain["query"]["embedding_digest"] == EMBEDDING_DIGEST.hex()
    assert plain["query"]["fusion"] == {"method": "rrf", "source": "default", "model": None}
    assert plain["query"]["weights"] == {
        "lexical": 1.0,
        "vector": 1.0,
        "source": "default",
        "model": None,
    }
    assert '"weights":{"lexical":1.0,"model":null,"source":"default","vector":1.0}' in text
    digests = {str(r["fragment_id"]): r["content_digest"] for r in records}
    result = plain["results"][0]
    provenance = result["provenance"]
    assert provenance["observed_at"] == "2025-05-31T12:00:00.000000Z"
    assert provenance["content_digest"] == digests[result["fragment"]["fragment_id"]].hex()
    assert provenance["content_digest"] == provenance["content_digest"].lower()
    omission = plain["omissions"][0]
    assert omission["content_digest"] == digests[omission["fragment_id"]].hex()
    assert omission["fragment_id"] != result["fragment"]["fragment_id"]
    assert set(omission) == {
        "workspace_id",
        "project_id",
        "fragment_id",
        "content_digest",
        "position",
        "reason",
        "byte_estimate",
        "freshness",
        "confidence",
    }


def test_search_result_json_float_repr() -> None:
    records, lexical, _ = hybrid_corpus(1)
    out = run(records=records, lexical=lexical, vector=None)
    rrf = out.results[0].rrf_score
    assert f'"score":{rrf!r}' in out.to_json()


def test_to_json_keeps_non_ascii() -> None:
    record = record_row(1, body="naïve café — 東京")
    out = run(records=[record], lexical=[lexical_row(record, 1)], vector=None)
    assert "naïve café — 東京" in out.to_json()


# ----------------------------------------------------------------- row parsing


def test_decision_from_row() -> None:
    decision = Decision.from_row(decision_row())
    assert decision.ceiling is Classification.CONFIDENTIAL
    assert decision.semantic_policy is SemanticPolicy.OPTIONAL
    assert decision.scope.workspace == "ws-alpha"
    assert decision.scope.purpose == "answering"


@pytest.mark.parametrize(
    ("overrides", "check"),
    [
        ({"candidate_limit": 0}, "field_value"),
        ({"candidate_limit": True}, "field_type"),
        ({"candidate_limit": 5.0}, "field_type"),
        ({"max_age": timedelta(0)}, "field_value"),
        ({"max_age": 3600}, "field_type"),
        ({"evaluated_at": datetime(2025, 1, 1)}, "field_value"),
        ({"ceiling": "secret"}, "field_value"),
        ({"semantic_policy": "sometimes"}, "field_value"),
        ({"decision_id": "6f1c2a4e-0000-4000-8000-00000000d001"}, "field_type"),
        ({"workspace_id": ""}, "field_value"),
        ({"surprise": 1}, "unknown_field"),
    ],
    ids=[
        "limit-zero",
        "limit-bool",
        "limit-float",
        "max-age-zero",
        "max-age-int",
        "naive-evaluated-at",
        "bad-ceiling",
        "bad-policy",
        "uuid-as-str",
        "empty-workspace",
        "unknown",
    ],
)
def test_decision_row_strictness(overrides: dict[str, Any], check: str) -> None:
    with pytest.raises(IntegrityViolation) as caught:
        Decision.from_row(decision_row(**overrides))
    assert caught.value.check == check


def test_decision_missing_field() -> None:
    row = decision_row()
    del row["grant_id"]
    with pytest.raises(IntegrityViolation) as caught:
        Decision.from_row(row)
    assert caught.value.check == "missing_field"
    assert caught.value.field == "grant_id"


def test_row_must_be_mapping() -> None:
    with pytest.raises(IntegrityViolation) as caught:
        LexicalCandidate.from_row([("rank", 1)])  # type: ignore[arg-type]
    assert caught.value.check == "row_type"


def test_candidate_and_record_parsing_round_trip() -> None:
    record = record_row(1, expires_at=None, source_uri=None)
    parsed = FragmentRecord.from_row(record)
    assert parsed.fragment_id == record["fragment_id"]
    assert parsed.source_uri is None
    assert parsed.identity == record["content_digest"].hex() + ":" + str(record["fragment_id"])
    assert LexicalCandidate.from_row(lexical_row(record, 2)).rank == 2
    assert VectorCandidate.from_row(vector_row(record, 1)).vector_generation == 3


def test_parsed_rows_equal_the_dataclasses_built_the_usual_way() -> None:
    """The parsers store each field through the slots instead of calling ``__init__``: the
    instances must be the same values, frozen and hashable as ever."""
    record = record_row(1, expires_at=None)
    lexical = lexical_row(record, 2)
    parsed = LexicalCandidate.from_row(lexical)
    built = LexicalCandidate(
        **{**lexical, "terms": tuple(LexicalTerm(**t) for t in lexical["terms"])}
    )
    assert parsed == built
    assert hash(parsed) == hash(built)
    assert repr(parsed) == repr(built)
    assert FragmentRecord.from_row(record) == FragmentRecord(
        **{
            **record,
            "classification": Classification(record["classification"]),
            "state": FragmentState(record["state"]),
        }
    )
    with pytest.raises(AttributeError):
        parsed.rank = 3  # type: ignore[misc]


def test_parsed_rows_are_instances_of_their_class_and_nothing_else() -> None:
    """Built in a twin of the class, then made instances of it: no trace of the twin."""
    parsed = FragmentRecord.from_row(record_row(1))
    assert type(parsed) is FragmentRecord
    assert not hasattr(parsed, "__dict__")
    with pytest.raises(AttributeError):
        parsed.body = "changed"  # type: ignore[misc]


def test_the_slot_builders_build_what_the_classes_build() -> None:
    record = FragmentRecord.from_row(record_row(1))
    omission: dict[str, Any] = {
        "workspace_id": record.workspace_id,
        "project_id": record.project_id,
        "fragment_id": record.fragment_id,
        "content_digest": record.content_digest,
        "position": 11,
        "reason": OmissionReason.RESULT_LIMIT,
        "byte_estimate": record.byte_size,
        "freshness": 0.75,
        "confidence": 0.25,
    }
    built = types_module._new_omission(**omission)
    assert type(built) is Omission
    assert built == Omission(**omission)
    assert repr(built) == repr(Omission(**omission))
    with pytest.raises(AttributeError):
        built.position = 3  # type: ignore[misc]
    # Keyword arguments only, every field and nothing else, as Omission(...) takes them.
    with pytest.raises(TypeError):
        types_module._new_omission(*omission.values())
    with pytest.raises(TypeError):
        types_module._new_omission(**{**omission, "extra": 1})
    del omission["position"]
    with pytest.raises(TypeError):
        types_module._new_omission(**omission)
    # A class with defaults or a __post_init__ does more in __init__ than store its fields.
    for cls in (Weights, SemanticStatus, LexicalCandidate):
        with pytest.raises(TypeError):
            types_module._slot_builder(cls)


def test_byte_size_counts_utf8_bytes() -> None:
    assert FragmentRecord.from_row(record_row(1, body="plain")).byte_size == 5
    assert FragmentRecord.from_row(record_row(2, body="caf\u00e9 \u2603")).byte_size == 9


def test_a_row_parser_names_every_field_of_a_class_without_post_init() -> None:
    spec = dict(types_module._TERM_SPEC)
    del spec["tf"]
    with pytest.raises(TypeError):
        types_module._row_parser(LexicalTerm, spec)
    with pytest.raises(TypeError):
        types_module._row_parser(
            LexicalTerm, {**types_module._TERM_SPEC, "extra": types_module._p_str}
        )
    # A class that checks itself in __post_init__ must be built by its __init__.
    with pytest.raises(TypeError):
        types_module._row_parser(
            Weights, {"lexical": types_module._p_float, "vector": types_module._p_float}
        )


class _Str(str):
    __slots__ = ()


class _Int(int):
    pass


class _NoOffset(tzinfo):
    """A time zone that knows no offset: its datetimes are as naive as those without one."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


# Values of every type a driver or a broken row might hand a parser, edge cases included.
_SAMPLES: tuple[object, ...] = (
    None,
    True,
    False,
    0,
    1,
    -1,
    2,
    2**70,
    _Int(3),
    0.0,
    -0.0,
    0.5,
    2.0,
    2.5,
    -1.5,
    float("inf"),
    float("-inf"),
    float("nan"),
    "",
    "a",
    "caf\u00e9",
    "\ud800",
    _Str("a"),
    b"",
    b"\x00" * 32,
    b"\x00" * 31,
    bytearray(32),
    UUID(int=7),
    datetime(2026, 1, 1, tzinfo=UTC),
    datetime(2026, 1, 1),
    datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2))),
    datetime(2026, 1, 1, tzinfo=_NoOffset()),
    timedelta(days=1),
    [],
    {},
    "internal",
    "active",
    "exact",
)


@pytest.mark.parametrize(
    "parser", list(types_module._GUARDS), ids=lambda p: getattr(p, "__qualname__", "?")
)
def test_a_value_in_a_guard_is_what_its_parser_returns(parser: Any) -> None:
    """A generated row parser stores a value that passes a field's guard without calling the
    field's parser: so the parser must return that very value, for every such value."""
    guard = eval(  # the module's own guard text
        f"lambda v: {types_module._GUARDS[parser]}",
        {
            "UUID": UUID,
            "datetime": datetime,
            "UTC": UTC,
            "isfinite": types_module.math.isfinite,
            "RANK_BASE": types_module.RANK_BASE,
            "DIGEST_SIZE": types_module.DIGEST_SIZE,
        },
    )
    admitted = 0
    for value in _SAMPLES:
        if guard(value):
            admitted += 1
            assert parser("f", value) is value
    assert admitted > 0


def _plain_parser(cls: Any, spec: Any) -> Any:
    """The row parser written plainly: the keys, then each field's parser, then the class."""

    def parse(row: Any) -> Any:
        checked = types_module._check_keys(row, spec)
        return cls(**{name: parse_field(name, checked[name]) for name, parse_field in spec.items()})

    return parse


def _outcome(parse: Any, row: Any) -> tuple[str, Any]:
    try:
        return "ok", parse(row)
    except IntegrityViolation as exc:
        return "error", (exc.check, exc.field, exc.message)


def _broken_rows(row: dict[str, Any]) -> list[Any]:
    rows: list[Any] = [row, dict(row), list(row.items()), None]
    for name in row:
        rows.append({k: v for k, v in row.items() if k != name})
        for value in _SAMPLES:
            rows.append({**row, name: value})
    rows.append({**row, "unknown": 1})
    return rows


def test_generated_row_parsers_agree_with_the_plain_ones_on_every_broken_row() -> None:
    """For each row class, a valid row and every one-field change of it (each sample value in
    each field, each field missing, an unknown field): the generated parser returns the same
    instance or raises the same error as the fields' parsers called one by one."""
    record = record_row(1)
    term = {
        "term": "a",
        "idf": 1.5,
        "tf": 2,
        "query_tf": 1,
        "length_norm": 0.5,
        "contribution": 1.0,
    }
    cases = [
        (Decision, types_module._DECISION_SPEC, decision_row()),
        (LexicalTerm, types_module._TERM_SPEC, term),
        (LexicalCandidate, types_module._LEXICAL_SPEC, lexical_row(record, 1)),
        (VectorCandidate, types_module._VECTOR_SPEC, vector_row(record, 1)),
        (FragmentRecord, types_module._RECORD_SPEC, record),
    ]
    compared = 0
    for cls, spec, row in cases:
        generated = types_module._row_parser(cls, spec)
        plain = _plain_parser(cls, spec)
        for broken in _broken_rows(row):
            expected = _outcome(plain, broken)
            got = _outcome(generated, broken)
            assert got == expected, (cls.__name__, broken)
            if got[0] == "ok":
                assert all(type(getattr(got[1], n)) is type(getattr(expected[1], n)) for n in spec)
            compared += 1
    assert compared > 500


def test_int_is_not_a_float_signal() -> None:
    record = record_row(1)
    with pytest.raises(IntegrityViolation) as caught:
        LexicalCandidate.from_row(lexical_row(record, 1, score=1))
    assert caught.value.check == "field_type"


def test_rank_must_be_positive() -> None:
    record = record_row(1)
    with pytest.raises(IntegrityViolation) as caught:
        LexicalCandidate.from_row({**lexical_row(record, 1), "rank": 0})
    assert caught.value.check == "field_value"


# -------------------------------------------------------------- value objects


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lexical": -0.5},
        {"vector": float("inf")},
        {"lexical": float("nan")},
        {"vector": True},
        {"lexical": "1.0"},
        {"vector": 1000.5},
    ],
    ids=["negative", "infinite", "nan", "bool", "string", "above_max"],
)
def test_weights_validation(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        Weights(**kwargs)


def test_weights_coerce_int_to_float() -> None:
    weights = Weights(lexical=2, vector=1)
    assert type(weights.lexical) is float
    assert weights.to_plain() == {"lexical": 2.0, "vector": 1.0}


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("used", "stale"),
        ("degraded", None),
        ("not_requested", "disabled"),
        ("not_requested", "corrupt"),
        ("maybe", None),
        ("used", "bored"),
    ],
    ids=[
        "used-with-reason",
        "degraded-without-reason",
        "not-requested-with-reason",
        "not-requested-degrades",
        "unknown-status",
        "unknown-reason",
    ],
)
def test_semantic_status_validation(status: str, reason: str | None) -> None:
    with pytest.raises(InvalidInput):
        SemanticStatus(status=status, reason=reason)  # type: ignore[arg-type]


def test_semantic_status_coerces_strings_and_flags_degradation() -> None:
    status = SemanticStatus(status="degraded", reason="stale")  # type: ignore[arg-type]
    assert status.status is SemanticOutcome.DEGRADED
    assert status.reason is DegradationReason.STALE
    assert status.lowers_confidence
    assert not SemanticStatus.used().lowers_confidence
    assert not SemanticStatus.not_requested().lowers_confidence


def test_semantic_evidence_is_copied_and_plain() -> None:
    evidence: dict[str, Any] = {"stale_count": 3, "models": ["m1"]}
    status = SemanticStatus.degraded(DegradationReason.STALE, evidence)
    evidence["models"].append("m2")
    evidence["stale_count"] = 4
    assert status.to_plain()["evidence"] == {"stale_count": 3, "models": ["m1"]}


@pytest.mark.parametrize(
    "evidence",
    [
        {"when": datetime(2025, 1, 1, tzinfo=UTC)},
        {"ratio": float("nan")},
        {"ids": {1, 2}},
        {1: "x"},
    ],
    ids=["datetime", "nan", "set", "int-key"],
)
def test_semantic_evidence_rejects_non_json(evidence: dict[Any, Any]) -> None:
    with pytest.raises(InvalidInput):
        SemanticStatus.degraded(DegradationReason.CORRUPT, evidence)


def test_dataclasses_are_frozen_and_keyword_only() -> None:
    weights = Weights()
    with pytest.raises(AttributeError):
        weights.lexical = 3.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        Weights(1.0, 1.0)  # type: ignore[call-arg]


def test_results_are_hashable_despite_dict_fields() -> None:
    records, lexical, _ = hybrid_corpus(2)
    out = run(records=records, lexical=lexical, vector=None)
    assert len({out.results[0], out.results[1]}) == 2
    assert hash(out) == hash(out)


# ------------------------------------------------------------------- errors

EXPECTED_CODES = {
    "AccessDenied": "VES_MEMORY_ACCESS_DENIED",
    "InvalidDecision": "VES_MEMORY_INVALID_DECISION",
    "InvalidInput": "VES_MEMORY_INVALID_INPUT",
    "InvalidEmbedding": "VES_MEMORY_INVALID_EMBEDDING",
    "UnknownModel": "VES_MEMORY_UNKNOWN_MODEL",
    "ModelFileMismatch": "VES_MEMORY_MODEL_FILE_MISMATCH",
    "NotFound": "VES_MEMORY_NOT_FOUND",
    "Conflict": "VES_MEMORY_CONFLICT",
    "IntegrityViolation": "VES_MEMORY_INTEGRITY_VIOLATION",
    "SemanticRequired": "VES_MEMORY_SEMANTIC_REQUIRED",
    "LexicalFailure": "VES_MEMORY_LEXICAL_FAILURE",
    "DatabaseUnavailable": "VES_MEMORY_DATABASE_UNAVAILABLE",
    "InternalError": "VES_MEMORY_INTERNAL",
    "ServerUnreachable": "VES_MEMORY_SERVER_UNREACHABLE",
    "AuthenticationFailed": "VES_MEMORY_AUTHENTICATION_FAILED",
    "SchemaMissing": "VES_MEMORY_SCHEMA_MISSING",
    "UnknownPrincipal": "VES_MEMORY_UNKNOWN_PRINCIPAL",
}


@pytest.mark.parametrize(("name", "code"), sorted(EXPECTED_CODES.items()))
def test_error_codes_are_stable(name: str, code: str) -> None:
    cls = getattr(errors, name)
    assert issubclass(cls, PyretrieveError)
    assert cls.code == code


def test_error_codes_are_unique() -> None:
    classes = [getattr(errors, name) for name in EXPECTED_CODES]
    assert len({cls.code for cls in classes}) == len(classes)


def test_error_default_and_custom_messages() -> None:
    assert str(errors.NotFound()) == "not found"
    err = errors.AccessDenied("no grant for this purpose")
    assert err.as_dict() == {
        "code": "VES_MEMORY_ACCESS_DENIED",
        "message": "no grant for this purpose",
    }


def test_integrity_violation_check_must_be_identifier() -> None:
    with pytest.raises(ValueError, match="identifiers"):
        IntegrityViolation("digest mismatch: body was 'secret'")
    err = IntegrityViolation("too_old", field="observed_at", fragment_id=UUID(int=1))
    assert err.as_dict() == {
        "code": "VES_MEMORY_INTEGRITY_VIOLATION",
        "message": (
            "integrity check failed: too_old (field observed_at) "
            "(fragment 00000000-0000-0000-0000-000000000001)"
        ),
        "check": "too_old",
    }
