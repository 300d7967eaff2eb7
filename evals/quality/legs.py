"""Each query's two candidate lists, collected once, so fusions and weights are compared offline.

    python -m evals.quality.legs --dataset scifact --model all-MiniLM-L6-v2-int8

Fusion sees only the two legs' candidates (rank, lexical score, vector distance) and each
fragment's tie-break identity; freshness is 1 in the evaluation grant (no max_age). So one
hybrid ``Retriever.search`` per query, with a limit that covers the union of both legs (200
for two legs of 100), gives everything any fusion and any weights need: re-fusing these rows
with :func:`pyretrieve.ranking.fused_order` gives exactly the order ``Retriever.search`` returns
for those settings (checked here on the collected run itself, and by
``tests/test_evals_quick.py``).

Writes ``evals/.cache/legs-<dataset>-<model>.json.gz`` (ignored by git; the embeddings are
cached beside it, see :mod:`evals.quality.cache`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from evals.bench.runtime import DATASETS, provenance
from evals.quality.cache import CACHE, CachedEmbedder
from evals.quality.datasets import Collection, load
from evals.quality.run import CANDIDATE_LIMIT, _Run, database
from pyretrieve import Retriever, Weights
from pyretrieve.embedders.registry import get_embedder

# Both legs' candidates: the union of two lists of CANDIDATE_LIMIT.
UNION_LIMIT = 2 * CANDIDATE_LIMIT


def path_for(dataset: str, model: str, folder: Path = CACHE) -> Path:
    return folder / f"legs-{dataset}-{model.replace('/', '_')}.json.gz"


def collect(dsn: str, collection: Collection, model: str, cache: Path = CACHE) -> dict[str, Any]:
    """Ingest the collection (cached embeddings), then one hybrid search per judged query."""
    embedder = CachedEmbedder(get_embedder(model), cache)
    queries: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn, tempfile.TemporaryDirectory() as tmp:
        facts = provenance(conn)
        folder = collection.folder or collection.write_beir(Path(tmp) / collection.name)
        run = _Run(conn, collection, collection.name)
        try:
            started = time.perf_counter()
            # Embedded before ingestion, outside any transaction: the ingestor embeds inside
            # its write transaction, and a slow model on a busy machine can keep a batch of
            # 256 there past the server's 60 s idle-in-transaction timeout.
            bodies = sorted({collection.body(d) for d in collection.docs})
            for start in range(0, len(bodies), 64):
                embedder.embed_documents(bodies[start : start + 64])
            ingest = run.ingest(folder, embedder)
            retriever = Retriever(conn, principal=run.principals.reader)
            prefix = folder.name + "#"
            for qid, text in collection.queries.items():
                text = text[:4096]
                vector = np.asarray(embedder.embed_query(text), dtype=np.float32)
                result = retriever.search(
                    text,
                    scope=run.scope,
                    mode="hybrid",
                    limit=UNION_LIMIT,
                    candidate_limit=CANDIDATE_LIMIT,
                    embedding=vector,
                    model=embedder.model_id,
                    weights=Weights(lexical=1.0, vector=1.0),
                    fusion="rrf",
                )
                rows = []
                for item in result.results:
                    rows.append(
                        {
                            "identity": item.record.identity,
                            "docs": run._doc_ids(item.record.source_uri, prefix),
                            "lexical": None
                            if item.lexical is None
                            else [item.lexical.rank, item.lexical.score],
                            "vector": None
                            if item.vector is None
                            else [item.vector.rank, item.vector.distance],
                        }
                    )
                queries[qid] = {
                    "semantic": result.semantic.status.value,
                    "candidates": rows,
                }
            seconds = time.perf_counter() - started
        finally:
            run.cleanup(False)
    return {
        "dataset": collection.name,
        "model": model,
        "provenance": facts,
        "settings": {
            "candidate_limit": CANDIDATE_LIMIT,
            "collected_with": "Retriever.search(mode='hybrid', weights=(1, 1), RRF,"
            f" limit={UNION_LIMIT}): every candidate of both legs, in that run's order",
        },
        "ingest": ingest,
        "embedding_cache": {"hits": embedder.hits, "misses": embedder.misses},
        "seconds": round(seconds, 1),
        "queries": queries,
    }


def read(dataset: str, model: str, folder: Path = CACHE) -> dict[str, Any] | None:
    path = path_for(dataset, model, folder)
    if not path.exists():
        return None
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def write(data: dict[str, Any], folder: Path = CACHE) -> Path:
    path = path_for(data["dataset"], data["model"], folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(data, fh)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="named collections, comma-separated")
    parser.add_argument("--model", required=True, help="embedder ids, comma-separated")
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--refresh", action="store_true", help="collect again even if cached")
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of the caches")
    args = parser.parse_args(argv)
    with database(args.dsn) as dsn:
        for dataset in args.dataset.split(","):
            collection = load(dataset, datasets=args.datasets)
            for model in args.model.split(","):
                if read(collection.name, model, args.cache) is not None and not args.refresh:
                    print(f"{collection.name} {model}: cached", file=sys.stderr)
                    continue
                data = collect(dsn, collection, model, args.cache)
                path = write(data, args.cache)
                print(
                    f"{collection.name} {model}: {len(data['queries'])} queries in"
                    f" {data['seconds']} s, cache {data['embedding_cache']} -> {path.name}",
                    file=sys.stderr,
                )


if __name__ == "__main__":
    main()
