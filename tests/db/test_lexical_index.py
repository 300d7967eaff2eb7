"""The lexical index in blocks: exactly the postings of the active fragments after every kind
of write, under concurrent writers, with tombstones where a block was held, and few rows."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, acting_as, role
from tests.db.seed import concurrent_writers, lexical_index_errors
from tests.db.test_bm25 import (
    CORPUS,
    QUERY,
    lexical,
    put,
    python_bm25,
    query_lexemes,
    setup,
    visible_documents,
)
from tests.db.test_ingest_bulk import call_batch, row

Conn = psycopg.Connection[Any]


def errors(db: Database) -> dict[str, list[Any]]:
    with db.admin() as admin:
        return lexical_index_errors(admin)


def blocks_of(db: Database, lexeme: str) -> list[dict[str, Any]]:
    with db.admin() as admin:
        return admin.execute(
            "SELECT classification::text AS cls, postings FROM pyretrieve.lexical_blocks"
            " WHERE workspace_id = 'acme' AND project_id = 'docs' AND lexeme = %s"
            " ORDER BY first_docno",
            (lexeme,),
        ).fetchall()


def tombstones(db: Database) -> int:
    with db.admin() as admin:
        row = admin.execute("SELECT count(*) AS n FROM pyretrieve.lexical_tombstones").fetchone()
    assert row is not None
    return int(row["n"])


def matches_python_bm25(conn: Conn, query: str = QUERY) -> None:
    """The leg returns exactly the visible fragments an independent BM25 scores, with its
    scores (to the last bits the float sums may differ in)."""
    got = {r["fragment_id"]: r["score"] for r in lexical(conn, query)}
    expected = python_bm25(visible_documents(conn), query_lexemes(conn, query))
    assert set(got) == set(expected)
    for fid, score in got.items():
        assert score == pytest.approx(expected[fid], rel=1e-12)


def test_the_index_holds_exactly_the_active_postings_after_every_kind_of_write(
    db: Database, conn: Conn
) -> None:
    setup(conn)
    assert errors(db) == {}
    now = datetime.now().astimezone()
    ids = [
        put(conn, "acme", f"zebra savanna note {i}", cls, observed_at=now - timedelta(days=age))
        for i, (cls, age) in enumerate(
            [("internal", 1), ("public", 40), ("confidential", 2), ("restricted", 3)] * 5
        )
    ]
    put(conn, "acme", "zebra savanna note 0", "internal")  # idempotent: the same fragment
    soon = put(conn, "acme", "zebra at dusk", expires_at=now + timedelta(seconds=2))
    assert errors(db) == {}
    with acting_as(conn, "wally"):
        conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (ids[0],))
        conn.execute(
            "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, 'zebra savanna anew')",
            (ids[1],),
        )
    assert errors(db) == {}
    with acting_as(conn, "wally"):
        call_batch(
            conn,
            [
                row(1, "a zebra in a batch"),
                row(2, "a savanna in a batch", replaces=[str(ids[2])]),
                row(3, "zebra " * 300 + "savanna", replaces=[str(ids[4]), str(ids[5])]),
                row(4, None, keep=str(ids[6])),
            ],
        )
    assert errors(db) == {}
    matches_python_bm25(conn)
    # Expiry is a filter on the evaluation time: no write, the same index.
    assert soon in {r["fragment_id"] for r in lexical(conn)}
    with db.admin() as admin:
        admin.execute("SELECT pg_sleep(2.1)")
    assert soon not in {r["fragment_id"] for r in lexical(conn)}
    assert errors(db) == {}
    matches_python_bm25(conn)


def test_concurrent_writers_keep_the_index_exact_and_never_wait(db: Database, conn: Conn) -> None:
    """Four writers in one scope, each holding an open transaction in which it wrote, superseded
    and retracted fragments full of the same words, with lock_timeout 2 s: none waits on
    another (blocks are appended, and merged only where no other writer holds them), and once
    all commit the index holds exactly the active fragments' postings: no update is lost."""
    setup(conn)
    mine = {n: [put(conn, "acme", f"zebra savanna owned by {n} item {i}") for i in range(6)]
            for n in range(4)}  # fmt: skip

    def write(c: Conn, n: int) -> None:
        for i in range(8):
            c.execute(
                "SELECT pyretrieve.put_fragment('acme', 'docs', %s)",
                (f"the zebra and the savanna migration, writer {n} note {i}",),
            )
        c.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (mine[n][0],))
        for old in mine[n][1:3]:
            c.execute(
                "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, %s)",
                (old, f"zebra savanna rewritten by {n} from {old}"),
            )

    assert concurrent_writers(db, "wally", 4, write) == []
    assert errors(db) == {}
    docs = visible_documents(conn)
    assert len(docs) == len(CORPUS) + 4 * (6 + 8 - 1)
    matches_python_bm25(conn)


def test_a_posting_in_a_held_block_is_tombstoned_and_never_counted(
    db: Database, conn: Conn
) -> None:
    """A writer whose merge finds a block held by another open transaction leaves the
    retracted fragment's posting there with a tombstone rather than wait: the leg checks that
    block fragment by fragment, so the retracted fragment neither returns nor counts, byte for
    byte the result once a later write has merged the block and dropped the tombstone."""
    setup(conn)
    target = put(conn, "acme", "zebra migration held in a block")
    holding = threading.Event()
    release = threading.Event()
    failures: list[BaseException] = []
    too: list[Any] = []

    def hold() -> None:
        # A writer adds a fragment with the same words and keeps its transaction open: its
        # merge locked the lexemes' blocks not yet full (FOR UPDATE SKIP LOCKED).
        try:
            with db.connect() as c, c.transaction():
                c.execute(f'SET LOCAL ROLE "{role("wally")}"')
                got = c.execute(
                    "SELECT pyretrieve.put_fragment('acme', 'docs', 'zebra migration too') AS id"
                ).fetchone()
                assert got is not None
                too.append(got["id"])
                holding.set()
                release.wait(timeout=30)
        except BaseException as exc:
            failures.append(exc)
            holding.set()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(timeout=30)
        with acting_as(conn, "wally"):
            conn.execute("SET LOCAL lock_timeout = '2s'")
            conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (target,))
        assert tombstones(db) > 0
        assert errors(db) == {}
        held = lexical(conn)
        assert target not in {r["fragment_id"] for r in held}
        matches_python_bm25(conn)
    finally:
        release.set()
        holder.join(timeout=30)
    assert failures == []
    # A later write with the same words merges the blocks and drops the tombstones; retracting
    # it and the holder's fragment again leaves the visible fragments the held search saw, and
    # the leg returns that result byte for byte, from blocks without a tombstone.
    later = put(conn, "acme", "a later zebra migration")
    assert tombstones(db) == 0
    with acting_as(conn, "wally"):
        conn.execute(
            "SELECT pyretrieve.retract_fragment('acme', 'docs', f.id) FROM unnest(%s::uuid[]) f(id)",
            ([later, *too],),
        )
    assert tombstones(db) == 0
    assert errors(db) == {}
    assert lexical(conn) == held


def test_every_lexeme_keeps_at_most_four_blocks_not_full(db: Database, conn: Conn) -> None:
    """Fragments written one statement each: a lexeme's blocks not yet full are merged once four
    have gathered, so every lexeme, rare or common, keeps at most four blocks not full besides
    its full ones, and its postings stay exact."""
    setup(conn)
    for i in range(150):
        put(conn, "acme", f"zebra herd {i}" + (" okapi" if i % 30 == 0 else ""))
        partial = [b for b in blocks_of(db, "zebra") if b["postings"] < 128]
        assert len(partial) <= 4, i
        assert len(blocks_of(db, "okapi")) <= 4, i
    assert sum(b["postings"] for b in blocks_of(db, "okapi")) == 5
    zebra = blocks_of(db, "zebra")
    assert sum(b["postings"] for b in zebra) == 150 + 5  # the corpus's zebras too
    assert len([b for b in zebra if b["postings"] == 128]) == 1
    assert errors(db) == {}
