"""SQL ``pyretrieve.search`` at one revision against another, same data, in turn.

Usage: python -m evals.bench.search_revisions [--baseline pyretrieve_0030] [--target REV]
       [--rows 200,2000] [--queries 50] [--rounds 2] [--server-dsn DSN] [--out PATH]

One server holds two databases with the same rows, both ``CREATE DATABASE ... TEMPLATE`` copies
of a third, which is migrated to ``--baseline`` (an Alembic revision) and loaded, once per scope
size, with SciFact abstracts and random 384-d embeddings (by the superuser with COPY, setup
only; the triggers run). The second copy is then migrated to ``--target`` (default: the
head), and both are analysed. A reader principal holds a grant on every scope. Then, per scope,
query and mode (``hybrid`` and ``lexical``, 10 results of 100 candidates per leg), the reader
calls ``pyretrieve.search`` in both databases, alternating which goes first. Each pair must
return the same rows and the same explanations, apart from what differs from call to call (the
decision's id and time, and the ages and scores that follow from the time); the run stops at
the first difference. ``--baseline`` equal to the target is the A/A run: how far the two
databases differ with nothing changed.

Writes p50/p95 per revision and scope, the ratio of the p50s and the median of the per-pair
ratios with a bootstrap 95% interval, to ``evals/bench/search-revisions.json`` with the commit,
machine and load. A measurement, not a test; the databases and the roles are dropped at the
end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from evals.bench import round_trips
from evals.bench.runtime import (
    DATASETS,
    Principals,
    acting_as,
    load_average,
    paired_ratio,
    provenance,
    server_or_throwaway,
    summary_ms,
)
from pyretrieve.db import migrate

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "search-revisions.json"
MODEL = round_trips.MODEL
PURPOSE = "bench"
MODES = ("hybrid", "lexical")
LIMIT = 10
CANDIDATES = 100
# Parts of an explanation that change from call to call: the decision and its time, and what
# follows from the time (age, freshness, final score, confidence).
PER_CALL = ("decision_id", "provenance", "freshness", "final_score", "confidence")
SEARCH = (
    "SELECT rank, fragment_id, fused_score, explanation FROM pyretrieve.search("
    " p_workspace => %s, p_project => 'docs', p_purpose => %s, p_query => %s,"
    " p_embedding => %s::public.vector, p_model => %s, p_limit => %s, p_mode => %s,"
    " p_candidate_limit => %s)"
)


def _load(conn: psycopg.Connection[Any], reader: str, workspace: str, bodies: list[str]) -> None:
    conn.execute("SELECT pyretrieve.create_workspace(%s)", (workspace,))
    conn.execute("SELECT pyretrieve.create_project(%s, 'docs')", (workspace,))
    conn.execute(
        "SELECT pyretrieve.grant_access(%s::regrole, %s, 'docs', %s, 'internal')",
        (reader, workspace, PURPOSE),
    )
    round_trips.copy_scope(conn, workspace, "docs", bodies, np.random.default_rng(len(bodies)))


@contextlib.contextmanager
def _databases(
    server: str, baseline: str, target: str | None, sizes: list[int], reader: str
) -> Iterator[list[str]]:
    """Two copies of one database loaded at the baseline (``CREATE DATABASE ... TEMPLATE``), the
    second then migrated to ``target`` (None: the head), both analysed alike; all dropped
    afterwards. Both are copies: the loaded database itself, measured beside its copy at the
    same revision, took 1.2 to 1.3 times as long for the same searches."""
    tag = secrets.token_hex(3)
    source = f"search_rev_{tag}_source"
    names = [f"search_rev_{tag}_base", f"search_rev_{tag}_head"]
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(source)))
    dsns = [make_conninfo(server, dbname=n) for n in names]
    try:
        loaded = make_conninfo(server, dbname=source)
        migrate.upgrade(loaded, baseline)
        bodies = round_trips._abstracts(DATASETS, max(sizes))
        with psycopg.connect(loaded, autocommit=True) as conn:
            with conn.transaction():
                conn.execute("SELECT pyretrieve.register_model(%s, %s)", (MODEL, 384))
                for n in sizes:
                    _load(conn, reader, f"s{n}", bodies[:n])
            conn.execute("VACUUM ANALYZE")
        with psycopg.connect(server, autocommit=True) as admin:
            for name in names:
                admin.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(source)
                    )
                )
        if target is None:
            migrate.upgrade(dsns[1])
        else:
            migrate.upgrade(dsns[1], target)
        for dsn in dsns:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("ANALYZE")
        yield dsns
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            for name in (*names, source):
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )


def _comparable(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            r["rank"],
            r["fragment_id"],
            r["fused_score"],
            {k: v for k, v in r["explanation"].items() if k not in PER_CALL},
        )
        for r in rows
    ]


def _search(
    conn: psycopg.Connection[Any], reader: str, params: tuple[Any, ...]
) -> tuple[float, list[tuple[Any, ...]]]:
    with acting_as(conn, reader):
        started = time.perf_counter()
        rows = conn.execute(SEARCH, params).fetchall()
        seconds = time.perf_counter() - started
    return seconds, _comparable(rows)


def _measure(
    conns: list[psycopg.Connection[Any]],
    reader: str,
    size: int,
    queries: list[str],
    rounds: int,
) -> dict[str, Any]:
    vector = round_trips.vector_text(round_trips._vector(np.random.default_rng(size)))
    out: dict[str, Any] = {}
    for mode in MODES:
        times: list[list[float]] = [[], []]
        for turn in range(rounds * len(queries)):
            query = queries[turn % len(queries)]
            params = (f"s{size}", PURPOSE, query, vector, MODEL, LIMIT, mode, CANDIDATES)
            order = (0, 1) if turn % 2 == 0 else (1, 0)
            found: dict[int, list[tuple[Any, ...]]] = {}
            for side in order:
                seconds, found[side] = _search(conns[side], reader, params)
                times[side].append(seconds)
            if found[0] != found[1]:
                raise SystemExit(f"scope {size}, {mode}: the revisions differ on {query!r}")
        base, head = summary_ms(times[0]), summary_ms(times[1])
        out[mode] = {
            "baseline": base,
            "current": head,
            "p50_ratio_current_to_baseline": round(head["p50"] / base["p50"], 3),
            "paired_ratio_current_to_baseline": paired_ratio(
                times[1], times[0], np.random.default_rng(size)
            ),
            "identical_results": len(times[0]),
        }
    return out


def run(args: argparse.Namespace, server: str) -> dict[str, Any]:
    sizes = sorted(int(s) for s in args.rows.split(","))
    queries = round_trips._queries(DATASETS)[: args.queries]
    with psycopg.connect(server, autocommit=True) as admin:
        principals = Principals.create(admin, "srev")
    try:
        with _databases(server, args.baseline, args.target, sizes, principals.reader) as dsns:
            with psycopg.connect(dsns[1], autocommit=True) as plain:
                measured_on = provenance(plain)
            conns = [psycopg.connect(d, autocommit=True, row_factory=dict_row) for d in dsns]
            try:
                for size in sizes:  # warm both
                    _measure(conns, principals.reader, size, queries[:3], 1)
                scopes = {
                    str(size): _measure(conns, principals.reader, size, queries, args.rounds)
                    for size in sizes
                }
            finally:
                for conn in conns:
                    conn.close()
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            principals.drop(admin)
    return {
        "benchmark": "pyretrieve.search: the head schema against an earlier revision",
        **measured_on,
        "settings": {
            "baseline": args.baseline,
            "target": args.target or "head",
            "rows": sizes,
            "queries": len(queries),
            "rounds": args.rounds,
            "modes": list(MODES),
            "limit": LIMIT,
            "candidate_limit": CANDIDATES,
            "text": "SciFact abstracts, random 384-d embeddings",
            "order": "one decision per call, the two databases alternating which goes first",
        },
        "scopes": scopes,
        "load_average_at_end": load_average(),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="pyretrieve_0030")
    parser.add_argument("--target", help="the revision compared (default: the head)")
    parser.add_argument("--rows", default="200,2000")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--server-dsn", help="a superuser DSN; default: a throwaway server")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    with server_or_throwaway(args.server_dsn) as server:
        result = run(args, server)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for size, modes in result["scopes"].items():
        for mode, figures in modes.items():
            print(
                f"{size:>6} rows {mode:>7}: p50 {figures['baseline']['p50']} ->"
                f" {figures['current']['p50']} ms ({figures['p50_ratio_current_to_baseline']}x),"
                f" paired {figures['paired_ratio_current_to_baseline']}"
            )
    return result


if __name__ == "__main__":
    main()
