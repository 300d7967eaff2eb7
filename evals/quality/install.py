"""What the MiniLM extra costs a new user: install time and size, with and without it.

    python -m evals.quality.install [--rev REV]

For this tree (or the tree of revision ``REV``: the decision to put the runtime in the base
install is measured on the last revision where it was still an extra), ``pip install <tree>`` and ``pip install '<tree>[minilm]'`` (not editable: what a
user of the package gets), each into a fresh virtual environment: first with an empty pip cache
(downloads included), then again with the cache that install filled (the install itself).
Records seconds, the environment's size, the packages, what the extra adds (per distribution,
installed size) and the wheels' download size (``pip download`` of the same requirement). Where
pip reads a local package index, the seconds include no network time. Writes ``evals/quality/install.json``; the load
average before and after each install is in the file, since other work on the machine shows up
in the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evals.bench.runtime import ROOT, git_info, load_average, machine_info
from evals.quality.embedders import _du_mb, _rev_parse, _tree

OUT = ROOT / "evals" / "quality" / "install.json"
VARIANTS = {"base": "", "minilm": "[minilm]"}


def _pip(venv: Path, *args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "pip"), *args],
        env={**os.environ, "PIP_CACHE_DIR": str(cache), "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        capture_output=True,
        text=True,
        check=True,
    )


def _distributions(venv: Path) -> dict[str, dict[str, Any]]:
    """name -> version and installed size (files the distribution's RECORD lists)."""
    script = (
        "import json, importlib.metadata as m, os\n"
        "out = {}\n"
        "for d in m.distributions():\n"
        "    size = 0\n"
        "    for f in d.files or []:\n"
        "        p = d.locate_file(f)\n"
        "        if os.path.isfile(p): size += os.path.getsize(p)\n"
        "    out[d.metadata['Name'].lower()] = {'version': d.version, 'mb': round(size / 1e6, 2)}\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True, check=True
    )
    data: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return data


def install(source: Path, variant: str, base: Path, cache: Path, tag: str) -> dict[str, Any]:
    venv = base / f"venv-{variant}-{tag}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    empty = _du_mb(venv)
    before = load_average()
    start = time.perf_counter()
    _pip(venv, "install", "-q", f"{source}{VARIANTS[variant]}", cache=cache)
    seconds = time.perf_counter() - start
    return {
        "seconds": round(seconds, 1),
        "venv_mb": _du_mb(venv),
        "empty_venv_mb": empty,
        "load_average_before": before,
        "load_average_after": load_average(),
        "venv": venv,
    }


def measure(rev: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pyretrieve-install-") as tmp:
        base = Path(tmp)
        source = _tree(rev, base / "src")
        out: dict[str, Any] = {"tree": "this tree" if rev is None else f"{rev} ({_rev_parse(rev)})"}
        for variant in VARIANTS:
            cache = base / f"cache-{variant}"
            cold = install(source, variant, base, cache, "cold")
            warm = install(source, variant, base, cache, "warm")
            distributions = _distributions(cold["venv"])
            # The wheels themselves (pip may install from a local index and then caches
            # nothing): what a user downloads.
            wheels = base / f"wheels-{variant}"
            _pip(
                cold["venv"],
                "download",
                "-q",
                "-d",
                str(wheels),
                f"{source}{VARIANTS[variant]}",
                cache=cache,
            )
            out[variant] = {
                "command": f"pip install '<tree>{VARIANTS[variant]}'",
                "seconds_empty_pip_cache": cold["seconds"],
                "seconds_warm_pip_cache": warm["seconds"],
                "venv_mb": cold["venv_mb"],
                "empty_venv_mb": cold["empty_venv_mb"],
                "download_mb": _du_mb(wheels),
                "pip_cache_mb": _du_mb(cache),
                "load_average": {
                    "cold": [cold["load_average_before"], cold["load_average_after"]],
                    "warm": [warm["load_average_before"], warm["load_average_after"]],
                },
                "distributions": distributions,
            }
        added = {
            name: info
            for name, info in out["minilm"]["distributions"].items()
            if name not in out["base"]["distributions"]
        }
        out["minilm_adds"] = {
            "distributions": dict(sorted(added.items(), key=lambda kv: -kv[1]["mb"])),
            "installed_mb": round(sum(d["mb"] for d in added.values()), 1),
            "venv_mb": round(out["minilm"]["venv_mb"] - out["base"]["venv_mb"], 1),
            "download_mb": round(out["minilm"]["download_mb"] - out["base"]["download_mb"], 1),
            "seconds_warm_pip_cache": round(
                out["minilm"]["seconds_warm_pip_cache"] - out["base"]["seconds_warm_pip_cache"], 1
            ),
            "seconds_empty_pip_cache": round(
                out["minilm"]["seconds_empty_pip_cache"] - out["base"]["seconds_empty_pip_cache"],
                1,
            ),
        }
        return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--rev", help="measure this revision's tree instead of the working tree")
    args = parser.parse_args(argv)
    doc = {
        "benchmark": "install size and time with and without the minilm extra",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        **git_info(),
        "machine": machine_info(),
        "settings": {
            "python": sys.version.split()[0],
            "install": "non-editable, into a fresh venv; empty pip cache, then the cache that"
            " install filled",
        },
        **measure(args.rev),
    }
    args.out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return doc


if __name__ == "__main__":
    main()
