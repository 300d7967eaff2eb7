"""Nothing a caller may not see leaks through results, omissions, counts, errors or logs.

The corpus plants sentinel strings in the bodies, source URIs and manifest ids of everything
alice may not see: a foreign workspace, a project of her own workspace she holds no grant for,
and, in her own scope, fragments above her ceiling, retracted, superseded, expired, too old
for her grant's max_age and observed in the future. Every hidden fragment carries the words
alice searches for and an embedding exactly on her query vector (and a stale one, so a hidden
row reaching the vector leg would also flip the semantic status to ``stale``). The visible
fragments are further away from the query vector, so any leak would rank first.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg.rows import dict_row

from pyretrieve.client import Retriever
from pyretrieve.errors import AccessDenied, PyretrieveError, SemanticRequired
from pyretrieve.types import Scope
from pyretrieve.vectors import canonical_embedding, to_pgvector_text
from tests.conftest import Database, Server, acting_as, create_database, drop_database, role
from tests.db.seed import grant, retract, supersede

MODEL = "leak4"
DIM = 4
PROBE = [1.0, 0.0, 0.0, 0.0]
NEAR_PROBE = [1.0, 0.01, 0.0, 0.0]
OWN = "acme"
FOREIGN = "umbrella"
SENTINEL_FOREIGN = "SENTINEL-FOREIGN-7f3a"
SEARCH_WORDS = "ledger reconciliation"

# In alice's own scope, hidden by her decision: case -> (sentinel, classification).
HIDDEN = {
    "ceiling": ("SENTINEL-CEILING-2b91", "restricted"),
    "retracted": ("SENTINEL-RETRACTED-3c02", "internal"),
    "superseded": ("SENTINEL-SUPERSEDED-4d13", "internal"),
    "expired": ("SENTINEL-EXPIRED-5e24", "internal"),
    "old": ("SENTINEL-OLD-6f35", "internal"),
    "future": ("SENTINEL-FUTURE-7a46", "internal"),
}
SENTINEL_PROJECT = "SENTINEL-PROJECT-8b57"
VISIBLE_BODIES = [
    "ledger reconciliation checklist for the month end",
    "ledger reconciliation owner: finance operations",
    "how to read the ledger",
    "reconciliation of bank statements against the ledger",
    "ledger ledger reconciliation summary",
]


@dataclass
class Corpus:
    visible: list[UUID] = field(default_factory=list)
    hidden: dict[str, UUID] = field(default_factory=dict)
    foreign: list[UUID] = field(default_factory=list)
    other_project: list[UUID] = field(default_factory=list)

    @property
    def visible_without_max_age(self) -> list[UUID]:
        """Under a grant without max_age the old fragment is not too old."""
        return [*self.visible, self.hidden["old"]]

    @property
    def secret_ids(self) -> list[UUID]:
        return [*self.hidden.values(), *self.foreign, *self.other_project]

    @property
    def needles(self) -> list[str]:
        """Strings that must never reach alice."""
        sentinels = [s for s, _ in HIDDEN.values()]
        return [
            SENTINEL_FOREIGN,
            SENTINEL_PROJECT,
            *sentinels,
            FOREIGN,
            "private-manifest",
            *(str(i) for i in self.secret_ids),
            *(hashlib.sha256(hidden_body(c).encode()).hexdigest() for c in HIDDEN),
        ]


def hidden_body(case: str) -> str:
    sentinel, _ = HIDDEN[case]
    return f"{sentinel} ledger reconciliation {case} marker"


def put(
    conn: psycopg.Connection[Any],
    workspace: str,
    project: str,
    body: str,
    classification: str = "internal",
    *,
    observed: str = "now() - interval '1 hour'",
    expires: str = "NULL",
    source_uri: str | None = None,
    manifest_id: str | None = None,
) -> UUID:
    row = conn.execute(
        "SELECT pyretrieve.put_fragment(p_workspace => %s, p_project => %s, p_body => %s,"
        f" p_classification => %s::pyretrieve.classification, p_observed_at => {observed},"
        f" p_expires_at => {expires}, p_source_uri => %s, p_manifest_id => %s) AS id",
        (workspace, project, body, classification, source_uri, manifest_id),
    ).fetchone()
    assert row is not None
    return UUID(str(row["id"]))


def embed(
    conn: psycopg.Connection[Any],
    workspace: str,
    project: str,
    fid: UUID,
    values: list[float],
    source: str,
) -> None:
    conn.execute(
        "SELECT pyretrieve.put_embedding(%s, %s, %s, %s, %s::public.vector, %s)",
        (
            workspace,
            project,
            fid,
            MODEL,
            to_pgvector_text(canonical_embedding(values)),
            hashlib.sha256(source.encode()).digest(),
        ),
    )


def build(database: Database, conn: psycopg.Connection[Any]) -> Corpus:
    corpus = Corpus()
    with acting_as(conn, "adam"):
        for ws in (OWN, FOREIGN):
            conn.execute("SELECT pyretrieve.create_workspace(%s)", (ws,))
            conn.execute("SELECT pyretrieve.create_project(%s, 'docs')", (ws,))
        conn.execute("SELECT pyretrieve.create_project(%s, 'board')", (OWN,))
        conn.execute("SELECT pyretrieve.register_model(%s, %s)", (MODEL, DIM))
        grant(conn, role("alice"), OWN, "docs", "support", "confidential", max_age="30 days")
        grant(conn, role("alice"), OWN, "docs", "nomax", "confidential")
        grant(
            conn, role("alice"), OWN, "docs", "strict", "confidential", semantic_policy="required"
        )
        for ws, project in ((OWN, "docs"), (OWN, "board"), (FOREIGN, "docs")):
            grant(conn, role("walt"), ws, project, "ingest", "restricted")
    with acting_as(conn, "walt"):
        for n, body in enumerate(VISIBLE_BODIES):
            fid = put(
                conn,
                OWN,
                "docs",
                body,
                ["public", "internal", "confidential"][n % 3],
                source_uri=f"https://wiki.acme.example/page/{n}",
                manifest_id=f"m-{n}",
            )
            embed(conn, OWN, "docs", fid, [1.0, 0.5 + n, 0.25, 0.0], body)
            corpus.visible.append(fid)
        for case, (sentinel, classification) in HIDDEN.items():
            observed, expires = "now() - interval '1 hour'", "NULL"
            if case == "expired":
                observed, expires = "now() - interval '2 days'", "now() - interval '1 day'"
            elif case == "old":
                observed = "now() - interval '60 days'"
            elif case == "future":
                observed = "now() + interval '1 day'"
            body = hidden_body(case)
            fid = put(
                conn,
                OWN,
                "docs",
                body,
                classification,
                observed=observed,
                expires=expires,
                # A successor inherits its predecessor's source and manifest, legitimately:
                # the superseded fragment's sentinel is in its body only.
                source_uri=None if case == "superseded" else f"https://acme.example/{sentinel}",
                manifest_id=None if case == "superseded" else f"private-manifest-{sentinel}",
            )
            # Stale, so a hidden row reaching the vector leg would show as a degradation. The
            # old one is visible under a grant without max_age, so its embedding is current.
            embed(conn, OWN, "docs", fid, PROBE, body if case == "old" else body + " (stale)")
            corpus.hidden[case] = fid
        for n in range(4):
            body = f"{SENTINEL_FOREIGN} ledger reconciliation {FOREIGN} record {n}"
            fid = put(
                conn,
                FOREIGN,
                "docs",
                body,
                "public",
                source_uri=f"https://{FOREIGN}.example/{SENTINEL_FOREIGN}/{n}",
                manifest_id=f"{SENTINEL_FOREIGN}-manifest-{n}",
            )
            embed(conn, FOREIGN, "docs", fid, PROBE, body if n % 2 else body + " (stale)")
            corpus.foreign.append(fid)
        for n in range(2):
            body = f"{SENTINEL_PROJECT} ledger reconciliation board minutes {n}"
            fid = put(conn, OWN, "board", body, "public", manifest_id=SENTINEL_PROJECT)
            embed(conn, OWN, "board", fid, PROBE, body)
            corpus.other_project.append(fid)
    successor = supersede(
        database,
        conn,
        "walt",
        OWN,
        "docs",
        corpus.hidden["superseded"],
        "ledger reconciliation successor page",
    )
    with acting_as(conn, "walt"):
        embed(
            conn,
            OWN,
            "docs",
            successor,
            [1.0, 9.0, 0.0, 0.0],
            "ledger reconciliation successor page",
        )
    corpus.visible.append(successor)
    retract(database, conn, "walt", OWN, "docs", corpus.hidden["retracted"])
    return corpus


@pytest.fixture(scope="module")
def world(server: Server, template_db: str) -> Iterator[tuple[Database, Corpus]]:
    name = create_database(server, template_db)
    try:
        database = Database(server=server, name=name)
        with database.connect(autocommit=True) as c:
            corpus = build(database, c)
        yield database, corpus
    finally:
        drop_database(server, name)


@pytest.fixture
def conn(world: tuple[Database, Corpus]) -> Iterator[psycopg.Connection[Any]]:
    with world[0].connect(autocommit=True) as c:
        yield c


@pytest.fixture
def corpus(world: tuple[Database, Corpus]) -> Corpus:
    return world[1]


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="pyretrieve")
    caplog.set_level(logging.DEBUG, logger="psycopg")
    caplog.set_level(logging.DEBUG)
    return caplog


class ProbeEmbedder:
    model_id = MODEL
    dimension = DIM

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(PROBE) for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return list(PROBE)


def own(purpose: str = "support") -> Scope:
    return Scope(workspace=OWN, project="docs", purpose=purpose)


def assert_clean(text: str, corpus: Corpus) -> None:
    for needle in corpus.needles:
        assert needle not in text, needle


def assert_clean_error(exc: PyretrieveError, corpus: Corpus) -> None:
    for shown in (str(exc), repr(exc), repr(exc.as_dict()), str(exc.args)):
        assert_clean(shown, corpus)
    assert exc.__cause__ is None


def assert_clean_logs(logs: pytest.LogCaptureFixture, corpus: Corpus) -> None:
    for record in logs.records:
        assert_clean(record.getMessage(), corpus)
        assert_clean(str(record.args), corpus)
        if record.exc_text:
            assert_clean(record.exc_text, corpus)


QUERIES = [
    SEARCH_WORDS,
    f"{SENTINEL_FOREIGN} ledger",
    "SENTINEL FOREIGN 7f3a umbrella record",
    "restricted ceiling retracted superseded expired old future marker",
    "board minutes",
    "https://umbrella.example private-manifest",
]
SEARCHES = [
    {"mode": "hybrid", "embedding": PROBE, "model": MODEL},
    {"mode": "hybrid", "embedding": NEAR_PROBE, "model": MODEL},
    {"mode": "lexical"},
    {"mode": "vector", "embedding": PROBE, "model": MODEL},
    {"mode": "hybrid", "model": MODEL},  # embedded by the ProbeEmbedder
]


# ------------------------------------------------------------------------------ searches


@pytest.mark.parametrize(("query", "kw"), list(itertools.product(QUERIES, SEARCHES)))
@pytest.mark.parametrize("limit", [1, 3, 50])
def test_hidden_and_foreign_fragments_never_reach_the_caller(
    conn: psycopg.Connection[Any],
    corpus: Corpus,
    logs: pytest.LogCaptureFixture,
    query: str,
    kw: dict[str, Any],
    limit: int,
) -> None:
    retriever = Retriever(conn, principal=role("alice"), embedders=[ProbeEmbedder()])
    result = retriever.search(query, scope=own(), limit=limit, **kw)
    assert_clean(result.to_json(), corpus)
    returned = [r.fragment_id for r in result.results]
    omitted = [o.fragment_id for o in result.omissions]
    assert set(returned + omitted) <= set(corpus.visible)
    assert len(returned) + len(omitted) <= len(corpus.visible)
    for r in result.results:
        assert r.record.workspace_id == OWN
        assert r.record.project_id == "docs"
    # A hidden row with a stale embedding would have turned the vector leg to "stale".
    if kw["mode"] != "lexical":
        assert result.semantic.status.value == "used"
        assert result.vector_ran
    assert_clean(repr(result.semantic.evidence), corpus)
    assert_clean_logs(logs, corpus)


def test_the_count_of_matches_is_the_count_of_visible_matches(
    conn: psycopg.Connection[Any], corpus: Corpus
) -> None:
    retriever = Retriever(conn, principal=role("alice"))
    for kw in SEARCHES[:4]:
        result = retriever.search(SEARCH_WORDS, scope=own(), limit=2, **kw)
        everything = [r.fragment_id for r in result.results] + [
            o.fragment_id for o in result.omissions
        ]
        # Every visible fragment holds "ledger" or "reconciliation" and has an embedding.
        assert sorted(everything) == sorted(corpus.visible)
    # Words only hidden fragments hold match nothing, and say so with nothing.
    for word in ("marker", SENTINEL_FOREIGN, "minutes", "ceiling"):
        result = retriever.search(word, scope=own(), mode="lexical", limit=5)
        assert result.results == ()
        assert result.omissions == ()
        assert_clean(result.to_json(), corpus)


def test_omissions_cover_exactly_the_visible_matches_cut_by_the_limit(
    conn: psycopg.Connection[Any], corpus: Corpus
) -> None:
    retriever = Retriever(conn, principal=role("alice"))
    kw: dict[str, Any] = {"embedding": PROBE, "model": MODEL}
    full = retriever.search(SEARCH_WORDS, scope=own("nomax"), limit=50, **kw)
    order = [r.fragment_id for r in full.results]
    expected = set(corpus.visible_without_max_age)
    assert sorted(order) == sorted(expected)
    assert full.omissions == ()
    for limit in range(1, len(order) + 1):
        cut = retriever.search(SEARCH_WORDS, scope=own("nomax"), limit=limit, **kw)
        returned = [r.fragment_id for r in cut.results]
        omitted = [o.fragment_id for o in cut.omissions]
        assert returned == order[:limit]
        assert omitted == order[limit:]
        assert not set(returned) & set(omitted)
        assert set(returned) | set(omitted) == expected
        for offset, omission in enumerate(cut.omissions):
            position = limit + 1 + offset
            whole = full.results[position - 1]
            assert omission.reason.value == "result_limit"
            assert omission.position == position
            assert omission.workspace_id == OWN
            assert omission.project_id == "docs"
            assert omission.content_digest == whole.record.content_digest
            assert omission.byte_estimate == len(whole.record.body.encode("utf-8"))
            # Freshness is 1.0 without max_age, so the scores do not drift between requests.
            assert omission.freshness == whole.freshness
            assert omission.confidence == whole.confidence
            plain = omission.to_plain()
            assert "text" not in plain
            assert set(plain) == {
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


# -------------------------------------------------------------------------------- errors


def test_a_foreign_scope_is_denied_exactly_like_an_absent_one(
    conn: psycopg.Connection[Any], corpus: Corpus, logs: pytest.LogCaptureFixture
) -> None:
    retriever = Retriever(conn, principal=role("alice"))
    errors = []
    for scope in (
        Scope(workspace=FOREIGN, project="docs", purpose="support"),  # exists, no grant
        Scope(workspace=OWN, project="board", purpose="support"),  # exists, no grant
        Scope(workspace="initech", project="docs", purpose="support"),  # does not exist
        Scope(workspace=OWN, project="docs", purpose="billing"),  # no grant for the purpose
    ):
        for kw in SEARCHES[:4]:
            with pytest.raises(AccessDenied) as info:
                retriever.search(f"{SENTINEL_FOREIGN} ledger", scope=scope, **kw)
            assert_clean_error(info.value, corpus)
            errors.append((type(info.value), info.value.as_dict(), info.value.sqlstate))
    assert len(set(map(repr, errors))) == 1
    assert_clean_logs(logs, corpus)


def test_errors_raised_while_searching_quote_nothing(
    conn: psycopg.Connection[Any], corpus: Corpus, logs: pytest.LogCaptureFixture
) -> None:
    retriever = Retriever(conn, principal=role("alice"))
    cases: list[tuple[str, dict[str, Any]]] = [
        (SENTINEL_FOREIGN * 300, {}),  # too long
        (SENTINEL_FOREIGN, {"scope": own("strict")}),  # required semantic, no embedding
        (SENTINEL_FOREIGN, {"scope": own("strict"), "embedding": PROBE, "model": "missing"}),
        (SENTINEL_FOREIGN, {"mode": "vector", "embedding": [1.0, 0.0], "model": MODEL}),
        (SENTINEL_FOREIGN, {"embedding": [float("inf")] * DIM, "model": MODEL}),
        (SENTINEL_FOREIGN, {"scope": Scope(workspace=FOREIGN, project="docs", purpose="x")}),
    ]
    for query, kw in cases:
        kw.setdefault("scope", own())
        with pytest.raises(PyretrieveError) as info:
            retriever.search(query, **kw)
        assert_clean_error(info.value, corpus)
    assert_clean_logs(logs, corpus)


def test_required_semantic_fails_closed_without_naming_hidden_rows(
    conn: psycopg.Connection[Any], corpus: Corpus
) -> None:
    retriever = Retriever(conn, principal=role("alice"))
    with pytest.raises(SemanticRequired) as info:
        retriever.search(SEARCH_WORDS, scope=own("strict"))
    assert_clean_error(info.value, corpus)
    # With an embedding it works, and the hidden probe-exact rows are not among the results.
    result = retriever.search(SEARCH_WORDS, scope=own("strict"), embedding=PROBE, model=MODEL)
    assert {r.fragment_id for r in result.results} <= set(corpus.visible_without_max_age)
    assert result.semantic.status.value == "used"


# ----------------------------------------------------------------------- the SQL surface


def test_guessed_ids_and_probe_vectors_return_nothing_hidden_through_the_sql_functions(
    conn: psycopg.Connection[Any], corpus: Corpus
) -> None:
    probe = to_pgvector_text(canonical_embedding(PROBE))
    with acting_as(conn, "alice"):
        cur = conn.cursor(row_factory=dict_row)
        decision = cur.execute(
            "SELECT * FROM pyretrieve.authorize(%s, 'docs', 'support', %s, 'optional', NULL, 10)",
            (OWN, hashlib.sha256(b"x").digest()),
        ).fetchone()
        assert decision is not None
        asked = [*corpus.secret_ids, *corpus.visible]
        records = cur.execute(
            "SELECT * FROM pyretrieve.fragments(%s, %s::uuid[])", (decision["decision_id"], asked)
        ).fetchall()
        vectors = cur.execute(
            "SELECT * FROM pyretrieve.vector_candidates(%s, %s, %s::public.vector, 100)",
            (decision["decision_id"], MODEL, probe),
        ).fetchall()
        lexical = cur.execute(
            "SELECT * FROM pyretrieve.lexical_candidates(%s, %s, 100)",
            (decision["decision_id"], f"{SENTINEL_FOREIGN} marker minutes {SEARCH_WORDS}"),
        ).fetchall()
        # The raw tables, as the second wall (pyretrieve_api's RLS) admits them under the
        # bound decision; no principal can read them at all.
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            cur.execute("SELECT count(*) FROM pyretrieve.fragments")
        cur.execute("SET LOCAL ROLE pyretrieve_api")
        counts = cur.execute(
            "SELECT (SELECT count(*) FROM pyretrieve.fragments) AS fragments,"
            " (SELECT count(*) FROM pyretrieve.embeddings) AS embeddings,"
            " (SELECT count(*) FROM pyretrieve.workspaces) AS workspaces,"
            " (SELECT count(*) FROM pyretrieve.projects) AS projects"
        ).fetchone()
    with acting_as(conn, "alice"):  # search() authorizes itself: a transaction of its own
        rows = (
            conn.cursor(row_factory=dict_row)
            .execute(
                "SELECT * FROM pyretrieve.search(%s, 'docs', 'support', %s, %s::public.vector, %s, 50)",
                (OWN, f"{SENTINEL_FOREIGN} {SEARCH_WORDS}", probe, MODEL),
            )
            .fetchall()
        )
    visible = set(corpus.visible)
    assert {r["fragment_id"] for r in records} == visible
    assert {r["fragment_id"] for r in vectors} == visible
    assert {r["fragment_id"] for r in lexical} == visible
    assert {r["fragment_id"] for r in rows} == visible
    assert all(r["source_digest"] == r["content_digest"] for r in vectors)
    # Even the raw tables, at the second wall under the bound decision, hold only the visible rows.
    assert counts == {
        "fragments": len(visible),
        "embeddings": len(visible),
        "workspaces": 1,
        "projects": 1,
    }
    for row in rows:
        assert_clean(repr(row), corpus)
