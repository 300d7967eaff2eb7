"""Reference figures to put our numbers next to (nDCG@10).

``published``: the figures quoted in ``../shared/datasets/README.md`` with their sources.
``lab``: figures measured earlier on our own machines with ir-measures (the design notes,
``../shared/design/NOTES.md``); not published, shown where no published figure exists.
``pg_fulltext`` marks PostgreSQL full-text (``ts_rank``) baselines: our bar is to beat the
published ones.
"""

from __future__ import annotations

from typing import Any

PUBLISHED_SOURCE = "../shared/datasets/README.md"
LAB_SOURCE = "../shared/design/NOTES.md (measured here with ir-measures, not published)"


def _ref(
    system: str, ndcg: float, kind: str, source: str, *, pg_fulltext: bool = False
) -> dict[str, Any]:
    return {
        "system": system,
        "nDCG@10": ndcg,
        "kind": kind,
        "source": source,
        "pg_fulltext": pg_fulltext,
    }


REFERENCES: dict[str, list[dict[str, Any]]] = {
    "scifact": [
        _ref("BM25 (BEIR, Elasticsearch multifield)", 0.665, "published", "BEIR"),
        _ref("BM25 (Anserini flat)", 0.679, "published", "Anserini"),
        _ref(
            "PostgreSQL full-text ts_rank, 'simple'",
            0.569,
            "published",
            "castorini/quackir docs",
            pg_fulltext=True,
        ),
        _ref(
            "PostgreSQL full-text ts_rank, 'english', normalization 1",
            0.606,
            "published",
            "castorini/quackir docs",
            pg_fulltext=True,
        ),
        _ref(
            "RRF(PostgreSQL full-text, BGE-base dense)",
            0.680,
            "published",
            "castorini/quackir docs",
        ),
        _ref("BGE-base dense", 0.741, "published", "castorini/quackir docs"),
        _ref("all-MiniLM-L6-v2 dense", 0.645, "published", PUBLISHED_SOURCE),
        _ref("RRF(BM25, all-MiniLM-L6-v2)", 0.695, "lab", PUBLISHED_SOURCE + " (measured here)"),
        _ref("OR + ts_rank normalization 1", 0.604, "lab", LAB_SOURCE, pg_fulltext=True),
        _ref("BM25 in SQL over the tsvector (k1 0.9, b 0.4)", 0.689, "lab", LAB_SOURCE),
        _ref("RRF(ts_rank, all-MiniLM-L6-v2)", 0.697, "lab", LAB_SOURCE),
        _ref("RRF(BM25 in SQL, all-MiniLM-L6-v2)", 0.714, "lab", LAB_SOURCE),
    ],
    "cranfield": [
        _ref("OR + ts_rank normalization 1", 0.322, "lab", LAB_SOURCE, pg_fulltext=True),
        _ref("BM25 in SQL over the tsvector (k1 0.9, b 0.4)", 0.355, "lab", LAB_SOURCE),
        _ref("all-MiniLM-L6-v2 dense", 0.381, "lab", LAB_SOURCE),
        _ref("RRF(ts_rank, all-MiniLM-L6-v2)", 0.395, "lab", LAB_SOURCE),
        _ref("RRF(BM25 in SQL, all-MiniLM-L6-v2)", 0.413, "lab", LAB_SOURCE),
    ],
}


def references(dataset: str) -> list[dict[str, Any]]:
    return [dict(r) for r in REFERENCES.get(dataset, [])]


def pg_fulltext_bar(dataset: str) -> dict[str, Any]:
    """The published PostgreSQL full-text figure hybrid must beat (the best of them), if any."""
    published = [r for r in REFERENCES.get(dataset, []) if r["pg_fulltext"]]
    best_published = max(
        (r for r in published if r["kind"] == "published"),
        key=lambda r: r["nDCG@10"],
        default=None,
    )
    best_lab = max(
        (r for r in published if r["kind"] == "lab"), key=lambda r: r["nDCG@10"], default=None
    )
    return {"published": best_published, "lab": best_lab}
