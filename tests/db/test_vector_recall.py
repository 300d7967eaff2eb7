"""Vector recall under policy: vector_candidates against exact cosine search in numpy over the
same authorised rows, for scopes of very different sizes (down to 1% of the table).

The corpus: clustered random 32-d vectors (fixed seed) in four scopes of one workspace plus a
foreign workspace, with about a tenth of each scope hidden from the reader (above the ceiling,
retracted, expired or observed in the future). Rows are loaded in bulk by the superuser (test
setup only); the searches run as alice through the SQL API.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
import pytest

from pyretrieve import contract
from pyretrieve.client import Retriever, build_request
from pyretrieve.types import Scope, canonical_json
from pyretrieve.vectors import canonical_embedding, to_pgvector_text
from tests.conftest import (
    Database,
    Server,
    acting_as,
    create_database,
    drop_database,
    role,
    rolled_back,
)
from tests.db.seed import HIDDEN_KINDS, PURPOSE, authorize, copy_fragments, vec, vector

Conn = psycopg.Connection[Any]
MODEL = "recall-32d"
DIM = 32
CLUSTERS = 24
TOTAL = 4000
# project -> rows; "tiny" holds 1% of the table, "other" is a foreign workspace.
SCOPES = {"big": 2400, "mid": 1000, "small": 400, "tiny": 40}
FOREIGN = TOTAL - sum(SCOPES.values())
QUERIES_PER_SCOPE = 8


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
        copy_fragments(
            cur,
            (
                (ws, project, fid, f"{ws} {project} row {i}", "internal",
                 HIDDEN_KINDS[kind] if kind >= 0 else "")
                for i, (fid, kind) in enumerate(zip(ids, kinds, strict=True))
            ),
            now,
        )  # fmt: skip
        with cur.copy(
            "COPY pyretrieve.embeddings (workspace_id, project_id, fragment_id, model_id,"
            " embedding, source_digest) FROM STDIN"
        ) as copy:
            for i, (fid, v) in enumerate(zip(ids, vectors, strict=True)):
                # Each embedding is of its fragment's own text, so search() uses the leg.
                digest = hashlib.sha256(f"{ws} {project} row {i}".encode()).digest()
                copy.write_row((ws, project, fid, MODEL, vec(v), digest))
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


# ------------------------------------------------- how the leg searched, said on every row


def vector_labels(
    c: Corpus, project: str, query: np.ndarray
) -> tuple[set[str], list[str], list[str]]:
    """As alice, in one transaction: the search labels of vector_candidates' rows, and the
    vector part of each explanation of SQL search() (in a rolled-back savepoint) and of the
    Python client, as canonical JSON."""
    values = list(map(float, query))
    text = to_pgvector_text(canonical_embedding(values))
    with c.db.connect() as conn, acting_as(conn, "alice"):
        with rolled_back(conn):
            d = authorize(conn, "corp", project, limit=100)
            labels = {r["search"] for r in vector(conn, d["decision_id"], values, 100, model=MODEL)}
        with rolled_back(conn):
            rows = conn.execute(
                "SELECT explanation FROM pyretrieve.search(p_workspace => 'corp',"
                " p_project => %s, p_purpose => %s, p_query => 'row',"
                " p_embedding => %s::public.vector, p_model => %s, p_limit => 10)",
                (project, PURPOSE, text, MODEL),
            ).fetchall()
        request = build_request(
            "row", scope=Scope(workspace="corp", project=project, purpose=PURPOSE),
            limit=10, embedding=values, model=MODEL,
        )  # fmt: skip
        result = Retriever(conn)._execute_in_transaction(conn, request)
    sql_parts = [canonical_json(r["explanation"]["modalities"]["vector"]) for r in rows]
    py_parts = [canonical_json(r.to_plain()["modalities"]["vector"]) for r in result.results]
    return labels, sql_parts, py_parts


def test_every_row_and_explanation_says_how_the_vector_leg_searched(corpus: Corpus) -> None:
    """Exact without the scope's index, hnsw through it: on every row of the leg, in every
    explanation of SQL search() and of the client (the same bytes), and never because of
    another scope's index."""
    query = clustered(np.random.default_rng(31), corpus.centers, 1)[0]
    with scope_index(corpus, "corp", "mid"):  # another scope's index changes nothing here
        exact = vector_labels(corpus, "big", query)
    with scope_index(corpus, "corp", "big"):
        indexed = vector_labels(corpus, "big", query)
    for (labels, sql_parts, py_parts), want in ((exact, "exact"), (indexed, "hnsw")):
        assert labels == {want}
        assert sql_parts == py_parts
        assert len(sql_parts) == 10
        parts = [json.loads(part) for part in sql_parts]
        assert any(parts), "no result came from the vector leg"
        assert {part["search"] for part in parts if part is not None} == {want}


# ------------------------------------------------------- the automatic choice of the path


def maintain(c: Corpus, min_rows: int, *, dry_run: bool = False) -> list[dict[str, Any]]:
    with c.db.connect(autocommit=True) as conn, acting_as(conn, "adam"):
        return [
            dict(r)
            for r in conn.execute(
                "SELECT * FROM pyretrieve.maintain_vector_indexes(p_min_rows => %s,"
                " p_dry_run => %s)",
                (min_rows, dry_run),
            ).fetchall()
        ]


def scope_indexes(c: Corpus) -> set[str]:
    with c.db.connect() as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'pyretrieve'"
            " AND indexname LIKE 'embeddings_hnsw_s%%'"
        ).fetchall()
    return {r["indexname"] for r in rows}


def test_maintenance_indexes_the_scopes_above_the_line_and_unindexes_those_far_below(
    corpus: Corpus,
) -> None:
    """With the line at 900 embeddings the two scopes above it (big 2,400 and mid 1,000, every
    classification and state counted, as the index holds them all) get an index each, and
    the foreign 160-row scope none; a dry run first changes nothing; a second run keeps them;
    with the line at 4,000 mid (under half of it) loses its index and big (between half and
    the line) keeps it; the vector leg follows the indexes."""
    assert scope_indexes(corpus) == set()
    query = clustered(np.random.default_rng(41), corpus.centers, 1)[0]
    try:
        planned = maintain(corpus, 900, dry_run=True)
        assert [(r["project_id"], r["action"], r["applied"]) for r in planned] == [
            ("big", "create", False), ("mid", "create", False),
        ]  # fmt: skip
        assert scope_indexes(corpus) == set()
        for r in planned:
            assert r["embeddings"] == SCOPES[r["project_id"]], r
            assert (r["workspace_id"], r["model_id"]) == ("corp", MODEL)
        done = maintain(corpus, 900)
        assert [(r["project_id"], r["action"], r["applied"]) for r in done] == [
            ("big", "create", True), ("mid", "create", True),
        ]  # fmt: skip
        assert len(scope_indexes(corpus)) == 2
        assert vector_labels(corpus, "big", query)[0] == {"hnsw"}
        assert vector_labels(corpus, "small", query)[0] == {"exact"}
        again = maintain(corpus, 900)
        assert [(r["project_id"], r["action"], r["applied"]) for r in again] == [
            ("big", "keep", False), ("mid", "keep", False),
        ]  # fmt: skip
        shrunk = maintain(corpus, 4000)
        assert [(r["project_id"], r["action"], r["applied"]) for r in shrunk] == [
            ("big", "keep", False), ("mid", "drop", True),
        ]  # fmt: skip
        assert vector_labels(corpus, "mid", query)[0] == {"exact"}
        assert [(r["project_id"], r["action"]) for r in maintain(corpus, 5000)] == [("big", "drop")]
        assert scope_indexes(corpus) == set()
        assert vector_labels(corpus, "big", query)[0] == {"exact"}
    finally:
        for project in SCOPES:
            with corpus.db.connect(autocommit=True) as conn, acting_as(conn, "adam"):
                conn.execute(
                    "SELECT pyretrieve.drop_vector_index('corp', %s, %s)", (project, MODEL)
                )


# The shipped index options as pg_class.reloptions spells them.
SHIPPED_OPTIONS = [f"{key}={value}" for key, value in contract.VECTOR_INDEX_OPTIONS]


def index_options(c: Corpus) -> dict[str, list[str] | None]:
    """Each scope index's reloptions, by name."""
    with c.db.connect() as conn:
        rows = conn.execute(
            "SELECT c.relname, c.reloptions FROM pg_class c"
            " WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind = 'i'"
            " AND c.relname LIKE 'embeddings_hnsw_s%%'"
        ).fetchall()
    return {r["relname"]: r["reloptions"] for r in rows}


def index_with_older_options(c: Corpus) -> str:
    """The corp/big scope's own index as create_scope_vector_index built it until migration
    0048 (m 16, ef_construction 128); its name."""
    with c.db.admin(autocommit=True) as admin:
        row = admin.execute(
            "SELECT p.scope_serial, m.model_serial, m.dimension FROM pyretrieve.projects p,"
            " pyretrieve.embedding_models m WHERE p.workspace_id = 'corp'"
            " AND p.project_id = 'big' AND m.model_id = %s",
            (MODEL,),
        ).fetchone()
        assert row is not None
        name = f"embeddings_hnsw_s{row['scope_serial']}_m{row['model_serial']}"
        admin.execute(
            f"CREATE INDEX {name} ON pyretrieve.embeddings USING hnsw"
            f" ((embedding::public.vector({row['dimension']})) public.vector_cosine_ops)"
            f" WITH (m = 16, ef_construction = 128)"
            f" WHERE scope_serial = {row['scope_serial']} AND model_id = '{MODEL}'"
        )
    return name


def test_an_index_built_with_older_options_is_rebuilt_while_searches_go_on(
    corpus: Corpus,
) -> None:
    """An install upgraded from a schema that built scope indexes with m 16 and
    ef_construction 128: maintenance says 'rebuild' for that index (and a dry run changes
    nothing), rebuilds it under its own name with the current options while four searchers
    keep querying the scope (none fails, every one goes through an index), and keeps it on
    the next run. create_vector_index on an index already as wanted changes nothing."""
    name = index_with_older_options(corpus)
    queries = clustered(np.random.default_rng(23), corpus.centers, 4)
    labels: list[str] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def searcher(n: int) -> None:
        try:
            with corpus.db.connect(autocommit=True) as conn:
                while not stop.is_set():
                    with acting_as(conn, "alice"):
                        d = authorize(conn, "corp", "big", limit=100)
                        rows = vector(
                            conn, d["decision_id"], list(map(float, queries[n])), 100, model=MODEL
                        )
                    labels.extend({r["search"] for r in rows})
        except BaseException as exc:
            failures.append(exc)

    try:
        assert index_options(corpus) == {name: ["m=16", "ef_construction=128"]}
        planned = maintain(corpus, 2000, dry_run=True)
        assert [(r["project_id"], r["action"], r["applied"]) for r in planned] == [
            ("big", "rebuild", False)
        ]
        assert index_options(corpus) == {name: ["m=16", "ef_construction=128"]}
        threads = [threading.Thread(target=searcher, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        done = maintain(corpus, 2000)
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        assert [(r["project_id"], r["action"], r["applied"]) for r in done] == [
            ("big", "rebuild", True)
        ]
        assert index_options(corpus) == {name: SHIPPED_OPTIONS}
        assert not failures, failures
        assert labels, "no search ran"
        assert set(labels) == {"hnsw"}
        assert [(r["action"], r["applied"]) for r in maintain(corpus, 2000)] == [("keep", False)]
        with corpus.db.connect(autocommit=True) as conn, acting_as(conn, "adam"):
            before = conn.execute(
                "SELECT %s::regclass::oid AS oid", (f"pyretrieve.{name}",)
            ).fetchone()
            conn.execute("SELECT pyretrieve.create_vector_index('corp', 'big', %s)", (MODEL,))
            after = conn.execute(
                "SELECT %s::regclass::oid AS oid", (f"pyretrieve.{name}",)
            ).fetchone()
        assert before == after
    finally:
        stop.set()
        with corpus.db.connect(autocommit=True) as conn, acting_as(conn, "adam"):
            conn.execute("SELECT pyretrieve.drop_vector_index('corp', 'big', %s)", (MODEL,))
    assert index_options(corpus) == {}


def test_a_rebuild_committed_after_a_searchs_snapshot_keeps_it_on_the_index(
    corpus: Corpus,
) -> None:
    """The vector leg reads the scope index's name and its index row in one snapshot, the
    statement's. A repeatable-read search whose snapshot predates the commit of a rebuild (the
    old index dropped, the new one renamed to its name) still takes the index path, as the
    searches after it do. Until 0052 the name came from the newest catalog (to_regclass) and
    the row from the snapshot: such a search found the new name but not its row, and scanned
    the scope exactly."""
    name = index_with_older_options(corpus)
    query = list(map(float, clustered(np.random.default_rng(29), corpus.centers, 1)[0]))
    try:
        with corpus.db.connect(autocommit=True) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with acting_as(conn, "alice"):
                d = authorize(conn, "corp", "big", limit=100)
                assert [r["action"] for r in maintain(corpus, 2000)] == ["rebuild"]
                during = {
                    r["search"] for r in vector(conn, d["decision_id"], query, 100, model=MODEL)
                }
            with acting_as(conn, "alice"):
                d = authorize(conn, "corp", "big", limit=100)
                after = {
                    r["search"] for r in vector(conn, d["decision_id"], query, 100, model=MODEL)
                }
        assert index_options(corpus) == {name: SHIPPED_OPTIONS}
        assert during == {"hnsw"}
        assert after == {"hnsw"}
    finally:
        with corpus.db.connect(autocommit=True) as conn, acting_as(conn, "adam"):
            conn.execute("SELECT pyretrieve.drop_vector_index('corp', 'big', %s)", (MODEL,))
    assert index_options(corpus) == {}


def test_only_admins_maintain_the_indexes_and_a_bad_line_is_refused(corpus: Corpus) -> None:
    """A reader or a writer may not run the maintenance, even as a dry run (it names every
    scope's size, hidden rows included); a bad line is refused before anything runs."""
    with corpus.db.connect(autocommit=True) as conn:
        for nick in ("alice", "wally"):
            for statement in (
                "SELECT * FROM pyretrieve.maintain_vector_indexes()",
                "SELECT * FROM pyretrieve.maintain_vector_indexes(p_dry_run => true)",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, nick):
                    conn.execute(statement)
        for bad in (None, 1, -5):
            with pytest.raises(psycopg.Error) as refused, acting_as(conn, "adam"):
                conn.execute(
                    "SELECT * FROM pyretrieve.maintain_vector_indexes(p_min_rows => %s)", (bad,)
                )
            assert refused.value.sqlstate == "PR010"
    assert scope_indexes(corpus) == set()
