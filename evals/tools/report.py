"""Markdown tables of the tool-discovery results (``evals/tools/*.json``, ``evals/bench/tools.json``).

    python -m evals.tools.report > tables.md

docs/tools.md holds these tables; regenerate them from the committed results, never by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent / "bench" / "tools.json"
COLLECTIONS = ("bfcl-tools", "gorilla-torchhub", "gorilla-tensorflowhub", "gorilla-huggingface")
MODELS = ("hash-ngram-v1", "all-MiniLM-L6-v2-int8")
MEASURES = ("R@5", "R@10", "R@15", "R@20", "nDCG@15", "MRR@15 (lenient)")


def results() -> list[dict[str, Any]]:
    out = []
    for c in COLLECTIONS:
        for m in MODELS:
            path = HERE / f"{c}-{m}.json"
            if path.exists():
                out.append(json.loads(path.read_text(encoding="utf-8")))
    return out


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def retrieval(rs: list[dict[str, Any]]) -> list[str]:
    lines = [
        _row(["collection", "model", "mode", *MEASURES]),
        _row(["---"] * (3 + len(MEASURES))),
    ]
    for r in rs:
        for mode, v in r["modes"].items():
            lines.append(
                _row([r["collection"], r["model"], mode, *(f"{v[m]:.3f}" for m in MEASURES)])
            )
    return lines


def hybrid_bar(rs: list[dict[str, Any]]) -> list[str]:
    lines = [
        _row(["collection", "model", "queries", "weights per fold (lexical; vector 1.0)",
              "better leg", "Δ nDCG@15", "Δ R@10", "Δ MRR@15", ">= better leg (nDCG@15)",
              ">= on every measure", "replay = system"]),
        _row(["---"] * 11),
    ]  # fmt: skip
    for r in rs:
        b = r["hybrid_vs_better_leg"]
        weights = ", ".join(str(w) for w in r["weights"]["per_fold"].values())
        lines.append(_row([
            r["collection"], r["model"], r["queries"], weights, b["better_leg"],
            f"{b['nDCG@15']:+.3f}", f"{b['R@10']:+.3f}", f"{b['MRR@15 (lenient)']:+.3f}",
            "yes" if b["at_least_as_good_on_nDCG@15"] else "**no**",
            "yes" if b["at_least_as_good"] else "no",
            f"{r['queries'] - r['replay_mismatches']}/{r['queries']}",
        ]))  # fmt: skip
    return lines


def policies(rs: list[dict[str, Any]]) -> list[str]:
    lines = [
        _row(["collection", "model", "policy", "average K", "recall (strict)", "vs K=48",
              "name recall", "vs K=48", "schema tokens / request", "p90", "saved vs K=48"]),
        _row(["---"] * 11),
    ]  # fmt: skip
    for r in rs:
        for p, v in r["policies"].items():
            lines.append(_row([
                r["collection"], r["model"], p, f"{v['average_k']:.2f}", f"{v['recall']:.3f}",
                f"{100 * v['recall_vs_k48']:+.1f} pt", f"{v['recall_names']:.3f}",
                f"{100 * v['recall_names_vs_k48']:+.1f} pt", f"{v['schema_tokens_mean']:.0f}",
                v["schema_tokens_p90"], f"{100 * v['tokens_saved_vs_k48']:.0f}%",
            ]))  # fmt: skip
    return lines


def cross_validated(rs: list[dict[str, Any]]) -> list[str]:
    lines = [
        _row(["collection", "model", "family", "parameters per fold (a, b, kmin)",
              "chosen on all queries", "average K (held out)", "recall vs K=48",
              "name recall vs K=48", "tokens saved"]),
        _row(["---"] * 9),
    ]  # fmt: skip
    for r in rs:
        for family, v in r["cross_validated"].items():
            folds = "; ".join(
                ",".join(str(x) for x in p) for p in v["parameters_per_fold"].values()
            )
            lines.append(_row([
                r["collection"], r["model"], family, folds,
                ",".join(str(x) for x in v["chosen_on_all"]), f"{v['average_k']:.2f}",
                f"{100 * v['recall_vs_k48']:+.1f} pt", f"{100 * v['recall_names_vs_k48']:+.1f} pt",
                f"{100 * v['tokens_saved_vs_k48']:.0f}%",
            ]))  # fmt: skip
    return lines


def confidence(rs: list[dict[str, Any]]) -> list[str]:
    levels = ("high", "normal", "low", "fail", "none")
    lines = [_row(["collection", "model", *levels]), _row(["---"] * (2 + len(levels)))]
    for r in rs:
        lines.append(
            _row([r["collection"], r["model"], *(r["confidence"].get(x, 0) for x in levels)])
        )
    return lines


def similar(rs: list[dict[str, Any]]) -> list[str]:
    lines = [
        _row(["collection", "model", "queries", "", "contradicting write tools in top 5 / query",
              "at rank 1", "asked-family write tools of another title in top 5 / query",
              "R@5 on the set"]),
        _row(["---"] * 8),
    ]  # fmt: skip
    for r in rs:
        s = r["similar_tools"]
        if not s["queries"]:
            continue
        for key in ("before", "after"):
            v = s[key]
            lines.append(_row([r["collection"], r["model"], s["queries"],
                               "before (no penalties)" if key == "before" else "after (penalties)",
                               v["contradicting_in_top5_per_query"], v["contradicting_at_rank1"],
                               v.get("same_family_other_tool_in_top5_per_query", "not measured"),
                               v["recall@5"]]))  # fmt: skip
    return lines


def bench() -> list[str]:
    if not BENCH.exists():
        return ["(no bench result)"]
    b = json.loads(BENCH.read_text(encoding="utf-8"))
    methods = ("client.discover", "sql.discover_tools", "schema_loading", "naive")
    lines = [
        _row(["tools in scope", *(f"{m} p50 / p95 ms" for m in methods), "naive / client (p50)",
              "average K", "target p50", "met", "load s"]),
        _row(["---"] * (len(methods) + 6)),
    ]  # fmt: skip
    for size, v in sorted(b["sizes"].items(), key=lambda kv: int(kv[0])):
        lines.append(_row([
            f"{int(size):,}", *(f"{v[m]['p50']:.1f} / {v[m]['p95']:.1f}" for m in methods),
            f"{v['naive_over_client_p50']}x", v["average_k"],
            v["target_p50_ms"] or "", {True: "yes", False: "**no**"}.get(v.get("meets_target"), ""),
            v["load"]["seconds"],
        ]))  # fmt: skip
    for miss in b.get("not_measured", []):
        lines.append(_row([f"{miss['size']:,}", f"not measured: {miss['reason']}", *[""] * 9]))
    return lines


def main() -> int:
    rs = results()
    for title, lines in (
        ("Retrieval", retrieval(rs)),
        ("Hybrid with a cross-validated weight against its better leg", hybrid_bar(rs)),
        ("K policies", policies(rs)),
        ("near, cross-validated", cross_validated(rs)),
        ("Confidence distribution (hybrid)", confidence(rs)),
        ("Similar-tool false positives", similar(rs)),
        ("Scale", bench()),
    ):
        print(f"### {title}\n")
        print("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
