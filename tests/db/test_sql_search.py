"""``pyretrieve.search(...)`` (SQL) and the Python ranker give the same order and the same floats.

The property test builds a random small corpus in a fresh scope per example (bodies from a
small vocabulary so lexical scores tie, identical bodies at two classifications so content
digests tie, observed_at spread over and beyond the grant's max_age, random 8-d embeddings,
some of them stale), then, in ONE transaction as the principal, calls authorize, the candidate
functions and fragments() itself, ranks with :func:`pyretrieve.ranking.rank`, and calls
``pyretrieve.search`` with the same arguments. Both see the same evaluation time (``now()`` is
the transaction's start), so every score must be equal, not just close.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row

from pyretrieve import ranking
from pyretrieve.client import Retriever
from pyretrieve.errors import SemanticRequired
from pyretrieve.types import DegradationReason, Scope, SearchResult, SemanticStatus
from pyretrieve.vectors import canonical_embedding, embedding_digest, to_pgvector_text
from tests.conftest import Database, Server, acting_as, create_database, drop_database, role
from tests.db.seed import grant, sha

WS = "prop"
MODEL = "h8"
DIM = 8
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
    )


# --------------------------------------------------------------------------------- setup


@pytest.fixture(scope="module")
def pdb(server: Server, template_db: str) -> Iterator[Database]:
    name = create_database(server, template_db)
    try:
        database = Database(server=server, name=name)
        with database.connect(autocommit=True) as c, acting_as(c, "adam"):
            c.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
            c.execute("SELECT pyretrieve.register_model(%s, %s)", (MODEL, DIM))
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
            semantic = SemanticStatus.degraded(DegradationReason.STALE)
        else:
            vector_rows = rows
            semantic = SemanticStatus.used({"model": MODEL})
    ids = sorted({r["fragment_id"] for r in (lexical or []) + (vector_rows or [])})
    records = conn.execute(
        "SELECT * FROM pyretrieve.fragments(%s, %s::uuid[])", (decision["decision_id"], ids)
    ).fetchall()
    return ranking.rank(
        decision=decision,
        lexical=lexical,
        vector=vector_rows,
        records=records,
        limit=case.limit,
        semantic=semantic,
        query_digest=sha(case.query),
        embedding_digest=digest,
    )


class _Undo(Exception):
    """Rolls a savepoint back on purpose."""


def sql_search(
    conn: psycopg.Connection[Any], project: str, purpose: str, case: Case
) -> list[dict[str, Any]] | None:
    """pyretrieve.search in a savepoint of the current transaction, rolled back afterwards (a
    transaction holds one decision, so the Python path can then authorize at the same time);
    None when it raised PR030."""
    vector = to_pgvector_text(canonical_embedding(case.query_embedding))
    rows: list[dict[str, Any]] | None = None
    try:
        with conn.transaction():
            rows = conn.execute(
                "SELECT * FROM pyretrieve.search(%s, %s, %s, %s, %s::public.vector, %s, %s, %s)",
                (WS, project, purpose, case.query, vector, MODEL, case.limit, case.mode),
            ).fetchall()
            raise _Undo
    except _Undo:
        return rows
    except psycopg.Error as exc:
        if exc.sqlstate != "PR030":
            raise
        return None


def assert_same(
    result: SearchResult | None, rows: list[dict[str, Any]] | None, *, one_transaction: bool
) -> None:
    """Same ids, order and floats; with ``one_transaction`` the ages are equal too."""
    if result is None or rows is None:
        assert result is None
        assert rows is None
        return
    assert [r["fragment_id"] for r in rows] == [r.fragment_id for r in result.results]
    for row, res in zip(rows, result.results, strict=True):
        assert row["rank"] == res.fused_rank
        assert row["content_digest"] == res.record.content_digest
        assert row["body"] == res.record.body
        # Exactly equal, not approximately: the SQL repeats the ranker's float operations.
        assert row["rrf_score"] == res.rrf_score
        assert row["freshness"] == res.freshness
        assert row["final_score"] == res.final_score
        assert row["confidence"] == res.confidence
        explanation = row["explanation"]
        assert explanation["tie_break"] == res.tie_break
        freshness = res.explanation["freshness"]
        assert isinstance(freshness, dict)
        assert explanation["freshness"]["factor"] == freshness["factor"]
        assert explanation["freshness"]["max_age_us"] == freshness["max_age_us"]
        if one_transaction:
            assert explanation["freshness"]["age_us"] == freshness["age_us"]
        assert explanation["provenance"]["content_digest"] == res.record.content_digest.hex()
        assert explanation["content"] == {"text": res.record.body, "trust": "untrusted-data"}
        semantic = explanation["semantic"]
        assert semantic["status"] == result.semantic.status.value
        assert semantic["reason"] == (result.semantic.reason and result.semantic.reason.value)
        assert semantic["lowers_confidence"] == result.semantic.lowers_confidence
        if res.lexical is None:
            assert explanation["lexical"] is None
        else:
            assert explanation["lexical"]["rank"] == res.lexical.rank
            assert explanation["lexical"]["score"] == res.lexical.score
        if res.vector is None:
            assert explanation["vector"] is None
        else:
            assert explanation["vector"]["rank"] == res.vector.rank
            assert explanation["vector"]["distance"] == res.vector.distance


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
    with acting_as(pconn, "alice"):
        got = sql_search(pconn, project, "ranked", case)
        expected = python_ranking(pconn, project, "ranked", case)
        # Both computations saw the same decision time (now() of the one transaction); the
        # second wall shows the transaction's one decision.
        pconn.execute("SET LOCAL ROLE pyretrieve_api")
        times = pconn.execute(
            "SELECT count(DISTINCT evaluated_at) AS n, count(*) AS decisions"
            " FROM pyretrieve.decisions WHERE project_id = %s",
            (project,),
        ).fetchone()
    assert_same(expected, got, one_transaction=True)
    event(
        f"mode={case.mode} results={0 if got is None else min(len(got), 3)}+"
        f" omitted={bool(expected and expected.omissions)}"
    )
    event(f"semantic={'raised' if expected is None else expected.semantic.status.value}")
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
    }
    try:
        client: SearchResult | None = retriever.search(
            case.query, scope=Scope(workspace=WS, project=project, purpose="nomax"), **scope_args
        )
    except SemanticRequired:
        client = None
    with acting_as(pconn, "alice"):
        rows = sql_search(pconn, project, "nomax", case)
    assert_same(client, rows, one_transaction=False)


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
        grant(pconn, role("alice"), WS, project, "nosem", "internal", semantic_policy="disabled")
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
        **kw,
    }
    names = ", ".join(f"{k} => %({k})s" for k in args)
    names = names.replace("%(p_embedding)s", "%(p_embedding)s::public.vector")
    cur = conn.cursor(row_factory=dict_row)
    if keep:
        return cur.execute(f"SELECT * FROM pyretrieve.search({names})", args).fetchall()
    rows: list[Any] = []
    try:
        with conn.transaction():
            rows = cur.execute(f"SELECT * FROM pyretrieve.search({names})", args).fetchall()
            raise _Undo
    except _Undo:
        pass
    return rows


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
    assert all(r["explanation"]["vector"] is None for r in disabled)
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
