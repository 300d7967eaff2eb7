"""The lexical index in blocks: exactly the postings of the active fragments after every kind
of write, under concurrent writers, with tombstones where a block was held, and few rows."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from pyretrieve.contract import (
    LEXICAL_BUCKET_GROUP,
    LEXICAL_BUCKETS,
    LEXICAL_BULK_POSTINGS,
    LEXICAL_MAX_PENDING_PAGES,
    LEXICAL_PAGE_POSTINGS,
)
from tests.conftest import Database, acting_as, role, rows_read
from tests.db.seed import (
    RAW_LEXICAL_ENTRIES,
    concurrent_writers,
    error_fields,
    lexical_index_errors,
)
from tests.db.test_bm25 import (
    CORPUS,
    PURPOSE,
    QUERY,
    lexical,
    put,
    python_bm25,
    query_lexemes,
    setup,
    sha,
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


def stored(db: Database, lexeme: str) -> int:
    """The entries of an acme/docs lexeme as stored, in blocks and pages, tombstoned or not."""
    with db.admin() as admin:
        row = admin.execute(
            f"SELECT count(*) AS n FROM ({RAW_LEXICAL_ENTRIES}) r"
            " WHERE r.workspace_id = 'acme' AND r.project_id = 'docs' AND r.lexeme = %s",
            (lexeme,),
        ).fetchone()
    assert row is not None
    return int(row["n"])


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
    # Two earlier blocks not full of a word of its own (the scope's first write put the corpus's
    # first fragment in pages), so that the holder's write, the fourth, merges them and holds
    # the target's block.
    for i in range(2):
        put(conn, "acme", f"gnu early {i}")
    target = put(conn, "acme", "zebra migration gnu held in a block")
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
                    "SELECT pyretrieve.put_fragment('acme', 'docs', 'zebra migration gnu too') AS id"
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
    later = put(conn, "acme", "a later zebra migration gnu")
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
    # The corpus's zebras too (its first fragment's in a page: the scope's first write).
    assert stored(db, "zebra") == 150 + 5
    assert sum(b["postings"] for b in zebra) < 150 + 5
    assert len([b for b in zebra if b["postings"] == 128]) == 1
    assert errors(db) == {}


# -- pages of small lists (migration 0022) ---------------------------------------------------


def compact(
    conn: Conn, nick: str = "wally", project: str = "docs", min_share: float | None = None
) -> tuple[int, int, int]:
    """compact_lexical_index as ``nick``; ``min_share`` None: the default (always)."""
    with acting_as(conn, nick):
        got = conn.execute(
            "SELECT rows_read, rows_written, postings"
            " FROM pyretrieve.compact_lexical_index('acme', %s)"
            if min_share is None
            else "SELECT rows_read, rows_written, postings"
            " FROM pyretrieve.compact_lexical_index('acme', %s, p_min_share => %s)",
            (project,) if min_share is None else (project, min_share),
        ).fetchone()
    assert got is not None
    return int(got["rows_read"]), int(got["rows_written"]), int(got["postings"])


def index_rows(db: Database, workspace: str = "acme") -> dict[str, Any]:
    """Per table and classification of a workspace: rows and postings (as the superuser)."""
    with db.admin() as admin:
        rows = admin.execute(
            "SELECT 'blocks' AS t, classification::text AS cls, count(*) AS n, sum(postings) AS p"
            "  FROM pyretrieve.lexical_blocks WHERE workspace_id = %(ws)s GROUP BY 2"
            " UNION ALL"
            " SELECT 'pages', classification::text, count(*), sum(postings)"
            "  FROM pyretrieve.lexical_pages WHERE workspace_id = %(ws)s GROUP BY 2",
            {"ws": workspace},
        ).fetchall()
    return {f"{r['t']}/{r['cls']}": (r["n"], r["p"]) for r in rows}


def small_blocks(db: Database) -> int:
    """Blocks of lexemes without a full block: what compaction moves into pages."""
    with db.admin() as admin:
        row = admin.execute(
            "SELECT count(*) AS n FROM pyretrieve.lexical_blocks b"
            " WHERE NOT EXISTS (SELECT 1 FROM pyretrieve.lexical_blocks f"
            "  WHERE (f.workspace_id, f.project_id, f.lexeme, f.classification)"
            "      = (b.workspace_id, b.project_id, b.lexeme, b.classification)"
            "    AND f.postings = 128)"
        ).fetchone()
    assert row is not None
    return int(row["n"])


QUERIES = (QUERY, "zebra", "okapi herd", "savanna grass every year", "note 7 rewritten", "river")


def legs(conn: Conn) -> list[list[dict[str, Any]]]:
    return [lexical(conn, q) for q in QUERIES]


def test_compaction_moves_small_lists_into_pages_and_every_result_stays_byte_for_byte(
    db: Database, conn: Conn
) -> None:
    """Compaction moves every lexeme with fewer than 128 postings in a classification from its
    blocks into pages (fewer rows), lexemes that reach 128 back to blocks, and the tombstoned
    postings of the pages it rewrites out; the index stays exact, and every row, score and term
    of the leg (a ceiling, a 30-day window and expiries that read some pages in part) is the
    one before it, byte for byte."""
    setup(conn)
    now = datetime.now().astimezone()
    ids = [
        put(conn, "acme", f"zebra herd note {i}" + (" okapi" if i % 9 == 0 else ""), cls,
            observed_at=now - timedelta(days=age),
            expires_at=now + timedelta(days=1) if i % 11 == 0 else None)
        for i, (cls, age) in enumerate(
            [("internal", 1), ("public", 40), ("confidential", 2), ("internal", 3)] * 12
        )
    ]  # fmt: skip
    before = legs(conn)
    rows = index_rows(db)
    assert small_blocks(db) > 0
    read, written, moved = compact(conn)
    assert errors(db) == {}
    assert small_blocks(db) == 0
    assert 0 < written < read
    # Every block's postings, and those of the pages of the buckets it rewrote (the scope's
    # first write went straight to pages).
    in_blocks = sum(p for k, (_n, p) in rows.items() if k.startswith("blocks/"))
    assert in_blocks <= moved <= sum(p for _n, p in rows.values())
    after = index_rows(db)
    assert sum(n for n, _ in after.values()) < sum(n for n, _ in rows.values())
    assert legs(conn) == before
    # Nothing left to move: a second run reads nothing.
    assert compact(conn) == (0, 0, 0)

    # Retracted and superseded fragments whose postings are in pages: tombstones, never counted,
    # and compaction drops them with their postings.
    with acting_as(conn, "wally"):
        conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (ids[0],))
        conn.execute(
            "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, 'zebra note rewritten')",
            (ids[3],),
        )
    assert tombstones(db) > 0
    assert errors(db) == {}
    matches_python_bm25(conn)
    held = legs(conn)
    compact(conn)
    assert tombstones(db) == 0
    assert errors(db) == {}
    assert legs(conn) == held

    # A lexeme whose pages and blocks together reach 128 postings of a classification leaves
    # the pages for blocks: 100 sightings in one batch (a block), compacted into a page, then
    # 30 more (another block), compacted again.
    with acting_as(conn, "wally"):
        call_batch(conn, [row(i, f"okapi sighting {i}") for i in range(100)])
    compact(conn)
    assert all(b["cls"] != "internal" for b in blocks_of(db, "okapi"))
    with acting_as(conn, "wally"):
        call_batch(conn, [row(i, f"okapi sighting {i}") for i in range(100, 130)])
    sightings = legs(conn)
    compact(conn)
    assert errors(db) == {}
    internal = [b["postings"] for b in blocks_of(db, "okapi") if b["cls"] == "internal"]
    assert internal[0] == 128
    assert sum(internal) > 130
    with db.admin() as admin:
        paged = admin.execute(
            "SELECT count(*) AS n FROM pyretrieve.lexical_pages"
            " WHERE classification = 'internal' AND 'okapi' = ANY (lexemes)"
        ).fetchone()
    assert paged is not None
    assert paged["n"] == 0
    assert small_blocks(db) == 0
    assert legs(conn) == sightings


def test_compaction_and_writers_at_once_neither_wait_nor_lose_a_posting(
    db: Database, conn: Conn
) -> None:
    """Two writers adding, retracting and superseding fragments of the same words while two
    compactions run, all four holding their transactions open (lock_timeout 2 s): none waits
    (compaction takes only blocks and pages no one holds, and leaves a bucket with a page held
    elsewhere for a later run), and once all commit the index holds exactly the active
    postings, each once, and the leg matches an independent BM25."""
    setup(conn)
    mine = {n: [put(conn, "acme", f"zebra savanna owned by {n} item {i}") for i in range(6)]
            for n in range(2)}  # fmt: skip
    compact(conn)

    def work(c: Conn, n: int) -> None:
        if n >= 2:
            c.execute("SELECT * FROM pyretrieve.compact_lexical_index('acme', 'docs')")
            return
        for i in range(8):
            c.execute(
                "SELECT pyretrieve.put_fragment('acme', 'docs', %s)",
                (f"the zebra and the savanna migration, writer {n} note {i}",),
            )
        c.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (mine[n][0],))
        c.execute(
            "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, %s)",
            (mine[n][1], f"zebra savanna rewritten by {n}"),
        )

    assert concurrent_writers(db, "wally", 4, work) == []
    assert errors(db) == {}
    matches_python_bm25(conn)
    before = legs(conn)
    compact(conn)
    assert errors(db) == {}
    assert small_blocks(db) == 0
    assert legs(conn) == before


def test_a_writer_compacts_only_its_own_scope_and_classifications(db: Database, conn: Conn) -> None:
    """Attack: a writer whose ceiling is internal compacts a scope that also holds confidential
    and restricted fragments, then names a scope it holds no grant for. Its run moves only the
    rows of its classifications (the others' rows and postings are untouched), what it reports
    counts only those, the foreign scope fails as an absent one would (PR001) with nothing
    moved, and a reader cannot compact at all."""
    setup(conn)
    with acting_as(conn, "adam"):
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'ingest', 'internal')",
            (role("walt"),),
        )
    for i in range(20):
        for cls in ("public", "internal", "confidential", "restricted"):
            put(conn, "acme", f"zebra {cls} secret word{i} {cls}{i}", cls)
        put(conn, "globex", f"globex zebra word{i}")
    rows = index_rows(db)
    hidden = {k: v for k, v in rows.items() if k.endswith(("/confidential", "/restricted"))}
    assert hidden
    _read, _written, moved = compact(conn, "walt")
    after = index_rows(db)
    assert {k: v for k, v in after.items() if k in hidden} == hidden
    assert "pages/confidential" not in after
    assert "pages/restricted" not in after
    mine = {k: p for k, (_n, p) in rows.items() if k.endswith(("/public", "/internal"))}
    assert sum(p for k, p in mine.items() if k.startswith("blocks/")) <= moved
    assert moved <= sum(mine.values())
    assert errors(db) == {}
    settled = index_rows(db, "globex")
    with acting_as(conn, "walt"), pytest.raises(psycopg.Error) as denied:
        conn.execute("SELECT * FROM pyretrieve.compact_lexical_index('globex', 'docs')")
    with acting_as(conn, "walt"), pytest.raises(psycopg.Error) as absent:
        conn.execute("SELECT * FROM pyretrieve.compact_lexical_index('nowhere', 'docs')")
    assert error_fields(denied.value)[:2] == ("PR001", "access denied")
    assert error_fields(denied.value) == error_fields(absent.value)
    with acting_as(conn, "alice"), pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT * FROM pyretrieve.compact_lexical_index('acme', 'docs')")
    assert index_rows(db, "globex") == settled


def test_principals_cannot_touch_the_pages_directly(db: Database, conn: Conn) -> None:
    """Attack: a writer and a reader try to read, insert, update and delete pages, and to call
    the internal compaction with a wider ceiling: every attempt is refused for lack of a
    privilege, whatever the row would be."""
    setup(conn)
    for i in range(5):
        put(conn, "acme", f"zebra note {i}")
    compact(conn)
    statements = [
        "SELECT count(*) FROM pyretrieve.lexical_pages",
        "INSERT INTO pyretrieve.lexical_pages (workspace_id, project_id, bucket, classification,"
        " first_lexeme, last_lexeme, postings, first_docno, last_docno, min_observed_at,"
        " max_observed_at, lexemes, starts, entries) VALUES ('acme', 'docs', 0, 'public', 'a',"
        " 'a', 1, 1, 1, now(), now(), '{a}', '{1}', '{4294967297}')",
        "UPDATE pyretrieve.lexical_pages SET postings = postings",
        "DELETE FROM pyretrieve.lexical_pages",
        "SELECT * FROM pyretrieve.compact_lexical_postings('acme', 'docs', 'restricted')",
        "SELECT nextval('pyretrieve.lexical_page_seq')",
    ]
    for nick in ("wally", "alice"):
        for statement in statements:
            with acting_as(conn, nick), pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    assert errors(db) == {}


# Each corruption, made by hand as the superuser, and the invariant check that must name it.
CORRUPTIONS = {
    "a block whose time range does not bound its fragments": (
        "UPDATE pyretrieve.lexical_blocks SET min_observed_at = min_observed_at + interval"
        " '1 day', max_observed_at = max_observed_at + interval '1 day'"
    ),
    "a page whose time range does not bound its fragments": (
        "UPDATE pyretrieve.lexical_pages SET min_observed_at = min_observed_at + interval"
        " '1 day', max_observed_at = max_observed_at + interval '1 day'"
    ),
    "a block whose summary is wrong": "UPDATE pyretrieve.lexical_blocks SET max_tf = max_tf + 1",
    "a page whose layout or summary is wrong": (
        "UPDATE pyretrieve.lexical_pages SET last_docno = last_docno + 1"
    ),
    "an active fragment's posting missing": "DELETE FROM pyretrieve.lexical_pages",
}


def test_each_invariant_check_finds_the_corruption_it_names(db: Database, conn: Conn) -> None:
    """The checks every test above relies on can fail: on an index with both blocks and pages,
    each corruption made by hand (and rolled back) is named by its check."""
    setup(conn)
    for i in range(6):
        put(conn, "acme", f"zebra herd note {i}", "internal")
    compact(conn)
    for i in range(6, 9):
        put(conn, "acme", f"zebra herd note {i}", "internal")  # blocks the run has not moved
    assert errors(db) == {}
    assert small_blocks(db) > 0
    assert index_rows(db)
    for what, corruption in CORRUPTIONS.items():
        with db.admin() as admin, admin.transaction(force_rollback=True):
            admin.execute(corruption)
            found = lexical_index_errors(admin)
        assert what in found, what
    assert errors(db) == {}


def test_a_min_share_compacts_only_once_enough_waits_in_blocks(db: Database, conn: Conn) -> None:
    """p_min_share > 0: a run moves nothing while the postings in blocks not full and the
    tombstones are below that share of the postings in pages, and compacts once they reach it;
    the leg's rows are the same either way. A share that is negative, infinite, not a number
    or NULL is refused (PR010) before anything moves."""
    setup(conn)
    ids = [put(conn, "acme", f"zebra herd note {i} savanna river") for i in range(12)]
    assert compact(conn, min_share=1.0)[0] > 0  # no page yet: the share is met at once
    paged = sum(p for k, (_, p) in index_rows(db).items() if k.startswith("pages/"))
    put(conn, "acme", "zebra okapi note")  # a few postings wait in blocks
    waiting = small_blocks(db)
    assert waiting > 0
    before = legs(conn)
    assert compact(conn, min_share=1.0) == (0, 0, 0)
    assert small_blocks(db) == waiting
    assert legs(conn) == before
    # A retraction's tombstones count as waiting too.
    with acting_as(conn, "wally"):
        conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (ids[0],))
    assert tombstones(db) > 0
    after_retract = legs(conn)
    assert compact(conn, min_share=1.0) == (0, 0, 0)
    assert compact(conn, min_share=0.01)[0] > 0  # 0.01 of the pages' postings is waiting
    assert (small_blocks(db), tombstones(db)) == (0, 0)
    assert legs(conn) == after_retract
    assert paged > 0
    for bad in (-0.5, float("nan"), float("inf"), None):
        with acting_as(conn, "wally"), pytest.raises(psycopg.Error) as caught:
            conn.execute(
                "SELECT * FROM pyretrieve.compact_lexical_index('acme', 'docs', %s)", (bad,)
            )
        assert error_fields(caught.value)[0] == "PR010"
    assert errors(db) == {}


def test_the_share_rule_counts_nothing_a_writer_may_not_see(db: Database, conn: Conn) -> None:
    """Attack: a writer whose ceiling is internal picks shares just above and just below the
    ratio of its own waiting postings to its own paged ones, in a scope whose restricted rows
    (pages, and blocks waiting) would tip either choice if they were counted. Whether its run
    compacts follows its own rows alone, so the rule is no oracle for hidden postings."""
    setup(conn)
    with acting_as(conn, "adam"):
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'ingest', 'internal')",
            (role("walt"),),
        )
    for i in range(10):
        put(conn, "acme", f"zebra herd note {i} savanna", "internal")
        put(conn, "acme", f"zebra secret plan {i} vault", "restricted")
    compact(conn, "wally")  # pages of both classifications
    for i in range(2):
        put(conn, "acme", f"zebra herd late note {i}", "internal")  # the writer's rows waiting

    def visible_ratio() -> float:
        with db.admin() as admin:
            row = admin.execute(
                "SELECT (SELECT sum(postings) FROM pyretrieve.lexical_blocks"
                "         WHERE classification <= 'internal' AND postings < 128) AS small,"
                "       (SELECT sum(postings) FROM pyretrieve.lexical_pages"
                "         WHERE classification <= 'internal') AS paged"
            ).fetchone()
        assert row is not None
        assert row["small"]
        assert row["paged"]
        return float(row["small"]) / float(row["paged"])

    ratio = visible_ratio()
    for i in range(30):
        put(conn, "acme", f"zebra secret extra {i} vault key", "restricted")  # hidden, waiting
    hidden = {k: v for k, v in index_rows(db).items() if k.endswith("/restricted")}
    assert "pages/restricted" in hidden
    assert "blocks/restricted" in hidden
    # The hidden rows would tip both choices: their waiting postings lift the ratio above
    # 1.01 times the writer's own, and their pages bring it below 0.99 times.
    paged = float(index_rows(db)["pages/internal"][1])
    small = ratio * paged
    assert (small + hidden["blocks/restricted"][1]) / paged > ratio * 1.01
    assert small / (paged + hidden["pages/restricted"][1]) < ratio * 0.99
    before = index_rows(db)
    # Just above its own ratio: nothing moves (counting the hidden waiting postings would).
    assert compact(conn, "walt", min_share=ratio * 1.01) == (0, 0, 0)
    assert index_rows(db) == before
    # Just below: it compacts its own rows (counting the hidden pages would have skipped).
    assert compact(conn, "walt", min_share=ratio * 0.99)[0] > 0
    assert {k: v for k, v in index_rows(db).items() if k.endswith("/restricted")} == hidden
    assert errors(db) == {}


def test_a_first_write_into_an_empty_index_goes_straight_to_pages(db: Database, conn: Conn) -> None:
    """Since 0026 a writer's first write into a scope whose index holds nothing it may see
    writes its lists as compaction would leave them: pages for lexemes with fewer than 128
    postings, blocks of 128 for the others, so compaction has nothing to move; the index is exact
    and the leg equals an independent BM25. Later writes wait in blocks as before.
    Attack: restricted rows already in the scope, which an internal writer may not see, neither
    change what its first write does nor are touched by it (the same layout as in a scope
    without them), so the writer's layout is no oracle for hidden rows."""
    setup(conn)  # acme/docs: CORPUS, written by wally (restricted ceiling)
    with acting_as(conn, "adam"):
        for ws in ("acme", "globex"):
            conn.execute("SELECT pyretrieve.create_project(%s, 'fresh')", (ws,))
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, 'fresh', 'ingest', 'restricted')",
                (role("wally"), ws),
            )
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, 'fresh', 'ingest', 'internal')",
                (role("walt"), ws),
            )
    with acting_as(conn, "wally"):  # hidden from walt: acme/fresh only
        call_batch(
            conn,
            [row(i, f"okapi vault secret {i}", classification="restricted") for i in range(5)],
            project="fresh",
        )
    hidden = index_rows(db)
    assert hidden.get("pages/restricted", (0, 0))[1] > 0  # wally's first write: pages

    def first_write(ws: str) -> None:
        with acting_as(conn, "walt"):
            call_batch(
                conn,
                [row(i, f"okapi sighting {i}" + (" rare" if i == 3 else "")) for i in range(130)],
                workspace=ws,
                project="fresh",
            )

    def layout(ws: str) -> list[tuple[Any, ...]]:
        with db.admin() as admin:
            return [
                tuple(r.values())
                for r in admin.execute(
                    "SELECT 'block', lexeme, classification::text, postings, max_tf, min_length,"
                    "       cardinality(entries), NULL::text[]"
                    "  FROM pyretrieve.lexical_blocks"
                    " WHERE workspace_id = %(ws)s AND project_id = 'fresh'"
                    "   AND classification <= 'internal'"
                    " UNION ALL"
                    " SELECT 'page', first_lexeme, classification::text, postings, bucket, starts[1],"
                    "       cardinality(entries), lexemes"
                    "  FROM pyretrieve.lexical_pages"
                    " WHERE workspace_id = %(ws)s AND project_id = 'fresh'"
                    "   AND classification <= 'internal'"
                    " ORDER BY 1, 2, 3, 4",
                    {"ws": ws},
                ).fetchall()
            ]

    restricted = {k: v for k, v in index_rows(db).items() if k.endswith("/restricted")}
    first_write("acme")
    first_write("globex")
    assert errors(db) == {}
    acme = layout("acme")
    assert acme == layout("globex")
    # okapi and sighting (130 postings each): a block of 128 and one of 2; every other lexeme
    # (the numbers, rare) in pages, none waiting in blocks.
    blocks = sorted((r[1], r[3]) for r in acme if r[0] == "block")
    assert blocks == [("okapi", 2), ("okapi", 128), ("sight", 2), ("sight", 128)]
    assert sum(r[3] for r in acme if r[0] == "page") == 130 + 1  # a number each, and rare
    assert {k: v for k, v in index_rows(db).items() if k.endswith("/restricted")} == restricted
    assert compact(conn, "walt", project="fresh") == (0, 0, 0)
    # A later write waits in blocks until compaction.
    with acting_as(conn, "walt"):
        call_batch(conn, [row(1, "a rare okapi")], project="fresh")
    with db.admin() as admin:
        waiting = admin.execute(
            "SELECT count(*) AS n FROM pyretrieve.lexical_blocks WHERE workspace_id = 'acme'"
            " AND project_id = 'fresh' AND lexeme = 'rare' AND postings = 1"
        ).fetchone()
    assert waiting is not None
    assert waiting["n"] == 1
    assert errors(db) == {}


def test_two_first_writes_at_once_both_go_to_pages_and_compaction_merges_them(
    db: Database, conn: Conn
) -> None:
    """Two writers' first writes into one empty scope, each in a transaction still open when
    the other writes (so neither sees the other's rows): both take the first write's way to
    pages, neither waits on the other, the buckets then hold pages of both whose lexeme ranges
    overlap, and the index is exact, the leg equal to an independent BM25. Since 0027 the
    postings of overlapping pages count as waiting in the share rule (a share just above theirs
    moves nothing, just below compacts), and compaction merges each such bucket's pages into
    pages that no longer overlap, every row, score and term the same."""
    setup(conn, corpus=())

    def write(c: Conn, n: int) -> None:
        call_batch(c, [row(i, f"zebra savanna writer {n} note {i} okapi{n}") for i in range(20)])

    def overlapping() -> int:
        """Pairs of pages of one bucket and classification whose lexeme ranges meet."""
        with db.admin() as admin:
            got = admin.execute(
                "SELECT count(*) AS n FROM pyretrieve.lexical_pages a"
                "  JOIN pyretrieve.lexical_pages b"
                "    ON (b.workspace_id, b.project_id, b.bucket, b.classification)"
                "     = (a.workspace_id, a.project_id, a.bucket, a.classification)"
                "   AND b.page > a.page"
                '   AND b.first_lexeme COLLATE "C" <= a.last_lexeme'
                '   AND a.first_lexeme COLLATE "C" <= b.last_lexeme'
            ).fetchone()
        assert got is not None
        return int(got["n"])

    assert concurrent_writers(db, "wally", 2, write) == []
    assert errors(db) == {}
    assert small_blocks(db) == 0
    assert overlapping() > 0  # 'zebra' and 'savanna', at least, in a page of each writer
    matches_python_bm25(conn, "zebra savanna note okapi0 okapi1")
    before = legs(conn)
    # Nothing else waits: the overlapping pages' share of the paged postings decides.
    with db.admin() as admin:
        got = admin.execute(
            "SELECT (SELECT sum(postings) FROM pyretrieve.overlapping_pages('acme', 'docs',"
            "        'restricted'))::float8 / sum(postings) AS share"
            "  FROM pyretrieve.lexical_pages"
        ).fetchone()
    assert got is not None
    share = float(got["share"])
    assert 0 < share <= 1
    assert compact(conn, min_share=share * 1.01) == (0, 0, 0)
    assert overlapping() > 0
    assert compact(conn, min_share=share * 0.99)[0] > 0
    assert errors(db) == {}
    assert overlapping() == 0
    assert legs(conn) == before
    assert compact(conn, min_share=0.01) == (0, 0, 0)  # nothing waits any more


def matches_python_bm25_top(conn: Conn, query: str) -> None:
    """The leg's 100 rows are an independent BM25's best 100 over the visible fragments, with
    its scores (ties at the cut aside, which the leg breaks by content)."""
    got = {r["fragment_id"]: r["score"] for r in lexical(conn, query)}
    expected = python_bm25(visible_documents(conn), query_lexemes(conn, query))
    assert len(got) == min(100, len(expected))
    for fid, score in got.items():
        assert score == pytest.approx(expected[fid], rel=1e-12)
    cut = min(got.values())
    assert {f for f, v in expected.items() if v > cut * (1 + 1e-12)} <= set(got)


# Each row of a bulk statement: 35 distinct lexemes (okapi, one of its own, so that no two rows
# are the same content, and 33 of 500 numbered words).
ROW_LEXEMES = 35


def bulk_rows(first: int, n: int, cls: str = "internal", extra: int = 0) -> list[dict[str, Any]]:
    """``n`` rows of ROW_LEXEMES distinct lexemes each (source uris from ``first`` on), and with
    ``extra`` > 0 one more row of that many lexemes: ``n * ROW_LEXEMES + extra`` postings."""
    rows = [
        row(i, f"okapi r{i} " + " ".join(f"v{(i * 7 + j * 13) % 500}" for j in range(ROW_LEXEMES - 2)),
            classification=cls)
        for i in range(first, first + n)
    ]  # fmt: skip
    if extra:
        rows.append(
            row(first + n, " ".join(f"u{first}x{j}" for j in range(extra)), classification=cls)
        )
    return rows


def pending(db: Database, cls: str | None = None) -> tuple[int, int, int]:
    """acme/docs's pending pages (of one classification, or all): pages, postings, and the
    most in one bucket and classification."""
    with db.admin() as admin:
        got = admin.execute(
            "SELECT count(*) AS pages, coalesce(sum(postings), 0) AS postings,"
            "       coalesce(max(n), 0) AS most"
            "  FROM (SELECT postings, count(*) OVER (PARTITION BY classification, bucket) AS n"
            "          FROM pyretrieve.lexical_pages"
            "         WHERE workspace_id = 'acme' AND project_id = 'docs' AND pending"
            "           AND (%s::text IS NULL OR classification::text = %s)) p",
            (cls, cls),
        ).fetchone()
    assert got is not None
    return int(got["pages"]), int(got["postings"]), int(got["most"])


def test_a_bulk_write_puts_its_small_lists_in_pending_pages_that_compaction_merges(
    db: Database, conn: Conn
) -> None:
    """Since 0050 a statement of LEXICAL_BULK_POSTINGS postings or more writes its lists of
    fewer than 128 as pending pages (one per bucket and classification) instead of a block per
    lexeme; one posting fewer, and the statement waits in blocks as before. The index stays
    exact, the leg equals an independent BM25, the pending postings count as waiting in the
    share rule, and compaction merges them into their buckets' pages with every row, score and
    term the same. A single fragment's write is no bulk write."""
    setup(conn)
    compact(conn)
    assert compact(conn, min_share=1.0) == (0, 0, 0)  # nothing waits
    # One posting under the threshold: no pending page, a block per lexeme.
    with acting_as(conn, "wally"):
        call_batch(conn, bulk_rows(0, (LEXICAL_BULK_POSTINGS - 1) // ROW_LEXEMES,
                                   extra=(LEXICAL_BULK_POSTINGS - 1) % ROW_LEXEMES))  # fmt: skip
    assert pending(db) == (0, 0, 0)
    assert [b["postings"] for b in blocks_of(db, "v7")] != []
    compact(conn)
    # At the threshold: a bulk write.
    with acting_as(conn, "wally"):
        call_batch(conn, bulk_rows(1000, LEXICAL_BULK_POSTINGS // ROW_LEXEMES,
                                   extra=LEXICAL_BULK_POSTINGS % ROW_LEXEMES))  # fmt: skip
    pages, postings, most = pending(db)
    assert (pages > 0, most) == (True, 1)
    # Every list of the statement had fewer than 128 postings (okapi's too): all pending, and
    # not one block written.
    assert postings == LEXICAL_BULK_POSTINGS
    assert small_blocks(db) == 0
    assert errors(db) == {}
    queries = ("okapi v7 v13 zebra", "v499 u1000x0", "savanna okapi")
    for query in queries:
        matches_python_bm25_top(conn, query)
    before = legs(conn) + [lexical(conn, q) for q in queries]
    # The pending postings are what waits: a share just above theirs moves nothing, just
    # below compacts.
    with db.admin() as admin:
        got = admin.execute(
            "SELECT sum(postings) AS n FROM pyretrieve.lexical_pages"
            " WHERE workspace_id = 'acme' AND project_id = 'docs' AND NOT pending"
        ).fetchone()
    assert got is not None
    share = postings / float(got["n"])
    assert compact(conn, min_share=share * 1.01) == (0, 0, 0)
    assert compact(conn, min_share=share * 0.99)[0] > 0
    assert pending(db) == (0, 0, 0)
    assert errors(db) == {}
    assert legs(conn) + [lexical(conn, q) for q in queries] == before
    # A list of 128 or more in one bulk statement goes to blocks; a single write to a block.
    with acting_as(conn, "wally"):
        call_batch(conn, bulk_rows(2000, 130))
    assert [b["postings"] for b in blocks_of(db, "okapi")][-2:] == [128, 2]
    compact(conn)
    put(conn, "acme", "okapi quagga sighting")
    assert pending(db) == (0, 0, 0)
    assert blocks_of(db, "quagga") == [{"cls": "internal", "postings": 1}]
    assert errors(db) == {}
    matches_python_bm25_top(conn, "okapi quagga v7")


def test_a_bucket_with_16_pending_pages_is_compacted_and_hidden_ones_count_for_nobody_else(
    db: Database, conn: Conn
) -> None:
    """The leg reads each pending page of a term's bucket, so the share rule also compacts once
    a bucket holds LEXICAL_MAX_PENDING_PAGES of them, whatever the share asked for.
    Attack: an internal writer's run, with a share it cannot meet, in a scope whose restricted
    buckets (which it may not see) hold that many pending pages already: it moves nothing. Its
    own sixteenth page does compact its own rows, and leaves the restricted ones alone."""
    setup(conn)
    with acting_as(conn, "adam"):
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'ingest', 'internal')",
            (role("walt"),),
        )
    compact(conn)
    for k in range(LEXICAL_MAX_PENDING_PAGES):
        with acting_as(conn, "wally"):
            call_batch(conn, bulk_rows(10_000 + 200 * k, 120, cls="restricted"))
    for k in range(LEXICAL_MAX_PENDING_PAGES - 1):
        with acting_as(conn, "walt"):
            call_batch(conn, bulk_rows(200 * k, 120))
    assert pending(db, "restricted")[2] == LEXICAL_MAX_PENDING_PAGES
    assert pending(db, "internal")[2] == LEXICAL_MAX_PENDING_PAGES - 1
    before = index_rows(db)
    assert compact(conn, "walt", min_share=1e9) == (0, 0, 0)
    assert index_rows(db) == before
    with acting_as(conn, "walt"):
        call_batch(conn, bulk_rows(200 * LEXICAL_MAX_PENDING_PAGES, 120))
    assert pending(db, "internal")[2] == LEXICAL_MAX_PENDING_PAGES
    hits = [lexical(conn, q) for q in ("okapi v7", "v13 v499 zebra")]
    assert compact(conn, "walt", min_share=1e9)[0] > 0
    assert pending(db, "internal") == (0, 0, 0)
    assert pending(db, "restricted")[2] == LEXICAL_MAX_PENDING_PAGES
    assert [lexical(conn, q) for q in ("okapi v7", "v13 v499 zebra")] == hits
    assert compact(conn, "wally", min_share=1e9)[0] > 0
    assert pending(db) == (0, 0, 0)
    assert errors(db) == {}
    matches_python_bm25_top(conn, "okapi v7 v13 zebra")


def _fragments_read(conn: Conn, query: str) -> int:
    """Fragment rows one lexical leg call reads (alice: internal, a 30-day window)."""
    with acting_as(conn, "alice"), rows_read(conn) as read:
        d = conn.execute(
            "SELECT decision_id FROM pyretrieve.authorize('acme', 'docs', %s, %s, 'disabled',"
            " NULL, 100)",
            (PURPOSE, sha(query)),
        ).fetchone()
        assert d is not None
        conn.execute(
            "SELECT * FROM pyretrieve.lexical_candidates(%s, %s, 10, 'bm25')",
            (d["decision_id"], query),
        ).fetchall()
    return read.get("pyretrieve.fragments", 0)


def test_a_block_admitted_but_for_its_tombstones_is_read_without_its_fragments(
    db: Database, conn: Conn
) -> None:
    """A retract or supersede tombstones its fragment's postings; until compaction rewrites
    their blocks, a search finds the tombstones in the blocks of its words. A block whose time
    range the window holds admits every posting but the tombstoned, so the leg leaves those out
    by the term's tombstones and reads no fragment of the block (until 0048 it read each: 3,200
    fragments a search of 3,000 SciFact abstracts after 20 retracts, against 200). Blocks the
    window holds in part are still checked fragment by fragment. Every row, score and term is
    the same before and after compaction drops the tombstones, and BM25 recomputed apart."""
    setup(conn)
    now = datetime.now().astimezone()
    with acting_as(conn, "wally"):
        batch = call_batch(
            conn,
            [
                row(i, f"zebra herd w{i % 6} v{i % 5} note {i}" + " grass" * (i % 4))
                for i in range(600)
            ],
        )
    # Outside alice's 30-day window: zebra's and herd's blocks are read fragment by fragment.
    for i in range(5):
        put(conn, "acme", f"zebra herd long ago {i}", observed_at=now - timedelta(days=40))
    # The lists of 100 to 120 postings (w0..w5, v0..v4) go to pages, zebra's stay in blocks.
    compact(conn)
    assert any(b["postings"] == 128 for b in blocks_of(db, "zebra"))
    assert blocks_of(db, "w1") == []
    query = "w0 w1 v2 v3 grass"
    clean = _fragments_read(conn, query)
    ids = [r["fragment_id"] for r in batch]
    with acting_as(conn, "wally"):
        for fid in ids[:12:2]:
            conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (fid,))
        for fid in ids[1:12:2]:
            conn.execute(
                "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, 'zebra herd revised')",
                (fid,),
            )
    assert tombstones(db) > 0
    assert errors(db) == {}
    tombstoned = _fragments_read(conn, query)
    # Before: every fragment of each list holding a tombstone, about 550.
    assert tombstoned <= clean + 12, (clean, tombstoned)
    # zebra's blocks hold fragments outside the window: checked one by one, as before.
    assert _fragments_read(conn, "zebra") > 590
    for q in (query, "zebra w2", "grass note 7"):
        # The leg's first 100 are an independent BM25's best 100, with its scores.
        got = {r["fragment_id"]: r["score"] for r in lexical(conn, q)}
        expected = python_bm25(visible_documents(conn), query_lexemes(conn, q))
        assert len(got) == min(100, len(expected))
        for fid, score in got.items():
            assert score == pytest.approx(expected[fid], rel=1e-12)
        left_out = [v for k, v in expected.items() if k not in got]
        assert not left_out or max(left_out) <= min(got.values()) * (1 + 1e-12)
    held = [*legs(conn), lexical(conn, query)]
    compact(conn)
    assert tombstones(db) == 0
    assert [*legs(conn), lexical(conn, query)] == held


def groups(db: Database) -> dict[tuple[str, int], tuple[int, int, int]]:
    """Per classification and group of 16 buckets of acme/docs, its pages that are not pending:
    (postings, pages, pages under the group's own key)."""
    with db.admin() as admin:
        rows = admin.execute(
            "SELECT classification::text AS cls,"
            "       CASE WHEN bucket < 256 THEN bucket >> 4 ELSE bucket - 256 END AS g,"
            "       sum(postings) AS n, count(*) AS pages, count(*) FILTER (WHERE bucket >= %s) AS own"
            "  FROM pyretrieve.lexical_pages"
            " WHERE workspace_id = 'acme' AND project_id = 'docs' AND NOT pending"
            " GROUP BY 1, 2",
            (LEXICAL_BUCKETS,),
        ).fetchall()
    return {(r["cls"], int(r["g"])): (int(r["n"]), int(r["pages"]), int(r["own"])) for r in rows}


def as_compaction_leaves_them(layout: dict[tuple[str, int], tuple[int, int, int]]) -> bool:
    """One page of the group's own where its postings are fewer than a page's, else none."""
    return all(
        (pages, own) == (1, 1) if n < LEXICAL_PAGE_POSTINGS else own == 0
        for n, pages, own in layout.values()
    )


def test_a_group_with_few_small_postings_shares_one_page_and_splits_as_it_grows(
    db: Database, conn: Conn
) -> None:
    """Since 0059 a group of 16 buckets whose small lists of a classification hold fewer than
    1,024 postings keeps them in one page under its own key (256 + group), not in a page per
    bucket of a few postings each. A first write into a small scope writes one page per group;
    once a group holds 1,024 or more, compaction writes its buckets' pages instead (and no page
    of the group's own), and once retracts bring it below again, one page of its own. Through
    every step the index is exact, the leg equals an independent BM25, and compaction changes
    no row, score or term (the leg's best 100 are an independent BM25's)."""
    setup(conn, corpus=())
    # Ten lexemes of its own for each row (q<row>x<k>, as bulk_rows names them), and okapi.
    queries = ["q0x3 q70x0 q450x0 okapi", "okapi q1x2"]

    def rows(first: int, n: int) -> list[dict[str, Any]]:
        return [
            row(i, "okapi " + " ".join(f"q{i}x{k}" for k in range(10)))
            for i in range(first, first + n)
        ]

    with acting_as(conn, "wally"):
        small = call_batch(conn, rows(0, 60))
    layout = groups(db)
    assert errors(db) == {}
    # 660 small postings (okapi's 60 among them): a page of its own for each group, none per
    # bucket.
    assert len(layout) == LEXICAL_BUCKETS // LEXICAL_BUCKET_GROUP
    assert sum(n for n, _, _ in layout.values()) == 660
    assert as_compaction_leaves_them(layout)
    assert {own for _, _, own in layout.values()} == {1}
    for q in queries:
        matches_python_bm25_top(conn, q)
    assert compact(conn, min_share=0.01) == (0, 0, 0)  # nothing to merge

    with acting_as(conn, "wally"):
        grown = call_batch(conn, rows(60, 2000))  # a bulk write: pending pages
    assert errors(db) == {}
    before = [lexical(conn, q) for q in queries]
    assert compact(conn)[0] > 0
    layout = groups(db)
    assert errors(db) == {}
    assert as_compaction_leaves_them(layout)
    assert min(n for n, _, _ in layout.values()) >= LEXICAL_PAGE_POSTINGS  # every group split
    assert {own for _, _, own in layout.values()} == {0}
    assert [lexical(conn, q) for q in queries] == before
    for q in queries:
        matches_python_bm25_top(conn, q)

    with acting_as(conn, "wally"):
        for r in [*small, *grown][:1300]:
            conn.execute(
                "SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (r["fragment_id"],)
            )
    before = [lexical(conn, q) for q in queries]
    assert compact(conn)[0] > 0
    layout = groups(db)
    assert errors(db) == {}
    assert tombstones(db) == 0
    assert as_compaction_leaves_them(layout)
    assert {own for _, _, own in layout.values()} == {1}  # 7,600 small postings left
    assert [lexical(conn, q) for q in queries] == before
    for q in queries:
        matches_python_bm25_top(conn, q)
