"""Tool discovery on BFCL tools and the Gorilla APIBench splits, through the public paths.

    python -m evals.tools.run [--datasets DIR] [--model hash-ngram-v1] [--limit-queries N]
                              [--collections bfcl,gorilla-torchhub,...] [--out evals/tools]

An admin principal creates the scope, a writer registers every tool with
``pyretrieve.tools.register_tools`` (the tool's BEIR id is its name, because BFCL has many
same-named variants that strict qrels tell apart), a reader runs
``Retriever.discover_tools`` for every query (pool 48). Scored with ir-measures against the
strict qrels (Recall@k, nDCG@15) and the lenient ones (MRR@15; BFCL only has both). Per K
policy: average K, recall at the chosen K (strict), schema tokens per request (o200k_base of
the chosen tools' OpenAI rendering, summed per tool); the confidence distribution; and
similar-tool false positives on the delete/update/create queries, with and without the
penalties. One JSON file per collection, with the commit and settings.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import secrets
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import ir_measures
import psycopg

from evals.bench.runtime import DATASETS, Principals, acting_as, provenance, throwaway_database
from pyretrieve import Retriever, Scope
from pyretrieve.embedders.registry import get_embedder
from pyretrieve.tools import context, register_tools
from pyretrieve.tools import select as sel
from pyretrieve.tools.definitions import (
    WRITE_FAMILIES,
    ToolDefinition,
    operation_family,
    query_operations,
)

OUT = Path(__file__).resolve().parent
MODES = ("lexical", "vector", "hybrid")
RECALL_KS = (5, 10, 15, 20)
MEASURES = [*(f"R@{k}" for k in RECALL_KS), "nDCG@15"]
PURPOSE = "eval"


# ---------------------------------------------------------------------------------------------
# Collections
# ---------------------------------------------------------------------------------------------
def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        q, d, s = line.split("\t")
        out.setdefault(q, {})[d] = int(s)
    return out


def bfcl(root: Path) -> dict[str, Any]:
    folder = root / "bfcl_tools"
    tools = []
    for doc in _jsonl(folder / "corpus.jsonl"):
        schema = doc["schema"]
        tools.append(
            ToolDefinition(
                name=doc["_id"],
                description=schema.get("description", ""),
                parameters=schema.get("parameters") or {},
                operation=operation_family(doc["title"], schema.get("description", "")),
            )
        )
    return {
        "name": "bfcl-tools",
        "tools": tools,
        "titles": {d["_id"]: d["title"] for d in _jsonl(folder / "corpus.jsonl")},
        "queries": {q["_id"]: q["text"] for q in _jsonl(folder / "queries.jsonl")},
        "strict": _qrels(folder / "qrels" / "test.tsv"),
        "lenient": _qrels(folder / "qrels" / "test_name.tsv"),
    }


def gorilla(root: Path, split: str) -> dict[str, Any]:
    folder = root / "gorilla_apibench" / "retrieval_view"
    tools = []
    titles = {}
    for doc in _jsonl(folder / f"{split}_corpus.jsonl"):
        try:
            api = json.loads(doc["text"])
        except json.JSONDecodeError:
            api = {"description": doc["text"]}
        words = [str(api.get(k, "")) for k in ("domain", "functionality", "description")]
        args = api.get("api_arguments") or {}
        props = (
            {str(k): {"type": "string", "description": str(v)[:200]} for k, v in args.items()}
            if isinstance(args, dict)
            else {}
        )
        name = re.sub(r"[^A-Za-z0-9_.:/-]", "_", doc["_id"])[:128]
        titles[name] = doc.get("title", "")
        tools.append(
            ToolDefinition(
                name=name,
                description=f"{doc.get('title', '')}: " + ". ".join(w for w in words if w),
                parameters={"type": "object", "properties": props},
                operation="other",
            )
        )
    strict = _qrels(folder / f"{split}_qrels_test.tsv")
    return {
        "name": f"gorilla-{split}",
        "tools": tools,
        "titles": titles,
        "queries": {q["_id"]: q["text"] for q in _jsonl(folder / f"{split}_queries.jsonl")},
        "strict": strict,
        "lenient": strict,
    }


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------
def rebuild(found: Any) -> list[sel.Scored]:
    """The pure selector's input back from a discovery (to apply every K policy offline)."""
    out = []
    for t in found.ranked:
        e = t.explanation
        c = sel.Candidate(
            t.fragment_id, t.name, t.operation, t.schema_version, e["fused_rank"],
            e["fused_score"], e["lexical_rank"], e["vector_rank"], 0,
        )  # fmt: skip
        out.append(sel.Scored(c, e["rank"], e["normalized_score"], e["adjusted_score"], ()))
    return out


def measures(runs: dict[str, dict[str, float]], coll: dict[str, Any]) -> dict[str, float]:
    strict = [ir_measures.Qrel(q, d, s) for q, ds in coll["strict"].items() for d, s in ds.items()]
    lenient = [
        ir_measures.Qrel(q, d, s) for q, ds in coll["lenient"].items() for d, s in ds.items()
    ]
    run = [ir_measures.ScoredDoc(q, d, s) for q, ds in runs.items() for d, s in ds.items()]
    # Queries with no result score 0: ir-measures averages over the run's queries, so add them.
    judged = [q for q in coll["strict"] if q in coll["queries_used"]]
    parsed = [ir_measures.parse_measure(m) for m in MEASURES]
    per_query: dict[str, dict[str, float]] = {q: {m: 0.0 for m in MEASURES} for q in judged}
    for m in ir_measures.iter_calc(parsed, strict, run):
        if m.query_id in per_query:
            per_query[m.query_id][str(m.measure)] = m.value
    mrr: dict[str, float] = {q: 0.0 for q in judged}
    for m in ir_measures.iter_calc([ir_measures.parse_measure("RR@15")], lenient, run):
        if m.query_id in mrr:
            mrr[m.query_id] = m.value
    out = {m: statistics.fmean(v[m] for v in per_query.values()) for m in MEASURES}
    out["MRR@15 (lenient)"] = statistics.fmean(mrr.values())
    return {k: round(v, 4) for k, v in out.items()}


def recall_at(chosen: list[str], gold: dict[str, int]) -> float:
    rel = {d for d, s in gold.items() if s > 0}
    return len(rel & set(chosen)) / len(rel) if rel else 0.0


def evaluate(
    coll: dict[str, Any], dsn: str, model: str, limit: int | None, modes: tuple[str, ...] = MODES
) -> dict[str, Any]:
    embedder = get_embedder(model)
    tag = secrets.token_hex(3)
    ws, pj = f"tools-{tag}", "tools"
    schema_tokens = {
        t.name: context.schema_tokens([t.schema])[0] for t in coll["tools"]
    }  # per tool, o200k_base when installed
    with psycopg.connect(dsn, autocommit=True) as conn:
        who = Principals.create(conn, "tools")
        try:
            with acting_as(conn, who.admin):
                conn.execute("SELECT pyretrieve.create_workspace(%s)", (ws,))
                conn.execute("SELECT pyretrieve.create_project(%s, %s)", (ws, pj))
                for role, purpose in ((who.writer, "ingest"), (who.reader, PURPOSE)):
                    conn.execute(
                        "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, %s, 'restricted')",
                        (role, ws, pj, purpose),
                    )
                conn.execute(
                    "SELECT pyretrieve.register_model(%s, %s)", (model, embedder.dimension)
                )
            started = time.perf_counter()
            report = register_tools(
                conn, coll["tools"], workspace=ws, project=pj, principal=who.writer,
                embedders=[embedder],
            )  # fmt: skip
            register_seconds = time.perf_counter() - started
            retriever = Retriever(conn, principal=who.reader, embedders=[embedder])
            scope = Scope(workspace=ws, project=pj, purpose=PURPOSE)
            qids = [q for q in coll["queries"] if q in coll["strict"]][:limit]
            coll["queries_used"] = set(qids)
            result: dict[str, Any] = {
                "collection": coll["name"],
                "tools": len(coll["tools"]),
                "queries": len(qids),
                "registration": {**report.to_plain(), "seconds": round(register_seconds, 1)},
                "modes": {},
            }
            kept: dict[str, dict[str, list[sel.Scored]]] = {}
            for mode, protect in [(m, True) for m in modes] + [("hybrid", False)]:
                key = mode if protect else "hybrid-unprotected"
                runs: dict[str, dict[str, float]] = {}
                kept[key] = {}
                seconds = []
                for q in qids:
                    t0 = time.perf_counter()
                    found = retriever.discover_tools(
                        coll["queries"][q], scope=scope, policy="fixed-48", mode=mode,
                        model=model, protect=protect,
                    )  # fmt: skip
                    seconds.append(time.perf_counter() - t0)
                    scored = rebuild(found)
                    kept[key][q] = scored
                    runs[q] = {s.candidate.name: 1000.0 - s.rank for s in scored}
                result["modes"][key] = {
                    **measures(runs, coll),
                    "median_ms": round(1000 * statistics.median(seconds), 1),
                }
            result["policies"] = policies(kept["hybrid"], coll, schema_tokens)
            result["confidence"] = dict(
                Counter(sel.assess(s, "tight").level for s in kept["hybrid"].values())
            )
            result["similar_tools"] = similar(kept, coll)
            return result
        finally:
            who.drop(conn)


def policies(
    kept: dict[str, list[sel.Scored]], coll: dict[str, Any], tokens: dict[str, int]
) -> dict[str, Any]:
    out = {}
    for policy in sel.POLICIES:
        ks, recalls, toks = [], [], []
        for q, scored in kept.items():
            k = sel.assess(scored, policy).recommended_k
            chosen = [s.candidate.name for s in scored[:k]]
            ks.append(k)
            recalls.append(recall_at(chosen, coll["strict"][q]))
            toks.append(sum(tokens[n] for n in chosen))
        out[policy] = {
            "average_k": round(statistics.fmean(ks), 2),
            "recall": round(statistics.fmean(recalls), 4),
            "schema_tokens_mean": round(statistics.fmean(toks), 1),
            "schema_tokens_p90": sorted(toks)[math.ceil(0.9 * len(toks)) - 1],
        }
    base = out[sel.BASELINE_POLICY]
    for row in out.values():
        row["recall_vs_k48"] = round(row["recall"] - base["recall"], 4)
        row["tokens_saved_vs_k48"] = (
            round(1 - row["schema_tokens_mean"] / base["schema_tokens_mean"], 3)
            if base["schema_tokens_mean"]
            else None
        )
    return out


def similar(kept: dict[str, dict[str, list[sel.Scored]]], coll: dict[str, Any]) -> dict[str, Any]:
    """False positives on delete/update/create requests: write tools in the top 5 (and at
    rank 1) of a write family the request did not ask for, with and without the penalties."""
    titles = coll["titles"]
    qset = []
    for q in kept["hybrid"]:
        gold = [d for d, s in coll["strict"][q].items() if s > 0]
        families = {operation_family(titles.get(d, d)) for d in gold}
        asked = query_operations(coll["queries"][q])
        if families & WRITE_FAMILIES and families & asked:
            qset.append((q, asked))
    out: dict[str, Any] = {"queries": len(qset)}
    for key in ("hybrid-unprotected", "hybrid"):
        top5 = top1 = 0
        recall5 = []
        for q, asked in qset:
            scored = kept[key][q]
            bad = [
                s
                for s in scored[:5]
                if s.candidate.operation in WRITE_FAMILIES and s.candidate.operation not in asked
            ]
            top5 += len(bad)
            top1 += bool(scored and scored[0] in bad)
            recall5.append(recall_at([s.candidate.name for s in scored[:5]], coll["strict"][q]))
        out["after" if key == "hybrid" else "before"] = {
            "contradicting_in_top5_per_query": round(top5 / len(qset), 3) if qset else None,
            "contradicting_at_rank1": round(top1 / len(qset), 3) if qset else None,
            "recall@5": round(statistics.fmean(recall5), 4) if recall5 else None,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", type=Path, default=DATASETS)
    p.add_argument("--model", default="hash-ngram-v1")
    p.add_argument("--limit-queries", type=int, default=None)
    p.add_argument(
        "--collections", default="bfcl,gorilla-torchhub,gorilla-tensorflowhub,gorilla-huggingface"
    )
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--modes", default=",".join(MODES), help="modes besides hybrid-unprotected")
    args = p.parse_args(argv)
    loaders = {
        "bfcl": lambda: bfcl(args.datasets),
        **{
            f"gorilla-{s}": (lambda s=s: gorilla(args.datasets, s))
            for s in ("torchhub", "tensorflowhub", "huggingface")
        },
    }
    with throwaway_database() as dsn:
        with psycopg.connect(dsn) as conn:
            facts = provenance(conn)
        for name in args.collections.split(","):
            coll = loaders[name]()
            result = evaluate(
                coll, dsn, args.model, args.limit_queries, tuple(args.modes.split(","))
            )
            result["settings"] = {
                "model": args.model,
                "pool": sel.POOL,
                "default_policy": sel.DEFAULT_POLICY,
                "penalties": {
                    "contradiction": sel.CONTRADICTION_FACTOR,
                    "no_shared_entity": sel.NO_ENTITY_FACTOR,
                },
                "token_method": context.count_tokens("x")[1],
                "limit_queries": args.limit_queries,
                "modes": args.modes,
            }
            result["provenance"] = facts
            path = args.out / f"{coll['name']}-{args.model}.json"
            path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            print(json.dumps({k: result[k] for k in ("collection", "modes")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
