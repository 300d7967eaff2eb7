"""Fusions and weights compared on the collected legs, and the default weights per model.

    python -m evals.quality.legs --dataset scifact,... --model hash-ngram-v1,...   # once
    python -m evals.quality.fusion [--models ...] [--collections ...]

For every collection and model with collected legs (:mod:`evals.quality.legs`), each query's
candidates are re-fused with :func:`pyretrieve.ranking.fused_order` (the ranker's own
arithmetic) for RRF and DBSF at every lexical weight of the grid with the vector weight at 1
(either fusion's order depends only on the ratio of the two weights: scaling both scales every
fused score), and scored with ir-measures as a quality run is (top 100 fragments, nDCG@10,
R@100, MRR@10).

Three cross-validated figures per collection, all with 5 folds by a hash of the query id:

* ``per_collection``: the weight chosen on the other folds of that collection (what tuning a
  weight per collection can be expected to give);
* ``pooled``: one weight per model for all collections, chosen on the other folds of every
  collection by the mean over collections of their means (each collection counts once), scored
  on the held-out fold: what the model's default gives on new queries like these;
* ``leave_one_collection_out``: the weight chosen on the other collections only, scored on
  the whole held-out collection: what the default gives on a collection it was not chosen on.

The default weight per model and fusion is the weight best on all queries by that pooled
objective; ties go to the weight closest to 1 (equal weights), then the smaller. The model's
default fusion is the one whose default keeps hybrid at least as good as the better leg alone
(pooled cross-validated figure) on more collections, RRF on a tie (:func:`choose`). Writes
``evals/quality/fusion.json``; ``python -m evals.quality --render`` puts it in
``docs/quality.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from evals.bench.runtime import git_info, machine_info
from evals.quality import legs as legs_cache
from evals.quality.cache import CACHE
from evals.quality.datasets import NAMED
from evals.quality.run import LIMIT, score
from evals.quality.stats import PERMUTATIONS, paired_permutation
from evals.quality.weights import fold_of
from pyretrieve.ranking import fused_order
from pyretrieve.types import Weights

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "quality" / "fusion.json"
MODELS = ("hash-ngram-v1", "all-MiniLM-L6-v2-int8", "all-MiniLM-L6-v2-int8-windowed")
FUSIONS = ("rrf", "dbsf")
# Lexical weights (vector weight 1): down to 0.05, where the vector leg dominates, up to 20,
# where it only reorders near-ties of the lexical order.
GRID = (
    0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75, 1.0,
    1.25, 1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0,
)  # fmt: skip
FOLDS = 5

PerQuery = dict[str, dict[str, float]]  # query id -> measure -> value


# ------------------------------------------------------------------------- re-fusing


def _docs(order: Sequence[Any], docs_of: dict[str, list[str]]) -> list[str]:
    """The top LIMIT fragments of a fused order, as the documents they stand for."""
    out: list[str] = []
    seen: set[str] = set()
    for key in order[:LIMIT]:
        for doc in docs_of[key]:
            if doc not in seen:
                seen.add(doc)
                out.append(doc)
    return out


def runs_for(
    queries: dict[str, Any], settings: Sequence[tuple[str, float]]
) -> dict[str, dict[str, list[str]]]:
    """For each setting (a mode, or a fusion at a lexical weight), query id -> ranked docs."""
    out: dict[str, dict[str, list[str]]] = {label(*s): {} for s in settings}
    for qid, entry in queries.items():
        rows = entry["candidates"]
        docs_of = {r["identity"]: r["docs"] for r in rows}
        identity = {r["identity"]: r["identity"] for r in rows}
        lexical = sorted(
            ((r["identity"], *r["lexical"]) for r in rows if r["lexical"] is not None),
            key=lambda t: t[1],
        )
        vector = sorted(
            ((r["identity"], *r["vector"]) for r in rows if r["vector"] is not None),
            key=lambda t: t[1],
        )
        for method, weight in settings:
            if method == "lexical":
                order = [k for k, _, _ in lexical]
            elif method == "vector":
                order = [k for k, _, _ in vector]
            else:
                fused = fused_order(
                    method=method,
                    weights=Weights(lexical=weight, vector=1.0),
                    lexical=lexical,
                    vector=vector if entry["semantic"] == "used" else None,
                    identity=identity,
                )
                order = [k for k, _ in fused]
            out[label(method, weight)][qid] = _docs(order, docs_of)
    return out


def label(method: str, weight: float) -> str:
    return method if method in ("lexical", "vector") else f"{method}@{weight:g}"


def check_collected_order(data: dict[str, Any]) -> int:
    """Re-fused at the collection's own settings (RRF, equal weights), every query must give
    back the order Retriever.search returned; returns the number of queries checked."""
    for qid, entry in data["queries"].items():
        rows = entry["candidates"]
        identity = {r["identity"]: r["identity"] for r in rows}
        lexical = [(r["identity"], *r["lexical"]) for r in rows if r["lexical"] is not None]
        vector = [(r["identity"], *r["vector"]) for r in rows if r["vector"] is not None]
        fused = fused_order(
            method="rrf",
            weights=Weights(),
            lexical=sorted(lexical, key=lambda t: t[1]),
            vector=sorted(vector, key=lambda t: t[1]) if entry["semantic"] == "used" else None,
            identity=identity,
        )
        if [k for k, _ in fused] != [r["identity"] for r in rows]:
            raise AssertionError(f"{data['dataset']} {data['model']} {qid}: re-fused order differs")
    return len(data["queries"])


# ----------------------------------------------------------------------- statistics


def _best(candidates: Sequence[str], value: dict[str, float]) -> str:
    """The setting with the highest value; ties to the weight closest to 1, then the smaller."""

    def key(name: str) -> tuple[float, float, float]:
        weight = float(name.split("@")[1])
        return (round(value[name], 12), -abs(np.log(weight)), -weight)

    return max(candidates, key=key)


def _mean(per_query: dict[str, float], queries: Sequence[str]) -> float:
    return float(np.mean([per_query[q] for q in queries])) if queries else 0.0


# ------------------------------------------------------------------------ the study


def study(models: Sequence[str], collections: Sequence[str], folder: Path) -> dict[str, Any]:
    settings = [("lexical", 0.0), ("vector", 0.0)] + [(m, w) for m in FUSIONS for w in GRID]
    # (collection, model) -> setting label -> query id -> nDCG@10; and the means of all measures.
    ndcg: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    means: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    provenance: dict[str, Any] = {}
    for collection in collections:
        for model in models:
            data = legs_cache.read(collection, model, folder)
            if data is None:
                print(f"{collection} {model}: no collected legs, skipped", file=sys.stderr)
                continue
            checked = check_collected_order(data)
            qrels = _qrels(collection)
            runs = runs_for(data["queries"], settings)
            per_setting: dict[str, dict[str, float]] = {}
            mean_setting: dict[str, dict[str, float]] = {}
            for name, run in runs.items():
                mean_values, per_query = score(qrels, run)
                per_setting[name] = {q: v["nDCG@10"] for q, v in per_query.items()}
                mean_setting[name] = mean_values
            ndcg[(collection, model)] = per_setting
            means[(collection, model)] = mean_setting
            provenance[f"{collection} {model}"] = {
                "legs": data["provenance"],
                "legs_settings": data["settings"],
                "queries_checked_against_search_order": checked,
            }
            print(f"{collection} {model}: {len(runs)} settings", file=sys.stderr)
    out: dict[str, Any] = {"collections": {}, "models": {}}
    for model in models:
        present = [c for c in collections if (c, model) in ndcg]
        if not present:
            continue
        out["models"][model] = _defaults(model, present, ndcg)
        for collection in present:
            out["collections"].setdefault(collection, {})[model] = _per_collection(
                ndcg[(collection, model)],
                means[(collection, model)],
                out["models"][model],
                collection,
            )
    for model, fusions in out["models"].items():
        fusions["chosen"] = choose(model, out["collections"])
    out["provenance"] = provenance
    return out


def choose(model: str, collections: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The model's default fusion: the one whose default weight keeps hybrid at least as good
    as the better leg alone (cross-validated, pooled) on more collections; RRF, the canonical
    fusion, on a tie."""
    holds: dict[str, list[str]] = {method: [] for method in FUSIONS}
    for collection, models in collections.items():
        entry = models.get(model)
        if entry is None:
            continue
        better = entry[entry["better_leg"]]["nDCG@10"]
        for method in FUSIONS:
            if entry[method]["pooled_cv_nDCG@10"] >= better:
                holds[method].append(collection)
    fusion = "dbsf" if len(holds["dbsf"]) > len(holds["rrf"]) else "rrf"
    return {
        "fusion": fusion,
        "rule": "the fusion whose pooled cross-validated nDCG@10 at its default weight is at"
        " least the better leg's on more collections; rrf on a tie",
        "collections_at_or_above_the_better_leg": holds,
    }


def _qrels(collection: str) -> dict[str, dict[str, int]]:
    from evals.quality.datasets import load

    return load(collection).qrels


def _candidates(method: str) -> list[str]:
    return [label(method, w) for w in GRID]


def _defaults(
    model: str, collections: Sequence[str], ndcg: dict[tuple[str, str], dict[str, dict[str, float]]]
) -> dict[str, Any]:
    """The model's default weight per fusion, and the cross-validated figures of choosing it."""
    result: dict[str, Any] = {}
    for method in FUSIONS:
        names = _candidates(method)

        def pooled(train: dict[str, list[str]], names: list[str] = names) -> dict[str, float]:
            return {
                n: float(np.mean([_mean(ndcg[(c, model)][n], train[c]) for c in train]))
                for n in names
            }

        everything = {c: sorted(ndcg[(c, model)]["lexical"]) for c in collections}
        chosen = _best(names, pooled(everything))
        folds: dict[str, list[float]] = {c: [] for c in collections}
        chosen_per_fold = []
        for fold in range(FOLDS):
            train = {
                c: [q for q in everything[c] if fold_of(q, FOLDS) != fold] for c in collections
            }
            pick = _best(names, pooled(train))
            chosen_per_fold.append(float(pick.split("@")[1]))
            for c in collections:
                folds[c].extend(
                    ndcg[(c, model)][pick][q] for q in everything[c] if fold_of(q, FOLDS) == fold
                )
        loco: dict[str, Any] = {}
        for held in collections:
            rest = {c: everything[c] for c in collections if c != held}
            pick = _best(names, pooled(rest)) if rest else chosen
            loco[held] = {
                "lexical_weight": float(pick.split("@")[1]),
                "nDCG@10": round(_mean(ndcg[(held, model)][pick], everything[held]), 4),
            }
        result[method] = {
            "lexical_weight": float(chosen.split("@")[1]),
            "vector_weight": 1.0,
            "objective": "mean over collections of each collection's mean nDCG@10",
            "objective_value": round(pooled(everything)[chosen], 4),
            "pooled_cv": {
                "chosen_lexical_weights": chosen_per_fold,
                "nDCG@10": {c: round(float(np.mean(v)), 4) for c, v in folds.items()},
            },
            "leave_one_collection_out": loco,
        }
    return result


def _per_collection(
    per_setting: dict[str, dict[str, float]],
    means: dict[str, dict[str, float]],
    defaults: dict[str, Any],
    collection: str,
) -> dict[str, Any]:
    queries = sorted(per_setting["lexical"])
    lexical, vector = per_setting["lexical"], per_setting["vector"]
    better = "lexical" if _mean(lexical, queries) >= _mean(vector, queries) else "vector"
    entry: dict[str, Any] = {
        "queries": len(queries),
        "lexical": means["lexical"],
        "vector": means["vector"],
        "better_leg": better,
        "sweep": {
            method: {f"{w:g}": means[label(method, w)]["nDCG@10"] for w in GRID}
            for method in FUSIONS
        },
    }
    for method in FUSIONS:
        names = _candidates(method)
        held_out: list[float] = []
        chosen: list[float] = []
        for fold in range(FOLDS):
            train = [q for q in queries if fold_of(q, FOLDS) != fold]
            test = [q for q in queries if fold_of(q, FOLDS) == fold]
            pick = _best(names, {n: _mean(per_setting[n], train) for n in names})
            chosen.append(float(pick.split("@")[1]))
            held_out.extend(per_setting[pick][q] for q in test)
        default = label(method, defaults[method]["lexical_weight"])
        equal = label(method, 1.0)
        at_default = [per_setting[default][q] for q in queries]
        best_leg = [per_setting[better][q] for q in queries]
        entry[method] = {
            "equal_weights": means[equal],
            "per_collection_cv": {
                "chosen_lexical_weights": chosen,
                "nDCG@10": round(float(np.mean(held_out)), 4),
            },
            "pooled_cv_nDCG@10": defaults[method]["pooled_cv"]["nDCG@10"][collection],
            "leave_one_collection_out": defaults[method]["leave_one_collection_out"][collection],
            "at_default": {
                "lexical_weight": defaults[method]["lexical_weight"],
                **means[default],
                "minus_better_leg": round(float(np.mean(at_default) - np.mean(best_leg)), 4),
                "p_vs_better_leg": round(paired_permutation(at_default, best_leg), 4),
            },
        }
    rrf_default = [per_setting[label("rrf", defaults["rrf"]["lexical_weight"])][q] for q in queries]
    dbsf_default = [
        per_setting[label("dbsf", defaults["dbsf"]["lexical_weight"])][q] for q in queries
    ]
    entry["dbsf_minus_rrf_at_defaults"] = {
        "nDCG@10": round(float(np.mean(dbsf_default) - np.mean(rrf_default)), 4),
        "p": round(paired_permutation(dbsf_default, rrf_default), 4),
    }
    return entry


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--collections", default=",".join(NAMED))
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    collections = [c for c in args.collections.split(",") if c]
    results = study(models, collections, args.cache)
    doc = {
        "benchmark": "fusion and weights on collected legs, cross-validated",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        **git_info(),
        "machine": machine_info(),
        "settings": {
            "grid_lexical_weights": list(GRID),
            "vector_weight": 1.0,
            "fusions": list(FUSIONS),
            "folds": FOLDS,
            "fold_by": "sha256(query id) mod folds",
            "limit": LIMIT,
            "refused_with": "pyretrieve.ranking.fused_order (the ranker's arithmetic)",
            "significance": f"paired randomization (sign flip), {PERMUTATIONS} permutations,"
            " seed 0, two-sided",
        },
        **results,
    }
    args.out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return doc


if __name__ == "__main__":
    main()
