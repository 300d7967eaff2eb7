"""PNG plots of the committed evaluation results, drawn with matplotlib's Agg backend.

* :func:`latency_figure`: latency (p50, 1 client) against scope size for each method of the
  scale benchmark (``evals/bench/latest.json``);
* :func:`quality_figure`: nDCG@10 per collection and leg (lexical, vector, hybrid), one panel
  per embedding model (``evals/quality/<dataset>.json``);
* :func:`weights_figure`: hybrid nDCG@10 against the lexical weight, one panel per collection
  and one curve per model, with each model's better leg as a dashed line
  (``evals/quality/weights-*.json``);
* :func:`fusion_figure`: the same for RRF and DBSF from the offline sweep down to 0.05, with
  each model's default weight marked (``evals/quality/fusion.json``).

The figures are built from the JSON alone (nothing is measured here) and never touch pyplot,
so no display or global backend is involved. :func:`save` writes a PNG without a timestamp or
software version in its metadata, so the same JSON and matplotlib give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

# The end-to-end methods of the scale benchmark (those its report tabulates) and the
# candidate statements that price RLS against the same query written by hand.
END_TO_END = (
    "client.hybrid",
    "client.lexical",
    "client.vector",
    "sql.search",
    "hand.hybrid",
    "naive",
)
CANDIDATES = ("rls.lexical", "hand.lexical", "rls.vector", "hand.vector")
LEGS = ("lexical", "vector", "hybrid", "hybrid-rrf", "hybrid-dbsf")
DPI = 100


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: Path) -> Path:
    """Write ``fig`` as a PNG at ``path`` (folders made as needed) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None})
    return path


# ---------------------------------------------------------------------------------------------
# Scale benchmark
# ---------------------------------------------------------------------------------------------


def latency_series(
    bench: dict[str, Any], methods: Iterable[str]
) -> dict[str, list[tuple[int, float]]]:
    """method -> [(scope rows, p50 ms at 1 client)] over the probe scopes, by rows."""
    scopes = sorted(bench["scopes"], key=lambda s: s["rows"])
    return {
        m: [(int(s["rows"]), float(s["methods"][m]["1"]["p50"])) for s in scopes] for m in methods
    }


def latency_figure(bench: dict[str, Any]) -> Figure:
    fig = _figure(11.5, 4.6)
    left, right = fig.subplots(1, 2)
    s = bench["settings"]
    fig.suptitle(
        f"Latency against scope size: {s['fragments']:,} fragments, 1 client, p50"
        f" (commit {str(bench['commit'])[:10]})"
    )
    for ax, methods, title in (
        (left, END_TO_END, "End to end (authorize, candidates, records, fusion)"),
        (right, CANDIDATES, "Candidate statements: under RLS vs hand-written"),
    ):
        for method, points in latency_series(bench, methods).items():
            style = "--" if method.startswith("hand.") and ax is right else "-"
            ax.plot(
                [r for r, _ in points],
                [ms for _, ms in points],
                style,
                marker="o",
                label=method,
                gid=method,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows in the scope (log)")
        ax.set_ylabel("p50 latency, ms (log)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
    return fig


# ---------------------------------------------------------------------------------------------
# Quality
# ---------------------------------------------------------------------------------------------


def _models(results: Sequence[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for data in results:
        for model in data.get("runs", {}):
            seen[model] = None
    return sorted(seen)


def quality_values(results: Sequence[dict[str, Any]], model: str) -> dict[str, list[float | None]]:
    """leg -> nDCG@10 per collection (in the order of ``results``), None where not run."""
    out: dict[str, list[float | None]] = {}
    for leg in LEGS:
        out[leg] = [
            data.get("runs", {}).get(model, {}).get("modes", {}).get(leg, {}).get("nDCG@10")
            for data in results
        ]
    return out


def quality_figure(results: Sequence[dict[str, Any]]) -> Figure:
    """``results`` in the report's collection order."""
    models = _models(results)
    collections = [data["dataset"] for data in results]
    # Narrower panels as models are added, so the page stays within 2,000 pixels.
    fig = _figure(min(19.0, max(6.0, 3.6 * len(models))), 4.4)
    axes = fig.subplots(1, len(models), sharey=True, squeeze=False)[0]
    fig.suptitle("Retrieval quality: nDCG@10 per collection and leg")
    width = 0.8 / len(LEGS)
    for ax, model in zip(axes, models, strict=True):
        values = quality_values(results, model)
        for i, leg in enumerate(LEGS):
            xs = [j + (i - (len(LEGS) - 1) / 2) * width for j in range(len(collections))]
            heights = [0.0 if v is None else v for v in values[leg]]
            ax.bar(xs, heights, width, label=leg, gid=f"{model}:{leg}")
        ax.set_title(model, fontsize=10)
        ax.set_xticks(range(len(collections)), collections, rotation=30, ha="right", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel("nDCG@10")
    axes[0].legend(fontsize=8)
    return fig


def weights_series(sweep: dict[str, Any]) -> list[tuple[float, float]]:
    """[(lexical weight, hybrid nDCG@10)] of one sweep, by weight."""
    return sorted((float(w), float(v["nDCG@10"])) for w, v in sweep["results"].items())


def better_leg(results: Sequence[dict[str, Any]], dataset: str, model: str) -> float | None:
    for data in results:
        if data["dataset"] == dataset:
            modes = data.get("runs", {}).get(model, {}).get("modes", {})
            if "lexical" in modes and "vector" in modes:
                return max(float(modes["lexical"]["nDCG@10"]), float(modes["vector"]["nDCG@10"]))
    return None


def weights_figure(sweeps: Sequence[dict[str, Any]], results: Sequence[dict[str, Any]]) -> Figure:
    """``sweeps`` in the report's collection order; one panel per collection."""
    collections = list(dict.fromkeys(sweep["dataset"] for sweep in sweeps))
    models = sorted({sweep["model"] for sweep in sweeps})
    colours = {m: f"C{i}" for i, m in enumerate(models)}
    ncols = min(3, len(collections))
    nrows = -(-len(collections) // ncols)
    fig = _figure(4.0 * ncols, 3.4 * nrows + 0.6)
    grid = fig.subplots(nrows, ncols, squeeze=False)
    cells = [ax for row in grid for ax in row]
    axes = cells[: len(collections)]
    for spare in cells[len(collections) :]:
        spare.set_visible(False)
    fig.suptitle(
        "Weighted RRF: hybrid nDCG@10 against the lexical weight (vector weight 1)\n"
        "star: the best weight; dashed: the model's better leg (lexical or vector alone)"
    )
    for ax, dataset in zip(axes, collections, strict=True):
        for sweep in sorted(
            (s for s in sweeps if s["dataset"] == dataset), key=lambda s: s["model"]
        ):
            model = sweep["model"]
            points = weights_series(sweep)
            ax.plot(
                [w for w, _ in points],
                [v for _, v in points],
                marker=".",
                color=colours[model],
                label=model,
                gid=f"{dataset}:{model}",
            )
            best = float(sweep["best_lexical_weight"])
            ax.plot(
                [best],
                [dict(points)[best]],
                marker="*",
                markersize=11,
                color=colours[model],
                gid=f"{dataset}:{model}:best",
            )
            leg = better_leg(results, dataset, model)
            if leg is not None:
                ax.axhline(
                    leg,
                    linestyle="--",
                    linewidth=1,
                    color=colours[model],
                    gid=f"{dataset}:{model}:leg",
                )
        ax.set_xscale("log")
        ax.set_title(dataset, fontsize=10)
        ax.set_xlabel("lexical weight (log)")
        ax.grid(True, alpha=0.3)
    for row in grid:
        row[0].set_ylabel("hybrid nDCG@10")
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=9)
    return fig


def fusion_series(entry: dict[str, Any], method: str) -> list[tuple[float, float]]:
    """[(lexical weight, nDCG@10)] of one collection and model's sweep for one fusion."""
    return sorted((float(w), float(v)) for w, v in entry["sweep"][method].items())


def fusion_figure(doc: dict[str, Any], order: Sequence[str]) -> Figure:
    """One panel per collection (in ``order``): RRF solid, DBSF dashed, one colour per model;
    a dot at each model's default weight and its better leg dotted."""
    collections = [c for c in order if c in doc["collections"]]
    models = sorted({m for c in collections for m in doc["collections"][c]})
    colours = {m: f"C{i}" for i, m in enumerate(models)}
    ncols = min(3, len(collections))
    nrows = -(-len(collections) // ncols)
    fig = _figure(4.4 * ncols, 3.5 * nrows + 0.7)
    grid = fig.subplots(nrows, ncols, squeeze=False)
    cells = [ax for row in grid for ax in row]
    for spare in cells[len(collections) :]:
        spare.set_visible(False)
    fig.suptitle(
        "Hybrid nDCG@10 against the lexical weight (vector weight 1): RRF solid, DBSF dashed\n"
        "dot: the model's default weight; dotted: the model's better leg alone"
    )
    for ax, collection in zip(cells, collections, strict=False):
        for model in models:
            entry = doc["collections"][collection].get(model)
            if entry is None:
                continue
            for method, style in (("rrf", "-"), ("dbsf", "--")):
                points = fusion_series(entry, method)
                ax.plot(
                    [w for w, _ in points],
                    [v for _, v in points],
                    style,
                    color=colours[model],
                    label=f"{model} {method}",
                    gid=f"{collection}:{model}:{method}",
                )
                default = doc["models"][model][method]["lexical_weight"]
                ax.plot([default], [dict(points)[default]], "o", color=colours[model])
            better = entry[entry["better_leg"]]["nDCG@10"]
            ax.axhline(better, linestyle=":", color=colours[model], linewidth=1)
        ax.set_xscale("log")
        ax.set_title(collection, fontsize=10)
        ax.set_xlabel("lexical weight (log)", fontsize=8)
        ax.grid(True, alpha=0.3)
    cells[0].set_ylabel("nDCG@10")
    cells[0].legend(fontsize=6)
    return fig
