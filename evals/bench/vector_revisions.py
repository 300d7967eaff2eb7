"""The installed vector leg against an earlier revision's, on the same data, interleaved.

Usage: python -m evals.bench.vector_revisions --dsn DSN --workspace W --project P
       --queries FILE [--model hash-ngram-v1] [--baseline REV] [--limit-queries N]
       [--limits 100,10] [--out PATH]

The database must hold a populated scope with embeddings of ``--model`` (for example the one
``python -m evals.bench.tools --dsn DSN`` leaves behind). The run installs
``vector_candidates`` as it was at ``--baseline`` (read from git) beside the current one, under
another name and owned by ``pyretrieve_api`` like the original (so RLS applies alike), grants a
throwaway reader the scope, embeds each query with the model's embedder, and then, query by
query, calls both under one decision for each of ``--limits``, alternating which goes first.
Every pair of results must be identical in every column; the run stops on the first difference.
The time is the first limit's. Writes p50/p95 per revision and the ratio
(``evals/bench/vector-revisions.json``) with the commit, settings, machine and load. A
measurement, not a test; the baseline function and the reader are dropped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from evals.bench.lexical_revisions import (
    _create_reader,
    _decision,
    _grant,
    _install_function,
    _queries,
    _revoke,
)
from evals.bench.lexical_revisions import baseline_function as function_at
from evals.bench.runtime import acting_as, load_average, provenance, summary_ms
from pyretrieve.embedders.hashing import MODEL_ID as HASH_MODEL_ID
from pyretrieve.embedders.registry import get_embedder
from pyretrieve.vectors import canonical_embedding, to_pgvector_text

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "vector-revisions.json"
BASELINE_NAME = "vector_candidates_baseline"
SIGNATURE = "(uuid, text, public.vector, integer)"


def _compare(
    conn: psycopg.Connection[Any], reader: str, args: Any, queries: list[tuple[str, str]]
) -> dict[str, list[float]]:
    """Each query under one decision, the two legs in turn at every limit; the time is the
    first limit's."""
    seconds: dict[str, list[float]] = {"baseline": [], "current": []}
    names = {"baseline": BASELINE_NAME, "current": "vector_candidates"}
    for i, (text, literal) in enumerate(queries):
        with acting_as(conn, reader):
            decision = _decision(conn, args, text, "optional", max(args.limits))
            for n, limit in enumerate(args.limits):
                rows = {}
                for which in ("baseline", "current") if i % 2 else ("current", "baseline"):
                    started = time.perf_counter()
                    rows[which] = conn.execute(
                        f"SELECT * FROM pyretrieve.{names[which]}(%s, %s, %s::public.vector, %s)",
                        (decision, args.model, literal, limit),
                    ).fetchall()
                    if n == 0:
                        seconds[which].append(time.perf_counter() - started)
                if rows["baseline"] != rows["current"]:
                    raise SystemExit(f"query {i}, limit {limit}: the revisions differ")
    return seconds


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="a superuser DSN of a populated database")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--queries", type=Path, required=True, help="a BEIR queries.jsonl")
    parser.add_argument("--model", default=HASH_MODEL_ID)
    parser.add_argument("--baseline", default="HEAD~1", help="the git revision to compare with")
    parser.add_argument("--limit-queries", type=int, default=300)
    parser.add_argument(
        "--limits", type=lambda s: [int(x) for x in s.split(",")], default=[100, 10]
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    embedder = get_embedder(args.model)
    texts = _queries(args.queries, args.limit_queries)
    queries = [(t, to_pgvector_text(canonical_embedding(embedder.embed_query(t)))) for t in texts]
    reader = f"pyretrieve_vecrev_{secrets.token_hex(3)}"
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        measured_on = provenance(conn)
        _create_reader(conn, reader)
        try:
            _install_function(
                conn,
                function_at(args.baseline, "vector_candidates", BASELINE_NAME),
                BASELINE_NAME + SIGNATURE,
            )
            _grant(conn, reader, args)
            try:
                seconds = _compare(conn, reader, args, queries)
            finally:
                _revoke(conn, reader, args, BASELINE_NAME + SIGNATURE)
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(reader)))
        rows = conn.execute(
            "SELECT count(*) FROM pyretrieve.embeddings WHERE workspace_id = %s"
            " AND project_id = %s AND model_id = %s",
            (args.workspace, args.project, args.model),
        ).fetchone()
    baseline_ms, current_ms = summary_ms(seconds["baseline"]), summary_ms(seconds["current"])
    result = {
        "benchmark": "vector_candidates: the installed revision against an earlier one",
        **measured_on,
        "settings": {
            "baseline": subprocess.run(
                ["git", "rev-parse", args.baseline], cwd=ROOT, capture_output=True, text=True
            ).stdout.strip(),
            "scope": f"{args.workspace}/{args.project}",
            "scope_embeddings": int(rows[0]) if rows else None,
            "model": args.model,
            "queries": str(args.queries.name),
            "query_count": len(queries),
            "limits_compared": args.limits,
            "limit_timed": args.limits[0],
            "order": "alternating, one decision per query",
            "compared": "every column",
        },
        "identical_results": len(queries),
        "baseline": baseline_ms,
        "current": current_ms,
        "p50_ratio_current_to_baseline": round(
            float(current_ms["p50"]) / float(baseline_ms["p50"]), 3
        ),
        "load_average_at_end": load_average(),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("baseline", "current")}))
    return result


if __name__ == "__main__":
    main()
