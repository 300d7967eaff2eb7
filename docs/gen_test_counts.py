"""Rebuild the Counts table of docs/guarantees.md from a collection of the whole suite.

    python docs/gen_test_counts.py [--check]

The security functions are the ones the document lists below the table (every function of the
files it names whole, and each ``file::function`` it names); the script counts, per test file,
functions and collected cases, and how many of each are security ones, then rewrites the table
and the sentence that sums it up. ``--check`` only compares and exits 1 when they differ.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "guarantees.md"


def collect() -> Counter[str]:
    """Collected cases per test function (``file::function`` relative to tests/)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cases: Counter[str] = Counter()
    for line in out.splitlines():
        if "::" in line and line.startswith("tests/"):
            cases[re.sub(r"\[.*", "", line).removeprefix("tests/")] += 1
    return cases


def security(doc: str) -> tuple[set[str], set[str]]:
    """The files counted whole and the single functions the document names as security ones."""
    part = doc.split("The security functions:", 1)[1]
    listed = re.findall(r"every function of ((?:`[^`]+`(?:,\s+|\s+and\s+)?)+)", part)[0]
    whole = set(listed.split("`")[1::2])
    single = set(re.findall(r"`((?:db|unit)?/?[\w/]+\.py::[\w:]+)`", part))
    return whole, single


def table(cases: Counter[str], whole: set[str], single: set[str]) -> tuple[str, str]:
    files: dict[str, list[int]] = {}
    for name, n in sorted(cases.items()):
        path = name.split("::", 1)[0]
        row = files.setdefault(path, [0, 0, 0, 0])
        sec = path in whole or name in single
        row[0] += 1
        row[1] += n
        row[2] += sec
        row[3] += n if sec else 0
    groups = {"unit": [0, 0, 0, 0], "db": [0, 0, 0, 0], "other": [0, 0, 0, 0]}
    lines = ["| Suite | Functions | Cases | Security functions | Security cases |",
             "|---|---:|---:|---:|---:|"]  # fmt: skip
    for path, row in files.items():
        lines.append(f"| `{path}` | " + " | ".join(str(x) for x in row) + " |")
        key = path.split("/", 1)[0] if "/" in path else "other"
        groups[key] = [a + b for a, b in zip(groups[key], row, strict=True)]
    total = [sum(x) for x in zip(*groups.values(), strict=True)]
    lines += [
        "| **unit/property (`unit/`)** | " + " | ".join(map(str, groups["unit"])) + " |",
        "| **database (`db/`)** | " + " | ".join(map(str, groups["db"])) + " |",
        "| **other** | " + " | ".join(map(str, groups["other"])) + " |",
        "| **all** | " + " | ".join(map(str, total)) + " |",
    ]
    u, d, o = groups["unit"], groups["db"], groups["other"]
    summary = (
        f"In all: {total[1]} cases, {total[3]} of them security cases. The unit/property suites"
        f" hold {u[1]} cases ({u[3]}\nsecurity); the database suites hold {d[1]} cases"
        f" ({d[3]} security); the other {o[1]} cases ({o[3]} security)\nare the command line,"
        " packaging, evaluation and tooling suites."
    )
    return "\n".join(lines), summary


def render(doc: str, cases: Counter[str]) -> str:
    whole, single = security(doc)
    new_table, summary = table(cases, whole, single)
    doc = re.sub(r"\| Suite \| Functions .*?\| \*\*all\*\* \|[^\n]*", new_table, doc, flags=re.S)
    return re.sub(r"In all: \d+ cases.*?tooling suites\.", summary, doc, flags=re.S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    doc = DOC.read_text(encoding="utf-8")
    new = render(doc, collect())
    if args.check:
        return 0 if new == doc else 1
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
