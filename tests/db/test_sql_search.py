"""``pyretrieve.search(...)`` (SQL) and the Python ranker give the same order and the same floats.

The property test builds a random small corpus in a fresh scope per example (bodies from a
small vocabulary so lexical scores tie, identical bodies at two classifications so content
digests tie, observed_at spread over and beyond the grant's max_age, random 8-d embeddings,
some of them stale), then, in ONE transaction as the principal, calls authorize, the candidate
functions and fragments() itself, ranks with :func:`pyretrieve.ranking.rank`, and calls
``pyretrieve.search`` with the same arguments. Both see the same evaluation time (``now()`` is
the transaction's start), so every score must be equal, not just close.

The contract property goes further: in one transaction it runs ``pyretrieve.search`` and then
the client's own request path (``Retriever``), across every mode, semantic intent (``semantic``
/ ``p_semantic``), degradation (stale, missing embedding, unknown model, corrupt embedding, a
vector leg that fails, a disabling or a requiring policy), weighting (zero included), candidate
limit and limit, and compares the WHOLE explanation document of every result, as canonical
JSON, byte for byte; the omissions the client reports against the rows a wider SQL search
returns past the limit; the decisions both recorded, semantic intent included; and, where a
request is refused, the typed error both sides raise.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row

from pyretrieve import contract, ranking
from pyretrieve.client import Retriever, build_request
from pyretrieve.db.errors import translate
from pyretrieve.errors import PyretrieveError, SemanticRequired
from pyretrieve.types import (
    DegradationReason,
    Scope,
    SearchResult,
    SemanticStatus,
    Weights,
    canonical_json,
)
from pyretrieve.vectors import canonical_embedding, embedding_digest, to_pgvector_text
from tests.conftest import (
    Database,
    Server,
    acting_as,
    at_second_wall,
    create_database,
    drop_database,
    role,
    rolled_back,
    session_set,
)
from tests.db.seed import grant, sha

WS = "prop"
MODEL = "h8"
DIM = 8
MODEL_WEIGHTS = (0.7, 1.3)
MODEL_FUSION = "dbsf"
VOCAB = ["ledger", "audit", "quarterly", "balance", "journal", "closing", "review"]
QUERY_WORDS = [*VOCAB, "the", "zebra"]  # a stop word and a word no body holds
CLASSIFICATIONS = ["public", "internal", "confidential"]  # alice's ceiling: internal
_PROJECTS = itertools.count(1)


@dataclass(frozen=True)
class Doc:
    words: tuple[str, ...]
    classification: str
    age_fraction: float  # age as a fraction of max_age; above 1.0 is too old to see
    embedding: tuple[float, ...] | None
    stale: bool


@dataclass(frozen=True)
class Case:
    max_age_hours: int
    docs: tuple[Doc, ...]
    query: str
    query_embedding: tuple[float, ...]
    mode: str
    limit: int
    # How the query's vector is given: "ok", "none" (no embedding), "unknown_model",
    # "wrong_dimension" (a corrupt one) or "failed" (the vector function fails: its EXECUTE
    # privilege is revoked for the example's transaction).
    vector_input: str = "ok"
    # "ranked" (max_age), "nomax", "nosem" (semantic disabled) or "strict" (required).
    purpose: str = "ranked"
    # None: neither side gives weights, so both use the model's registered defaults (or 1.0
    # each for an unknown model).
    weights: tuple[float, float] | None = (1.0, 1.0)
    semantic: str = "optional"
    candidate_limit: int | None = None
    # None: the model's registered fusion (or RRF for an unknown model).
    fusion: str | None = "rrf"

    @property
    def model(self) -> str:
        return "no-such-model" if self.vector_input == "unknown_model" else MODEL

    @property
    def embedding(self) -> tuple[float, ...] | None:
        if self.vector_input == "none":
            return None
        if self.vector_input == "wrong_dimension":
            return (1.0, -2.0, 0.5)  # valid, but not the model's dimension
        return self.query_embedding


def _nonzero(parts: tuple[list[int], int, int]) -> list[int]:
    values, index, value = parts
    values[index] = value
    return values


# Small integer components, so distances tie; one component is forced non-zero.
_vector = st.tuples(
    st.lists(st.integers(-2, 2), min_size=DIM, max_size=DIM),
    st.integers(0, DIM - 1),
    st.sampled_from([-2, -1, 1, 2]),
).map(_nonzero)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    docs = []
    for _ in range(draw(st.integers(1, 8))):
        words = tuple(draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=5)))
        embedded = draw(st.booleans()) or draw(st.booleans())
        docs.append(
            Doc(
                words=words,
                classification=draw(st.sampled_from(CLASSIFICATIONS)),
                age_fraction=draw(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.5])),
                embedding=tuple(float(v) for v in draw(_vector)) if embedded else None,
                stale=embedded and draw(st.sampled_from([False] * 9 + [True])),
            )
        )
        if draw(st.integers(0, 3)) == 0:
            # The same body at another classification: equal scores, equal content digest.
            twin = "public" if docs[-1].classification != "public" else "internal"
            docs.append(Doc(words, twin, docs[-1].age_fraction, docs[-1].embedding, False))
    return Case(
        max_age_hours=draw(st.integers(1, 72)),
        docs=tuple(docs),
        query=" ".join(draw(st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=3))),
        query_embedding=tuple(float(v) for v in draw(_vector)),
        mode=draw(st.sampled_from(["hybrid", "hybrid", "lexical", "vector"])),
        limit=draw(st.integers(1, 10)),
        fusion=draw(st.sampled_from(["rrf", "dbsf"])),
    )


@st.composite
def contract_cases(draw: st.DrawFn) -> Case:
    """:func:`cases` with every way the semantic leg can degrade, every purpose and weights."""
    case = draw(cases())
    return Case(
        max_age_hours=case.max_age_hours,
        docs=case.docs,
        query=case.query,
        query_embedding=case.query_embedding,
        mode=case.mode,
        limit=case.limit,
        vector_input=draw(
            st.sampled_from(
                ["ok", "ok", "ok", "none", "unknown_model", "wrong_dimension", "failed"]
            )
        ),
        purpose=draw(st.sampled_from(["ranked", "ranked", "nomax", "nosem", "strict"])),
        weights=draw(
            st.one_of(
                st.none(),
                st.tuples(
                    st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0]),
                    st.sampled_from([0.0, 0.5, 1.0, 1.0, 3.0]),
                ),
            )
        ),
        semantic=draw(st.sampled_from(["optional", "optional", "required", "disabled"])),
        candidate_limit=draw(st.sampled_from([None, None, None, 1, 2, 5])),
        fusion=draw(st.sampled_from([None, case.fusion])),
    )


# Each degradation, how a case provokes it, and what the semantic status must then say: the
# reason (or "refused" when the request or the grant requires the leg).
DEGRADATIONS = {
    "missing_embedding": ({"vector_input": "none"}, "missing_embedding"),
    "unknown_model": ({"vector_input": "unknown_model"}, "unavailable"),
    "corrupt": ({"vector_input": "wrong_dimension"}, "corrupt"),
    "failed": ({"vector_input": "failed"}, "unavailable"),
    "stale": ({}, "stale"),
    "disabled_by_policy": ({"purpose": "nosem"}, "disabled"),
    "required_by_request": ({"vector_input": "failed", "semantic": "required"}, "refused"),
    "required_by_grant": ({"vector_input": "none", "purpose": "strict"}, "refused"),
}


@st.composite
def degraded_cases(draw: st.DrawFn, kind: str) -> Case:
    """A hybrid case whose query matches the corpus (so there are results to explain) and
    whose vector leg degrades as ``kind`` says."""
    case = draw(cases())
    overrides, _ = DEGRADATIONS[kind]
    # The first fragment is visible to alice, fresh, and embedded (stale for "stale").
    first = case.docs[0]
    vector = first.embedding or (1.0, *[0.0] * (DIM - 1))
    others = tuple(d for d in case.docs[1:] if d.words != first.words)
    docs = (Doc(first.words, "public", 0.0, vector, kind == "stale"), *others)
    fields = {
        **vars(case),
        "docs": docs,
        "mode": "hybrid",
        "query": " ".join((docs[0].words[0], *case.query.split()[:1])),
        "purpose": draw(st.sampled_from(["ranked", "nomax"])),
        "limit": draw(st.integers(1, 4)),
        **overrides,
    }
    return Case(**fields)


# --------------------------------------------------------------------------------- setup


@pytest.fixture(scope="module")
def pdb(server: Server, template_db: str) -> Iterator[Database]:
    name = create_database(server, template_db)
    try:
        database = Database(server=server, name=name)
        with database.connect(autocommit=True) as c, acting_as(c, "adam"):
            c.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
            # Default weights other than 1.0, so a request without weights shows whose they are.
            c.execute(
                "SELECT pyretrieve.register_model(%s, %s, %s, %s, %s)",
                (MODEL, DIM, *MODEL_WEIGHTS, MODEL_FUSION),
            )
        yield database
    finally:
        drop_database(server, name)


@pytest.fixture(scope="module")
def pconn(pdb: Database) -> Iterator[psycopg.Connection[Any]]:
    with pdb.connect(autocommit=True) as c:
        yield c


def build_scope(conn: psycopg.Connection[Any], case: Case) -> str:
    """A fresh project holding the case's corpus; returns the project id."""
    project = f"p{next(_PROJECTS)}"
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, project))
        grant(
            conn,
            role("alice"),
            WS,
            project,
            "ranked",
            "internal",
            max_age=f"{case.max_age_hours} hours",
        )
        grant(conn, role("alice"), WS, project, "nomax", "internal")
        grant(conn, role("alice"), WS, project, "nosem", "internal", semantic_policy="disabled")
        grant(conn, role("alice"), WS, project, "strict", "internal", semantic_policy="required")
        grant(conn, role("wally"), WS, project, "ingest", "restricted")
    with acting_as(conn, "wally"):
        for doc in case.docs:
            body = " ".join(doc.words)
            row = conn.execute(
                "SELECT pyretrieve.put_fragment(p_workspace => %s, p_project => %s,"
                " p_body => %s, p_classification => %s::pyretrieve.classification,"
                " p_observed_at => now() - make_interval(secs => %s)) AS id",
                (
                    WS,
                    project,
                    body,
                    doc.classification,
                    doc.age_fraction * case.max_age_hours * 3600.0,
                ),
            ).fetchone()
            assert row is not None
            if doc.embedding is not None:
                source = body + " (before an edit)" if doc.stale else body
                conn.execute(
                    "SELECT pyretrieve.put_embedding(%s, %s, %s, %s, %s::public.vector, %s)",
                    (
                        WS,
                        project,
                        row["id"],
                        MODEL,
                        to_pgvector_text(canonical_embedding(doc.embedding)),
                        sha(source),
                    ),
                )
    return project


# ------------------------------------------------------------------ the two computations


def python_ranking(
    conn: psycopg.Connection[Any], project: str, purpose: str, case: Case
) -> SearchResult | None:
    """The client's steps by hand, in the current transaction; None when semantic is
    required (vector mode) but the vector leg degraded."""
    vector = canonical_embedding(case.query_embedding)
    wants_vector = case.mode != "lexical"
    digest = embedding_digest(vector) if wants_vector else None
    intent = {"lexical": "disabled", "vector": "required", "hybrid": "optional"}[case.mode]
    decision = conn.execute(
        "SELECT * FROM pyretrieve.authorize(%s, %s, %s, %s, %s, %s, %s)",
        (WS, project, purpose, sha(case.query), intent, digest, case.limit),
    ).fetchone()
    assert decision is not None
    cap = decision["candidate_limit"]
    lexical = None
    if case.mode != "vector":
        lexical = conn.execute(
            "SELECT * FROM pyretrieve.lexical_candidates(%s, %s, %s)",
            (decision["decision_id"], case.query, cap),
        ).fetchall()
    vector_rows = None
    semantic = SemanticStatus.not_requested()
    if wants_vector:
        rows = conn.execute(
            "SELECT * FROM pyretrieve.vector_candidates(%s, %s, %s::public.vector, %s)",
            (decision["decision_id"], MODEL, to_pgvector_text(vector), cap),
        ).fetchall()
        stale = [
            r
            for r in rows
            if r["source_digest"] != r["content_digest"]
            or r["vector_generation"] < r["lexical_generation"]
        ]
        if stale:
            if case.mode == "vector":
                return None
            semantic = SemanticStatus.degraded(
                DegradationReason.STALE,
                {"model": MODEL, "stale_candidates": len(stale), "candidates": len(rows)},
            )
        else:
            vector_rows = rows
            semantic = SemanticStatus.used({"model": MODEL})
    ids = sorted({r["fragment_id"] for r in (lexical or []) + (vector_rows or [])})
    records = conn.execute(
        "SELECT * FROM pyretrieve.fragments(%s, %s::uuid[])", (decision["decision_id"], ids)
    ).fetchall()
    weights = (
        None if case.weights is None else Weights(lexical=case.weights[0], vector=case.weights[1])
    )
    source = "request"
    if weights is None:
        weights, source = Weights(lexical=MODEL_WEIGHTS[0], vector=MODEL_WEIGHTS[1]), "model"
    return ranking.rank(
        decision=decision,
        lexical=lexical,
        vector=vector_rows,
        records=records,
        limit=case.limit,
        semantic=semantic,
        query_digest=sha(case.query),
        embedding_digest=digest,
        weights=weights,
        fusion=case.fusion or MODEL_FUSION,
        weights_source=source,
        weights_model=MODEL if source == "model" else None,
        fusion_source="request" if case.fusion else "model",
        fusion_model=None if case.fusion else MODEL,
    )


# What one side answered: its rows (SQL) or result (client), or the code of the typed error
# it raised.
SqlOutcome = list[dict[str, Any]] | str
ClientOutcome = SearchResult | str
SEMANTIC_REQUIRED = SemanticRequired.code


def sql_search(
    conn: psycopg.Connection[Any],
    project: str,
    purpose: str,
    case: Case,
    *,
    limit: int | None = None,
    decision: dict[str, Any] | None = None,
) -> SqlOutcome:
    """pyretrieve.search in a savepoint of the current transaction, rolled back afterwards (a
    transaction holds one decision, so the Python path can then authorize at the same time);
    the typed error's code, as the client would raise it, when it raised. ``decision``, when
    given, receives the audit row it recorded."""
    embedding = case.embedding
    vector = None if embedding is None else to_pgvector_text(canonical_embedding(embedding))
    try:
        with rolled_back(conn):
            rows = conn.execute(
                "SELECT * FROM pyretrieve.search(p_workspace => %s, p_project => %s,"
                " p_purpose => %s, p_query => %s, p_embedding => %s::public.vector,"
                " p_model => %s, p_limit => %s, p_mode => %s, p_lexical_weight => %s,"
                " p_vector_weight => %s, p_semantic => %s, p_candidate_limit => %s,"
                " p_fusion => %s)",
                (
                    WS,
                    project,
                    purpose,
                    case.query,
                    vector,
                    case.model,
                    case.limit if limit is None else limit,
                    case.mode,
                    *(case.weights or (None, None)),
                    case.semantic,
                    case.candidate_limit,
                    case.fusion,
                ),
            ).fetchall()
            if decision is not None:
                decision.update(recorded_decision(conn, project))
        return rows
    except psycopg.Error as exc:
        return translate(exc).code


def recorded_decision(conn: psycopg.Connection[Any], project: str) -> dict[str, Any]:
    """What the transaction's decision recorded, read at the second wall (the role is restored
    when the caller's savepoint or transaction ends)."""
    conn.execute("SET LOCAL ROLE pyretrieve_api")
    row = conn.execute(
        "SELECT decision_id, principal, purpose, grant_id, ceiling, max_age, semantic_policy, requested_limit,"
        " candidate_limit, query_digest, semantic_intent, embedding_digest, evaluated_at"
        " FROM pyretrieve.decisions WHERE project_id = %s AND xact_id = pg_current_xact_id()",
        (project,),
    ).fetchone()
    assert row is not None
    return dict(row)


def client_search(conn: psycopg.Connection[Any], case: Case, project: str) -> ClientOutcome:
    """The client's own request path, in the current transaction (which acts as alice); the
    typed error's code when it raised one."""
    try:
        request = build_request(
            case.query,
            scope=Scope(workspace=WS, project=project, purpose=case.purpose),
            mode=case.mode,
            semantic=case.semantic,
            limit=case.limit,
            candidate_limit=case.candidate_limit,
            embedding=None if case.embedding is None else list(case.embedding),
            model=case.model,
            weights=None
            if case.weights is None
            else Weights(lexical=case.weights[0], vector=case.weights[1]),
            fusion=case.fusion,
        )
        # A savepoint: a refused request leaves the example's transaction usable.
        with conn.transaction():
            return Retriever(conn)._execute_in_transaction(conn, request)
    except PyretrieveError as exc:
        return exc.code


@contextlib.contextmanager
def vector_leg_failing(conn: psycopg.Connection[Any], case: Case) -> Iterator[None]:
    """For a "failed" case, the vector function refuses alice until the block ends (its owner
    revokes the principals' EXECUTE in the current transaction, which is rolled back)."""
    if case.vector_input != "failed":
        yield
        return
    with rolled_back(conn):
        with at_second_wall(conn):
            conn.execute(
                "REVOKE EXECUTE ON FUNCTION"
                " pyretrieve.vector_candidates(uuid, text, public.vector, integer)"
                " FROM pyretrieve_reader"
            )
        yield


def _differences(got: Any, want: Any, path: str = "") -> list[str]:
    """The paths where two JSON documents differ, in value or in JSON type."""
    if isinstance(got, dict) and isinstance(want, dict):
        out = [f"{path}.{k}: missing on one side" for k in sorted(set(got) ^ set(want))]
        for key in sorted(set(got) & set(want)):
            out += _differences(got[key], want[key], f"{path}.{key}")
        return out
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return [
            d
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for d in _differences(g, w, f"{path}[{i}]")
        ]
    if type(got) is not type(want) or got != want:
        return [f"{path}: {got!r} != {want!r}"]
    return []


def assert_same_documents(
    result: ClientOutcome, rows: SqlOutcome, sql_decision: dict[str, Any]
) -> None:
    """Every result's whole explanation, byte for byte, and the row's columns agree with it.

    The two sides ran in one transaction, so they share the evaluation time, but each recorded
    a decision of its own (the SQL one was rolled back with its savepoint): each document must
    name its own decision, and, with the SQL decision's id read as the client's, the documents
    must be the same bytes. A refused request is refused with the same typed error."""
    if isinstance(result, str) or isinstance(rows, str):
        assert result == rows
        return
    sql_id = str(sql_decision["decision_id"])
    client_id = str(result.decision.decision_id)
    assert sql_decision["evaluated_at"] == result.decision.evaluated_at
    documents = []
    for row in rows:
        document = dict(row["explanation"])
        assert document["decision_id"] == sql_id
        document["decision_id"] = client_id
        documents.append(document)
    for got, want in zip(documents, result.results, strict=True):
        # The differing leaves first (a readable failure), then the whole documents' bytes.
        assert _differences(got, want.to_plain()) == []
    assert [canonical_json(d) for d in documents] == [
        canonical_json(r.to_plain()) for r in result.results
    ]
    for row, res in zip(rows, result.results, strict=True):
        assert (row["rank"], row["fragment_id"], row["content_digest"], row["body"]) == (
            res.fused_rank,
            res.fragment_id,
            res.record.content_digest,
            res.record.body,
        )
        assert (row["fused_score"], row["freshness"], row["final_score"], row["confidence"]) == (
            res.fused_score,
            res.freshness,
            res.final_score,
            res.confidence,
        )


_PER_TRANSACTION = ("decision_id", "retrieved_at", "age_us")


def _without_transaction_fields(value: Any) -> Any:
    """An explanation with what differs between two transactions blanked: the decision, its
    time and the ages measured from it."""
    if isinstance(value, dict):
        return {
            k: ("*" if k in _PER_TRANSACTION else _without_transaction_fields(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_without_transaction_fields(v) for v in value]
    return value


def assert_same(result: ClientOutcome, rows: SqlOutcome) -> None:
    """Same ids, order and floats, and the same explanation documents but for what differs
    between two transactions: the decision id, its time and the ages."""
    if isinstance(result, str) or isinstance(rows, str):
        assert result == rows
        return
    assert [canonical_json(_without_transaction_fields(row["explanation"])) for row in rows] == [
        canonical_json(_without_transaction_fields(r.to_plain())) for r in result.results
    ]
    for row, res in zip(rows, result.results, strict=True):
        assert row["fragment_id"] == res.fragment_id
        assert (row["fused_score"], row["freshness"], row["final_score"], row["confidence"]) == (
            res.fused_score,
            res.freshness,
            res.final_score,
            res.confidence,
        )


# ---------------------------------------------------------------------------- properties


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases())
def test_sql_search_equals_the_python_ranker_in_one_transaction(
    pconn: psycopg.Connection[Any], case: Case
) -> None:
    project = build_scope(pconn, case)
    sql_decision: dict[str, Any] = {}
    with acting_as(pconn, "alice"):
        got = sql_search(pconn, project, "ranked", case, decision=sql_decision)
        ranked = python_ranking(pconn, project, "ranked", case)
        expected = SEMANTIC_REQUIRED if ranked is None else ranked
        # Both computations saw the same decision time (now() of the one transaction); the
        # second wall shows the transaction's one decision.
        pconn.execute("SET LOCAL ROLE pyretrieve_api")
        times = pconn.execute(
            "SELECT count(DISTINCT evaluated_at) AS n, count(*) AS decisions"
            " FROM pyretrieve.decisions WHERE project_id = %s",
            (project,),
        ).fetchone()
    assert_same_documents(expected, got, sql_decision)
    event(
        f"mode={case.mode} results={0 if isinstance(got, str) else min(len(got), 3)}+"
        f" omitted={bool(ranked and ranked.omissions)}"
    )
    event(f"semantic={'raised' if ranked is None else ranked.semantic.status.value}")
    assert times is not None
    assert times["n"] == 1
    assert times["decisions"] == 1


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases())
def test_sql_search_equals_the_client_without_max_age(
    pconn: psycopg.Connection[Any], case: Case
) -> None:
    project = build_scope(pconn, case)
    retriever = Retriever(pconn, principal=role("alice"))
    scope_args: dict[str, Any] = {
        "mode": case.mode,
        "embedding": list(case.query_embedding),
        "model": MODEL,
        "limit": case.limit,
        "weights": None
        if case.weights is None
        else Weights(lexical=case.weights[0], vector=case.weights[1]),
        "fusion": case.fusion,
    }
    client: ClientOutcome
    try:
        client = retriever.search(
            case.query, scope=Scope(workspace=WS, project=project, purpose="nomax"), **scope_args
        )
    except SemanticRequired as exc:
        client = exc.code
    with acting_as(pconn, "alice"):
        rows = sql_search(pconn, project, "nomax", case)
    assert_same(client, rows)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=contract_cases())
def test_sql_search_and_the_client_explain_byte_identically(
    pconn: psycopg.Connection[Any], case: Case
) -> None:
    """One contract: in one transaction (one evaluation time), pyretrieve.search() and the
    client's request path give the same whole explanation document for every result, as
    canonical JSON, in every mode, semantic intent, purpose, weighting, candidate limit and
    degradation, or the same typed error; the client's omissions are the rows a wider SQL search
    returns past the limit; and both decisions record the same thing, semantic intent
    included."""
    assert_contract(pconn, case)


def assert_contract(pconn: psycopg.Connection[Any], case: Case) -> ClientOutcome:
    """The contract property for one case; returns what the client answered."""
    project = build_scope(pconn, case)
    sql_decision: dict[str, Any] = {}
    client_decision: dict[str, Any] = {}
    with acting_as(pconn, "alice"), vector_leg_failing(pconn, case):
        rows = sql_search(pconn, project, case.purpose, case, decision=sql_decision)
        wider = sql_search(pconn, project, case.purpose, case, limit=100)
        result = client_search(pconn, case, project)
        if not isinstance(result, str):
            client_decision = recorded_decision(pconn, project)
    assert_same_documents(result, rows, sql_decision)
    if isinstance(result, str):
        event(f"refused: {result}")
        return result
    assert not isinstance(rows, str)
    assert not isinstance(wider, str)
    semantic = result.semantic
    event(f"mode={case.mode} semantic={case.semantic} -> {semantic.status.value}")
    event(f"fusion={result.fusion.method.value} from {result.fusion.fusion_source.value}")
    event(f"weights from {result.fusion.source.value}")
    event(f"reason={semantic.reason and semantic.reason.value} results={bool(rows)}")
    event(f"omitted={bool(result.omissions)}")
    if case.vector_input == "failed" and semantic.status.value == "degraded":
        # The leg failed (or a disabling policy kept it from running) and, since the documents
        # agreed, both sides named the same cause: the privilege the function lacked.
        assert semantic.reason in (DegradationReason.UNAVAILABLE, DegradationReason.DISABLED)
        if semantic.reason is DegradationReason.UNAVAILABLE:
            assert semantic.evidence == {"model": MODEL, "cause": "VES_MEMORY_ACCESS_DENIED"}
    # The wider search holds the results, then exactly the omissions, in order.
    assert [r["fragment_id"] for r in wider[: len(rows)]] == [r["fragment_id"] for r in rows]
    past = wider[len(rows) :]
    assert [
        (r["rank"], r["fragment_id"], r["content_digest"], r["freshness"], r["confidence"])
        for r in past
    ] == [
        (o.position, o.fragment_id, o.content_digest, o.freshness, o.confidence)
        for o in result.omissions
    ]
    assert [len(r["body"].encode("utf-8")) for r in past] == [
        o.byte_estimate for o in result.omissions
    ]
    assert client_decision.pop("decision_id") == result.decision.decision_id
    sql_decision.pop("decision_id")
    assert client_decision == sql_decision
    return result


# ------------------------------------------------------------------------------ examples


@pytest.fixture
def fixed(pconn: psycopg.Connection[Any]) -> str:
    case = Case(
        max_age_hours=24,
        docs=(
            Doc(("ledger", "audit"), "internal", 0.1, (1.0, 0, 0, 0, 0, 0, 0, 0), False),
            Doc(("ledger",), "public", 0.5, (0, 1.0, 0, 0, 0, 0, 0, 0), False),
            Doc(("journal",), "confidential", 0.0, (1.0, 0, 0, 0, 0, 0, 0, 0), False),
        ),
        query="ledger",
        query_embedding=(1.0, 0, 0, 0, 0, 0, 0, 0),
        mode="hybrid",
        limit=5,
    )
    project = build_scope(pconn, case)
    with acting_as(pconn, "adam"):
        grant(pconn, role("alice"), WS, project, "strict", "internal", semantic_policy="required")
    return project


def _search(
    conn: psycopg.Connection[Any], project: str, purpose: str, *, keep: bool = False, **kw: Any
) -> list[Any]:
    """pyretrieve.search as the current role. A transaction holds one decision, so unless
    ``keep`` the call runs in a savepoint that is rolled back, and the next call may search
    again in the same transaction."""
    args = {
        "p_workspace": WS,
        "p_project": project,
        "p_purpose": purpose,
        "p_query": "ledger",
        "p_embedding": to_pgvector_text(canonical_embedding([1.0, 0, 0, 0, 0, 0, 0, 0])),
        "p_model": MODEL,
        "p_limit": 5,
        "p_mode": "hybrid",
        # RRF at equal weights, whatever the model's defaults: a degraded search must keep the
        # lexical order (DBSF orders equal BM25 scores by identity, not by lexical rank) and
        # the same confidence bits (other weights round differently).
        "p_fusion": "rrf",
        "p_lexical_weight": 1.0,
        "p_vector_weight": 1.0,
        **kw,
    }
    names = ", ".join(f"{k} => %({k})s" for k in args)
    names = names.replace("%(p_embedding)s", "%(p_embedding)s::public.vector")
    cur = conn.cursor(row_factory=dict_row)
    if keep:
        return cur.execute(f"SELECT * FROM pyretrieve.search({names})", args).fetchall()
    with rolled_back(conn):
        rows: list[Any] = cur.execute(f"SELECT * FROM pyretrieve.search({names})", args).fetchall()
    return rows


def _both_documents(conn: psycopg.Connection[Any], project: str) -> tuple[list[str], list[str]]:
    """The client's and pyretrieve.search()'s explanations of the fixed query (purpose nomax,
    so no freshness depends on the moment), each as canonical JSON without the fields that
    differ between two transactions."""
    result = Retriever(conn, principal=role("alice")).search(
        "ledger",
        scope=Scope(workspace=WS, project=project, purpose="nomax"),
        embedding=[1.0, 0, 0, 0, 0, 0, 0, 0],
        model=MODEL,
        limit=5,
        weights=Weights(lexical=1.0, vector=1.0),
        fusion="rrf",
    )
    with acting_as(conn, "alice"):
        rows = _search(conn, project, "nomax")
    return (
        [canonical_json(_without_transaction_fields(r.to_plain())) for r in result.results],
        [canonical_json(_without_transaction_fields(row["explanation"])) for row in rows],
    )


# Session settings that change how the server writes a value as text: floats rounded (15
# significant digits at 0, 2 at -15), dates and intervals in styles a text parser may not read.
_HOSTILE_TEXT_SETTINGS = (
    "extra_float_digits = 0",
    "extra_float_digits = -15",
    "DateStyle = 'SQL, DMY'",
    "DateStyle = 'German'",
    "IntervalStyle = 'iso_8601'",
    "IntervalStyle = 'sql_standard'",
)


@pytest.mark.parametrize("setting", _HOSTILE_TEXT_SETTINGS)
def test_a_sessions_text_settings_change_no_byte_of_a_search(
    pconn: psycopg.Connection[Any], fixed: str, setting: str
) -> None:
    """Attack: a session sets how the server writes values as text (rounded floats, dates and
    intervals in other styles). pyretrieve.search() and the client still explain every result
    byte for byte as under the default, and the client still reads its decision: no score or
    distance passes through text at the caller's precision, inside the search or on its way to
    the client, and no date or interval reaches the client in a style it cannot read."""
    expected = _both_documents(pconn, fixed)
    assert expected[0] == expected[1]
    assert any('"score":' in doc for doc in expected[1])
    retriever = Retriever(pconn, principal=role("alice"))
    with session_set(pconn, setting):
        assert _both_documents(pconn, fixed) == expected
        ranked = retriever.search(
            "ledger", scope=Scope(workspace=WS, project=fixed, purpose="ranked"), mode="lexical"
        )
    assert ranked.decision.max_age == timedelta(hours=24)
    assert ranked.results


def test_sql_search_denies_an_absent_and_a_foreign_scope_alike(
    pconn: psycopg.Connection[Any], fixed: str
) -> None:
    messages = set()
    for project, purpose in ((fixed, "billing"), ("nowhere", "ranked")):
        with pytest.raises(psycopg.Error) as info, acting_as(pconn, "alice"):
            _search(pconn, project, purpose)
        assert info.value.sqlstate == "PR001"
        messages.add(info.value.diag.message_primary)
    assert messages == {"access denied"}
    with pytest.raises(psycopg.Error) as info, acting_as(pconn, "bob"):
        _search(pconn, fixed, "ranked")
    assert info.value.sqlstate == "PR001"


def test_sql_search_degrades_or_raises_like_the_client(
    pconn: psycopg.Connection[Any], fixed: str
) -> None:
    with acting_as(pconn, "alice"):
        rows = _search(pconn, fixed, "ranked")
        assert [r["explanation"]["semantic"]["status"] for r in rows] == ["used"] * 2
        missing = _search(pconn, fixed, "ranked", p_embedding=None)
        assert {r["explanation"]["semantic"]["reason"] for r in missing} == {"missing_embedding"}
        unknown = _search(pconn, fixed, "ranked", p_model="no-such-model")
        assert {r["explanation"]["semantic"]["reason"] for r in unknown} == {"unavailable"}
        corrupt = _search(pconn, fixed, "ranked", p_embedding="[1,0,0]")
        assert {r["explanation"]["semantic"]["reason"] for r in corrupt} == {"corrupt"}
        lexical = _search(pconn, fixed, "ranked", p_mode="lexical")
        assert {r["explanation"]["semantic"]["status"] for r in lexical} == {"not_requested"}
    for degraded in (missing, unknown, corrupt):
        assert all(r["explanation"]["semantic"]["lowers_confidence"] for r in degraded)
        # Same order as the lexical-only run; confidence 0.75 times as high.
        assert [r["fragment_id"] for r in degraded] == [r["fragment_id"] for r in lexical]
        for got, base in zip(degraded, lexical, strict=True):
            assert got["confidence"] == base["confidence"] * 0.75
    with acting_as(pconn, "alice"):
        disabled = _search(pconn, fixed, "nosem")
        lexical = _search(pconn, fixed, "nosem", p_mode="lexical")
    assert {r["explanation"]["semantic"]["reason"] for r in disabled} == {"disabled"}
    assert all(r["explanation"]["modalities"]["vector"] is None for r in disabled)
    assert [r["fragment_id"] for r in disabled] == [r["fragment_id"] for r in lexical]
    for got, base in zip(disabled, lexical, strict=True):
        assert got["confidence"] == base["confidence"] * 0.75
    for purpose, kw in (
        ("strict", {"p_embedding": None}),
        ("ranked", {"p_mode": "vector", "p_model": "no-such-model"}),
        ("nosem", {"p_mode": "vector"}),
    ):
        with pytest.raises(psycopg.Error) as info, acting_as(pconn, "alice"):
            _search(pconn, fixed, purpose, **kw)
        assert info.value.sqlstate == "PR030"


def test_sql_search_records_the_clients_digests(pconn: psycopg.Connection[Any], fixed: str) -> None:
    vector = canonical_embedding([1.0, 0, 0, 0, 0, 0, 0, 0])
    with acting_as(pconn, "alice"):
        rows = _search(pconn, fixed, "ranked", keep=True)
        decision_id = UUID(rows[0]["explanation"]["decision_id"])
        pconn.execute("SET LOCAL ROLE pyretrieve_api")
        row = pconn.execute(
            "SELECT query_digest, embedding_digest, semantic_intent, requested_limit"
            " FROM pyretrieve.decisions WHERE decision_id = %s",
            (decision_id,),
        ).fetchone()
    assert row == {
        "query_digest": sha("ledger"),
        "embedding_digest": embedding_digest(vector),
        "semantic_intent": "optional",
        "requested_limit": 5,
    }
    assert rows[0]["explanation"]["semantic_query_digest"] == embedding_digest(vector).hex()
    # Only what alice may see: the confidential fragment is not there.
    assert all(r["explanation"]["fragment"]["workspace_id"] == WS for r in rows)
    assert {r["body"] for r in rows} == {"ledger audit", "ledger"}


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=False),
        min_size=1,
        max_size=16,
    ).filter(any)
)
def test_the_sql_embedding_digest_equals_the_clients(
    pconn: psycopg.Connection[Any], values: list[float]
) -> None:
    """authorize() records the same embedding digest whichever side computed it."""
    vector = canonical_embedding(values)
    with acting_as(pconn, "alice"):
        row = pconn.execute(
            "SELECT pyretrieve.embedding_digest(%s::public.vector) AS d",
            (to_pgvector_text(vector),),
        ).fetchone()
    assert row == {"d": embedding_digest(vector)}


def _intent_of(conn: psycopg.Connection[Any], rows: list[Any]) -> str:
    decision_id = UUID(rows[0]["explanation"]["decision_id"])
    with at_second_wall(conn):
        row = conn.execute(
            "SELECT semantic_intent FROM pyretrieve.decisions WHERE decision_id = %s",
            (decision_id,),
        ).fetchone()
    assert row is not None
    return str(row["semantic_intent"])


def test_sql_search_takes_the_clients_semantic_argument(
    pconn: psycopg.Connection[Any], fixed: str
) -> None:
    seen = {}
    for semantic in ("optional", "required", "disabled"):
        with acting_as(pconn, "alice"), rolled_back(pconn):
            rows = _search(pconn, fixed, "ranked", keep=True, p_semantic=semantic)
            seen[semantic] = (
                _intent_of(pconn, rows),
                {r["explanation"]["semantic"]["status"] for r in rows},
                {r["explanation"]["semantic_query_digest"] is None for r in rows},
            )
    assert seen == {
        "optional": ("optional", {"used"}, {False}),
        "required": ("required", {"used"}, {False}),
        "disabled": ("disabled", {"not_requested"}, {True}),
    }
    # Required: a leg that cannot run raises, as the client does; vector without semantic is
    # refused before anything is decided; so are an unknown semantic and ranking.
    for kw, state in (
        ({"p_semantic": "required", "p_embedding": None}, "PR030"),
        ({"p_semantic": "disabled", "p_mode": "vector"}, "PR010"),
        ({"p_semantic": "sometimes"}, "PR010"),
        ({"p_ranking": "tfidf", "p_mode": "vector"}, "PR010"),
        ({"p_candidate_limit": 0}, "PR010"),
        ({"p_model": "m" * 129}, "PR010"),
    ):
        with pytest.raises(psycopg.Error) as info, acting_as(pconn, "alice"):
            _search(pconn, fixed, "ranked", **kw)
        assert info.value.sqlstate == state, kw


def test_sql_search_caps_each_leg_at_the_candidate_limit(
    pconn: psycopg.Connection[Any], fixed: str
) -> None:
    with acting_as(pconn, "alice"):
        rows = _search(pconn, fixed, "ranked", p_candidate_limit=1, p_mode="vector")
    # One vector candidate only: the closest of the two visible fragments.
    assert [r["explanation"]["modalities"]["vector"]["rank"] for r in rows] == [1]


def test_a_failing_vector_leg_degrades_in_sql_as_in_the_client(
    pconn: psycopg.Connection[Any], fixed: str
) -> None:
    with acting_as(pconn, "alice"), rolled_back(pconn):
        with at_second_wall(pconn):
            pconn.execute(
                "REVOKE EXECUTE ON FUNCTION"
                " pyretrieve.vector_candidates(uuid, text, public.vector, integer)"
                " FROM pyretrieve_reader"
            )
        rows = _search(pconn, fixed, "ranked")
        lexical = _search(pconn, fixed, "ranked", p_mode="lexical")
        with pytest.raises(psycopg.Error) as info:
            _search(pconn, fixed, "ranked", p_semantic="required")
    assert info.value.sqlstate == "PR030"
    assert {canonical_json(r["explanation"]["semantic"]) for r in rows} == {
        canonical_json(
            {
                "status": "degraded",
                "reason": "unavailable",
                "evidence": {"model": MODEL, "cause": "VES_MEMORY_ACCESS_DENIED"},
                "lowers_confidence": True,
            }
        )
    }
    assert [r["fragment_id"] for r in rows] == [r["fragment_id"] for r in lexical]


@pytest.mark.parametrize("kind", sorted(DEGRADATIONS))
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_sql_search_and_the_client_degrade_byte_identically(
    pconn: psycopg.Connection[Any], kind: str, data: st.DataObject
) -> None:
    """Every degradation, each provoked on purpose, with results to explain: the whole
    explanation documents (the semantic status and its evidence in each), the decisions and the
    omissions agree, and the status is the one the degradation must give."""
    case = data.draw(degraded_cases(kind))
    result = assert_contract(pconn, case)
    _, want = DEGRADATIONS[kind]
    if isinstance(result, str):
        assert (result, want) == (SEMANTIC_REQUIRED, "refused")
        return
    assert result.results, "a degraded case with nothing to explain"
    assert result.semantic.reason is not None
    assert result.semantic.reason.value == want


def test_a_candidate_limit_cannot_raise_the_decisions_cap(
    pconn: psycopg.Connection[Any], fixed: str
) -> None:
    """The attack: ask for more candidates per leg than the decision allows. The legs run at
    the decision's cap (the vector function would refuse more, PR010, and the failure would
    show as a degraded leg naming VES_MEMORY_INVALID_INPUT)."""
    with acting_as(pconn, "alice"):
        rows = _search(pconn, fixed, "ranked", p_limit=1, p_candidate_limit=1000)
    assert rows
    assert {canonical_json(r["explanation"]["semantic"]) for r in rows} == {
        canonical_json(
            {
                "status": "used",
                "reason": None,
                "evidence": {"model": MODEL},
                "lowers_confidence": False,
            }
        )
    }


# ------------------------------------------------- the model's defaults, and the request's


# Five documents that both legs rank differently, so a fusion or weight that is not the one
# asked for shows up as another order or other bytes.
_DEFAULTS_DOCS = (
    Doc(("ledger", "audit", "ledger"), "internal", 0.1, (1.0, 0, 0, 0, 0, 0, 0, 0), False),
    Doc(("ledger",), "public", 0.3, (0, 1.0, 0, 0, 0, 0, 0, 0), False),
    Doc(("audit", "review"), "internal", 0.2, (1.0, 1.0, 0, 0, 0, 0, 0, 0), False),
    Doc(("ledger", "journal", "closing"), "public", 0.0, (2.0, 0, 1.0, 0, 0, 0, 0, 0), False),
    Doc(("balance",), "internal", 0.4, (1.0, 0, 0, 1.0, 0, 0, 0, 0), False),
)


@pytest.mark.parametrize(
    ("fusion", "weights", "method", "fusion_source", "used", "weights_source"),
    [
        (None, None, MODEL_FUSION, "model", MODEL_WEIGHTS, "model"),
        ("rrf", None, "rrf", "request", MODEL_WEIGHTS, "model"),
        (None, (2.0, 0.5), MODEL_FUSION, "model", (2.0, 0.5), "request"),
        ("rrf", (2.0, 0.5), "rrf", "request", (2.0, 0.5), "request"),
    ],
    ids=["defaults", "request_fusion", "request_weights", "request_both"],
)
# One fixed example each (assert_contract records hypothesis events, so it runs inside one).
@settings(
    max_examples=1,
    deadline=None,
    database=None,
)
@given(example=st.just(None))
def test_sql_and_the_client_take_the_models_defaults_unless_the_request_gives_its_own(
    example: None,
    pconn: psycopg.Connection[Any],
    fusion: str | None,
    weights: tuple[float, float] | None,
    method: str,
    fusion_source: str,
    used: tuple[float, float],
    weights_source: str,
) -> None:
    """A request without a fusion or weights gets the ones registered with its model (h8:
    DBSF at 0.7/1.3), from pyretrieve.search() and from the client alike; what the request
    gives wins. In one transaction, both sides' results and explanations are the same bytes
    (assert_contract), and each explanation says which fusion ran, with its parameters, its
    weights, and where each came from."""
    case = Case(
        max_age_hours=24,
        docs=_DEFAULTS_DOCS,
        query="ledger audit",
        query_embedding=(1.0, 0.5, 0, 0, 0, 0, 0, 0),
        mode="hybrid",
        limit=5,
        weights=weights,
        fusion=fusion,
    )
    result = assert_contract(pconn, case)
    assert isinstance(result, SearchResult)
    assert len(result.results) == 5
    assert result.lexical_ran
    assert result.vector_ran
    model = {"model": MODEL, "request": None}
    assert result.fusion.method.value == method
    assert (result.fusion.fusion_source.value, result.fusion.fusion_model) == (
        fusion_source,
        model[fusion_source],
    )
    assert result.weights == Weights(lexical=used[0], vector=used[1])
    parameters: dict[str, Any] = (
        {"spread": contract.DBSF_SPREAD, "formula": contract.DBSF_FORMULA}
        if method == "dbsf"
        else {"k": contract.RRF_K, "rank_base": contract.RANK_BASE, "formula": contract.RRF_FORMULA}
    )
    for r in result.results:
        stated = r.to_plain()["fusion"]
        assert isinstance(stated, dict)
        assert stated["method"] == method
        assert (stated["source"], stated["model"]) == (fusion_source, model[fusion_source])
        assert {k: stated[k] for k in parameters} == parameters
        assert stated["weights"] == {
            "lexical": used[0],
            "vector": used[1],
            "source": weights_source,
            "model": model[weights_source],
        }
        # DBSF states each leg's normalization; RRF has none to state.
        modalities = r.to_plain()["modalities"]
        assert isinstance(modalities, dict)
        for leg in modalities.values():
            if leg is not None:
                assert isinstance(leg, dict)
                assert ("normalization" in leg) is (method == "dbsf")
