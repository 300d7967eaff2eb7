"""The exact vector leg's cut, attacked where it can go wrong: at the p_limit-th distance.

The leg keeps the p_limit + 1 nearest rows in one pass and reads the scope again only when the
row after the p_limit-th ties it (0055). Here every embedding is one of a few directions, so
distances tie in long runs and a cut falls inside a run, at a run's end, or past the scope's last
row, and bodies repeat, so the content digest ties too and only the fragment id breaks the tie.
Rows the reader may not see (above the ceiling, retracted, expired, observed in the future, or
in another workspace) lie at the very same distances: they must neither be returned nor move the
cut. Every limit from 1 to past the scope's size is compared with the exhaustive order, computed
by the superuser over the rows known to be visible, with the same distance operator.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest

from tests.conftest import Database, Server, acting_as, create_database, drop_database, role
from tests.db.seed import HIDDEN_KINDS, PURPOSE, authorize, copy_fragments, vec, vector
from tests.db.test_plans import captured_plans, nodes

Conn = psycopg.Connection[Any]
MODEL = "cut-8d"
DIM = 8
DIRECTIONS = 7
VISIBLE = 60
CLASSES = ("public", "internal")
QUERIES = 6

_ORACLE = """
SELECT e.fragment_id, (e.embedding OPERATOR(public.<=>) %(q)s::public.vector)::double precision
       AS distance
  FROM pyretrieve.embeddings e
  JOIN pyretrieve.fragments f ON f.workspace_id = e.workspace_id AND f.fragment_id = e.fragment_id
 WHERE e.fragment_id = ANY(%(ids)s) AND e.model_id = %(model)s
 ORDER BY 2, f.content_digest, e.fragment_id
"""


@pytest.fixture(scope="module")
def scope(server: Server, template_db: str) -> Iterator[tuple[Database, list[uuid.UUID]]]:
    """corp/cut: VISIBLE rows alice may see and as many she may not, every one on one of
    DIRECTIONS directions; the foreign workspace holds the same directions."""
    rng = np.random.default_rng(20_261_207)
    directions = rng.normal(size=(DIRECTIONS, DIM)).astype(np.float32)
    db = Database(server=server, name=create_database(server, template_db))
    try:
        with db.admin(autocommit=True) as admin:
            admin.execute("SELECT pyretrieve.create_workspace('corp')")
            admin.execute("SELECT pyretrieve.create_workspace('other')")
            admin.execute("SELECT pyretrieve.create_project('corp', 'cut')")
            admin.execute("SELECT pyretrieve.create_project('other', 'cut')")
            admin.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, 'corp', 'cut', %s, 'internal')",
                (role("alice"), PURPOSE),
            )
            admin.execute("SELECT pyretrieve.register_model(%s, %s)", (MODEL, DIM))
            now = admin.execute("SELECT now() AS t").fetchone()["t"]  # type: ignore[index]
            rows: list[tuple[Any, ...]] = []
            visible: list[uuid.UUID] = []
            for i in range(VISIBLE * 2):
                hidden = HIDDEN_KINDS[i % len(HIDDEN_KINDS)] if i >= VISIBLE else ""
                fid = uuid.uuid4()
                if not hidden:
                    visible.append(fid)
                # Visible bodies come in pairs, one public, one internal (an active body is unique
                # per classification): many rows share a distance and a content digest.
                body = f"hidden {i}" if hidden else f"body {i // 2}"
                rows.append(
                    ("corp", fid, body, hidden or CLASSES[i % 2], directions[i % DIRECTIONS])
                )
            for i in range(VISIBLE):
                rows.append(
                    (
                        "other",
                        uuid.uuid4(),
                        f"body {i // 2}",
                        CLASSES[i % 2],
                        directions[i % DIRECTIONS],
                    )
                )
            load(admin, rows, now)
            admin.execute("ANALYZE pyretrieve.fragments")
            admin.execute("ANALYZE pyretrieve.embeddings")
        yield db, visible
    finally:
        drop_database(server, db.name)


def load(admin: Conn, rows: list[tuple[Any, ...]], now: Any) -> None:
    with admin.transaction(), admin.cursor() as cur:
        copy_fragments(
            cur,
            (
                (ws, "cut", fid, body, kind if kind in CLASSES else "internal",
                 "" if kind in CLASSES else kind)
                for ws, fid, body, kind, _ in rows
            ),
            now,
        )  # fmt: skip
        with cur.copy(
            "COPY pyretrieve.embeddings (workspace_id, project_id, fragment_id, model_id,"
            " embedding, source_digest) FROM STDIN"
        ) as copy:
            for ws, fid, body, _, v in rows:
                digest = hashlib.sha256(body.encode()).digest()
                copy.write_row((ws, "cut", fid, MODEL, vec([float(x) for x in v]), digest))


def test_every_cut_is_the_exhaustive_order_whether_or_not_the_next_row_ties(
    scope: tuple[Database, list[uuid.UUID]],
) -> None:
    db, visible = scope
    rng = np.random.default_rng(7)
    queries = [[float(x) for x in rng.normal(size=DIM)] for _ in range(QUERIES)]
    limits = range(1, VISIBLE + 3)
    tied = untied = 0
    with db.admin(autocommit=True) as admin, db.connect(autocommit=True) as conn:
        for q in queries:
            oracle = admin.execute(
                _ORACLE, {"q": vec(q), "ids": visible, "model": MODEL}
            ).fetchall()
            assert len(oracle) == VISIBLE
            with acting_as(conn, "alice"):
                d = authorize(conn, "corp", "cut", limit=VISIBLE + 2)["decision_id"]
                for k in limits:
                    got = vector(conn, d, q, k, model=MODEL)
                    want = oracle[:k]
                    assert [(r["fragment_id"], r["distance"]) for r in got] == [
                        (w["fragment_id"], w["distance"]) for w in want
                    ], (q, k)
                    assert [r["rank"] for r in got] == list(range(1, len(want) + 1))
                    assert {r["search"] for r in got} == {"exact"}
                    if k < VISIBLE and oracle[k]["distance"] == oracle[k - 1]["distance"]:
                        tied += 1
                    else:
                        untied += 1
    # Both ways through the leg were taken, many times each.
    assert tied > 50, (tied, untied)
    assert untied > 50, (tied, untied)


def embeddings_reads(db: Database, q: list[float], k: int) -> list[int]:
    """Rows each scan of the embeddings gave one exact vector call, in plan order."""

    def call(conn: Conn) -> None:
        d = authorize(conn, "corp", "cut", limit=VISIBLE + 2)["decision_id"]
        assert len(vector(conn, d, q, k, model=MODEL)) == min(k, VISIBLE)

    plans = captured_plans(db, "alice", call)
    return [
        round(n["Actual Rows"] * n["Actual Loops"])
        for p in plans
        for n in nodes(p)
        if n.get("Relation Name") == "embeddings" and n["Node Type"] == "Bitmap Heap Scan"
    ]


def test_the_scope_is_read_twice_only_when_the_next_row_ties(
    scope: tuple[Database, list[uuid.UUID]],
) -> None:
    """EXPLAIN ANALYZE of the leg: one read of the scope's visible rows when the row after the
    p_limit-th lies farther, a second (gated by a one-time filter) only when it ties."""
    db, visible = scope
    q = [float(x) for x in np.random.default_rng(7).normal(size=DIM)]
    with db.admin(autocommit=True) as admin:
        distances = [
            r["distance"]
            for r in admin.execute(_ORACLE, {"q": vec(q), "ids": visible, "model": MODEL})
        ]
    untied = next(k for k in range(1, VISIBLE) if distances[k] > distances[k - 1])
    tied = next(k for k in range(1, VISIBLE) if distances[k] == distances[k - 1])
    # The first pass gives the scope's visible rows (the hidden ones filtered); the second is
    # never run when the next row lies farther, and gives the rows within the cut's distance
    # (more than k: the ties) when it ties.
    assert embeddings_reads(db, q, untied) == [VISIBLE, 0]
    within = sum(1 for x in distances if x <= distances[tied - 1])
    assert within > tied
    assert embeddings_reads(db, q, tied) == [VISIBLE, within]
