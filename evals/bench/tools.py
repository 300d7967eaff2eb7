"""Tool discovery at scale: one scope growing to 180, 1,200, 10,000 and 100,000 tools.

    python -m evals.bench.tools [--sizes 180,1200,10000,100000] [--queries 20] [--dsn DSN]
                                [--out evals/bench/tools.json] [--max-load-seconds S]

Tools are BFCL tools' schemas (``../shared/datasets/bfcl_tools``) cycled, each copy under a name
of its own (``<name>__<n>``), registered through the writer API (``register_tools``, 1,000 per
transaction, with ``hash-ngram-v1`` embeddings) into ONE workspace/project, which grows from one
size to the next. At each size, after VACUUM ANALYZE and a warm-up, one client measures, with the
methods taking turns query by query:

* ``client.discover``: ``Retriever.discover_tools`` end to end (authorize, both legs, records,
  fusion, the tool rows, penalties, confidence, K of the default policy, schemas of the chosen K);
* ``sql.discover_tools``: the same as one SQL call, ``pyretrieve.discover_tools``;
* ``schema_loading``: ``pyretrieve.tool_schemas`` alone for the chosen K of that query, under a
  decision (must stay flat as the catalog grows);
* ``naive``: the linear way: fetch every authorised tool of the scope (text, embedding, schema)
  under the reader's decision at the second wall, rank it in process (numpy cosine plus term
  overlap, RRF, ``evals.bench.scale.naive_rank``) and keep the top 10 with their schemas.

``--vector-index-above N``: at each size above N, once measured, an admin gives the scope its
own HNSW index (``create_vector_index``, timed), the size is measured again
(``with_vector_index``) and the index is dropped, so the exact and the indexed vector leg are
compared in one run at every such size.

``--bulk-above N``: tools past the first N are written by the connecting superuser in bulk
(``INSERT ... SELECT`` of the same bodies ``pyretrieve.tool_text`` builds, the same tools rows,
``hash-ngram-v1`` embeddings computed here and copied in), in batches of 5,000 instead of the API's
per-tool calls. The triggers that keep the lexical index, generations and the
embeddings' visibility columns run as for any write; only the per-call API checks are skipped, so
the catalog is what the API would have written. The result records which sizes were bulk-filled.

The targets (p50 <= 15 ms at 10,000 tools, <= 50 ms at 100,000) are compared with the measured
p50 of ``client.discover``; the naive way in the same run is the baseline (ratios). A size whose
loading would pass ``--max-load-seconds`` is not measured, and the result says so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg.vector import register_vector_info
from psycopg.types import TypeInfo

from evals.bench.runtime import (
    DATASETS,
    Principals,
    acting_as,
    ensure_installed,
    exit_cleanly_on_sigterm,
    load_average,
    provenance,
    summary_ms,
    throwaway_database,
)
from evals.bench.scale import naive_rank
from pyretrieve import Retriever, Scope
from pyretrieve.embedders.hashing import HashNgramEmbedder
from pyretrieve.tools import register_tools
from pyretrieve.tools import select as sel
from pyretrieve.tools.definitions import ToolDefinition, operation_family

OUT = Path(__file__).resolve().parent / "tools.json"
SIZES = (180, 1200, 10000, 100000)
BATCH = 1000
PURPOSE = "agent"
TARGETS_P50_MS = {10000: 15.0, 100000: 50.0}
EMBEDDER = HashNgramEmbedder()

_NAIVE_FETCH = """
SELECT f.fragment_id, f.body, e.embedding, t.schema
  FROM pyretrieve.tools t
  JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id AND f.fragment_id = t.fragment_id
  JOIN pyretrieve.embeddings e ON e.workspace_id = f.workspace_id AND e.fragment_id = f.fragment_id
 WHERE t.workspace_id = %s AND t.project_id = %s AND e.model_id = %s
"""


def catalog(root: Path) -> tuple[list[dict[str, Any]], list[str]]:
    corpus = [
        json.loads(x) for x in (root / "bfcl_tools" / "corpus.jsonl").read_text().splitlines()
    ]
    queries = [
        json.loads(x)["text"][:4096]
        for x in (root / "bfcl_tools" / "queries.jsonl").read_text().splitlines()
    ]
    return [d["schema"] for d in corpus], queries


def tool(schema: dict[str, Any], n: int) -> ToolDefinition:
    base = re.sub(r"[^A-Za-z0-9_.:/-]", "_", str(schema["name"]))[:110]
    description = str(schema.get("description", ""))
    return ToolDefinition(
        name=f"{base}__{n}",
        description=description,
        parameters=schema.get("parameters") or {},
        operation=operation_family(base, description),
    )


_BULK = """
WITH src AS (
    SELECT x.s AS schema FROM jsonb_array_elements(%(schemas)s::jsonb) AS x(s)
), ins AS (
    INSERT INTO pyretrieve.fragments (workspace_id, project_id, body, classification, source_uri)
    SELECT %(ws)s, %(pj)s, pyretrieve.tool_text(src.schema), 'internal', 'tool:' || (src.schema ->> 'name')
      FROM src
    RETURNING fragment_id, body, source_uri, classification, observed_at, expires_at
)
INSERT INTO pyretrieve.tools (workspace_id, project_id, fragment_id, name, schema, schema_version,
                              operation, classification, observed_at, expires_at)
SELECT %(ws)s, %(pj)s, ins.fragment_id, src.schema ->> 'name', src.schema, 1, 'other',
       ins.classification, ins.observed_at, ins.expires_at
  FROM ins JOIN src ON ins.source_uri = 'tool:' || (src.schema ->> 'name')
RETURNING fragment_id, (SELECT i.body FROM ins i WHERE i.fragment_id = tools.fragment_id)
"""


def bulk_fill(conn: psycopg.Connection[Any], ws: str, pj: str, batch: list[ToolDefinition]) -> None:
    """Superuser bulk write of tools, their fragments and their embeddings (see the docstring)."""
    with conn.transaction():
        rows = conn.execute(
            _BULK, {"schemas": json.dumps([t.schema for t in batch]), "ws": ws, "pj": pj}
        ).fetchall()
        vectors = EMBEDDER.embed_documents([r[1] for r in rows])
        with conn.cursor().copy(
            "COPY pyretrieve.embeddings (workspace_id, project_id, fragment_id, model_id,"
            " embedding, source_digest) FROM STDIN"
        ) as copy:
            for (fid, body), vector in zip(rows, vectors, strict=True):
                copy.write_row(
                    (ws, pj, fid, EMBEDDER.model_id, "[" + ",".join(repr(float(v)) for v in vector) + "]",
                     hashlib.sha256(body.encode("utf-8")).digest())
                )  # fmt: skip


def measure(
    conn: psycopg.Connection[Any],
    who: Principals,
    scope: Scope,
    queries: list[str],
    size: int,
) -> dict[str, Any]:
    retriever = Retriever(conn, principal=who.reader, embedders=[EMBEDDER])
    vectors = [EMBEDDER.embed_query(q) for q in queries]
    info = TypeInfo.fetch(conn, "vector")
    times: dict[str, list[float]] = {
        "client.discover": [], "sql.discover_tools": [], "schema_loading": [], "naive": [],
    }  # fmt: skip
    ks: list[int] = []
    naive_every = max(1, size // 20000)  # the linear way at 100,000 tools takes seconds

    def discover(text: str, vector: list[float]) -> Any:
        return retriever.discover_tools(
            text, scope=scope, model=EMBEDDER.model_id, embedding=vector, adaptive=True
        )

    def sql_discover(text: str, vector: list[float]) -> None:
        with acting_as(conn, who.reader):
            conn.execute(
                "SELECT pyretrieve.discover_tools(p_workspace => %s, p_project => %s,"
                " p_purpose => %s, p_query => %s, p_embedding => %s::public.vector,"
                " p_model => %s, p_adaptive => true)",
                (scope.workspace, scope.project, PURPOSE, text, str(vector), EMBEDDER.model_id),
            ).fetchone()

    def schemas(text: str, ids: list[Any]) -> float:
        with acting_as(conn, who.reader):
            d = conn.execute(
                "SELECT decision_id FROM pyretrieve.authorize(%s, %s, %s, sha256(convert_to(%s,"
                " 'UTF8')), 'disabled', NULL, 48)",
                (scope.workspace, scope.project, PURPOSE, text),
            ).fetchone()
            assert d is not None
            t0 = time.perf_counter()
            rows = conn.execute(
                "SELECT * FROM pyretrieve.tool_schemas(p_decision => %s, p_ids => %s)",
                (d[0], ids),
            ).fetchall()
            spent = time.perf_counter() - t0
        assert len(rows) == len(ids)
        return spent

    def naive(text: str, vector: list[float]) -> None:
        with acting_as(conn, who.reader):
            conn.execute(
                "SELECT pyretrieve.authorize(%s, %s, %s, sha256(convert_to(%s, 'UTF8')),"
                " 'optional', NULL, 48)",
                (scope.workspace, scope.project, PURPOSE, text),
            )
            # Principals hold no table privilege: read what the decision admits as the role the
            # API runs as, under the same RLS.
            conn.execute("SET LOCAL ROLE pyretrieve_api")
            with conn.cursor(binary=True) as cur:
                register_vector_info(cur, info)  # type: ignore[arg-type]
                rows = cur.execute(
                    _NAIVE_FETCH, (scope.workspace, scope.project, EMBEDDER.model_id)
                ).fetchall()
        ids = [r[0] for r in rows]
        matrix = np.stack([r[2].to_numpy() for r in rows]).astype(np.float32)
        top = naive_rank(text, np.asarray(vector, np.float32), ids, [r[1] for r in rows], matrix)
        by_id = {r[0]: r[3] for r in rows}
        assert len([by_id[i] for i in top]) == len(top)

    # Warm-up, then the methods take turns query by query.
    for text, vector in zip(queries[:3], vectors[:3], strict=True):
        discover(text, vector)
        sql_discover(text, vector)
    for i, (text, vector) in enumerate(zip(queries, vectors, strict=True)):
        t0 = time.perf_counter()
        found = discover(text, vector)
        times["client.discover"].append(time.perf_counter() - t0)
        ks.append(found.k)
        t0 = time.perf_counter()
        sql_discover(text, vector)
        times["sql.discover_tools"].append(time.perf_counter() - t0)
        times["schema_loading"].append(schemas(text, [t.fragment_id for t in found.chosen]))
        if i % naive_every == 0:
            t0 = time.perf_counter()
            naive(text, vector)
            times["naive"].append(time.perf_counter() - t0)
    out: dict[str, Any] = {m: summary_ms(v) for m, v in times.items()}
    out["average_k"] = round(sum(ks) / len(ks), 2)
    out["naive_over_client_p50"] = round(out["naive"]["p50"] / out["client.discover"]["p50"], 1)
    return out


def run(args: argparse.Namespace, dsn: str) -> dict[str, Any]:
    schemas, queries = catalog(args.datasets)
    queries = queries[: args.queries]
    result: dict[str, Any] = {"sizes": {}, "not_measured": []}
    with psycopg.connect(dsn, autocommit=True) as conn:
        result["provenance"] = provenance(conn)
        who = Principals.create(conn, "toolbench")
        ws, pj = f"toolbench-{secrets.token_hex(3)}", "agents"
        scope = Scope(workspace=ws, project=pj, purpose=PURPOSE)
        try:
            with acting_as(conn, who.admin):
                conn.execute("SELECT pyretrieve.create_workspace(%s)", (ws,))
                conn.execute("SELECT pyretrieve.create_project(%s, %s)", (ws, pj))
                conn.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'ingest', 'restricted')",
                    (who.writer, ws, pj),
                )
                conn.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, %s, 'internal')",
                    (who.reader, ws, pj, PURPOSE),
                )
                conn.execute(
                    "SELECT pyretrieve.register_model(%s, %s) WHERE NOT EXISTS"
                    " (SELECT 1 FROM pyretrieve.list_models() m WHERE m.model_id = %s)",
                    (EMBEDDER.model_id, EMBEDDER.dimension, EMBEDDER.model_id),
                )
            loaded = 0
            load_seconds = 0.0
            for size in args.sizes:
                rate = loaded / load_seconds if load_seconds else None
                api = args.bulk_above is None or size <= args.bulk_above
                if api and rate and (size - loaded) / rate > args.max_load_seconds:
                    result["not_measured"].append(
                        {"size": size, "reason": f"loading {size - loaded} more tools at {rate:.0f}/s"
                         f" would pass --max-load-seconds {args.max_load_seconds}"}
                    )  # fmt: skip
                    continue
                before = loaded
                t0 = time.perf_counter()
                bulk = args.bulk_above is not None and size > args.bulk_above
                while loaded < size:
                    n = min(5 * BATCH if bulk else BATCH, size - loaded)
                    batch = [
                        tool(schemas[(loaded + j) % len(schemas)], loaded + j) for j in range(n)
                    ]
                    if bulk and loaded >= args.bulk_above:
                        bulk_fill(conn, ws, pj, batch)
                    else:
                        register_tools(
                            conn, batch, workspace=ws, project=pj, principal=who.writer,
                            embedders=[EMBEDDER],
                        )  # fmt: skip
                    loaded += n
                spent = time.perf_counter() - t0
                load_seconds += spent
                # Every table of the database (the lexical index's tables change with the schema),
                # vacuumed as well as analysed: measured at rest, as autovacuum leaves a catalog
                # within a minute of a load. Analysed only (until schema 0055's runs), the first
                # searches after a bulk load set hint bits and read the heap where an index-only
                # scan reads the visibility map: at 10,000 tools 41 ms p50 against 31 once
                # autovacuum had run.
                conn.execute("VACUUM (ANALYZE)")
                figures = measure(conn, who, scope, queries, size)
                if args.vector_index_above is not None and size > args.vector_index_above:
                    figures["with_vector_index"] = indexed(conn, who, scope, queries, size)
                figures["load"] = {
                    "tools_added": size - before,
                    "how": "bulk" if bulk else "api",
                    "seconds": round(spent, 1),
                    "load_average": load_average(),
                }
                figures["target_p50_ms"] = TARGETS_P50_MS.get(size)
                if size in TARGETS_P50_MS:
                    figures["meets_target"] = (
                        figures["client.discover"]["p50"] <= TARGETS_P50_MS[size]
                    )
                result["sizes"][str(size)] = figures
                print(json.dumps({"size": size, **p50s(figures)}), flush=True)
        finally:
            who.drop(conn)
    result["settings"] = {
        "sizes": list(args.sizes),
        "queries": len(queries),
        "batch": BATCH,
        "model": EMBEDDER.model_id,
        "policy": sel.DEFAULT_POLICY,
        "pool": sel.POOL,
        "candidates_per_leg": sel.CANDIDATES,
        "clients": 1,
        "max_load_seconds": args.max_load_seconds,
        "bulk_above": args.bulk_above,
        "vector_index_above": args.vector_index_above,
        "after_load": "VACUUM (ANALYZE) of the database",
    }
    return result


def indexed(
    conn: psycopg.Connection[Any], who: Principals, scope: Scope, queries: list[Any], size: int
) -> dict[str, Any]:
    """The same measurements once the scope has its own HNSW index (``create_vector_index``,
    timed), so exact and indexed vector legs sit side by side at one size; the index is dropped
    again afterwards."""
    t0 = time.perf_counter()
    with acting_as(conn, who.admin):
        conn.execute(
            "SELECT pyretrieve.create_vector_index(%s, %s, %s)",
            (scope.workspace, scope.project, EMBEDDER.model_id),
        )
    built = time.perf_counter() - t0
    try:
        figures = measure(conn, who, scope, queries, size)
    finally:
        # Dropped again, so the next size is measured exact first (creation is idempotent: an
        # index kept from a smaller size would make its "exact" figures indexed ones).
        with acting_as(conn, who.admin):
            conn.execute(
                "SELECT pyretrieve.drop_vector_index(%s, %s, %s)",
                (scope.workspace, scope.project, EMBEDDER.model_id),
            )
    figures["build_seconds"] = round(built, 1)
    print(json.dumps({"size": size, "with_vector_index": p50s(figures)}), flush=True)
    return figures


def p50s(figures: dict[str, Any]) -> dict[str, float]:
    """The p50 of each method of one size's figures, for the progress lines."""
    return {
        m: figures[m]["p50"]
        for m in ("client.discover", "sql.discover_tools", "schema_loading", "naive")
    }


def main(argv: list[str] | None = None) -> int:
    exit_cleanly_on_sigterm()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", type=Path, default=DATASETS)
    p.add_argument("--sizes", type=lambda s: tuple(int(x) for x in s.split(",")), default=SIZES)
    p.add_argument("--queries", type=int, default=20)
    p.add_argument("--dsn", default=None)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--max-load-seconds", type=float, default=3600.0)
    p.add_argument("--bulk-above", type=int, default=None)
    p.add_argument(
        "--vector-index-above",
        type=int,
        default=None,
        help="at sizes above N, measure again once the scope has its own HNSW index",
    )
    args = p.parse_args(argv)
    if args.dsn:
        ensure_installed(args.dsn)
        result = run(args, args.dsn)
    else:
        with throwaway_database() as dsn:
            result = run(args, dsn)
    args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
