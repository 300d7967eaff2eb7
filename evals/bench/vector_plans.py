"""The vector leg with generic plans (as installed since 0033) against custom plans (0007 to
0032), claim by claim.

Usage: python -m evals.bench.vector_plans [--rows 200,1000,5183,10000,20000] [--queries 100]
       [--dsn DSN] [--out PATH]

``vector_candidates`` is copied, owned by ``pyretrieve_api`` like the original (so RLS applies
alike), with the settings of 0032: ``plan_cache_mode = force_custom_plan`` and no
``enable_seqscan``. The machinery is ``evals.bench.second_wall``'s: scopes of SciFact abstracts
(repeated with a numbered mark past the 5,183 of the collection) with random 384-d embeddings,
each claim authorised and its vector leg read (100 candidates, exact) through the installed
function, the copy, and the installed function again as the control, each arm on its own
connection, in turns. The copy must return exactly the installed function's rows.

Writes ``evals/bench/vector-plans.json``: per size, p50 of each arm and the median per-claim
ratios with their bootstrap 95% intervals. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from evals.bench import round_trips, second_wall
from evals.bench.runtime import DATASETS, load_average

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "vector-plans.json"
GENERIC = " SET plan_cache_mode TO 'force_generic_plan'\n SET enable_seqscan TO 'off'\n"
CUSTOM = " SET plan_cache_mode TO 'force_custom_plan'\n"


def custom_plans(definition: str) -> str:
    """The installed definition with 0032's plan settings."""
    if definition.count(GENERIC) != 1:
        raise SystemExit("vector_candidates does not pin the settings this bench replaces")
    return definition.replace(GENERIC, CUSTOM)


COMPARISON = second_wall.Comparison(
    arm="custom", kinds=("vector",), owner="pyretrieve_api", edit=custom_plans
)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", default="200,1000,5183,10000,20000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--dsn", help="a fresh database (superuser); default: a throwaway server")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.rows.split(",")]
    texts = round_trips.claims(DATASETS)[: args.queries]
    with second_wall.scopes(args.dsn, "plans", sizes) as (dsn, principals, facts, projects):
        figures = second_wall.measure(dsn, principals, projects, texts, COMPARISON)
    result = {
        "benchmark": "vector_candidates with generic plans against custom plans",
        **facts,
        "settings": {
            "rows": list(projects),
            "queries": args.queries,
            "candidates": second_wall.CANDIDATES,
            "installed": GENERIC.strip().splitlines(),
            "custom": CUSTOM.strip().splitlines(),
            "text": "SciFact abstracts and claims, random 384-d embeddings",
            "order": "per claim, one transaction per arm, each arm on its own connection,"
            " in a rotating order",
        },
        "scopes": {rows: kinds["vector"] for rows, kinds in figures.items()},
        "load_average_at_end": load_average(),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
