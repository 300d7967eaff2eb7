"""Scope-local BM25: statistics from what the decision admits only, correct under every write,
explained, and written without a shared row that concurrent writers would queue on."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from pyretrieve import ranking
from pyretrieve.types import SemanticStatus, Weights
from tests.conftest import Database, acting_as, role, rolled_back
from tests.db.seed import concurrent_writers

Conn = psycopg.Connection[Any]
PURPOSE = "support"
QUERY = "zebra migration across the savanna"
RARE = "okapi"  # appears only in hidden fragments unless a test says otherwise

CORPUS = [
    "zebra herds migration across the savanna grasslands",
    "the savanna is home to lions and zebra",
    "migration of wildebeest and zebra in the serengeti",
    "a short note about rivers",
    "zebra zebra zebra stripes are unique to each animal",
    "savanna fires renew the grass every year",
    "",  # an empty body still counts as a document
    "long text " + "filler " * 60 + "with one zebra at the end",
]


def sha(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def setup(conn: Conn, corpus: Sequence[str] = CORPUS) -> None:
    with acting_as(conn, "adam"):
        for ws in ("acme", "globex"):
            conn.execute("SELECT pyretrieve.create_workspace(%s)", (ws,))
            conn.execute("SELECT pyretrieve.create_project(%s, 'docs')", (ws,))
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, 'docs', 'ingest', 'restricted')",
                (role("wally"), ws),
            )
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', %s, 'internal',"
            " p_max_age => interval '30 days')",
            (role("alice"), PURPOSE),
        )
    for body in corpus:
        put(conn, "acme", body or " ")


def put(conn: Conn, ws: str, body: str, classification: str = "internal", **kw: Any) -> Any:
    with acting_as(conn, "wally"):
        row = conn.execute(
            "SELECT pyretrieve.put_fragment(p_workspace => %s, p_project => 'docs', p_body => %s,"
            " p_classification => %s::pyretrieve.classification,"
            " p_observed_at => %s, p_expires_at => %s) AS id",
            (ws, body, classification, kw.get("observed_at"), kw.get("expires_at")),
        ).fetchone()
    assert row is not None
    return row["id"]


def decide(conn: Conn, query: str) -> Any:
    """The transaction's decision for a lexical search of acme/docs (run as the reader)."""
    d = conn.execute(
        "SELECT decision_id FROM pyretrieve.authorize('acme', 'docs', %s, %s, 'disabled',"
        " NULL, 100)",
        (PURPOSE, sha(query)),
    ).fetchone()
    assert d is not None
    return d["decision_id"]


def lexical(conn: Conn, query: str = QUERY, ranking_: str = "bm25") -> list[dict[str, Any]]:
    with acting_as(conn, "alice"):
        return conn.execute(
            "SELECT * FROM pyretrieve.lexical_candidates(%s, %s, 100, %s)",
            (decide(conn, query), query, ranking_),
        ).fetchall()


def visible_documents(conn: Conn) -> dict[Any, Counter[str]]:
    """Each visible fragment's lexeme counts, read through RLS as alice, for an independent BM25."""
    with acting_as(conn, "alice"):
        conn.execute(
            "SELECT pyretrieve.authorize('acme', 'docs', %s, %s, 'disabled', NULL, 10)",
            (PURPOSE, sha("stats")),
        )
        # The second wall: what pyretrieve_api sees under this transaction's decision.
        conn.execute("SET LOCAL ROLE pyretrieve_api")
        rows = conn.execute(
            "SELECT f.fragment_id, u.lexeme, greatest(cardinality(u.positions), 1) AS n"
            "  FROM pyretrieve.fragments f LEFT JOIN LATERAL unnest(f.tsv) u ON true"
        ).fetchall()
    docs: dict[Any, Counter[str]] = {}
    for r in rows:
        counts = docs.setdefault(r["fragment_id"], Counter())
        if r["lexeme"] is not None:
            counts[r["lexeme"]] += r["n"]
    return docs


def python_bm25(
    docs: dict[Any, Counter[str]], query_terms: Counter[str], k1: float = 0.9, b: float = 0.4
) -> dict[Any, float]:
    n = len(docs)
    avgdl = sum(sum(c.values()) for c in docs.values()) / n
    df = {t: sum(1 for c in docs.values() if t in c) for t in query_terms}
    scores: dict[Any, float] = {}
    for fid, counts in docs.items():
        dl = sum(counts.values())
        total = 0.0
        for term in sorted(query_terms):
            tf = counts.get(term, 0)
            if tf == 0:
                continue
            idf = math.log(1.0 + (n - df[term] + 0.5) / (df[term] + 0.5))
            total += (
                query_terms[term] * idf * (tf * (k1 + 1.0)) / (tf + k1 * (1.0 - b + b * dl / avgdl))
            )
        if total:
            scores[fid] = total
    return scores


def query_lexemes(conn: Conn, query: str) -> Counter[str]:
    rows = conn.execute(
        "SELECT u.lexeme, cardinality(u.positions) AS n FROM unnest(to_tsvector('english', %s)) u",
        (query,),
    ).fetchall()
    return Counter({r["lexeme"]: r["n"] for r in rows})


def test_bm25_matches_an_independent_implementation(db: Database, conn: Conn) -> None:
    setup(conn)
    got = lexical(conn)
    expected = python_bm25(visible_documents(conn), query_lexemes(conn, QUERY))
    assert {r["fragment_id"] for r in got} == set(expected)
    for r in got:
        assert r["score"] == pytest.approx(expected[r["fragment_id"]], rel=1e-12)
    # Ranks follow the scores, 1..n, with ties broken by the content digest.
    assert [r["rank"] for r in got] == list(range(1, len(got) + 1))
    keys = [(-r["score"], r["content_digest"], r["fragment_id"]) for r in got]
    assert keys == sorted(keys)
    # A repeated query term counts: the query "zebra zebra" weighs zebra twice.
    twice = {r["fragment_id"]: r["score"] for r in lexical(conn, "zebra zebra")}
    once = {r["fragment_id"]: r["score"] for r in lexical(conn, "zebra")}
    assert twice.keys() == once.keys()
    for fid, score in once.items():
        assert twice[fid] == pytest.approx(2 * score, rel=1e-12)


def test_the_explanation_lists_each_matched_term(db: Database, conn: Conn) -> None:
    setup(conn)
    top = lexical(conn)[0]
    terms = top["terms"]
    assert [t["term"] for t in terms] == sorted(t["term"] for t in terms)
    assert {t["term"] for t in terms} <= set(query_lexemes(conn, QUERY))
    for t in terms:
        assert set(t) == {"term", "idf", "tf", "query_tf", "length_norm", "contribution"}
        assert t["idf"] > 0
        assert t["tf"] >= 1
        assert t["length_norm"] > 0
    assert sum(t["contribution"] for t in terms) == pytest.approx(top["score"], rel=1e-12)


def test_the_explanation_terms_arrive_as_the_leg_wrote_them(db: Database, conn: Conn) -> None:
    """json, not jsonb: each number is the shortest text of the double the score was summed
    from (jsonb's numeric would print it again its own way), in the leg's key order."""
    setup(conn)
    with acting_as(conn, "alice"):
        rows = conn.execute(
            "SELECT pg_typeof(terms)::text AS type, terms::text AS text, score"
            "  FROM pyretrieve.lexical_candidates(%s, %s, 100)",
            (decide(conn, QUERY), QUERY),
        ).fetchall()
        # The server's own shortest text of each double, for the comparison below.
        conn.execute("SET LOCAL extra_float_digits = 1")
        for r in rows:
            assert r["type"] == "json"
            terms = json.loads(r["text"])
            written = ", ".join(
                f'{{"term": {json.dumps(t["term"])}, "idf": {_float_text(conn, t["idf"])},'
                f' "tf": {t["tf"]}, "query_tf": {t["query_tf"]},'
                f' "length_norm": {_float_text(conn, t["length_norm"])},'
                f' "contribution": {_float_text(conn, t["contribution"])}}}'
                for t in terms
            )
            assert r["text"] == f"[{written}]"
            # The parts, summed in the order listed, give the score to the last bit.
            total = 0.0
            for t in terms:
                total += t["contribution"]
            assert total == r["score"]


def _float_text(conn: Conn, value: float) -> str:
    row = conn.execute("SELECT %s::float8::text AS t", (value,)).fetchone()
    assert row is not None
    return str(row["t"])


HIDDEN_CASES = {
    "foreign workspace": dict(ws="globex"),
    "above the ceiling": dict(classification="confidential"),
    "expired": dict(
        expires_at=datetime.now().astimezone() - timedelta(days=1),
        observed_at=datetime.now().astimezone() - timedelta(days=2),
    ),
    "observed in the future": dict(observed_at=datetime.now().astimezone() + timedelta(days=1)),
    "older than max_age": dict(observed_at=datetime.now().astimezone() - timedelta(days=40)),
    "retracted": dict(then="retract"),
    "superseded": dict(then="supersede"),
}


@pytest.mark.parametrize("case", HIDDEN_CASES, ids=list(HIDDEN_CASES))
def test_a_hidden_fragment_changes_no_visible_score(db: Database, conn: Conn, case: str) -> None:
    setup(conn)
    query = f"{QUERY} {RARE}"
    before = lexical(conn, query)
    spec = dict(HIDDEN_CASES[case])
    then = spec.pop("then", None)
    ws = spec.pop("ws", "acme")
    # The hidden fragment holds the rare query term and common ones, so df, N and avgdl would
    # all move if it were counted.
    body = f"{RARE} zebra savanna migration " * 3
    fid = put(conn, ws, body, **spec)
    if then == "retract":
        with acting_as(conn, "wally"):
            conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (fid,))
    elif then == "supersede":
        with acting_as(conn, "wally"):
            new = conn.execute(
                "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, %s) AS id",
                (fid, "a note about rivers and lakes"),
            ).fetchone()
        assert new is not None
        # The successor is visible and matches nothing of the query: it adds a document to N,
        # so for this case compare against a baseline that has it too.
        with acting_as(conn, "wally"):
            conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (new["id"],))
    after = lexical(conn, query)
    assert after == before


def test_the_same_fragment_visible_does_change_the_scores(db: Database, conn: Conn) -> None:
    """The control for the test above: counted, such a fragment moves every statistic."""
    setup(conn)
    query = f"{QUERY} {RARE}"
    before = {r["fragment_id"]: r["score"] for r in lexical(conn, query)}
    fid = put(conn, "acme", f"{RARE} zebra savanna migration " * 3)
    after = {r["fragment_id"]: r["score"] for r in lexical(conn, query)}
    assert fid in after
    changed = [f for f in before if before[f] != after[f]]
    assert changed == list(before)


def test_statistics_follow_put_supersede_retract_and_expiry(db: Database, conn: Conn) -> None:
    setup(conn)
    now = datetime.now().astimezone()
    extra = put(conn, "acme", "zebra crossing in the city")
    soon = put(
        conn,
        "acme",
        "savanna zebra",
        observed_at=now - timedelta(days=1),
        expires_at=now + timedelta(seconds=2),
    )

    def check() -> None:
        got = {r["fragment_id"]: r["score"] for r in lexical(conn)}
        expected = python_bm25(visible_documents(conn), query_lexemes(conn, QUERY))
        assert got.keys() == expected.keys()
        for fid, score in got.items():
            assert score == pytest.approx(expected[fid], rel=1e-12)

    check()
    with acting_as(conn, "wally"):
        new = conn.execute(
            "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, %s) AS id",
            (extra, "zebra crossing in the old town"),
        ).fetchone()
    assert new is not None
    check()
    with acting_as(conn, "wally"):
        conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (new["id"],))
    check()
    # Expiry needs no write: the decision's evaluation time moves past expires_at.
    assert soon in {r["fragment_id"] for r in lexical(conn)}
    conn.execute("SELECT pg_sleep(2.1)")
    assert soon not in {r["fragment_id"] for r in lexical(conn)}
    check()


def test_ts_rank_stays_selectable(db: Database, conn: Conn) -> None:
    setup(conn)
    bm25 = lexical(conn, ranking_="bm25")
    legacy = lexical(conn, ranking_="ts_rank")
    assert {r["fragment_id"] for r in bm25} == {r["fragment_id"] for r in legacy}
    assert all(r["terms"] == [] for r in legacy)
    with acting_as(conn, "alice"):
        d = conn.execute(
            "SELECT decision_id FROM pyretrieve.authorize('acme', 'docs', %s, %s, 'disabled',"
            " NULL, 10)",
            (PURPOSE, sha("x")),
        ).fetchone()
        assert d is not None
        with pytest.raises(psycopg.Error) as info, conn.transaction():
            conn.execute(
                "SELECT * FROM pyretrieve.lexical_candidates(%s, 'x', 10, 'tfidf')",
                (d["decision_id"],),
            )
    assert info.value.sqlstate == "PR010"


def test_project_parameters_change_the_scores(db: Database, conn: Conn) -> None:
    setup(conn)
    default = {r["fragment_id"]: r["score"] for r in lexical(conn)}
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.set_bm25('acme', 'docs', 1.2, 0.75)")
    tuned = {r["fragment_id"]: r["score"] for r in lexical(conn)}
    expected = python_bm25(visible_documents(conn), query_lexemes(conn, QUERY), k1=1.2, b=0.75)
    assert tuned.keys() == default.keys()
    assert tuned != default
    for fid, score in tuned.items():
        assert score == pytest.approx(expected[fid], rel=1e-12)
    with acting_as(conn, "alice"), pytest.raises(psycopg.Error):
        conn.execute("SELECT pyretrieve.set_bm25('acme', 'docs', 2.0, 0.5)")


def test_concurrent_writers_do_not_wait_on_common_terms(db: Database, conn: Conn) -> None:
    """Writers in one scope, each holding an open transaction that wrote common terms, never
    block one another: there is no shared statistics or counter row."""
    setup(conn)
    writers = 4

    def write(c: Conn, n: int) -> None:
        for i in range(5):
            c.execute(
                "SELECT pyretrieve.put_fragment('acme', 'docs', %s)",
                (f"the zebra and the savanna, writer {n} note {i}",),
            )

    errors = concurrent_writers(db, "wally", writers, write)
    assert errors == []
    docs = visible_documents(conn)
    assert len(docs) == len(CORPUS) + writers * 5
    got = {r["fragment_id"]: r["score"] for r in lexical(conn)}
    expected = python_bm25(docs, query_lexemes(conn, QUERY))
    for fid, score in got.items():
        assert score == pytest.approx(expected[fid], rel=1e-12)


def test_weighted_fusion_is_the_same_in_sql_and_python(db: Database, conn: Conn) -> None:
    setup(conn)
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.register_model('m3', 3)")
    with db.admin() as admin:
        rows = admin.execute(
            "SELECT fragment_id, body FROM pyretrieve.fragments ORDER BY fragment_id"
        ).fetchall()
    with acting_as(conn, "wally"):
        for i, r in enumerate(rows):
            conn.execute(
                "SELECT pyretrieve.put_embedding('acme', 'docs', %s, 'm3', %s::vector, %s)",
                (r["fragment_id"], f"[{1 + i % 3},{i % 5},{1 + i % 2}]", sha(r["body"])),
            )
    embedding = "[1,2,1]"
    weights = Weights(lexical=1.5, vector=0.5)
    with acting_as(conn, "alice"):
        # search() first, in a savepoint rolled back afterwards (one decision per
        # transaction), then the same steps by hand at the same now().
        with rolled_back(conn):
            sql_rows = conn.execute(
                "SELECT * FROM pyretrieve.search('acme', 'docs', %s, %s, %s::vector, 'm3', 5,"
                " p_lexical_weight => 1.5, p_vector_weight => 0.5)",
                (PURPOSE, QUERY, embedding),
            ).fetchall()
        d = conn.execute(
            "SELECT * FROM pyretrieve.authorize('acme', 'docs', %s, %s, 'optional',"
            " pyretrieve.embedding_digest(%s::vector), 5)",
            (PURPOSE, sha(QUERY), embedding),
        ).fetchone()
        assert d is not None
        lex = conn.execute(
            "SELECT * FROM pyretrieve.lexical_candidates(%s, %s, %s)",
            (d["decision_id"], QUERY, d["candidate_limit"]),
        ).fetchall()
        vec = conn.execute(
            "SELECT * FROM pyretrieve.vector_candidates(%s, 'm3', %s::vector, %s)",
            (d["decision_id"], embedding, d["candidate_limit"]),
        ).fetchall()
        ids = sorted({r["fragment_id"] for r in lex} | {r["fragment_id"] for r in vec}, key=str)
        records = conn.execute(
            "SELECT * FROM pyretrieve.fragments(%s, %s::uuid[])", (d["decision_id"], ids)
        ).fetchall()
        digest = conn.execute(
            "SELECT pyretrieve.embedding_digest(%s::vector) AS d", (embedding,)
        ).fetchone()
    assert digest is not None
    result = ranking.rank(
        decision=d,
        lexical=lex,
        vector=vec,
        records=records,
        limit=5,
        semantic=SemanticStatus.used({"model": "m3"}),
        query_digest=sha(QUERY),
        embedding_digest=digest["d"],
        weights=weights,
    )
    assert [r.fragment_id for r in result.results] == [r["fragment_id"] for r in sql_rows]
    for py, sq in zip(result.results, sql_rows, strict=True):
        assert py.fused_score == sq["fused_score"]
        assert py.final_score == sq["final_score"]
        assert py.confidence == sq["confidence"]
        lexical_part = sq["explanation"]["modalities"]["lexical"]
        if lexical_part is not None:
            assert lexical_part["weight"] == 1.5
            assert [t["term"] for t in lexical_part["terms"]] == [t.term for t in py.lexical.terms]  # type: ignore[union-attr]
    # Weights change the fusion: with the vector leg weighted 0, the order is the lexical one.
    with acting_as(conn, "alice"):
        lexical_only = conn.execute(
            "SELECT fragment_id FROM pyretrieve.search('acme', 'docs', %s, %s, %s::vector, 'm3', 5,"
            " p_lexical_weight => 1.0, p_vector_weight => 0)",
            (PURPOSE, QUERY, embedding),
        ).fetchall()
    assert [r["fragment_id"] for r in lexical_only] == [r["fragment_id"] for r in lex[:5]]
