"""BM25's scope statistics come from an append-only log (``pyretrieve.statistics_log``) that the
fragments' statement triggers write: it must stay equal to the active fragments under every
kind of write, concurrent writers included, and a decision must admit exactly the log rows of
the fragments it admits (the second wall), so no hidden fragment moves N or the average length.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg
import pytest

from pyretrieve.ingest import Ingestor
from tests.conftest import Database, acting_as, at_second_wall, role
from tests.db.seed import authorize, concurrent_writers, grant, lexical, put

Conn = psycopg.Connection[Any]

FROM_LOG = """
    SELECT workspace_id::text, project_id::text, classification::text, observed_at, expires_at,
           sum(fragments)::bigint AS n, sum(length_sum)::bigint AS length
      FROM pyretrieve.statistics_log
     GROUP BY 1, 2, 3, 4, 5
    HAVING sum(fragments) <> 0 OR sum(length_sum) <> 0
"""
FROM_FRAGMENTS = """
    SELECT workspace_id::text, project_id::text, classification::text, observed_at, expires_at,
           count(*)::bigint AS n, sum(doc_length)::bigint AS length
      FROM pyretrieve.fragments
     WHERE state = 'active'
     GROUP BY 1, 2, 3, 4, 5
"""


def as_set(db: Database, query: str) -> set[tuple[Any, ...]]:
    with db.admin() as admin:
        return {tuple(r.values()) for r in admin.execute(query).fetchall()}


def assert_log_matches_fragments(db: Database) -> None:
    """Per scope and per (classification, observed_at, expires_at), the log's sums are the
    active fragments' count and total length, read by the superuser past RLS."""
    expected = as_set(db, FROM_FRAGMENTS)
    assert expected, "the test wrote active fragments"
    assert as_set(db, FROM_LOG) == expected


def setup_scopes(conn: Conn) -> None:
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace('acme')")
        for project in ("docs", "notes"):
            conn.execute("SELECT pyretrieve.create_project('acme', %s)", (project,))
            grant(conn, role("wally"), "acme", project, "ingest", "restricted")
        grant(conn, role("alice"), "acme", "docs", "bench", "internal", max_age="30 days")


def write_everything(conn: Conn, tmp_jsonl: Any) -> None:
    """Every way a fragment enters or leaves the active set, as the writer."""
    with acting_as(conn, "wally"):
        kept = put(conn, "acme", "docs", "zebra grazing on the savanna")
        old = put(conn, "acme", "docs", "the zebra herd moves north", "confidential")
        put(
            conn,
            "acme",
            "docs",
            "zebra notes for another project",
            observed="now() - interval '2 days'",
        )
        put(conn, "acme", "notes", "a zebra in the notes project")
        put(conn, "acme", "docs", "a zebra fact that expires", expires="now() + interval '1 hour'")
        put(conn, "acme", "docs", "a zebra seen in the future", observed="now() + interval '1 day'")
        put(conn, "acme", "docs", "an old zebra record", observed="now() - interval '400 days'")
        put(conn, "acme", "docs", "restricted zebra details", "restricted")
        gone = put(conn, "acme", "docs", "a zebra to retract", observed="now() - interval '3 days'")
        put(conn, "acme", "docs", "zebra grazing on the savanna")  # idempotent: no change
    with acting_as(conn, "wally"):
        conn.execute(
            "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, %s)",
            (old, "the zebra herd moves south"),
        )
        conn.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (gone,))
    tmp_jsonl.write_text(
        "".join(
            f'{{"id": "r{i}", "title": "zebra {i}", "text": "bulk zebra record number {i}"}}\n'
            for i in range(25)
        ),
        encoding="utf-8",
    )
    Ingestor(conn, principal=role("wally"), batch_size=10).ingest_path(
        tmp_jsonl, workspace="acme", project="docs"
    )
    # The same source again with changed records: the bulk path supersedes them.
    tmp_jsonl.write_text(
        "".join(
            f'{{"id": "r{i}", "title": "zebra {i}", "text": "bulk zebra record, revised {i}"}}\n'
            for i in range(0, 25, 2)
        ),
        encoding="utf-8",
    )
    Ingestor(conn, principal=role("wally"), batch_size=10).ingest_path(
        tmp_jsonl, workspace="acme", project="docs"
    )
    assert isinstance(kept, UUID)


def test_the_log_sums_to_the_active_fragments_after_every_kind_of_write(
    db: Database, conn: Conn, tmp_path: Any
) -> None:
    setup_scopes(conn)
    write_everything(conn, tmp_path / "records.jsonl")
    assert_log_matches_fragments(db)
    with db.admin() as admin:
        states = {
            r["state"]
            for r in admin.execute("SELECT DISTINCT state::text FROM pyretrieve.fragments")
        }
    assert states == {"active", "superseded", "retracted"}


def test_concurrent_writers_keep_the_log_exact(db: Database, conn: Conn) -> None:
    """Four writers in one scope put, supersede and retract at once, each holding its
    transaction open until all have written: none waits on another (no shared counter row),
    none fails, and the log still sums to the active fragments."""
    setup_scopes(conn)
    writers = 4

    def write(c: Conn, n: int) -> None:
        ids = [
            put(c, "acme", "docs", f"zebra writer {n} note {i}", observed=None) for i in range(6)
        ]
        c.execute(
            "SELECT pyretrieve.supersede_fragment('acme', 'docs', %s, %s)",
            (ids[0], f"zebra writer {n} note 0, revised"),
        )
        c.execute("SELECT pyretrieve.retract_fragment('acme', 'docs', %s)", (ids[1],))

    errors = concurrent_writers(db, "wally", writers, write)
    assert errors == []
    assert_log_matches_fragments(db)
    with db.admin() as admin:
        active = admin.execute(
            "SELECT count(*) AS n FROM pyretrieve.fragments WHERE state = 'active'"
        ).fetchone()
    assert active == {"n": writers * 5}


@pytest.mark.parametrize("hidden", ["above the ceiling", "expired", "future", "too old"])
def test_a_decision_admits_only_the_log_rows_of_the_fragments_it_admits(
    db: Database, conn: Conn, hidden: str
) -> None:
    """At the second wall (pyretrieve_api under alice's decision: internal, 30 days), the
    admitted log rows sum to exactly the admitted fragments; a fragment hidden from the
    decision, whichever way, adds nothing to N or the total length, and the BM25 scores of the
    visible fragments are byte-identical with and without it."""
    setup_scopes(conn)
    with acting_as(conn, "wally"):
        for i in range(5):
            put(conn, "acme", "docs", f"zebra sighting number {i} by the river")

    def statistics_and_scores() -> tuple[tuple[int, int], tuple[int, int], list[Any]]:
        with acting_as(conn, "alice"):
            d = authorize(conn, "acme", "docs", "bench", query="zebra")["decision_id"]
            scores = [(r["fragment_id"], r["score"], r["terms"]) for r in lexical(conn, d, "zebra")]
            with at_second_wall(conn):
                log = conn.execute(
                    "SELECT coalesce(sum(fragments), 0)::bigint AS n,"
                    " coalesce(sum(length_sum), 0)::bigint AS length"
                    " FROM pyretrieve.statistics_log"
                ).fetchone()
                admitted = conn.execute(
                    "SELECT count(*)::bigint AS n, coalesce(sum(doc_length), 0)::bigint AS length"
                    " FROM pyretrieve.fragments"
                ).fetchone()
        assert log is not None
        assert admitted is not None
        return (log["n"], log["length"]), (admitted["n"], admitted["length"]), scores

    before_log, before_admitted, before_scores = statistics_and_scores()
    assert before_log == before_admitted
    assert before_log[0] == 5
    hide = {
        "above the ceiling": {"classification": "confidential"},
        "expired": {"expires": "now() + interval '1 second'"},
        "future": {"observed": "now() + interval '1 day'"},
        "too old": {"observed": "now() - interval '31 days'"},
    }[hidden]
    with acting_as(conn, "wally"):
        # Many long fragments full of the query's term: they would move N, avgdl and idf.
        for i in range(20):
            put(conn, "acme", "docs", "zebra " * (10 + i) + f"hidden {i}", **hide)
    if hidden == "expired":
        with db.admin() as admin:  # let the second pass
            admin.execute("SELECT pg_sleep(1.1)")
    after_log, after_admitted, after_scores = statistics_and_scores()
    assert after_log == after_admitted == before_log
    assert after_scores == before_scores
    assert_log_matches_fragments(db)
