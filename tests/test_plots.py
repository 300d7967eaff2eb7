"""The plots in docs/img/: drawn from the committed JSON alone, with the series the JSON holds.

The figures are inspected as matplotlib objects (each series carries a ``gid``) and compared
with values read from the JSON here, independently of the plotting code; the files are checked
as PNGs. ``--render`` must reproduce the committed markdown from the committed JSON.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib", reason="the evals extra is not installed")
pytest.importorskip("ir_measures", reason="the evals extra is not installed")

from matplotlib.figure import Figure

from evals import plots
from evals.bench import scale
from evals.quality import cli as quality
from evals.quality import report

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BENCH = ROOT / "evals" / "bench" / "latest.json"
RESULTS = ROOT / "evals" / "quality"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the PNG header; fails unless the file is a PNG."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert data.endswith(b"IEND\xaeB`\x82"), f"{path.name} is truncated"
    return width, height


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _quality_results() -> list[dict[str, Any]]:
    found = [_load(p) for p in sorted(RESULTS.glob("*.json")) if not p.name.startswith("weights-")]
    found = [d for d in found if isinstance(d, dict)]
    return [d for d in found if "runs" in d and "bars" in d]


def _sweeps() -> list[dict[str, Any]]:
    return [_load(p) for p in sorted(RESULTS.glob("weights-*.json"))]


def _by_gid(fig: Figure) -> dict[str, Any]:
    artists: dict[str, Any] = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_gid():
                artists[line.get_gid()] = line
        for container in ax.containers:
            patches = list(container)
            if patches and patches[0].get_gid():
                artists[patches[0].get_gid()] = patches
    return artists


@pytest.mark.parametrize(
    ("name", "shown_in"),
    [("latency", "performance.md"), ("quality", "quality.md"), ("weights", "quality.md")],
)
def test_the_committed_plots_are_small_pngs_the_docs_show(name: str, shown_in: str) -> None:
    path = DOCS / "img" / f"{name}.png"
    width, height = png_size(path)
    assert 600 <= width <= 2000
    assert 300 <= height <= 1400
    assert path.stat().st_size < 300_000
    assert f"](img/{name}.png)" in (DOCS / shown_in).read_text(encoding="utf-8")


def test_the_latency_plot_has_every_method_against_scope_rows() -> None:
    bench = _load(BENCH)
    artists = _by_gid(plots.latency_figure(bench))
    scopes = sorted(bench["scopes"], key=lambda s: s["rows"])
    rows = [s["rows"] for s in scopes]
    assert set(artists) == set(plots.END_TO_END) | set(plots.CANDIDATES)
    assert {"client.hybrid", "naive", "rls.vector", "hand.vector"} <= set(artists)
    for method, line in artists.items():
        assert list(line.get_xdata()) == rows
        assert list(line.get_ydata()) == [s["methods"][method]["1"]["p50"] for s in scopes]


def test_the_quality_plot_has_each_leg_of_each_collection_and_model() -> None:
    results = report._by_collection(_quality_results())
    artists = _by_gid(plots.quality_figure(results))
    models = sorted({m for d in results for m in d["runs"]})
    assert {"hash-ngram-v1", "all-MiniLM-L6-v2"} <= set(models)
    assert set(artists) == {f"{m}:{leg}" for m in models for leg in plots.LEGS}
    assert "hybrid-dbsf" in plots.LEGS
    for model in models:
        for leg in plots.LEGS:
            heights = [bar.get_height() for bar in artists[f"{model}:{leg}"]]
            # A model (or mode) not run on a collection draws an empty (zero) bar there.
            expected = [
                d["runs"][model]["modes"].get(leg, {}).get("nDCG@10", 0.0)
                if model in d["runs"]
                else 0.0
                for d in results
            ]
            assert heights == pytest.approx(expected, abs=1e-12)
    # Collections in the report's order: the lexical bar of SciFact comes first.
    assert results[0]["dataset"] == "scifact"


def test_the_weights_plot_has_a_curve_a_best_point_and_the_better_leg_per_sweep() -> None:
    sweeps, results = _sweeps(), _quality_results()
    artists = _by_gid(plots.weights_figure(report._by_collection(sweeps), results))
    assert len(sweeps) >= 5
    for sweep in sweeps:
        key = f"{sweep['dataset']}:{sweep['model']}"
        weights = sorted(float(w) for w in sweep["results"])
        curve = artists[key]
        assert list(curve.get_xdata()) == weights
        assert list(curve.get_ydata()) == [sweep["results"][str(w)]["nDCG@10"] for w in weights]
        best = artists[f"{key}:best"]
        assert list(best.get_xdata()) == [sweep["best_lexical_weight"]]
        assert max(curve.get_ydata()) == best.get_ydata()[0]
        modes = next(d for d in results if d["dataset"] == sweep["dataset"])["runs"][
            sweep["model"]
        ]["modes"]
        leg = max(modes["lexical"]["nDCG@10"], modes["vector"]["nDCG@10"])
        assert list(artists[f"{key}:leg"].get_ydata()) == [leg, leg]


def test_the_fusion_plot_has_both_fusions_of_each_sweep_at_every_weight() -> None:
    doc = _load(RESULTS / "fusion.json")
    artists = _by_gid(plots.fusion_figure(doc, list(report.NAMED)))
    for collection, models in doc["collections"].items():
        for model, entry in models.items():
            for method in ("rrf", "dbsf"):
                curve = artists[f"{collection}:{model}:{method}"]
                weights = sorted(float(w) for w in entry["sweep"][method])
                assert list(curve.get_xdata()) == weights
                assert list(curve.get_ydata()) == [
                    entry["sweep"][method][f"{w:g}"] for w in weights
                ]
    assert min(float(w) for w in doc["settings"]["grid_lexical_weights"]) == 0.05


def test_scale_render_redraws_the_committed_page_and_plot_from_the_json(tmp_path: Path) -> None:
    result = tmp_path / "latest.json"
    shutil.copyfile(BENCH, result)
    doc = tmp_path / "performance.md"
    scale.main(["--render", str(result), "--doc", str(doc)])
    assert doc.read_text(encoding="utf-8") == (DOCS / "performance.md").read_text(encoding="utf-8")
    assert png_size(tmp_path / "img" / "latency.png") == png_size(DOCS / "img" / "latency.png")
    # Rendering only recomputes the verdicts: the measurements are the committed ones.
    assert _load(result)["scopes"] == _load(BENCH)["scopes"]


def test_quality_render_redraws_the_committed_page_and_plots_from_the_json(tmp_path: Path) -> None:
    doc = tmp_path / "quality.md"
    quality.main(["--render", "--out", str(RESULTS), "--doc", str(doc)])
    assert doc.read_text(encoding="utf-8") == (DOCS / "quality.md").read_text(encoding="utf-8")
    for name in ("quality", "weights", "fusion"):
        assert png_size(tmp_path / "img" / f"{name}.png") == png_size(DOCS / "img" / f"{name}.png")
