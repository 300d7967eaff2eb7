"""Tool discovery on BFCL tools and the Gorilla APIBench splits, through the public paths.

    python -m evals.tools.run [--datasets DIR] [--model hash-ngram-v1] [--limit-queries N]
                              [--collections bfcl,gorilla-torchhub,...] [--out evals/tools]
                              [--dsn DSN]

An admin principal creates the scope, a writer registers every tool with
``pyretrieve.tools.register_tools`` (the tool's BEIR id is its name, because BFCL has many
same-named variants that strict qrels tell apart), a reader runs every query. Steps:

1. **Legs.** Each leg's top 100 per query through ``Retriever.search`` (``legs.capture``).
2. **Weight, cross-validated.** Queries fall into 5 folds by a hash of their id. For each fold
   a lexical weight (vector weight 1.0) is chosen from ``LEXICAL_WEIGHTS`` on the other four
   folds, scoring discovery re-played from the legs (``legs.replay``): among the weights whose
   mean nDCG@15 there is within one standard error of the best one's, the nearest equal
   weights (``one_standard_error``).
3. **Discovery.** ``Retriever.discover_tools`` (pool 48, K=48, penalties on) for every query at
   its fold's weight: these are the hybrid figures. Each query's re-played ranking is compared
   with the system's, tool for tool (``replay_mismatches`` must be 0).
4. **Scores.** ir-measures, strict qrels for Recall@k and nDCG@15, lenient ones for MRR@15
   (BFCL has both). The legs alone are discovery in lexical / vector mode, re-played.
5. **K policies**, each applied to the discoveries of step 3: average K, recall at the chosen K
   (strict), schema tokens per request (o200k_base of the chosen tools' OpenAI rendering, summed
   per tool), against K=48. The parameters of each adaptive family are cross-validated the same
   way: on the other folds, the smallest average K whose recall is within ``RECALL_MARGIN`` of
   K=48; the held-out folds' figures are reported (``cross_validated``).
6. The confidence distribution, and similar-tool false positives on the delete/update/create
   queries with the penalties (step 3) and without them (re-played, ``protect=False``).

One JSON file per collection and model, with the commit and settings.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import secrets
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ir_measures
import psycopg

from evals.bench.runtime import (
    DATASETS,
    Principals,
    acting_as,
    ensure_installed,
    provenance,
    summary_ms,
    throwaway_database,
)
from evals.tools import legs as L
from pyretrieve import Retriever, Scope
from pyretrieve.embedders.registry import get_embedder
from pyretrieve.tools import context, register_tools
from pyretrieve.tools import select as sel
from pyretrieve.tools.definitions import (
    WRITE_FAMILIES,
    ToolDefinition,
    operation_family,
    query_operations,
    tool_entities,
)
from pyretrieve.types import Weights

OUT = Path(__file__).resolve().parent
RECALL_KS = (5, 10, 15, 20)
MEASURES = [*(f"R@{k}" for k in RECALL_KS), "nDCG@15"]
PURPOSE = "eval"
FOLDS = 5
LEXICAL_WEIGHTS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 10.0)
RECALL_MARGIN = 0.01  # the bar: within 1 point of K=48
MAX_QUERY = 4096


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


def _gorilla_split(split: str) -> Callable[[Path], dict[str, Any]]:
    return lambda root: gorilla(root, split)


LOADERS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "bfcl": bfcl,
    **{f"gorilla-{s}": _gorilla_split(s) for s in ("torchhub", "tensorflowhub", "huggingface")},
}


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------
def fold_of(query_id: str) -> int:
    return int.from_bytes(hashlib.sha256(query_id.encode("utf-8")).digest()[:8], "big") % FOLDS


def rebuild(found: Any) -> list[sel.Scored]:
    """The pure selector's input back from a discovery (to apply every K policy offline)."""
    out = []
    for t in found.ranked:
        e = t.explanation
        c = sel.Candidate(
            t.fragment_id, t.name, t.operation, t.schema_version, e["fused_rank"],
            e["fused_score"], e["lexical_rank"], e["vector_rank"], 0,
            frozenset(),  # the penalties are already in the adjusted score
            e["lexical_score"], e["vector_distance"],
        )  # fmt: skip
        out.append(sel.Scored(c, e["rank"], e["normalized_score"], e["adjusted_score"], ()))
    return out


def per_query(
    runs: dict[str, list[sel.Scored]], coll: dict[str, Any]
) -> dict[str, dict[str, float]]:
    """Each measure per judged query (0 for a query that found nothing)."""
    strict = [ir_measures.Qrel(q, d, s) for q, ds in coll["strict"].items() for d, s in ds.items()]
    lenient = [
        ir_measures.Qrel(q, d, s) for q, ds in coll["lenient"].items() for d, s in ds.items()
    ]
    run = [
        ir_measures.ScoredDoc(q, s.candidate.name, 1000.0 - s.rank)
        for q, scored in runs.items()
        for s in scored
    ]
    out: dict[str, dict[str, float]] = {q: dict.fromkeys([*MEASURES, "MRR@15"], 0.0) for q in runs}
    parsed = [ir_measures.parse_measure(m) for m in MEASURES]
    for m in ir_measures.iter_calc(parsed, strict, run):
        if m.query_id in out:
            out[m.query_id][str(m.measure)] = m.value
    for m in ir_measures.iter_calc([ir_measures.parse_measure("RR@15")], lenient, run):
        if m.query_id in out:
            out[m.query_id]["MRR@15"] = m.value
    return out


def means(
    values: dict[str, dict[str, float]], queries: Sequence[str] | None = None
) -> dict[str, float]:
    qs = list(values) if queries is None else list(queries)
    keys = [*MEASURES, "MRR@15"]
    out = {k: statistics.fmean(values[q][k] for q in qs) for k in keys}
    out["MRR@15 (lenient)"] = out.pop("MRR@15")
    return {k: round(v, 4) for k, v in out.items()}


def recall_at(chosen: list[str], gold: dict[str, int]) -> float:
    rel = {d for d, s in gold.items() if s > 0}
    return len(rel & set(chosen)) / len(rel) if rel else 0.0


def choose_weights(
    qids: list[str], ndcg: dict[float, dict[str, float]]
) -> tuple[dict[int, float], dict[str, Any]]:
    """Per fold, the lexical weight chosen on the other folds by the one-standard-error rule.

    The best weight there (mean nDCG@15) is a noisy estimate: on a few hundred queries the
    weights' means lie within a standard error of one another, and the best one scattered from
    fold to fold (torchhub: 0.25 to 3). So a fold takes, among the weights whose mean falls
    short of the best by no more than one standard error of the paired per-query differences,
    the one nearest equal weights (by ``abs(log(w))``; ties to the better mean): the canonical
    RRF unless the other folds show clearly that another weight is better.
    """
    folds = _train_sets(qids)
    chosen = {f: one_standard_error(train, ndcg) for f, train in folds.items()}
    sweep = {str(w): round(statistics.fmean(ndcg[w].values()), 4) for w in LEXICAL_WEIGHTS}
    return chosen, {
        "rule": "one standard error of the paired differences, nearest equal weights",
        "per_fold": {str(f): w for f, w in chosen.items()},
        "best_per_fold": {str(f): best_weight(train, ndcg) for f, train in folds.items()},
        "nDCG@15_by_weight": sweep,
    }


def _train_sets(qids: list[str]) -> dict[int, list[str]]:
    return {f: [q for q in qids if fold_of(q) != f] for f in range(FOLDS)}


def best_weight(train: list[str], ndcg: dict[float, dict[str, float]]) -> float:
    """The weight with the best mean nDCG@15 on ``train`` (ties to the one nearest 1.0)."""
    return max(
        LEXICAL_WEIGHTS,
        key=lambda w: (
            round(statistics.fmean(ndcg[w][q] for q in train), 12),
            -abs(math.log(w)),
        ),
    )


def one_standard_error(train: list[str], ndcg: dict[float, dict[str, float]]) -> float:
    """The weight nearest equal weights whose mean nDCG@15 on ``train`` is within one standard
    error (of the per-query differences) of the best weight's."""
    best = best_weight(train, ndcg)

    def within(w: float) -> bool:
        diffs = [ndcg[best][q] - ndcg[w][q] for q in train]
        if len(diffs) < 2:
            return w == best
        se = statistics.stdev(diffs) / math.sqrt(len(diffs))
        return statistics.fmean(diffs) <= se

    return min(
        (w for w in LEXICAL_WEIGHTS if within(w)),
        key=lambda w: (
            abs(math.log(w)),
            -round(statistics.fmean(ndcg[w][q] for q in train), 12),
        ),
    )


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------
@contextmanager
def scope_for(
    conn: psycopg.Connection[Any], model: str, dimension: int
) -> Iterator[tuple[Principals, Scope]]:
    who = Principals.create(conn, "tools")
    ws, pj = f"tools-{secrets.token_hex(3)}", "tools"
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
                "SELECT pyretrieve.register_model(%s, %s) WHERE NOT EXISTS"
                " (SELECT 1 FROM pyretrieve.list_models() m WHERE m.model_id = %s)",
                (model, dimension, model),
            )
        yield who, Scope(workspace=ws, project=pj, purpose=PURPOSE)
    finally:
        who.drop(conn)


def embed_queries(embedder: Any, texts: list[str]) -> list[list[float]]:
    out: list[list[float]] = []
    for start in range(0, len(texts), 64):
        out.extend(embedder.embed_documents(texts[start : start + 64]))
    return out


def evaluate(coll: dict[str, Any], dsn: str, model: str, limit: int | None) -> dict[str, Any]:
    embedder = get_embedder(model)
    schema_tokens = {t.name: context.schema_tokens([t.schema])[0] for t in coll["tools"]}
    operations = {t.name: t.operation for t in coll["tools"]}
    entities = {t.name: tool_entities(t.name, t.description) for t in coll["tools"]}
    qids = [q for q in coll["queries"] if q in coll["strict"]][:limit]
    texts = {q: coll["queries"][q][:MAX_QUERY] for q in qids}
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        scope_for(conn, model, embedder.dimension) as (who, scope),
    ):
        started = time.perf_counter()
        report = register_tools(
            conn, coll["tools"], workspace=scope.workspace, project=scope.project,
            principal=who.writer, embedders=[embedder],
        )  # fmt: skip
        register_seconds = time.perf_counter() - started
        tools = {
            str(r.fragment_id): L.Tool(
                r.name, str(r.fragment_id), r.schema_version, operations[r.name], entities[r.name]
            )
            for r in report.tools
        }
        vectors = dict(zip(qids, embed_queries(embedder, [texts[q] for q in qids]), strict=True))
        retriever = Retriever(conn, principal=who.reader, embedders=[embedder])

        # 1. Legs.
        legs: dict[str, L.QueryLegs] = {}
        leg_seconds = []
        for q in qids:
            t0 = time.perf_counter()
            legs[q] = L.capture(retriever, scope, texts[q], model=model, embedding=vectors[q])
            leg_seconds.append(time.perf_counter() - t0)

        def replayed(mode: str, w: float, protect: bool = True) -> dict[str, list[sel.Scored]]:
            weights = Weights(lexical=w, vector=1.0)
            return {
                q: L.replay(texts[q], legs[q], tools, weights=weights, mode=mode, protect=protect)
                for q in qids
            }

        # 2. The weight, cross-validated.
        sweep = {w: per_query(replayed("hybrid", w), coll) for w in LEXICAL_WEIGHTS}
        fold_weight, weight_report = choose_weights(
            qids, {w: {q: v["nDCG@15"] for q, v in s.items()} for w, s in sweep.items()}
        )

        # 3. Discovery through the system at each query's fold weight.
        hybrid: dict[str, list[sel.Scored]] = {}
        seconds = []
        mismatches = 0
        for q in qids:
            w = fold_weight[fold_of(q)]
            t0 = time.perf_counter()
            found = retriever.discover_tools(
                texts[q], scope=scope, policy="fixed-48", model=model, embedding=vectors[q],
                weights=Weights(lexical=w, vector=1.0),
            )  # fmt: skip
            seconds.append(time.perf_counter() - t0)
            hybrid[q] = rebuild(found)
            again = L.replay(texts[q], legs[q], tools, weights=Weights(lexical=w, vector=1.0))
            mismatches += [(s.candidate.name, s.adjusted) for s in again] != [
                (s.candidate.name, s.adjusted) for s in hybrid[q]
            ]
        unprotected = {
            q: L.replay(
                texts[q],
                legs[q],
                tools,
                weights=Weights(lexical=fold_weight[fold_of(q)], vector=1.0),
                protect=False,
            )
            for q in qids
        }

        # 4. Scores.
        modes = {
            "lexical": means(per_query(replayed("lexical", 1.0), coll)),
            "vector": means(per_query(replayed("vector", 1.0), coll)),
            "hybrid (equal weights)": means(sweep[1.0]),
            "hybrid (cross-validated weight)": means(per_query(hybrid, coll)),
            "hybrid (cross-validated weight, no penalties)": means(per_query(unprotected, coll)),
        }
        better_leg = max(("lexical", "vector"), key=lambda m: modes[m]["nDCG@15"])
        cv = modes["hybrid (cross-validated weight)"]
        result: dict[str, Any] = {
            "collection": coll["name"],
            "model": model,
            "tools": len(coll["tools"]),
            "queries": len(qids),
            "registration": {**report.to_plain(), "seconds": round(register_seconds, 1)},
            "modes": modes,
            "weights": weight_report,
            "hybrid_vs_better_leg": {
                "better_leg": better_leg,
                **{m: round(cv[m] - modes[better_leg][m], 4) for m in cv},
                "at_least_as_good": all(cv[m] >= modes[better_leg][m] for m in cv),
                "at_least_as_good_on_nDCG@15": cv["nDCG@15"] >= modes[better_leg]["nDCG@15"],
            },
            "replay_mismatches": mismatches,
            "latency_ms": {
                "both_legs_searched": summary_ms(leg_seconds),
                "discovery": summary_ms(seconds),
            },
        }
        # 5. K policies; 6. confidence, similar tools.
        result["policies"] = policies(hybrid, coll, schema_tokens)
        result["cross_validated"] = cross_validate(hybrid, coll, schema_tokens)
        result["confidence"] = dict(
            sorted(
                Counter(sel.assess(s, sel.DEFAULT_POLICY).level for s in hybrid.values()).items()
            )
        )
        result["similar_tools"] = similar(hybrid, unprotected, coll)
        return result


def _per_query_policy(
    kept: dict[str, list[sel.Scored]],
    coll: dict[str, Any],
    tokens: dict[str, int],
    policy: str,
    params: Any = None,
) -> dict[str, tuple[int, float, float, int]]:
    """Per query: K, strict recall and name-level recall at K (a tool counts when its name is
    a gold tool's name, README's alternative to strict ids), schema tokens."""
    titles = coll["titles"]
    out = {}
    for q, scored in kept.items():
        level = sel.assess(scored, sel.BASELINE_POLICY).level
        k = sel.recommended_k(policy, level, scored, params=params)
        chosen = [s.candidate.name for s in scored[:k]]
        gold = {d for d, v in coll["strict"][q].items() if v > 0}
        names = {titles.get(d, d) for d in gold}
        found = {titles.get(n, n) for n in chosen}
        out[q] = (
            k,
            recall_at(chosen, coll["strict"][q]),
            len(names & found) / len(names) if names else 0.0,
            sum(tokens[n] for n in chosen),
        )
    return out


def _summary(
    rows: dict[str, tuple[int, float, float, int]], queries: Sequence[str]
) -> dict[str, Any]:
    toks = sorted(rows[q][3] for q in queries)
    return {
        "average_k": statistics.fmean(rows[q][0] for q in queries),
        "recall": statistics.fmean(rows[q][1] for q in queries),
        "recall_names": statistics.fmean(rows[q][2] for q in queries),
        "schema_tokens_mean": statistics.fmean(toks),
        "schema_tokens_p90": toks[math.ceil(0.9 * len(toks)) - 1],
    }


def _rounded(row: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    return {
        "average_k": round(row["average_k"], 2),
        "recall": round(row["recall"], 4),
        "recall_vs_k48": round(row["recall"] - base["recall"], 4),
        "recall_names": round(row["recall_names"], 4),
        "recall_names_vs_k48": round(row["recall_names"] - base["recall_names"], 4),
        "schema_tokens_mean": round(row["schema_tokens_mean"], 1),
        "schema_tokens_p90": row["schema_tokens_p90"],
        "tokens_saved_vs_k48": (
            round(1 - row["schema_tokens_mean"] / base["schema_tokens_mean"], 3)
            if base["schema_tokens_mean"]
            else None
        ),
    }


def policies(
    kept: dict[str, list[sel.Scored]], coll: dict[str, Any], tokens: dict[str, int]
) -> dict[str, Any]:
    qids = list(kept)
    rows = {p: _summary(_per_query_policy(kept, coll, tokens, p), qids) for p in sel.POLICIES}
    base = rows[sel.BASELINE_POLICY]
    return {p: _rounded(r, base) for p, r in rows.items()}


def cross_validate(
    kept: dict[str, list[sel.Scored]], coll: dict[str, Any], tokens: dict[str, int]
) -> dict[str, Any]:
    """For each adaptive family: per fold, the parameters with the smallest average K on the
    other folds whose strict recall there is within RECALL_MARGIN of K=48 (else the best
    recall); the held-out folds' figures, pooled over all queries. ``chosen_on_all`` is the
    same rule applied to every query: the parameters a product default takes."""
    qids = list(kept)
    base = _per_query_policy(kept, coll, tokens, sel.BASELINE_POLICY)
    out: dict[str, Any] = {}
    for family, grid in sel.FAMILY_GRIDS.items():
        table = [(p, _per_query_policy(kept, coll, tokens, family, p)) for p in grid]

        def pick(queries: Sequence[str], table: Any = table) -> Any:
            target = _summary(base, queries)["recall"] - RECALL_MARGIN
            sums = [(p, _summary(rows, queries)) for p, rows in table]
            ok = [(r["average_k"], i) for i, (_, r) in enumerate(sums) if r["recall"] >= target]
            if ok:
                return sums[min(ok)[1]][0]
            return max(sums, key=lambda x: x[1]["recall"])[0]

        held: dict[str, tuple[int, float, float, int]] = {}
        picks = {}
        for f in range(FOLDS):
            chosen = pick([q for q in qids if fold_of(q) != f])
            picks[str(f)] = list(chosen)
            rows = dict(table)[chosen]
            held.update({q: rows[q] for q in qids if fold_of(q) == f})
        figures = _rounded(_summary(held, qids), _summary(base, qids))
        out[family] = {
            "parameters_per_fold": picks,
            "chosen_on_all": list(pick(qids)),
            **figures,
        }
    return out


def _per(count: int, queries: Sequence[Any]) -> float | None:
    return round(count / len(queries), 3) if queries else None


def similar(
    protected: dict[str, list[sel.Scored]],
    unprotected: dict[str, list[sel.Scored]],
    coll: dict[str, Any],
) -> dict[str, Any]:
    """False positives on delete/update/create requests, with and without the penalties: write
    tools in the top 5 (and at rank 1) of a write family the request did not ask for (what
    ``operation_contradiction`` is for), and write tools of an asked family that are another
    tool than every gold one, by title (what ``no_shared_entity`` is for; same-titled variants
    of a gold tool are not counted)."""
    titles = coll["titles"]
    qset = []
    for q in protected:
        gold = [d for d, s in coll["strict"][q].items() if s > 0]
        families = {operation_family(titles.get(d, d)) for d in gold}
        asked = query_operations(coll["queries"][q][:MAX_QUERY])
        if families & WRITE_FAMILIES and families & asked:
            qset.append((q, asked))
    out: dict[str, Any] = {"queries": len(qset)}
    for key, kept in (("before", unprotected), ("after", protected)):
        top5 = top1 = other = 0
        recall5 = []
        for q, asked in qset:
            scored = kept[q]
            bad = [
                s
                for s in scored[:5]
                if s.candidate.operation in WRITE_FAMILIES and s.candidate.operation not in asked
            ]
            top5 += len(bad)
            top1 += bool(scored and scored[0] in bad)
            gold_titles = {titles.get(d, d) for d, g in coll["strict"][q].items() if g > 0}
            other += sum(
                1
                for s in scored[:5]
                if s.candidate.operation in WRITE_FAMILIES & asked
                and titles.get(s.candidate.name, s.candidate.name) not in gold_titles
            )
            recall5.append(recall_at([s.candidate.name for s in scored[:5]], coll["strict"][q]))
        out[key] = {
            "contradicting_in_top5_per_query": _per(top5, qset),
            "contradicting_at_rank1": _per(top1, qset),
            "same_family_other_tool_in_top5_per_query": _per(other, qset),
            "recall@5": round(statistics.fmean(recall5), 4) if recall5 else None,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", type=Path, default=DATASETS)
    p.add_argument("--model", default="hash-ngram-v1")
    p.add_argument("--limit-queries", type=int, default=None)
    p.add_argument("--collections", default=",".join(LOADERS))
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--dsn", default=None, help="an existing database (else a throwaway server)")
    args = p.parse_args(argv)

    @contextmanager
    def database() -> Iterator[str]:
        if args.dsn:
            ensure_installed(args.dsn)
            yield args.dsn
        else:
            with throwaway_database() as dsn:
                yield dsn

    with database() as dsn:
        with psycopg.connect(dsn) as conn:
            facts = provenance(conn)
        for name in args.collections.split(","):
            coll = LOADERS[name](args.datasets)
            result = evaluate(coll, dsn, args.model, args.limit_queries)
            result["settings"] = {
                "model": args.model,
                "pool": sel.POOL,
                "candidates_per_leg": sel.CANDIDATES,
                "folds": FOLDS,
                "lexical_weights": list(LEXICAL_WEIGHTS),
                "recall_margin": RECALL_MARGIN,
                "default_policy": sel.DEFAULT_POLICY,
                "families": {f: [list(p) for p in g] for f, g in sel.FAMILY_GRIDS.items()},
                "penalties": {
                    "contradiction": sel.CONTRADICTION_FACTOR,
                    "no_shared_entity": sel.NO_ENTITY_FACTOR,
                },
                "token_method": context.count_tokens("x")[1],
                "limit_queries": args.limit_queries,
            }
            result["provenance"] = facts
            path = args.out / f"{coll['name']}-{args.model}.json"
            path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            print(
                json.dumps({k: result[k] for k in ("collection", "modes", "hybrid_vs_better_leg")}),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
