"""Where a client search's time goes: its statements, timed one by one, beside the client.

Usage: python -m evals.bench.request_cost [--rows 200] [--searches 50] [--rounds 4]
       [--dsn DSN] [--out PATH]

On a scope of ``--rows`` SciFact abstracts with random 384-d embeddings (``round_trips``' setup),
one connection, the same searches (hybrid, 10 results of 100 candidates per leg) are made two
ways, taking turns search by search:

* ``client``: ``Retriever.search`` end to end (pipelined, parsing, rechecks, fusion,
  explanations);
* ``statements``: the statements the client sends, from ``pyretrieve.db.queries``, in its
  order, each timed on its own: ``SET LOCAL ROLE``, ``authorize``, ``model_defaults``, the
  lexical leg, the vector leg inside its savepoint, the records of the candidates' union, and
  the commit. Nothing is parsed or checked.

The difference between the client's p50 and the sum of the statements' p50s is what the client
does in Python, and what its pipeline saves or costs. The issue's bar for a 200-row scope is
3 ms end to end. Writes ``evals/bench/request-cost.json`` with the commit, machine and load. A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row

from evals.bench import round_trips
from evals.bench.runtime import (
    DATASETS,
    load_average,
    summary_ms,
)
from pyretrieve import Retriever
from pyretrieve.db import queries

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "request-cost.json"
LIMIT = 10
CANDIDATES = 100
STEPS = ("set_role", "authorize", "model_defaults", "lexical", "vector", "records", "commit")


def _statements(
    conn: psycopg.Connection[Any], reader: str, query: str, vector: list[float]
) -> dict[str, float]:
    """One search as the client's statements, one by one: seconds per step."""
    text = round_trips.vector_text(vector)
    spent: dict[str, float] = {}

    def timed(step: str, statement: Any, params: Any = None) -> list[dict[str, Any]]:
        started = time.perf_counter()
        cur = conn.execute(statement, params)
        rows = cur.fetchall() if cur.description else []
        spent[step] = spent.get(step, 0.0) + time.perf_counter() - started
        return rows

    conn.execute(queries.TX_BEGIN)
    try:
        timed("set_role", queries.set_local_role(reader))
        digest = hashlib.sha256(query.encode("utf-8")).digest()
        (decision,) = timed(
            "authorize",
            queries.AUTHORIZE,
            (round_trips.WORKSPACE, round_trips.PROJECT, round_trips.PURPOSE, digest,
             "optional", hashlib.sha256(text.encode()).digest(), LIMIT),
        )  # fmt: skip
        did = decision["decision_id"]
        timed("model_defaults", queries.MODEL_DEFAULTS, (round_trips.MODEL,))
        lexical = timed("lexical", queries.LEXICAL_CANDIDATES, (did, query, CANDIDATES, "bm25"))
        timed("vector", queries.SAVEPOINT)
        found = timed(
            "vector", queries.VECTOR_CANDIDATES, (did, round_trips.MODEL, text, CANDIDATES)
        )
        timed("vector", queries.SAVEPOINT_RELEASE)
        ids = sorted({r["fragment_id"] for r in (*lexical, *found)})
        timed("records", queries.FRAGMENTS, (did, ids))
        timed("commit", queries.TX_COMMIT)
    except BaseException:
        conn.execute(queries.TX_ROLLBACK)
        raise
    return spent


def _client(client: Retriever, query: str, vector: list[float]) -> float:
    started = time.perf_counter()
    round_trips._search(client, "hybrid", query, vector)
    return time.perf_counter() - started


def measure(dsn: str, reader: str, searches: int, rounds: int) -> dict[str, Any]:
    queries_ = round_trips._queries(DATASETS)
    rng = np.random.default_rng(3)
    vectors = [round_trips._vector(rng) for _ in queries_]
    steps: dict[str, list[float]] = {s: [] for s in STEPS}
    totals: list[float] = []
    client_s: list[float] = []
    with (
        psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as hand,
        psycopg.connect(dsn, autocommit=True) as own,
    ):
        client = Retriever(own, principal=reader)
        for i in range(3):  # warm both
            _statements(hand, reader, queries_[i], vectors[i])
            _client(client, queries_[i], vectors[i])
        for turn in range(rounds * searches):
            i = turn % min(searches, len(queries_))
            first_by_hand = turn % 2 == 0
            if not first_by_hand:
                client_s.append(_client(client, queries_[i], vectors[i]))
            spent = _statements(hand, reader, queries_[i], vectors[i])
            for step in STEPS:
                steps[step].append(spent[step])
            totals.append(sum(spent.values()))
            if first_by_hand:
                client_s.append(_client(client, queries_[i], vectors[i]))
    by_step = {s: summary_ms(v) for s, v in steps.items()}
    total, end_to_end = summary_ms(totals), summary_ms(client_s)
    total_p50, client_p50 = float(total["p50"]), float(end_to_end["p50"])
    return {
        "statements": by_step,
        "statements_total": total,
        "statements_sum_of_p50s": round(sum(float(v["p50"]) for v in by_step.values()), 3),
        "client": end_to_end,
        "client_over_statements_p50": round(client_p50 / total_p50, 2),
        "client_minus_statements_p50_ms": round(client_p50 - total_p50, 3),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--searches", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--dsn", help="a fresh database (superuser); default: a throwaway server")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    bodies = round_trips._abstracts(DATASETS, args.rows)
    with round_trips.loaded(args.dsn, "cost", bodies) as (dsn, principals, measured_on):
        figures = measure(dsn, principals.reader, args.searches, args.rounds)
    result = {
        "benchmark": "a client search against its statements timed one by one",
        **measured_on,
        "settings": {
            "rows": args.rows,
            "searches": args.searches,
            "rounds": args.rounds,
            "mode": "hybrid",
            "limit": LIMIT,
            "candidate_limit": CANDIDATES,
            "text": "SciFact abstracts, random 384-d embeddings",
            "order": "the client and the statements take turns, alternating which goes first",
        },
        **figures,
        "load_average_at_end": load_average(),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    steps = ", ".join(f"{s} {v['p50']}" for s, v in result["statements"].items())
    print(
        f"client p50 {result['client']['p50']} ms; statements p50"
        f" {result['statements_total']['p50']} ms ({steps})"
    )
    return result


if __name__ == "__main__":
    main()
