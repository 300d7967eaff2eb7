"""The vector leg with and without a scope's own HNSW index, side by side in one run.

Usage: python -m evals.bench.vector_index [--sizes 2000,10000,30000,100000] [--queries 40]
       [--clusters 200] [--dsn DSN] [--out PATH]

One database holds one scope per size, each with about a tenth of its rows hidden from the
reader (above its ceiling), plus a foreign workspace of 30,000 rows: 384-d clustered
vectors (``evals.bench.synth``) and short bodies. The rows are loaded by the superuser with
COPY (setup only; the triggers run, so every embedding carries its fragment's columns and its
scope's serial). Then, per scope, as the reader through the SQL API, one client:

* ``exact``: ``vector_candidates`` before the scope has an index (the exact scan);
* ``hnsw``: the same calls once an admin has run ``create_vector_index`` (timed as
  ``build_seconds``), interleaved with nothing else;
* ``recall_at_100``: per query, the share of the exact leg's 100 rows that the indexed leg
  returns (the exact leg is the oracle), with the minimum over the queries; and whether every
  row the index found carries the exact leg's distance, bit for bit.

Writes ``evals/bench/vector-index.json`` (git commit, settings, machine, load, per scope p50,
p95, recall, index size). A measurement, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql
from psycopg.rows import dict_row

from evals.bench import passages, synth
from evals.bench.runtime import (
    Principals,
    acting_as,
    given_or_throwaway,
    load_average,
    provenance,
    summary_ms,
)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "vector-index.json"
MODEL = "bench-384"
WORKSPACE = "vix"
FOREIGN = "vix-other"
PURPOSE = "bench"
LIMIT = 100
HIDDEN_SHARE = 0.1
CLUSTERS = 200
FOREIGN_ROWS = 30_000
MAINTENANCE_WORK_MEM = "1GB"


def _vec(v: NDArray[np.float32]) -> str:
    return "[" + ",".join(map(repr, v.tolist())) + "]"


def _load(
    conn: psycopg.Connection[Any], ws: str, project: str, vectors: NDArray[np.float32]
) -> None:
    rng = np.random.default_rng(len(vectors))
    hidden = rng.random(len(vectors)) < HIDDEN_SHARE
    ids = [uuid.uuid4() for _ in range(len(vectors))]
    with conn.cursor() as cur:
        with cur.copy(
            "COPY pyretrieve.fragments (workspace_id, project_id, fragment_id, body,"
            " classification, state) FROM STDIN"
        ) as copy:
            for i, fid in enumerate(ids):
                level = "confidential" if hidden[i] else "internal"
                copy.write_row((ws, project, fid, f"{project} row {i}", level, "active"))
        with cur.copy(
            "COPY pyretrieve.embeddings (workspace_id, project_id, fragment_id, model_id,"
            " embedding, source_digest) FROM STDIN"
        ) as copy:
            for fid, v in zip(ids, vectors, strict=True):
                copy.write_row((ws, project, fid, MODEL, _vec(v), b"\x00" * 32))


Vectors = Callable[[str, int], NDArray[np.float32]]


def _setup(
    dsn: str, sizes: list[int], foreign: int, principals: Principals, vectors: Vectors
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(principals.admin)))
        conn.execute("SELECT pyretrieve.create_workspace(%s)", (WORKSPACE,))
        conn.execute("SELECT pyretrieve.create_workspace(%s)", (FOREIGN,))
        conn.execute("SELECT pyretrieve.create_project(%s, 'all')", (FOREIGN,))
        conn.execute("SELECT pyretrieve.register_model(%s, %s)", (MODEL, synth.DIMENSION))
        for n in sizes:
            conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WORKSPACE, f"s{n}"))
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, %s, 'internal')",
                (principals.reader, WORKSPACE, f"s{n}", PURPOSE),
            )
        conn.execute("RESET ROLE")
        # A per-model index (built by register_model up to 0015) serves no query; it only
        # slows the load.
        for (name,) in conn.execute(
            "SELECT relname FROM pg_class WHERE relname LIKE 'embeddings_hnsw_m%'"
        ).fetchall():
            conn.execute(sql.SQL("DROP INDEX pyretrieve.{}").format(sql.Identifier(name)))
        for ws, project, n in [
            *((WORKSPACE, f"s{n}", n) for n in sizes),
            (FOREIGN, "all", foreign),
        ]:
            with conn.transaction():
                _load(conn, ws, project, vectors(f"{ws}/{project}", n))
        conn.execute("VACUUM (ANALYZE) pyretrieve.fragments")
        conn.execute("VACUUM (ANALYZE) pyretrieve.embeddings")


def _synthetic(gen: synth.Generator, name: str, n: int) -> NDArray[np.float32]:
    rng = np.random.default_rng(synth._seed(gen.seed, "vix", name))
    clusters = rng.integers(0, gen.clusters, n)
    noise = rng.standard_normal((n, synth.DIMENSION)).astype(np.float32)
    noise *= synth.NOISE / np.sqrt(synth.DIMENSION)
    vectors: NDArray[np.float32] = gen.centres[clusters] + noise
    unit: NDArray[np.float32] = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(
        np.float32
    )
    return unit


def _sampled(found: passages.Passages, seed: int) -> Vectors:
    """Each scope: ``n`` passages drawn without replacement (scopes may share passages)."""

    def vectors(name: str, n: int) -> NDArray[np.float32]:
        if n > len(found.vectors):
            raise SystemExit(f"{name}: {n} rows asked, {len(found.vectors)} passages exist")
        rng = np.random.default_rng(synth._seed(seed, "vix-passages", name))
        return found.vectors[rng.choice(len(found.vectors), n, replace=False)]

    return vectors


def corpus(
    kind: str, *, queries: int, seed: int, clusters: int = CLUSTERS, limit: int | None = None
) -> tuple[Vectors, list[NDArray[np.float32]], dict[str, Any]]:
    """The rows' vectors, the queries and what describes them, for ``--corpus``: ``kind``
    ``passages`` (the first ``limit`` passages) or ``synthetic`` (``clusters`` topics)."""
    if kind == "passages":
        found = passages.load(limit=limit, queries=queries, seed=seed)
        described = {
            "corpus": "passages",
            "model": found.model,
            "collections": list(passages.COLLECTIONS),
            "passages": len(found.texts),
            "query_seed": seed,
        }
        return _sampled(found, seed), list(found.query_vectors), described
    vocabulary = synth.zipf_vocabulary(1000)
    gen = synth.Generator(vocabulary, clusters=clusters, seed=seed)
    asked = [v for _, v in gen.queries("vix", queries)]
    described = {"corpus": "synthetic", "clusters": clusters}
    return (lambda name, n: _synthetic(gen, name, n)), asked, described


def _search_settings(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """The hnsw settings the installed indexed leg sets for itself (read, not restated)."""
    row = conn.execute(
        "SELECT pg_get_functiondef(p.oid) AS src FROM pg_proc p"
        " WHERE p.oid = 'pyretrieve.approximate_vector_candidates'::regproc"
    ).fetchone()
    assert row is not None
    return dict(re.findall(r"set_config\('(hnsw\.[a-z_]+)', '([^']+)'", row["src"]))


def _leg(
    conn: psycopg.Connection[Any], reader: str, project: str, queries: list[NDArray[np.float32]]
) -> tuple[list[float], list[list[tuple[Any, float]]]]:
    seconds: list[float] = []
    rows: list[list[tuple[Any, float]]] = []
    for q in queries:
        with acting_as(conn, reader):
            d = conn.execute(
                "SELECT decision_id FROM pyretrieve.authorize(%s, %s, %s, sha256('q'::bytea),"
                " 'optional', NULL, %s)",
                (WORKSPACE, project, PURPOSE, LIMIT),
            ).fetchone()
            assert d is not None
            started = time.perf_counter()
            found = conn.execute(
                "SELECT fragment_id, distance FROM pyretrieve.vector_candidates(%s, %s,"
                " %s::public.vector, %s)",
                (d["decision_id"], MODEL, _vec(q), LIMIT),
            ).fetchall()
            seconds.append(time.perf_counter() - started)
        rows.append([(r["fragment_id"], r["distance"]) for r in found])
    return seconds, rows


def _scope(
    conn: psycopg.Connection[Any],
    principals: Principals,
    n: int,
    queries: list[NDArray[np.float32]],
) -> dict[str, Any]:
    project = f"s{n}"
    _leg(conn, principals.reader, project, queries[:3])  # warm the cache
    exact_s, exact = _leg(conn, principals.reader, project, queries)
    started = time.perf_counter()
    with acting_as(conn, principals.admin):
        # The admin's session settings reach the build (the function sets none of its own).
        conn.execute(f"SET LOCAL maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
        name = conn.execute(
            "SELECT pyretrieve.create_vector_index(%s, %s, %s) AS n", (WORKSPACE, project, MODEL)
        ).fetchone()
    build = time.perf_counter() - started
    assert name is not None
    size = conn.execute(
        "SELECT pg_relation_size(c.oid) AS b, c.reloptions AS options FROM pg_class c"
        " WHERE c.oid = %s::regclass",
        (f"pyretrieve.{name['n']}",),
    ).fetchone()
    _leg(conn, principals.reader, project, queries[:3])
    hnsw_s, hnsw = _leg(conn, principals.reader, project, queries)
    recalls = []
    recalls_10 = []
    missed_ranks: list[int] = []
    same_distance = True
    for truth, got in zip(exact, hnsw, strict=True):
        truth_d = dict(truth)
        found = {i for i, _ in got}
        recalls.append(len(set(truth_d) & found) / max(1, len(truth)))
        recalls_10.append(len({i for i, _ in truth[:10]} & {i for i, _ in got[:10]}) / 10)
        missed_ranks += [rank for rank, (i, _) in enumerate(truth, 1) if i not in found]
        same_distance &= all(truth_d[i] == dist for i, dist in got if i in truth_d)
    return {
        "rows": n,
        "visible_rows_about": round(n * (1 - HIDDEN_SHARE)),
        "exact": summary_ms(exact_s),
        "hnsw": summary_ms(hnsw_s),
        "speedup_p50": round(
            float(np.percentile(exact_s, 50)) / float(np.percentile(hnsw_s, 50)), 2
        ),
        "recall_at_100": {
            "mean": round(float(np.mean(recalls)), 4),
            "min": round(float(np.min(recalls)), 4),
            "queries": len(recalls),
        },
        "recall_at_10": {
            "mean": round(float(np.mean(recalls_10)), 4),
            "min": round(float(np.min(recalls_10)), 4),
        },
        # Where the rows the index missed stood in the exact order (1 = nearest).
        "missed_exact_ranks": {
            "count": len(missed_ranks),
            "min": min(missed_ranks, default=None),
            "median": float(np.median(missed_ranks)) if missed_ranks else None,
        },
        "found_distances_identical_to_exact": same_distance,
        "build_seconds": round(build, 2),
        "index": {
            "name": name["n"],
            "mb": round(size["b"] / 1e6, 1) if size else None,
            "options": size["options"] if size else None,
        },
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,10000,30000,100000")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--dsn", help="a database (superuser); default: a throwaway server")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--foreign-rows", type=int, default=FOREIGN_ROWS)
    parser.add_argument(
        "--clusters",
        type=int,
        default=CLUSTERS,
        help="topic clusters of the synthetic vectors (more: less contrast between neighbours)",
    )
    parser.add_argument(
        "--corpus",
        choices=("synthetic", "passages"),
        default="synthetic",
        help="synthetic clustered vectors, or real passages embedded by a real model"
        " (evals.bench.passages)",
    )
    parser.add_argument(
        "--passages", type=int, help="with --corpus passages: only the first N (default all)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    vectors, queries, described = corpus(
        args.corpus,
        queries=args.queries,
        seed=args.seed,
        clusters=args.clusters,
        limit=args.passages,
    )
    with given_or_throwaway(args.dsn) as dsn, psycopg.connect(dsn, autocommit=True) as setup:
        principals = Principals.create(setup, "vix")
        try:
            started = time.perf_counter()
            _setup(dsn, sizes, args.foreign_rows, principals, vectors)
            load = time.perf_counter() - started
            with psycopg.connect(dsn, autocommit=True) as plain:
                measured_on = provenance(plain)
            with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
                result: dict[str, Any] = {
                    "benchmark": "vector leg, exact against a scope's own HNSW index",
                    **measured_on,
                    "settings": {
                        "sizes": sizes,
                        "queries": args.queries,
                        "seed": args.seed,
                        "limit": LIMIT,
                        "dimension": synth.DIMENSION,
                        **described,
                        "hidden_share": HIDDEN_SHARE,
                        "foreign_scope_rows": args.foreign_rows,
                        "maintenance_work_mem_for_the_build": MAINTENANCE_WORK_MEM,
                        "search_settings": _search_settings(conn),
                    },
                    "load_seconds": round(load, 1),
                    "scopes": [_scope(conn, principals, n, queries) for n in sizes],
                    "load_average_at_end": load_average(),
                }
        finally:
            with contextlib.suppress(psycopg.Error):
                principals.drop(setup)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for s in result["scopes"]:
        print(
            f"{s['rows']:>7} rows: exact p50 {s['exact']['p50']} ms, hnsw p50"
            f" {s['hnsw']['p50']} ms, recall@100 mean {s['recall_at_100']['mean']}"
            f" min {s['recall_at_100']['min']}, build {s['build_seconds']} s"
        )
    return result


if __name__ == "__main__":
    main()
