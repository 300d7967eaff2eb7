"""What pgvector's HNSW parameters buy in recall and cost in time, on our corpora.

Usage: python -m evals.bench.hnsw_sweep [--corpus passages|synthetic] [--rows 100000]
       [--queries 100] [--options 16:128,16:256,24:200,32:256] [--ef-search 600,1000]
       [--iterative-scan strict_order,relaxed_order] [--fetched 132,400] [--dsn DSN] [--out PATH]

``create_vector_index`` builds every scope's index with one set of options (m 16,
ef_construction 128) and the indexed leg searches it with ef_search 600 in strict order. This
sweep says why: it loads ``--rows`` vectors of one corpus (as ``evals.bench.vector_index``
draws them) into a scratch table of plain pgvector (no scope, no policy: the parameters alone),
builds one index per ``m:ef_construction`` pair in turn, and for each ef_search, iterative scan
mode and number fetched asks for that many nearest rows of every query (the leg asks for
``LIMIT + 32``), re-sorts them by distance and keeps ``LIMIT``. The exact top ``LIMIT`` computed in
NumPy is the oracle. Per setting: build seconds, index size, recall@100 (mean, min, share of
queries below 0.99) and query time (p50, p95).

Writes ``evals/bench/hnsw-sweep-<corpus>.json`` (git commit, machine, server, settings). A
measurement, not a test; the scratch table is dropped at the end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from pgvector.psycopg import register_vector

from evals.bench import vector_index
from evals.bench.runtime import given_or_throwaway, load_average, provenance, summary_ms

ROOT = Path(__file__).resolve().parents[2]
TABLE = "hnsw_sweep_rows"
LIMIT = vector_index.LIMIT
EXTRA = 32  # the leg's own over-fetch for the content-bound tie-break


def _load(conn: psycopg.Connection[Any], vectors: NDArray[np.float32]) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.execute(
        f"CREATE TABLE {TABLE} (id integer PRIMARY KEY, v public.vector({vectors.shape[1]}))"
    )
    with (
        conn.cursor() as cur,
        cur.copy(f"COPY {TABLE} (id, v) FROM STDIN WITH (FORMAT BINARY)") as copy,
    ):
        copy.set_types(["int4", "vector"])
        for i, v in enumerate(vectors):
            copy.write_row((i, v))
    conn.execute(f"VACUUM ANALYZE {TABLE}")


def _build(conn: psycopg.Connection[Any], m: int, ef_construction: int) -> dict[str, Any]:
    conn.execute(f"DROP INDEX IF EXISTS {TABLE}_hnsw")
    started = time.perf_counter()
    conn.execute(
        f"CREATE INDEX {TABLE}_hnsw ON {TABLE} USING hnsw (v public.vector_cosine_ops)"
        f" WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
    )
    seconds = time.perf_counter() - started
    row = conn.execute(f"SELECT pg_relation_size('{TABLE}_hnsw')").fetchone()
    assert row is not None
    return {"build_seconds": round(seconds, 1), "index_mb": round(row[0] / 1e6, 1)}


def _search(
    conn: psycopg.Connection[Any],
    ef_search: int,
    queries: NDArray[np.float32],
    truth: list[set[int]],
    *,
    iterative_scan: str,
    fetched: int,
) -> dict[str, Any]:
    """Recall and time of the ``fetched`` nearest rows by the index, re-sorted by distance in a
    materialised CTE and cut to ``LIMIT``, as the leg does (with ``relaxed_order`` the scan may
    return a nearer row after a farther one, which the re-sort puts in its place)."""
    conn.execute(f"SET hnsw.ef_search = {int(ef_search)}")
    conn.execute(f"SET hnsw.iterative_scan = {iterative_scan}")
    recalls: list[float] = []
    seconds: list[float] = []
    for q, exact in zip(queries, truth, strict=True):
        started = time.perf_counter()
        rows = conn.execute(
            f"WITH near AS MATERIALIZED (SELECT id, v OPERATOR(public.<=>) %s AS d FROM {TABLE}"
            f" ORDER BY v OPERATOR(public.<=>) %s LIMIT {int(fetched)})"
            f" SELECT id FROM near ORDER BY d, id LIMIT {LIMIT}",
            (q, q),
        ).fetchall()
        seconds.append(time.perf_counter() - started)
        recalls.append(len(exact & {r[0] for r in rows}) / LIMIT)
    got = np.asarray(recalls)
    return {
        "ef_search": ef_search,
        "iterative_scan": iterative_scan,
        "fetched": fetched,
        "recall_at_100": {
            "mean": round(float(got.mean()), 4),
            "min": round(float(got.min()), 4),
            "share_below_0_99": round(float(np.mean(got < 0.99)), 3),
        },
        "query": summary_ms(seconds),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("synthetic", "passages"), default="passages")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--clusters", type=int, default=vector_index.CLUSTERS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--options", default="16:128,16:256,24:200,32:256")
    parser.add_argument("--ef-search", default="600,1000")
    parser.add_argument(
        "--iterative-scan",
        default="strict_order",
        help="comma-separated: strict_order, relaxed_order",
    )
    parser.add_argument(
        "--fetched",
        default=str(LIMIT + EXTRA),
        help="comma-separated numbers of rows asked of the index before the cut to 100",
    )
    parser.add_argument("--dsn", help="a database (superuser); default: a throwaway server")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    vectors_for, queries, corpus = vector_index.corpus(
        args.corpus, queries=args.queries, seed=args.seed, clusters=args.clusters
    )
    rows = vectors_for("sweep", args.rows)
    q = np.asarray(queries, dtype=np.float32)
    similarity = q @ rows.T
    truth = [{int(i) for i in np.argsort(-s, kind="stable")[:LIMIT]} for s in similarity]
    options = [tuple(int(x) for x in o.split(":")) for o in args.options.split(",")]
    ef_search = [int(x) for x in args.ef_search.split(",")]
    modes = args.iterative_scan.split(",")
    fetches = [int(x) for x in args.fetched.split(",")]
    out = args.out or ROOT / "evals" / "bench" / f"hnsw-sweep-{args.corpus}.json"
    with given_or_throwaway(args.dsn) as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        measured_on = provenance(conn)
        conn.execute("SET maintenance_work_mem = '1GB'")
        _load(conn, rows)
        try:
            results = []
            for m, ef_construction in options:
                built = _build(conn, m, ef_construction)
                for ef, mode, fetched in itertools.product(ef_search, modes, fetches):
                    found = _search(conn, ef, q, truth, iterative_scan=mode, fetched=fetched)
                    results.append({"m": m, "ef_construction": ef_construction, **built, **found})
                    print(
                        f"m {m} ef_construction {ef_construction} ef_search {ef} {mode}"
                        f" fetched {fetched}: recall {found['recall_at_100']}"
                        f" p50 {found['query']['p50']} ms, build {built['build_seconds']} s",
                        flush=True,
                    )
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    result = {
        "benchmark": "HNSW options and ef_search: recall@100 against exact, and time",
        **measured_on,
        "settings": {
            **corpus,
            "rows": args.rows,
            "queries": args.queries,
            "limit": LIMIT,
            "fetched": fetches,
            "iterative_scan": modes,
            "maintenance_work_mem_for_the_build": "1GB",
        },
        "results": results,
        "load_average_at_end": load_average(),
    }
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
