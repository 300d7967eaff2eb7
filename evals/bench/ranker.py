"""The Python ranker's cost per search: this tree against a baseline revision, in one run.

Usage: python -m evals.bench.ranker [--baseline REV] [--candidates 100] [--overlap 0.45]
       [--rounds 12] [--iterations 200] [--out PATH]

``ranking.rank`` is what ``Retriever.search`` does after the last statement: parse every row
strictly, recheck it against the decision, fuse, order, cut and explain. Its cost grows with the
candidates, not with the scope, so it is a fixed cost of every search.

The input is synthetic and deterministic (``--seed``): a decision, ``--candidates`` lexical rows
(one to four matched terms each) and as many vector rows, ``--overlap`` of them the same
fragments, and the records of their union (bodies of about 700 characters, the size of a SciFact
abstract). The rows are what psycopg returns (dicts of UUID, bytes, datetime, str, int, float).

The baseline's ``pyretrieve`` package is exported from git (``git archive REV``) into a
temporary directory. Each round runs one child process per side, in alternating order, each
timing ``--iterations`` calls of ``rank`` on the same input after a warm-up, and the plainest
fusion in the same process: RRF over the two id lists with no parsing, checks or explanations
(``naive``), and the calls of ``rank`` again timed by the process's CPU time
(``time.process_time``), which waiting for a core on a shared machine does not inflate. The ratios (this tree over the baseline, each side over its naive fusion) are the
figures to compare; the milliseconds depend on the machine's load. Both sides must return the
same result, byte for byte (the canonical JSON of the result, compared by digest).

Writes ``evals/bench/ranker.json`` (or ``--out``). A measurement, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evals.bench.runtime import display_path, git_info, load_average, machine_info  # noqa: E402

OUT = ROOT / "evals" / "bench" / "ranker.json"
LIMIT = 10
BODY_CHARS = 700

# The child: imports pyretrieve from the directory it is given, times rank() and the naive
# fusion on the pickled input, prints one JSON line.
CHILD = r"""
import hashlib, json, pickle, sys, time
sys.path.insert(0, sys.argv[1])
from pyretrieve import ranking
from pyretrieve.types import SemanticStatus, canonical_json
data = pickle.loads(open(sys.argv[2], "rb").read())
iterations = int(sys.argv[3])
kw = dict(data["rank"], semantic=SemanticStatus.used({"model": "bench"}))

def naive():
    scores = {}
    for rows in (data["rank"]["lexical"], data["rank"]["vector"]):
        for r in rows:
            scores[r["fragment_id"]] = scores.get(r["fragment_id"], 0.0) + 1.0 / (60 + r["rank"])
    return sorted(scores, key=lambda f: (-scores[f], str(f)))[: kw["limit"]]

def timed(f, clock=time.perf_counter):
    for _ in range(max(5, iterations // 10)):
        f()
    out = []
    for _ in range(iterations):
        started = clock()
        f()
        out.append(clock() - started)
    out.sort()
    return out[len(out) // 2]

result = ranking.rank(**kw)
digest = hashlib.sha256(canonical_json(result.to_plain()).encode("utf-8")).hexdigest()
print(json.dumps({"rank_s": timed(lambda: ranking.rank(**kw)), "naive_s": timed(naive),
                  "rank_cpu_s": timed(lambda: ranking.rank(**kw), time.process_time),
                  "result_sha256": digest, "results": len(result.results),
                  "omissions": len(result.omissions)}))
"""


def _body(rng: random.Random, words: list[str]) -> str:
    out: list[str] = []
    size = 0
    while size < BODY_CHARS:
        word = rng.choice(words)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def make_input(*, candidates: int, overlap: float, seed: int) -> dict[str, Any]:
    """A decision, both legs' rows and the records of their union, as psycopg returns them."""
    rng = random.Random(seed)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10)))
        for _ in range(2_000)
    ]
    evaluated_at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    decision = {
        "decision_id": uuid.UUID(int=rng.getrandbits(128), version=4),
        "principal": "reader",
        "workspace_id": "w",
        "project_id": "p",
        "purpose": "bench",
        "evaluated_at": evaluated_at,
        "ceiling": "internal",
        "max_age": timedelta(days=365),
        "semantic_policy": "optional",
        "candidate_limit": max(100, candidates),
        "grant_id": uuid.UUID(int=rng.getrandbits(128), version=4),
    }
    shared = round(candidates * overlap)
    total = 2 * candidates - shared
    records = []
    for _ in range(total):
        body = _body(rng, words)
        records.append(
            {
                "workspace_id": "w",
                "project_id": "p",
                "fragment_id": uuid.UUID(int=rng.getrandbits(128), version=4),
                "body": body,
                "content_digest": hashlib.sha256(body.encode("utf-8")).digest(),
                "classification": rng.choice(["public", "internal"]),
                "state": "active",
                "superseded_by": None,
                "observed_at": evaluated_at - timedelta(seconds=rng.randint(0, 300 * 86_400)),
                "expires_at": None,
                "ingested_at": evaluated_at - timedelta(seconds=rng.randint(0, 86_400)),
                "source_uri": f"file:///corpus/{rng.getrandbits(32):08x}.txt",
                "source_revision": None,
                "manifest_id": None,
                "ts_config": "english",
                "lexical_generation": rng.randint(1, 10_000),
            }
        )
    lexical_records = records[:candidates]
    vector_records = records[candidates - shared :]
    rng.shuffle(lexical_records)
    rng.shuffle(vector_records)
    lexical = []
    for position, r in enumerate(lexical_records, start=1):
        terms = sorted(rng.sample(words, rng.randint(1, 4)))
        parts = []
        for term in terms:
            idf = rng.uniform(0.5, 8.0)
            tf = rng.randint(1, 5)
            norm = rng.uniform(0.5, 1.5)
            parts.append(
                {
                    "term": term,
                    "idf": idf,
                    "tf": tf,
                    "query_tf": 1,
                    "length_norm": norm,
                    "contribution": idf * tf * 1.9 / (tf + norm),
                }
            )
        lexical.append(
            {
                "rank": position,
                "fragment_id": r["fragment_id"],
                "content_digest": r["content_digest"],
                "score": 40.0 - position * 0.3,
                "lexical_generation": r["lexical_generation"],
                "terms": parts,
            }
        )
    vector = [
        {
            "rank": position,
            "fragment_id": r["fragment_id"],
            "content_digest": r["content_digest"],
            "distance": 0.2 + position * 0.004,
            "source_digest": r["content_digest"],
            "vector_generation": r["lexical_generation"],
            "lexical_generation": r["lexical_generation"],
            "search": "exact",
        }
        for position, r in enumerate(vector_records, start=1)
    ]
    query_digest = hashlib.sha256(b"the query").digest()
    return {
        "rank": {
            "decision": decision,
            "lexical": lexical,
            "vector": vector,
            "records": sorted(records, key=lambda r: r["fragment_id"]),
            "limit": LIMIT,
            "query_digest": query_digest,
            "embedding_digest": hashlib.sha256(b"the query vector").digest(),
        },
        "shape": {"lexical": len(lexical), "vector": len(vector), "records": len(records)},
    }


def export_revision(revision: str, into: Path) -> str:
    """``pyretrieve/`` at ``revision`` extracted under ``into``; returns the full commit id."""
    commit = subprocess.run(
        ["git", "rev-parse", revision], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "pyretrieve"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return commit


def _child(package_root: Path, data: Path, iterations: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(package_root), str(data), str(iterations)],
        check=True,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    ).stdout
    parsed: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return parsed


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = make_input(candidates=args.candidates, overlap=args.overlap, seed=args.seed)
    sides: dict[str, list[dict[str, Any]]] = {"current": [], "baseline": []}
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        baseline_commit = export_revision(args.baseline, base)
        pickled = Path(tmp) / "input.pickle"
        pickled.write_bytes(pickle.dumps(data))
        roots = {"current": ROOT, "baseline": base}
        for round_no in range(args.rounds):
            order = ["current", "baseline"] if round_no % 2 == 0 else ["baseline", "current"]
            for side in order:
                sides[side].append(_child(roots[side], pickled, args.iterations))
    digests = {side: {r["result_sha256"] for r in runs} for side, runs in sides.items()}
    if len(digests["current"] | digests["baseline"]) != 1:
        raise SystemExit(f"the two sides ranked differently: {digests}")
    summary: dict[str, Any] = {}
    for side, runs in sides.items():
        rank_ms = statistics.median(r["rank_s"] for r in runs) * 1000
        naive_ms = statistics.median(r["naive_s"] for r in runs) * 1000
        cpu_ms = statistics.median(r["rank_cpu_s"] for r in runs) * 1000
        summary[side] = {
            "rank_p50_ms": round(rank_ms, 3),
            "rank_cpu_p50_ms": round(cpu_ms, 3),
            "naive_p50_ms": round(naive_ms, 4),
            "rank_over_naive": round(rank_ms / naive_ms, 1),
            "per_round_rank_ms": [round(r["rank_s"] * 1000, 3) for r in runs],
        }
    ratios = [
        c["rank_s"] / b["rank_s"] for c, b in zip(sides["current"], sides["baseline"], strict=True)
    ]
    return {
        "benchmark": "ranker",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        **git_info(),
        "baseline": {"revision": args.baseline, "commit": baseline_commit},
        "machine": {
            **machine_info(),
            "load_average_before": load_before,
            "load_average_after": load_average(),
        },
        "settings": {
            "candidates_per_leg": args.candidates,
            "overlap": args.overlap,
            "limit": LIMIT,
            "body_chars": BODY_CHARS,
            "rounds": args.rounds,
            "iterations": args.iterations,
            "seed": args.seed,
            "input": data["shape"],
        },
        "results": summary,
        "current_over_baseline": {
            "median_of_rounds": round(statistics.median(ratios), 3),
            "of_p50s": round(
                summary["current"]["rank_p50_ms"] / summary["baseline"]["rank_p50_ms"], 3
            ),
            "of_cpu_p50s": round(
                summary["current"]["rank_cpu_p50_ms"] / summary["baseline"]["rank_cpu_p50_ms"], 3
            ),
        },
        "same_result": True,
        "result_sha256": next(iter(digests["current"])),
        "results_and_omissions": [sides["current"][0]["results"], sides["current"][0]["omissions"]],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--baseline", default="HEAD", help="git revision to compare with")
    parser.add_argument("--candidates", type=int, default=100, help="rows per leg")
    parser.add_argument("--overlap", type=float, default=0.45, help="share found by both legs")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    result = run(args)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"rank p50 {result['results']['current']['rank_p50_ms']} ms (this tree) against"
        f" {result['results']['baseline']['rank_p50_ms']} ms ({args.baseline}):"
        f" {result['current_over_baseline']['median_of_rounds']}x; wrote"
        f" {display_path(args.out)}",
        file=sys.stderr,
    )
    return result


if __name__ == "__main__":
    main()
