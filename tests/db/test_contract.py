"""The SQL literals agree with pyretrieve.contract, and every PR SQLSTATE has a typed error.

The schema writes each contract constant as a literal (a limit in a check, RRF's k in the
fusion, the freshness floor, the degraded factor, the identifier rule); Python writes it once,
in :mod:`pyretrieve.contract`. These tests read the installed definitions of a test database
(``pg_get_functiondef``, ``pg_get_constraintdef``, ``pg_enum``) and fail when one side moves
without the other.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pyretrieve import contract
from pyretrieve.db import errors as db_errors
from pyretrieve.errors import InvalidFusion
from pyretrieve.tools import select
from pyretrieve.types import Classification, VectorSearch
from tests.conftest import Database, Server, acting_as, create_database, drop_database


@pytest.fixture(scope="module")
def catalog(server: Server, template_db: str) -> Iterator[dict[str, str]]:
    """Every installed function's definition and every check constraint of the schema, by
    name (``function:<name>`` for functions, ``check:<table or domain>`` for checks)."""
    name = create_database(server, template_db)
    try:
        with Database(server=server, name=name).admin(autocommit=True) as conn:
            yield _read_catalog(conn)
    finally:
        drop_database(server, name)


def _read_catalog(conn: psycopg.Connection[Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for row in conn.execute(
        "SELECT p.proname AS name, pg_catalog.pg_get_functiondef(p.oid) AS def"
        "  FROM pg_catalog.pg_proc p"
        " WHERE p.pronamespace = 'pyretrieve'::regnamespace AND p.prokind IN ('f', 'p')"
        " ORDER BY p.proname, p.oid"
    ).fetchall():
        key = f"function:{row['name']}"
        out[key] = out.get(key, "") + row["def"]
    for row in conn.execute(
        "SELECT coalesce(c.relname, t.typname) AS owner, pg_catalog.pg_get_constraintdef(co.oid) AS def"
        "  FROM pg_catalog.pg_constraint co"
        "  LEFT JOIN pg_catalog.pg_class c ON c.oid = co.conrelid"
        "  LEFT JOIN pg_catalog.pg_type t ON t.oid = co.contypid"
        " WHERE co.connamespace = 'pyretrieve'::regnamespace AND co.contype = 'c'"
        " ORDER BY 1, 2"
    ).fetchall():
        key = f"check:{row['owner']}"
        out[key] = out.get(key, "") + row["def"] + "\n"
    labels = conn.execute(
        "SELECT e.enumlabel FROM pg_catalog.pg_enum e"
        " WHERE e.enumtypid = 'pyretrieve.classification'::regtype ORDER BY e.enumsortorder"
    ).fetchall()
    out["enum:classification"] = ",".join(r["enumlabel"] for r in labels)
    return out


def _numbers(pattern: str, text: str) -> set[float]:
    """Every number the pattern's group captures in ``text`` (whitespace-insensitive)."""
    flat = re.sub(r"\s+", " ", text)
    found = {float(m) for m in re.findall(pattern, flat)}
    assert found, f"pattern {pattern!r} found nothing"
    return found


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


# --------------------------------------------------------------------------------- limits


def test_the_identifier_rule_is_the_contracts(catalog: dict[str, str]) -> None:
    literal = re.escape(f"'{contract.IDENTIFIER_PATTERN}'")
    assert re.search(literal, catalog["check:identifier"])
    assert re.search(literal, catalog["function:check_identifier"])
    assert f"^{contract.IDENTIFIER_RE.pattern}$" == contract.IDENTIFIER_PATTERN
    longest = int(re.findall(r"\{0,(\d+)\}", contract.IDENTIFIER_PATTERN)[0]) + 1
    assert longest == contract.IDENTIFIER_MAX_CHARS
    assert contract.is_identifier("a" * contract.IDENTIFIER_MAX_CHARS)
    assert not contract.is_identifier("a" * (contract.IDENTIFIER_MAX_CHARS + 1))
    assert not contract.is_identifier("_leading")


def test_the_model_id_rule_is_the_contracts(catalog: dict[str, str]) -> None:
    literal = f"'{contract.MODEL_ID_PATTERN}'"
    assert literal in catalog["function:register_model"]
    assert literal in catalog["check:embedding_models"]
    longest = int(re.findall(r"\{0,(\d+)\}", contract.MODEL_ID_PATTERN)[0]) + 1
    assert longest == contract.MAX_MODEL_ID_CHARS


def test_the_limits_are_the_contracts(catalog: dict[str, str]) -> None:
    query = r"length\(p_query\) NOT BETWEEN 1 AND (\d+)"
    for function in ("lexical_candidates", "search"):
        assert _numbers(query, catalog[f"function:{function}"]) == {contract.MAX_QUERY_CHARS}
    assert _numbers(
        r"p_requested_limit NOT BETWEEN 1 AND (\d+)", catalog["function:authorize"]
    ) == {contract.MAX_LIMIT}
    caps = re.search(
        r"least\(greatest\(p_requested_limit, (\d+)\), (\d+)\)",
        _flat(catalog["function:authorize"]),
    )
    assert caps is not None
    assert (int(caps[1]), int(caps[2])) == (contract.CANDIDATE_CAP_MIN, contract.CANDIDATE_CAP_MAX)
    assert contract.candidate_cap(1) == contract.CANDIDATE_CAP_MIN
    assert contract.candidate_cap(contract.MAX_LIMIT) == contract.CANDIDATE_CAP_MAX

    put = catalog["function:put_fragment"]
    assert _numbers(r"length\(p_body\) NOT BETWEEN 1 AND (\d+)", put) == {contract.MAX_BODY_CHARS}
    assert _numbers(r"length\(p_source_uri\) > (\d+)", put) == {contract.MAX_SOURCE_URI_CHARS}
    provenance = r"length\(p_(?:source_revision|manifest_id)\) > (\d+)"
    assert _numbers(provenance, put) == {contract.MAX_PROVENANCE_CHARS}
    fragments = catalog["check:fragments"]
    assert _numbers(r"length\(body\) <= (\d+)", fragments) == {contract.MAX_BODY_CHARS}
    assert _numbers(r"length\(source_uri\) <= (\d+)", fragments) == {contract.MAX_SOURCE_URI_CHARS}
    assert _numbers(r"length\((?:source_revision|manifest_id)\) <= (\d+)", fragments) == {
        contract.MAX_PROVENANCE_CHARS
    }

    search = catalog["function:search"]
    candidate = r"p_candidate_limit NOT BETWEEN 1 AND (\d+)"
    assert _numbers(candidate, search) == {contract.MAX_LIMIT}
    model = r"length\(p_model\) NOT BETWEEN 1 AND (\d+)"
    assert _numbers(model, search) == {contract.MAX_MODEL_ID_CHARS}
    weight = r"p_(?:lexical|vector)_weight <= (\d+)\)"
    assert _numbers(weight, search) == {contract.MAX_WEIGHT}

    dimension = r"p_dimension NOT BETWEEN 1 AND (\d+)"
    assert _numbers(dimension, catalog["function:register_model"]) == {contract.MAX_DIMENSION}
    # The check is stored deparsed: ((dimension >= 1) AND (dimension <= 2000)).
    stored = r"dimension <= (\d+)"
    assert _numbers(stored, catalog["check:embedding_models"]) == {contract.MAX_DIMENSION}


def test_the_lexical_index_sizes_are_the_contracts(catalog: dict[str, str]) -> None:
    block = contract.LEXICAL_BLOCK_POSTINGS
    assert _numbers(r"postings <= (\d+)", catalog["check:lexical_blocks"]) == {block}
    writes = catalog["function:write_lexical_postings"]
    assert _numbers(r"postings < (\d+)", writes) == {block}
    assert _numbers(r"% (\d+) AS fresh", writes) == {block}
    compacts = catalog["function:compact_lexical_postings"]
    assert _numbers(r"postings [<=]+ (\d+)", compacts) == {block}
    # Compaction and a first write pack their lists in one place.
    assert "write_lexical_lists(" in compacts
    assert "write_lexical_lists(" in writes
    lists = catalog["function:write_lexical_lists"]
    assert _numbers(r"g\.n [<>=]+ (\d+)", lists) == {block}
    assert _numbers(r"k\.k \* (\d+)", lists) == {block}
    assert _numbers(r"before / (\d+)", lists) == {contract.LEXICAL_PAGE_POSTINGS}
    # The share rule counts the postings in blocks not full, and a bucket's pending pages.
    share = catalog["function:compact_lexical_index"]
    assert _numbers(r"postings < (\d+)", share) == {block}
    assert _numbers(r"v_most_pending < (\d+)", share) == {contract.LEXICAL_MAX_PENDING_PAGES}
    # A bulk write: its size, and the lists it keeps out of pages.
    assert _numbers(r"e\.e\) FROM unnest\(p_entries\) AS e\(e\)\) >= (\d+)", writes) == {
        contract.LEXICAL_BULK_POSTINGS
    }
    assert _numbers(r"count\(t\.entry\) >= (\d+)", writes) == {block}
    # A page's key: a bucket's (0 to 255), or a group's of 16 buckets (256 + g).
    groups = contract.LEXICAL_BUCKETS // contract.LEXICAL_BUCKET_GROUP
    assert _numbers(r"bucket <= (\d+)", catalog["check:lexical_pages"]) == {
        contract.LEXICAL_BUCKETS + groups - 1
    }
    shift = contract.LEXICAL_BUCKET_GROUP.bit_length() - 1
    assert 2**shift == contract.LEXICAL_BUCKET_GROUP
    # The writer keys a group's page as the helpers do, below a page's postings; the leg reads
    # a term's pages under the same two keys.
    assert _numbers(r"bucket >> (\d+)", lists) == {shift}
    assert _numbers(r"(\d+) \+ \(g\.bucket", lists) == {contract.LEXICAL_BUCKETS}
    assert _numbers(r"bucket >> \d+\) < (\d+)", lists) == {contract.LEXICAL_PAGE_POSTINGS}
    leg = catalog["function:lexical_candidates"]
    assert _numbers(r"\((\d+) \+ \(k\.bucket >> \d+\)\)", leg) == {contract.LEXICAL_BUCKETS}
    assert _numbers(r"\(k\.bucket >> (\d+)\)", leg) == {shift}
    # Compaction, the overlap check and the share rule map keys to groups, and groups to their
    # keys, with the same numbers.
    width, last = contract.LEXICAL_BUCKET_GROUP, contract.LEXICAL_BUCKET_GROUP - 1
    overlap = catalog["function:overlapping_pages"]
    assert _numbers(r"bucket >> (\d+)", overlap) == {shift}
    assert _numbers(r"bucket (?:<|-|>=) (\d+)", overlap) == {contract.LEXICAL_BUCKETS}
    compacts_groups = catalog["function:compact_lexical_postings"]
    assert _numbers(r"c\.n < (\d+)", compacts_groups) == {contract.LEXICAL_PAGE_POSTINGS}
    assert _numbers(r"bucket >> (\d+)", compacts_groups) == {shift}
    assert _numbers(r"bucket (?:<|-|>=) (\d+)", compacts_groups) == {contract.LEXICAL_BUCKETS}
    assert _numbers(r"(\d+) \+ [cw]\.grp", compacts_groups) == {contract.LEXICAL_BUCKETS}
    assert _numbers(r"grp \* (\d+)", compacts_groups) == {width}
    assert _numbers(r"grp \* \d+ \+ (\d+)", compacts_groups) == {last}
    assert _numbers(r"bucket (?:<|-) (\d+)", share) == {contract.LEXICAL_BUCKETS}
    assert _numbers(r"\) \* (\d+)", share) == {width}
    assert _numbers(r"\* \d+ \+ (\d+) END", share) == {last}
    # The bucket is one byte of a digest: 256 values exactly.
    assert "get_byte(sha256(" in _flat(catalog["function:lexeme_bucket"])
    assert contract.LEXICAL_BUCKETS == 2**8


def test_the_classification_order_is_the_contracts(catalog: dict[str, str]) -> None:
    assert catalog["enum:classification"] == ",".join(contract.CLASSIFICATION_ORDER)
    assert tuple(c.value for c in Classification) == contract.CLASSIFICATION_ORDER
    assert sorted(Classification) == [Classification(v) for v in contract.CLASSIFICATION_ORDER]


# ---------------------------------------------------------------------------- the scores


def test_the_fusion_and_score_constants_are_the_contracts(catalog: dict[str, str]) -> None:
    search = _flat(catalog["function:search"])
    # RRF: w / (k + rank) per modality, and the explanation's k, rank base and formula.
    assert _numbers(r"v_w[lv] / \((\d+) \+ j\.(?:lexical|vector)_rank\)", search) == {
        contract.RRF_K
    }
    assert _numbers(r"'k', (\d+)", search) == {contract.RRF_K}
    assert _numbers(r"'rank_base', (\d+)", search) == {contract.RANK_BASE}
    assert f"'formula', '{contract.RRF_FORMULA}'" in search
    # The ideal score and the rank decay of confidence: 1 / (k + rank base) and (k + 1)/(k + r).
    top = float(contract.RRF_K + contract.RANK_BASE)
    assert _numbers(r"v_w[lv] / ([\d.]+)::double precision", search) == {top}
    decay = re.search(
        r"\(([\d.]+)::double precision / \(([\d.]+)::double precision \+ o\.fused_rank\)\)",
        search,
    )
    assert decay is not None
    assert (float(decay[1]), float(decay[2])) == (top, float(contract.RRF_K))
    # Freshness: clamp(1 - slope * age / max_age, floor, 1).
    floor = _numbers(r"greatest\(([\d.]+)::double precision, 1\.0::double precision - ", search)
    assert floor == {contract.FRESHNESS_FLOOR}
    slope = _numbers(r"1\.0::double precision - ([\d.]+)::double precision \* \(f\.age_us", search)
    assert slope == {contract.FRESHNESS_SLOPE}
    # Confidence is lowered by the degraded factor.
    factor = _numbers(r"WHEN v_status = 'degraded' THEN ([\d.]+)::double precision", search)
    assert factor == {contract.DEGRADED_CONFIDENCE_FACTOR}
    assert f"'trust', '{contract.TRUST_LABEL}'" in search


def test_the_fusions_and_weights_are_the_contracts(catalog: dict[str, str]) -> None:
    search = _flat(catalog["function:search"])
    fusions = ", ".join(f"'{f}'" for f in contract.FUSIONS)
    assert f"p_fusion NOT IN ({fusions})" in search
    # No fusion given and no registered model: the default, canonical RRF.
    assert "p_fusion text DEFAULT NULL::text" in search
    assert f"v_fusion := '{contract.DEFAULT_FUSION}';" in search
    # DBSF: the explanation's formula and spread, the spread in the distribution, the value of
    # an empty range.
    formula = contract.DBSF_FORMULA.replace("'", "''")
    assert f"'formula', '{formula}'" in search
    assert _numbers(r"'spread', pyretrieve\.json_double\(([\d.]+)::double precision\)", search) == {
        contract.DBSF_SPREAD
    }
    distribution = _flat(catalog["function:dbsf_distribution"])
    assert _numbers(r"v_spread := ([\d.]+)::double precision \* std", distribution) == {
        contract.DBSF_SPREAD
    }
    assert _numbers(
        r"WHEN NOT \(v_[lv]hi > v_[lv]lo\) THEN ([\d.]+)::double precision", search
    ) == {contract.DBSF_DEGENERATE}
    # Weights: a request's between 0 and the maximum, a model's default above 0 up to it, and
    # 1.0 each without either; the sources the explanation names.
    assert _numbers(r"p_(?:lexical|vector)_weight <= (\d+)", search) == {contract.MAX_WEIGHT}
    register = _flat(catalog["function:register_model"])
    assert _numbers(r"p_(?:lexical|vector)_weight <= (\d+)", register) == {contract.MAX_WEIGHT}
    checks = catalog["check:embedding_models"]
    assert _numbers(r"(?:lexical|vector)_weight <= \(?(\d+)", checks) == {contract.MAX_WEIGHT}
    assert _numbers(r"v_w[lv] := ([\d.]+)::double precision", search) == {contract.DEFAULT_WEIGHT}
    assert _numbers(r"coalesce\(p_(?:lexical|vector)_weight, ([\d.]+)\)", register) == {
        contract.DEFAULT_WEIGHT
    }
    for variable in ("v_source", "v_fusion_source"):
        sources = set(re.findall(variable + r" := '(\w+)'", search))
        assert sources == set(contract.WEIGHT_SOURCES)
    assert f"p_fusion NOT IN ({fusions})" in _flat(catalog["function:register_model"])
    checks = catalog["check:embedding_models"]
    stored = re.search(r"fusion = ANY \(ARRAY\[([^\]]*)\]\)", checks)
    assert stored is not None
    assert re.findall(r"'(\w+)'::text", stored[1]) == list(contract.FUSIONS)


def test_the_staleness_and_intent_rules_are_the_contracts(catalog: dict[str, str]) -> None:
    search = _flat(catalog["function:search"])
    assert (
        "c.source_digest <> c.content_digest OR c.vector_generation < c.lexical_generation"
        in search
    )
    digest, other = b"a" * 32, b"b" * 32
    assert not contract.is_stale(
        source_digest=digest, content_digest=digest, vector_generation=2, lexical_generation=2
    )
    assert contract.is_stale(
        source_digest=other, content_digest=digest, vector_generation=2, lexical_generation=2
    )
    assert contract.is_stale(
        source_digest=digest, content_digest=digest, vector_generation=1, lexical_generation=2
    )
    # search() takes the client's semantic argument and records the client's intent for it.
    wants = re.search(r"v_wants_vector := p_mode <> '(\w+)' AND p_semantic <> '(\w+)';", search)
    assert wants is not None
    intent = re.search(
        r"v_intent := CASE WHEN NOT v_wants_vector THEN '(\w+)' WHEN p_mode = '(\w+)' OR"
        r" p_semantic = '(\w+)' THEN '(\w+)' ELSE '(\w+)' END",
        search,
    )
    assert intent is not None

    def sql_intent(mode: str, semantic: str) -> str:
        if not (mode != wants[1] and semantic != wants[2]):
            return intent[1]
        return intent[4] if mode == intent[2] or semantic == intent[3] else intent[5]

    for mode in ("hybrid", "lexical", "vector"):
        for semantic in ("optional", "required", "disabled"):
            assert sql_intent(mode, semantic) == contract.semantic_intent(mode, semantic)


# ---------------------------------------------------------------------------- the errors


def _raised_codes(catalog: dict[str, str]) -> set[str]:
    codes: set[str] = set()
    for key, text in catalog.items():
        if key.startswith("function:"):
            codes.update(re.findall(r"ERRCODE\s*=\s*'(PR\d{3})'", text))
            codes.update(re.findall(r"RAISE\s+(?:EXCEPTION\s+)?SQLSTATE\s+'(PR\d{3})'", text))
    return codes


def test_every_schema_sqlstate_has_a_typed_error_and_every_mapped_one_is_raised(
    catalog: dict[str, str],
) -> None:
    raised = _raised_codes(catalog)
    assert raised, "no PR SQLSTATE found in the installed functions"
    mapped = set(db_errors.schema_errors())
    assert raised - mapped == set(), "raised by the schema but not translated"
    assert mapped - raised == set(), "translated but raised nowhere in the schema"


def test_the_rule_messages_shown_as_they_are_are_the_schemas(
    catalog: dict[str, str], conn: psycopg.Connection[Any]
) -> None:
    """PR010, PR011 and PR016 carry fixed texts that state the broken rule; exactly those are
    shown (an error says what to fix, not only "invalid input"), every one of them is raised,
    and a text under these codes that is not one of them is replaced by the class's message.
    PR016's texts are the contract's, and the only texts raised under it."""
    fusion_state = contract.INVALID_FUSION_SQLSTATE
    raised: set[str] = set()
    fusion_texts: set[str] = set()
    whats: set[str] = set()
    for key, text in catalog.items():
        if not key.startswith("function:"):
            continue
        flat = _flat(text)
        raised.update(re.findall(r"ERRCODE = 'PR01[01]', MESSAGE = '([^']*)'(?! \|\|)", flat))
        fusion_texts.update(
            re.findall(rf"ERRCODE = '{fusion_state}', MESSAGE = '([^']*)'(?! \|\|)", flat)
        )
        whats.update(re.findall(r"check_identifier\(\w+, '(\w+)'\)", flat))
    assert fusion_texts == set(contract.FUSION_ERRORS)
    raised |= fusion_texts
    assert "'invalid ' || p_what" in _flat(catalog["function:check_identifier"])
    assert whats == {"workspace", "project", "purpose"}
    shown = db_errors.rule_messages()
    assert shown == raised | {f"invalid {w}" for w in whats}

    # Through the one translation: the rule as written, the identifier rule spelled out,
    # and an unknown text under the same code hidden.
    def caught(statement: str) -> Exception:
        with pytest.raises(psycopg.Error) as info, acting_as(conn, "adam"):
            conn.execute(statement)
        return db_errors.translate(info.value)

    bad = caught("SELECT pyretrieve.create_workspace('No/Such')")
    assert str(bad) == contract.identifier_error("workspace")
    rule = caught("SELECT pyretrieve.register_model('m1', 0)")
    assert str(rule) == "dimension must be between 1 and 2000"
    forged = caught(
        "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'row 42 says hello'; END $$"
    )
    assert str(forged) == "invalid input"
    fusion = caught("SELECT pyretrieve.register_model('m1', 3, p_fusion => 'rrf2')")
    assert isinstance(fusion, InvalidFusion)
    assert str(fusion) == contract.FUSION_ERROR
    forged_fusion = caught(
        f"DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '{fusion_state}',"
        " MESSAGE = 'model m1 is secret'; END $$"
    )
    assert isinstance(forged_fusion, InvalidFusion)
    assert str(forged_fusion) == InvalidFusion.default_message


# ------------------------------------------------------------------------- tool discovery


def test_the_discovery_pool_and_candidates_are_the_clients(catalog: dict[str, str]) -> None:
    discover = catalog["function:discover_tools"]
    assert _numbers(r"c_pool constant integer := (\d+);", discover) == {select.POOL}
    assert _numbers(r"c_candidates constant integer := (\d+);", discover) == {select.CANDIDATES}
    # Both reach search(): the pool as its limit, the candidates as each leg's cap.
    assert "p_limit => c_pool" in _flat(discover)
    assert "p_candidate_limit => c_candidates" in _flat(discover)


def test_the_vector_index_line_and_search_labels_are_the_contracts(
    catalog: dict[str, str],
) -> None:
    maintain = catalog["function:maintain_vector_indexes"]
    assert f"p_min_rows integer DEFAULT {contract.VECTOR_INDEX_MIN_ROWS}," in maintain
    # The exact leg and the indexed leg each label their rows with one of the contract's.
    labels = re.findall(r"'(\w+)'::text\s+FROM top t", catalog["function:vector_candidates"])
    labels += re.findall(
        r"'(\w+)'::text\s+FROM top t", catalog["function:approximate_vector_candidates"]
    )
    assert sorted(labels) == sorted(contract.VECTOR_SEARCHES)
    # The client parses the label into its enum: the same values, in the contract's order.
    assert [s.value for s in VectorSearch] == list(contract.VECTOR_SEARCHES)


def test_the_scope_indexes_options_and_ef_search_are_the_contracts(
    catalog: dict[str, str],
) -> None:
    """The options every scope index is built (and rebuilt) with, as reloptions spells them,
    and the ef_search of the indexed leg."""
    options = re.findall(r"'(\w+=\d+)'", catalog["function:vector_index_options"])
    assert options == [f"{key}={value}" for key, value in contract.VECTOR_INDEX_OPTIONS]
    approximate = catalog["function:approximate_vector_candidates"]
    assert _numbers(r"set_config\('hnsw.ef_search', '(\d+)'", approximate) == {
        contract.VECTOR_INDEX_EF_SEARCH
    }
