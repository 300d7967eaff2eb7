"""Each scope's number of embeddings of each model comes from an append-only log
(``pyretrieve.embedding_count_log``) that the embeddings' insert trigger writes, and
``maintain_vector_indexes`` places the scopes' own HNSW indexes from it. The log must equal the
embeddings under every kind of write, concurrent writers included; only admins may read it, and
no decision or write binding admits a row of it (it counts hidden rows too).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from pyretrieve.embedders.hashing import HashNgramEmbedder
from pyretrieve.ingest import Ingestor
from tests.conftest import Database, acting_as, at_second_wall, role
from tests.db.seed import authorize, concurrent_writers, grant, put, sha, vec

Conn = psycopg.Connection[Any]
SMALL = "count-3d"

FROM_LOG = """
    SELECT workspace_id::text, project_id::text, model_id, sum(embeddings)::bigint AS n
      FROM pyretrieve.embedding_count_log
     GROUP BY 1, 2, 3
"""
FROM_EMBEDDINGS = """
    SELECT workspace_id::text, project_id::text, model_id, count(*)::bigint AS n
      FROM pyretrieve.embeddings
     GROUP BY 1, 2, 3
"""


def as_set(db: Database, query: str) -> set[tuple[Any, ...]]:
    with db.admin() as admin:
        return {tuple(r.values()) for r in admin.execute(query).fetchall()}


def assert_log_matches_embeddings(db: Database) -> set[tuple[Any, ...]]:
    expected = as_set(db, FROM_EMBEDDINGS)
    assert expected, "the test wrote embeddings"
    assert as_set(db, FROM_LOG) == expected
    return expected


def setup_scopes(conn: Conn) -> None:
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace('acme')")
        for project in ("docs", "notes"):
            conn.execute("SELECT pyretrieve.create_project('acme', %s)", (project,))
            grant(conn, role("wally"), "acme", project, "ingest", "restricted")
        grant(conn, role("alice"), "acme", "docs", "bench", "restricted")
        conn.execute("SELECT pyretrieve.register_model(%s, 3)", (SMALL,))
        conn.execute("SELECT pyretrieve.register_model('hash-ngram-v1', 256)")


def put_embedding(conn: Conn, project: str, fragment: Any, body: str, values: list[float]) -> None:
    conn.execute(
        "SELECT pyretrieve.put_embedding('acme', %s, %s, %s, %s::public.vector, %s)",
        (project, fragment, SMALL, vec(values), sha(body)),
    )


def test_the_log_counts_every_embedding_after_every_kind_of_write(
    db: Database, conn: Conn, tmp_path: Any
) -> None:
    """New embeddings of two models in two scopes, a re-put of the same vector, a changed
    vector, a retracted and a restricted fragment's embeddings (counted: the index holds them),
    the bulk path with embeddings, its re-run, a supersession that re-embeds, and reembed."""
    setup_scopes(conn)
    with acting_as(conn, "wally"):
        bodies = [f"zebra note {i}" for i in range(4)]
        ids = [put(conn, "acme", "docs", b) for b in bodies]
        secret = put(conn, "acme", "docs", "restricted zebra", "restricted")
        other = put(conn, "acme", "notes", "a note elsewhere")
        for i, (fid, body) in enumerate(zip(ids, bodies, strict=True)):
            put_embedding(conn, "docs", fid, body, [1.0, float(i), 0.5])
        put_embedding(conn, "docs", secret, "restricted zebra", [0.0, 1.0, 1.0])
        put_embedding(conn, "notes", other, "a note elsewhere", [1.0, 1.0, 1.0])
        put_embedding(conn, "docs", ids[0], bodies[0], [1.0, 0.0, 0.5])  # the same: no row
        put_embedding(conn, "docs", ids[1], bodies[1], [2.0, 1.0, 0.5])  # changed: no row
        conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (ids[3],))
    path = tmp_path / "records.jsonl"
    path.write_text(
        "".join(f'{{"id": "r{i}", "text": "bulk zebra record {i}"}}\n' for i in range(12)),
        encoding="utf-8",
    )
    embedder = HashNgramEmbedder()

    def ingest() -> None:
        Ingestor(conn, principal=role("wally"), embedder=embedder, batch_size=5).ingest_path(
            path, workspace="acme", project="docs"
        )

    ingest()
    ingest()  # a re-run writes nothing
    path.write_text(
        "".join(f'{{"id": "r{i}", "text": "bulk zebra record {i}, revised"}}\n' for i in range(6)),
        encoding="utf-8",
    )
    ingest()  # supersedes six records, with new embeddings
    Ingestor(conn, principal=role("wally")).reembed(
        workspace="acme", project="notes", model_or_embedder=embedder
    )
    counts = {(ws, pj, model): n for ws, pj, model, n in assert_log_matches_embeddings(db)}
    assert counts == {
        ("acme", "docs", SMALL): 5,
        ("acme", "notes", SMALL): 1,
        ("acme", "docs", "hash-ngram-v1"): 18,
        ("acme", "notes", "hash-ngram-v1"): 1,
    }


def test_concurrent_writers_keep_the_log_exact(db: Database, conn: Conn) -> None:
    """Four writers embed in one scope at once, each holding its transaction open until all
    have written: none waits on another (no shared counter row), none fails, and the log
    still equals the embeddings."""
    setup_scopes(conn)
    writers = 4

    def write(c: Conn, n: int) -> None:
        for i in range(5):
            body = f"zebra writer {n} note {i}"
            fid = put(c, "acme", "docs", body)
            put_embedding(c, "docs", fid, body, [1.0, float(n), float(i)])

    errors = concurrent_writers(db, "wally", writers, write)
    assert errors == []
    assert assert_log_matches_embeddings(db) == {("acme", "docs", SMALL, writers * 5)}


@pytest.mark.parametrize("who", ["reader under a decision", "writer under a binding"])
def test_no_decision_or_write_binding_admits_a_row_of_the_log(
    db: Database, conn: Conn, who: str
) -> None:
    """At the second wall (pyretrieve_api under alice's decision, or under wally's write
    binding) the log admits nothing, though the scope holds counted embeddings, a restricted
    one among them; a forged row for another scope is refused; an admin's function reads it."""
    setup_scopes(conn)
    with acting_as(conn, "wally"):
        for i, level in enumerate(("public", "restricted")):
            fid = put(conn, "acme", "docs", f"zebra {level}", level)
            put_embedding(conn, "docs", fid, f"zebra {level}", [1.0, float(i), 0.0])
    nick = "alice" if who.startswith("reader") else "wally"
    with acting_as(conn, nick):
        if nick == "alice":
            authorize(conn, "acme", "docs", "bench")
        else:
            conn.execute("SELECT pyretrieve.bind_write_scope('acme', 'docs')")
        with at_second_wall(conn):
            row = conn.execute(
                "SELECT count(*) AS n FROM pyretrieve.embedding_count_log"
            ).fetchone()
            assert row == {"n": 0}
    with acting_as(conn, "wally"):
        conn.execute("SELECT pyretrieve.bind_write_scope('acme', 'docs')")
        with (
            at_second_wall(conn),
            pytest.raises(psycopg.errors.InsufficientPrivilege),
            conn.transaction(),
        ):
            conn.execute(
                "INSERT INTO pyretrieve.embedding_count_log VALUES"
                " ('acme', 'notes', 999999, 1, %s, 100000)",
                (SMALL,),
            )
    with acting_as(conn, "adam"):
        rows = conn.execute(
            "SELECT project_id, model_id, embeddings, action FROM"
            " pyretrieve.maintain_vector_indexes(p_min_rows => 2, p_dry_run => true)"
        ).fetchall()
    assert [dict(r) for r in rows] == [
        {"project_id": "docs", "model_id": SMALL, "embeddings": 2, "action": "create"}
    ]
    assert_log_matches_embeddings(db)
