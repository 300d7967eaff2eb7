"""Command line of ``python -m evals.quality``.

``python -m evals.quality --render`` runs nothing: it redraws ``docs/quality.md`` and its plots
(``docs/img/``) from the committed JSON results.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evals.bench.runtime import DATASETS, ROOT, exit_cleanly_on_sigterm
from evals.quality import datasets, report
from evals.quality.run import MODES, database, evaluate, merge

RESULTS = ROOT / "evals" / "quality"
DOC = ROOT / "docs" / "quality.md"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evals.quality",
        description="Retrieval quality of pyretrieve on a BEIR-layout test collection.",
    )
    parser.add_argument(
        "--dataset",
        help=f"{' | '.join(datasets.NAMED)} | a path to a BEIR folder"
        " (default: cranfield with --quick)",
    )
    parser.add_argument(
        "--model",
        default="hash-ngram-v1",
        help="embedder id, or several separated by commas (hash-ngram-v1, all-MiniLM-L6-v2-int8)",
    )
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument(
        "--dsn", help="a database to use (schema installed if missing); default: a throwaway server"
    )
    parser.add_argument(
        "--limit-queries", type=int, help="evaluate only the first N judged queries"
    )
    parser.add_argument(
        "--datasets", type=Path, default=DATASETS, help="the folder of named collections"
    )
    parser.add_argument("--split", default="test", help="qrels split of a BEIR folder")
    parser.add_argument(
        "--out", type=Path, help="folder for <dataset>.json (default: evals/quality)"
    )
    parser.add_argument("--doc", type=Path, help="markdown summary (default: docs/quality.md)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a 200-document slice of Cranfield with 10 queries; results go to a temporary"
        " folder unless --out is given",
    )
    parser.add_argument(
        "--keep", action="store_true", help="with --dsn: leave the evaluation workspace in place"
    )
    parser.add_argument(
        "--no-embedding-cache",
        action="store_true",
        help="embed everything again instead of reading evals/.cache (and do not fill it)",
    )
    parser.add_argument(
        "--render",
        action="store_true",
        help="run nothing: write the markdown and its plots (img/ beside it) from the JSON"
        " results in --out",
    )
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    if args.render:
        results_dir: Path = args.out or RESULTS
        target: Path = args.doc or DOC
        report.write(results_dir, target)
        print(f"wrote {target} and its plots", file=sys.stderr)
        return {"doc": str(target)}
    if argv is None:
        exit_cleanly_on_sigterm()
    dataset = args.dataset or ("cranfield" if args.quick else None)
    if dataset is None:
        _parser().error("--dataset is required (or --quick)")
    models = [m.strip() for m in args.model.split(",") if m.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if any(m not in MODES for m in modes):
        _parser().error(f"modes are {', '.join(MODES)}")

    collection = datasets.load(dataset, datasets=args.datasets, split=args.split)
    if args.quick:
        collection = datasets.quick_slice(collection)
    if args.limit_queries:
        chosen = list(collection.queries)[: args.limit_queries]
        collection.queries = {q: collection.queries[q] for q in chosen}
        collection.qrels = {q: collection.qrels[q] for q in chosen}
        collection.notes.append(f"limited to the first {args.limit_queries} judged queries")

    temporary = None
    out_dir: Path = args.out or RESULTS
    if args.quick and args.out is None:
        temporary = tempfile.TemporaryDirectory()
        out_dir = Path(temporary.name)
    doc: Path = args.doc or (out_dir / "quality.md" if args.quick else DOC)

    bodies = {collection.body(d) for d in collection.docs if collection.body(d).strip()}
    info = {
        "name": collection.name,
        "source": collection.source,
        "documents": len(collection.docs),
        "fragments": len(bodies),
        "duplicate_documents": len(collection.duplicate_groups()),
        "judged_queries": len(collection.queries),
        "judgments": sum(len(v) for v in collection.qrels.values()),
        "notes": collection.notes,
    }
    started = time.perf_counter()
    with database(args.dsn) as url:
        runs = evaluate(
            url,
            collection,
            models,
            modes,
            folder=collection.folder,
            keep=args.keep,
            # A quick run stays out of the cache (tests run it).
            cache=not (args.no_embedding_cache or args.quick),
        )
    path = out_dir / f"{collection.name}.json"
    data = merge(path, collection.name, info, runs)
    report.write(out_dir, doc)
    print(_summary(data, time.perf_counter() - started), file=sys.stderr)
    print(f"wrote {path} and {doc}", file=sys.stderr)
    if temporary is not None:
        temporary.cleanup()
    return data


def _summary(data: dict[str, Any], seconds: float) -> str:
    lines = [f"{data['dataset']}: {seconds:.0f} s"]
    for model, run in data["runs"].items():
        for mode, m in run["modes"].items():
            lines.append(
                f"  {model:18} {mode:8} nDCG@10 {m['nDCG@10']:.3f}  R@100 {m['R@100']:.3f}"
                f"  MRR@10 {m['MRR@10']:.3f}  p50 {m['latency_ms'].get('p50', 0):.1f} ms"
            )
    lines.append("  bars: " + json.dumps(data["bars"])[:2000])
    return "\n".join(lines)
