"""Weighted RRF sweep: nDCG@10 of hybrid search for several lexical weights (vector weight 1.0).

    python -m evals.quality.weights --dataset scifact --model all-MiniLM-L6-v2-int8 \
        --lexical-weights 0.5,0.75,1,1.25,1.5,2,3,5,8,12,20

Each weight is a full pass of ``Retriever.search(mode="hybrid", weights=...)`` over the judged
queries, in the same scope (one ingestion), so the figures are pyretrieve's own fused order.
Writes ``evals/quality/weights-<dataset>-<model>.json``.

The best weight over all queries is chosen on the queries it is scored on, so it flatters. The
file also holds a cross-validated figure: the queries are split into folds by a hash of their
id, each fold is scored at the weight that is best on the other folds, and the held-out scores
are averaged. That is what choosing a weight per collection can be expected to give on new
queries.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from evals.bench.runtime import provenance
from evals.quality import report
from evals.quality.datasets import load
from evals.quality.run import CANDIDATE_LIMIT, LIMIT, _Run, database, score
from pyretrieve import Retriever, Weights
from pyretrieve.embedders.registry import get_embedder

ROOT = Path(__file__).resolve().parents[2]


def sweep(
    dsn: str, dataset: str, datasets: Path, model: str, weights: list[float]
) -> dict[str, Any]:
    collection = load(dataset, datasets=datasets)
    embedder = get_embedder(model)
    out: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn, tempfile.TemporaryDirectory() as tmp:
        out["provenance"] = provenance(conn)
        folder = collection.write_beir(Path(tmp) / collection.name)
        run = _Run(conn, collection, collection.name)
        try:
            run.ingest(folder, embedder)
            retriever = Retriever(conn, principal=run.principals.reader)
            prefix = folder.name + "#"
            vectors = {
                qid: np.asarray(embedder.embed_query(text[:4096]), dtype=np.float32)
                for qid, text in collection.queries.items()
            }
            for w in weights:
                started = time.perf_counter()
                ranked: dict[str, list[str]] = {}
                for qid, text in collection.queries.items():
                    result = retriever.search(
                        text[:4096],
                        scope=run.scope,
                        mode="hybrid",
                        limit=LIMIT,
                        candidate_limit=CANDIDATE_LIMIT,
                        embedding=vectors[qid],
                        model=embedder.model_id,
                        weights=Weights(lexical=w, vector=1.0),
                    )
                    docs: list[str] = []
                    for item in result.results:
                        for doc in run._doc_ids(item.record.source_uri, prefix):
                            if doc not in docs:
                                docs.append(doc)
                    ranked[qid] = docs
                means, per_query = score(collection.qrels, ranked)
                out.setdefault("by_weight", {})[str(w)] = {
                    **means,
                    "seconds": round(time.perf_counter() - started, 1),
                }
                out.setdefault("per_query", {})[str(w)] = {
                    q: values["nDCG@10"] for q, values in per_query.items()
                }
                print(f"{dataset} {model} lexical weight {w}: {means}", file=sys.stderr)
        finally:
            run.cleanup(False)
    return out


def fold_of(query_id: str, folds: int) -> int:
    """A fold that depends only on the query id, so reruns split the same way."""
    return int.from_bytes(hashlib.sha256(query_id.encode()).digest()[:8], "big") % folds


def cross_validate(per_query: dict[str, dict[str, float]], folds: int = 5) -> dict[str, Any]:
    """Mean held-out nDCG@10 when each fold uses the weight best on the other folds.

    ``per_query``: weight -> query id -> nDCG@10. Ties go to the weight closest to 1.0 (equal
    weights), then the smaller, so the choice never depends on dict order.
    """
    weights = sorted(per_query, key=float)
    queries = sorted(next(iter(per_query.values())))
    assignment = {q: fold_of(q, folds) for q in queries}
    held_out: list[float] = []
    chosen: list[float] = []
    for fold in range(folds):
        train = [q for q in queries if assignment[q] != fold]
        test = [q for q in queries if assignment[q] == fold]
        if not train or not test:
            continue
        best = max(
            weights,
            key=lambda w: (
                float(np.mean([per_query[w][q] for q in train])),
                -abs(float(w) - 1.0),
                -float(w),
            ),
        )
        chosen.append(float(best))
        held_out.extend(per_query[best][q] for q in test)
    return {
        "folds": folds,
        "fold_by": "sha256(query id) mod folds",
        "chosen_lexical_weights": chosen,
        "nDCG@10": round(float(np.mean(held_out)), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--model", default="all-MiniLM-L6-v2-int8")
    parser.add_argument("--lexical-weights", default="0.5,0.75,1,1.25,1.5,2,3,5,8,12,20")
    parser.add_argument("--datasets", default=str(ROOT.parent / "shared" / "datasets"))
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--out", default=str(ROOT / "evals" / "quality"))
    parser.add_argument("--doc", default=str(ROOT / "docs" / "quality.md"))
    args = parser.parse_args()
    weights = [float(w) for w in args.lexical_weights.split(",")]
    with database(args.dsn) as dsn:
        results = sweep(dsn, args.dataset, Path(args.datasets), args.model, weights)
    by_weight = results["by_weight"]
    best = max(by_weight, key=lambda w: by_weight[w]["nDCG@10"])
    doc = {
        "benchmark": "weighted RRF sweep",
        "dataset": args.dataset,
        "model": args.model,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {"vector_weight": 1.0, "limit": LIMIT, "candidate_limit": CANDIDATE_LIMIT},
        "provenance": results["provenance"],
        "results": by_weight,
        "best_lexical_weight": float(best),
        "equal_weights_nDCG@10": by_weight.get("1.0", {}).get("nDCG@10"),
        "cross_validated": cross_validate(results["per_query"]),
    }
    path = Path(args.out) / f"weights-{Path(args.dataset).name}-{args.model}.json"
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    report.write(Path(args.out), Path(args.doc))
    print(f"wrote {path} and {args.doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
