"""Vector recall under policy: vector_candidates against exact cosine search in numpy over the
same authorised rows, for scopes of very different sizes (down to 1% of the table).

The corpus: clustered random 32-d vectors (fixed seed) in four scopes of one workspace plus a
foreign workspace, with about a tenth of each scope hidden from the reader (above the ceiling,
retracted, expired or observed in the future). Rows are loaded in bulk by the superuser (test
setup only); the searches run as alice through the SQL API.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
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


# ------------------------------------------------------------ a scope's own HNSW index


@contextmanager
def scope_index(c: Corpus, workspace: str, project: str) -> Iterator[str]:
    """An admin gives the scope its own HNSW index of the model for the block, then drops it."""
    with c.db.connect(autocommit=True) as conn:
        with acting_as(conn, "adam"):
            row = conn.execute(
                "SELECT pyretrieve.create_vector_index(%s, %s, %s) AS name",
                (workspace, project, MODEL),
            ).fetchone()
        assert row is not None
        try:
            yield str(row["name"])
        finally:
            with acting_as(conn, "adam"):
                conn.execute(
                    "SELECT pyretrieve.drop_vector_index(%s, %s, %s)", (workspace, project, MODEL)
                )


def index_scans(c: Corpus, name: str) -> int:
    with c.db.admin() as admin:
        admin.execute("SELECT pg_stat_clear_snapshot()")
        row = admin.execute(
            "SELECT pg_stat_get_numscans(%s::regclass) AS n", (f"pyretrieve.{name}",)
        ).fetchone()
    assert row is not None
    return int(row["n"])


def search_scope(c: Corpus, project: str, queries: np.ndarray, k: int) -> list[list[Any]]:
    with c.db.connect(autocommit=True) as conn, acting_as(conn, "alice"):
        d = authorize(conn, "corp", project, limit=k)
        return [
            [(r["fragment_id"], r["distance"]) for r in vector(conn, d["decision_id"], list(map(float, q)), k, model=MODEL)]
            for q in queries
        ]  # fmt: skip


@pytest.mark.parametrize("project", ["big", "mid", "tiny"])
def test_a_scope_index_keeps_recall_and_hides_what_the_decision_hides(
    corpus: Corpus, project: str
) -> None:
    rng = np.random.default_rng(100 + list(SCOPES).index(project))
    mask = corpus.authorised[project]
    ids = np.array(corpus.ids[project], dtype=object)[mask]
    vectors = corpus.vectors[project][mask]
    hidden = set(np.array(corpus.ids[project], dtype=object)[~mask])
    outside = {i for p, v in corpus.ids.items() if p != project for i in v}
    k = min(100, len(ids))
    queries = clustered(rng, corpus.centers, QUERIES_PER_SCOPE)
    exact = search_scope(corpus, project, queries, k)
    with scope_index(corpus, "corp", project) as name:
        before = index_scans(corpus, name)
        approximate = search_scope(corpus, project, queries, k)
        assert index_scans(corpus, name) >= before + len(queries), "the leg did not use the index"
    recalls = []
    for q, got, truth_rows in zip(queries, approximate, exact, strict=True):
        got_ids = [i for i, _ in got]
        assert len(got_ids) == k
        assert not (set(got_ids) & hidden), "a hidden row was returned"
        assert not (set(got_ids) & outside), "a row of another scope was returned"
        truth = {ids[i] for i in exact_top(vectors, q, k)}
        assert {i for i, _ in truth_rows} == truth or len(ids) > k  # the exact leg is the oracle
        recalls.append(len(truth & set(got_ids)) / k)
        # A row found by the index has the distance the exact leg computes, bit for bit.
        exact_distance = dict(truth_rows)
        assert all(exact_distance[i] == dist for i, dist in got if i in exact_distance)
    assert min(recalls) >= 0.99, (project, len(ids), recalls)


def test_the_indexed_leg_ignores_the_callers_planner_and_index_settings(corpus: Corpus) -> None:
    """A caller who starves the index scan (ef_search 1, no iterative scan, index scans off)
    or forbids it gets the same rows: the leg's settings are its own."""
    queries = clustered(np.random.default_rng(7), corpus.centers, 3)
    with scope_index(corpus, "corp", "big"):
        plain = search_scope(corpus, "big", queries, 100)
        with corpus.db.connect(autocommit=True) as conn, acting_as(conn, "alice"):
            for setting in (
                "hnsw.ef_search = 1", "hnsw.iterative_scan = off", "hnsw.max_scan_tuples = 1",
                "enable_indexscan = off", "enable_sort = on", "enable_seqscan = on",
            ):  # fmt: skip
                conn.execute(f"SET LOCAL {setting}")
            d = authorize(conn, "corp", "big", limit=100)
            starved = [
                [(r["fragment_id"], r["distance"]) for r in vector(conn, d["decision_id"], list(map(float, q)), 100, model=MODEL)]
                for q in queries
            ]  # fmt: skip
    assert starved == plain


def test_another_scopes_rows_near_the_query_change_nothing_in_an_indexed_scope(
    corpus: Corpus,
) -> None:
    """Neighbourhood density does not cross scopes: 300 rows of another workspace placed right
    at the query leave the indexed scope's rows and distances as they were."""
    q = clustered(np.random.default_rng(11), corpus.centers, 1)
    with scope_index(corpus, "corp", "big"):
        before = search_scope(corpus, "big", q, 100)
        crowd = [uuid.uuid4() for _ in range(300)]
        jitter = np.random.default_rng(12).normal(scale=1e-3, size=(300, DIM))
        with corpus.db.admin() as admin:
            with admin.cursor() as cur:
                with cur.copy(
                    "COPY pyretrieve.fragments (workspace_id, project_id, fragment_id, body,"
                    " classification, state) FROM STDIN"
                ) as copy:
                    for i, fid in enumerate(crowd):
                        copy.write_row(("other", "big", fid, f"crowd {i}", "public", "active"))
                with cur.copy(
                    "COPY pyretrieve.embeddings (workspace_id, project_id, fragment_id,"
                    " model_id, embedding, source_digest) FROM STDIN"
                ) as copy:
                    for fid, j in zip(crowd, jitter, strict=True):
                        copy.write_row(("other", "big", fid, MODEL, vec(q[0] + j), b"\x00" * 32))
            admin.commit()
        try:
            after = search_scope(corpus, "big", q, 100)
        finally:
            with corpus.db.admin() as admin:
                admin.execute("SET session_replication_role = replica")
                admin.execute(
                    "DELETE FROM pyretrieve.embeddings WHERE fragment_id = ANY(%s)", (crowd,)
                )
                admin.execute(
                    "DELETE FROM pyretrieve.fragments WHERE fragment_id = ANY(%s)", (crowd,)
                )
                admin.commit()
    assert after == before


def test_a_scope_index_names_no_workspace_or_project_in_the_catalog(corpus: Corpus) -> None:
    """Every role may read pg_indexes: the index's name and predicate carry the scope's opaque
    serial and the model, never a workspace or project name."""
    with scope_index(corpus, "corp", "mid") as name, corpus.db.connect() as conn:
        row = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname = %s", (name,)
        ).fetchone()
    assert row is not None
    text = f"{row['indexname']} {row['indexdef']}"
    assert "scope_serial" in text
    assert MODEL in text
    assert "corp" not in text
    assert "mid" not in text
    assert "workspace_id" not in text


def test_only_admins_create_a_scope_index_and_an_unknown_scope_is_refused(corpus: Corpus) -> None:
    with corpus.db.connect(autocommit=True) as conn:
        for nick in ("alice", "wally"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, nick):
                conn.execute("SELECT pyretrieve.create_vector_index('corp', 'big', %s)", (MODEL,))
            with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, nick):
                # The indexed leg's helper takes a decision row: no principal may hand it one.
                conn.execute(
                    "SELECT * FROM pyretrieve.approximate_vector_candidates("
                    " (SELECT d FROM (SELECT NULL::pyretrieve.decisions AS d) x),"
                    " %s, '[1]'::public.vector, 10, 1, 1)",
                    (MODEL,),
                )
            for helper in ("create_scope_vector_index", "drop_scope_vector_index"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, nick):
                    conn.execute(f"SELECT pyretrieve.{helper}(1, %s)", (MODEL,))
        with pytest.raises(psycopg.Error) as absent, acting_as(conn, "adam"):
            conn.execute("SELECT pyretrieve.create_vector_index('corp', 'nowhere', %s)", (MODEL,))
        assert absent.value.sqlstate == "PR020"
        with pytest.raises(psycopg.Error) as model, acting_as(conn, "adam"):
            conn.execute("SELECT pyretrieve.create_vector_index('corp', 'big', 'no-such-model')")
        assert model.value.sqlstate == "PR012"


def test_dropping_the_index_under_load_falls_back_to_exact_without_an_error(
    corpus: Corpus,
) -> None:
    """Four searchers keep querying an indexed scope while an admin drops its index: no search
    fails, and every search that starts after the drop returns the exact leg's rows."""
    queries = clustered(np.random.default_rng(21), corpus.centers, 4)
    exact = search_scope(corpus, "big", queries, 100)
    failures: list[BaseException] = []
    after_drop: list[tuple[int, list[Any]]] = []
    dropped = threading.Event()
    stop = threading.Event()

    def searcher(n: int) -> None:
        try:
            with corpus.db.connect(autocommit=True) as conn:
                while not stop.is_set():
                    started_after_drop = dropped.is_set()
                    with acting_as(conn, "alice"):
                        d = authorize(conn, "corp", "big", limit=100)
                        rows = vector(
                            conn, d["decision_id"], list(map(float, queries[n])), 100, model=MODEL
                        )
                    if started_after_drop:
                        after_drop.append((n, [(r["fragment_id"], r["distance"]) for r in rows]))
        except BaseException as exc:
            failures.append(exc)

    with corpus.db.connect(autocommit=True) as conn:
        with acting_as(conn, "adam"):
            conn.execute("SELECT pyretrieve.create_vector_index('corp', 'big', %s)", (MODEL,))
        threads = [threading.Thread(target=searcher, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        with acting_as(conn, "adam"):
            conn.execute("SELECT pyretrieve.drop_vector_index('corp', 'big', %s)", (MODEL,))
        dropped.set()
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not failures, failures
    assert after_drop, "no search ran after the drop"
    for n, rows in after_drop:
        assert rows == exact[n]
