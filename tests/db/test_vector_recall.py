"""Vector recall under policy: vector_candidates against exact cosine search in numpy over the
same authorised rows, for scopes of very different sizes (down to 1% of the table).

The corpus: clustered random 32-d vectors (fixed seed) in four scopes of one workspace plus a
foreign workspace, with about a tenth of each scope hidden from the reader (above the ceiling,
retracted, expired or observed in the future). Rows are loaded in bulk by the superuser (test
setup only); the searches run as alice through the SQL API.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import psycopg
import pytest

from tests.conftest import Database, Server, acting_as, create_database, drop_database, role
from tests.db.seed import PURPOSE, authorize, vec, vector

Conn = psycopg.Connection[Any]
MODEL = "recall-32d"
DIM = 32
CLUSTERS = 24
TOTAL = 4000
# project -> rows; "tiny" holds 1% of the table, "other" is a foreign workspace.
SCOPES = {"big": 2400, "mid": 1000, "small": 400, "tiny": 40}
FOREIGN = TOTAL - sum(SCOPES.values())
QUERIES_PER_SCOPE = 8
HIDDEN_KINDS = ("restricted", "retracted", "expired", "future")


@dataclass
class Corpus:
    db: Database
    ids: dict[str, list[uuid.UUID]] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    authorised: dict[str, np.ndarray] = field(default_factory=dict)  # boolean mask per scope
    centers: np.ndarray = field(default_factory=lambda: np.zeros((0, DIM)))


def clustered(rng: np.random.Generator, centers: np.ndarray, n: int) -> np.ndarray:
    labels = rng.integers(0, len(centers), n)
    return (centers[labels] + rng.normal(scale=0.35, size=(n, DIM))).astype(np.float32)


@pytest.fixture(scope="module")
def corpus(server: Server, template_db: str) -> Iterator[Corpus]:
    rng = np.random.default_rng(20_261_130)
    db = Database(server=server, name=create_database(server, template_db))
    c = Corpus(db=db, centers=rng.normal(size=(CLUSTERS, DIM)))
    try:
        with db.admin(autocommit=True) as admin:
            admin.execute("SELECT pyretrieve.create_workspace('corp')")
            admin.execute("SELECT pyretrieve.create_workspace('other')")
            admin.execute("SELECT pyretrieve.create_project('other', 'big')")
            for project in SCOPES:
                admin.execute("SELECT pyretrieve.create_project('corp', %s)", (project,))
                admin.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, 'corp', %s, %s, 'confidential')",
                    (role("alice"), project, PURPOSE),
                )
            admin.execute("SELECT pyretrieve.register_model(%s, %s)", (MODEL, DIM))
            with admin.transaction():
                for ws, project, n in [
                    *(("corp", p, k) for p, k in SCOPES.items()),
                    ("other", "big", FOREIGN),
                ]:
                    load_scope(admin, rng, c, ws, project, n)
            admin.execute("ANALYZE pyretrieve.fragments")
            admin.execute("ANALYZE pyretrieve.embeddings")
        yield c
    finally:
        drop_database(server, db.name)


def load_scope(
    admin: psycopg.Connection[Any],
    rng: np.random.Generator,
    c: Corpus,
    ws: str,
    project: str,
    n: int,
) -> None:
    ids = [uuid.uuid4() for _ in range(n)]
    vectors = clustered(rng, c.centers, n)
    # About one row in ten is hidden from alice, one of four ways.
    kinds = np.where(rng.random(n) < 0.1, rng.integers(0, len(HIDDEN_KINDS), n), -1)
    row = admin.execute("SELECT now() AS t").fetchone()
    assert row is not None
    now = row["t"]
    with admin.cursor() as cur:
        with cur.copy(
            "COPY pyretrieve.fragments (workspace_id, project_id, fragment_id, body,"
            " classification, state, observed_at, expires_at) FROM STDIN"
        ) as copy:
            for i, (fid, kind) in enumerate(zip(ids, kinds, strict=True)):
                hidden = HIDDEN_KINDS[kind] if kind >= 0 else ""
                copy.write_row((
                    ws, project, fid, f"{ws} {project} row {i}",
                    "restricted" if hidden == "restricted" else "internal",
                    "retracted" if hidden == "retracted" else "active",
                    now + (timedelta(days=1) if hidden == "future" else -timedelta(hours=1)),
                    now - timedelta(minutes=1) if hidden == "expired" else None,
                ))  # fmt: skip
        with cur.copy(
            "COPY pyretrieve.embeddings (workspace_id, project_id, fragment_id, model_id,"
            " embedding, source_digest) FROM STDIN"
        ) as copy:
            for fid, v in zip(ids, vectors, strict=True):
                copy.write_row((ws, project, fid, MODEL, vec(v), b"\x00" * 32))
    c.ids[project if ws == "corp" else f"{ws}/{project}"] = ids
    c.vectors[project if ws == "corp" else f"{ws}/{project}"] = vectors
    c.authorised[project if ws == "corp" else f"{ws}/{project}"] = kinds < 0


def exact_top(vectors: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    """Indices of the k nearest rows by cosine distance, exactly, in float64."""
    v = vectors.astype(np.float64)
    q = query.astype(np.float64)
    distance = 1.0 - (v @ q) / (np.linalg.norm(v, axis=1) * np.linalg.norm(q))
    return list(np.argsort(distance, kind="stable")[:k])


@pytest.mark.parametrize("project", list(SCOPES))
def test_vector_recall_against_exact_search_over_authorised_rows(
    corpus: Corpus, project: str
) -> None:
    rng = np.random.default_rng(list(SCOPES).index(project))
    mask = corpus.authorised[project]
    ids = np.array(corpus.ids[project], dtype=object)[mask]
    vectors = corpus.vectors[project][mask]
    hidden = set(np.array(corpus.ids[project], dtype=object)[~mask])
    foreign = set(corpus.ids["other/big"])
    assert hidden, "each scope holds hidden rows"
    k = min(100, len(ids))
    queries = clustered(rng, corpus.centers, QUERIES_PER_SCOPE)
    recalls = []
    with corpus.db.connect(autocommit=True) as conn, acting_as(conn, "alice"):
        d = authorize(conn, "corp", project, limit=k)
        assert d["candidate_limit"] >= k
        for q in queries:
            rows = vector(conn, d["decision_id"], [float(x) for x in q], k, model=MODEL)
            got = [r["fragment_id"] for r in rows]
            assert len(got) == k
            assert not (set(got) & hidden), "a hidden row was returned"
            assert not (set(got) & foreign), "a foreign row was returned"
            truth = {ids[i] for i in exact_top(vectors, q, k)}
            recalls.append(len(truth & set(got)) / k)
    assert min(recalls) >= 0.98, (project, len(ids), recalls)


def test_the_scopes_span_two_orders_of_magnitude(corpus: Corpus) -> None:
    sizes = {p: len(corpus.ids[p]) for p in SCOPES}
    total = sum(len(v) for v in corpus.ids.values())
    assert total == TOTAL
    assert sizes["tiny"] / total == pytest.approx(0.01)
    assert sizes["big"] / sizes["tiny"] >= 50
    with corpus.db.admin() as admin:
        row = admin.execute(
            "SELECT count(*) AS n FROM pyretrieve.embeddings WHERE model_id = %s", (MODEL,)
        ).fetchone()
    assert row == {"n": TOTAL}
