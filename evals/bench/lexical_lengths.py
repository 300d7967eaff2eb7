"""The lexical leg by query length, with the share of the scope's postings it reads.

Usage: python -m evals.bench.lexical_lengths --dsn DSN --workspace W --project P
       --queries FILE [--lengths 1,2,4,8,16] [--limit-queries N] [--rounds R] [--out PATH]

The database must hold a populated scope (for example one kept by ``python -m evals.quality
--keep``). Each query of the BEIR queries file is cut to its first words holding exactly k
distinct lexemes of the scope's text-search configuration, for each k of ``--lengths`` the
query is long enough for (the last length stands for "k or more": the whole query, when it
holds at least k), as pg_textsearch reports its latency by query length. A throwaway reader
granted the scope calls ``lexical_candidates`` (top 100) for each cut under a decision of its
own, the lengths taking turns query by query, ``--rounds`` times. Per length: p50/p95 and the
mean share of the scope's postings that belong to the query's lexemes, which is what the leg
reads (it reads every posting of each query term in the scope: it does not prune yet). Writes
``evals/bench/lexical-lengths.json`` with the commit, settings, machine and load. A
measurement, not a test; the reader is dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from evals.bench.lexical_revisions import _create_reader, _decision, _grant, _queries, _revoke
from evals.bench.runtime import acting_as, load_average, provenance, summary_ms

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "lexical-lengths.json"
LIMIT = 100


def _config(conn: psycopg.Connection[Any], args: Any) -> str:
    row = conn.execute(
        "SELECT ts_config::text FROM pyretrieve.projects WHERE workspace_id = %s AND project_id = %s",
        (args.workspace, args.project),
    ).fetchone()
    if row is None:
        raise SystemExit(f"no scope {args.workspace}/{args.project}")
    return str(row[0])


def _lexemes(conn: psycopg.Connection[Any], config: str, text: str) -> list[str]:
    row = conn.execute(
        "SELECT coalesce(array_agg(u.lexeme ORDER BY u.lexeme), '{}')"
        " FROM unnest(to_tsvector(%s::regconfig, %s)) u",
        (config, text),
    ).fetchone()
    return list(row[0]) if row else []


def cuts(
    conn: psycopg.Connection[Any], config: str, text: str, lengths: list[int]
) -> dict[int, tuple[str, list[str]]]:
    """Per length k: the query's first words holding exactly k distinct lexemes (for the last
    length, the whole query when it holds at least k), with those lexemes."""
    words = text.split()
    out: dict[int, tuple[str, list[str]]] = {}
    for i in range(1, len(words) + 1):
        prefix = " ".join(words[:i])
        found = _lexemes(conn, config, prefix)
        if len(found) in lengths[:-1] and len(found) not in out:
            out[len(found)] = (prefix, found)
    whole = _lexemes(conn, config, text)
    if len(whole) >= lengths[-1]:
        out[lengths[-1]] = (text, whole)
    return out


def _postings(conn: psycopg.Connection[Any], args: Any, lexemes: list[str] | None) -> int:
    """Postings of the scope (of the given lexemes), in whichever lexical index the installed
    schema has: the view over blocks and pages less tombstones (since 0021) or a row per
    posting."""
    view = conn.execute("SELECT to_regclass('pyretrieve.lexical_postings') IS NOT NULL").fetchone()
    table = "lexical_postings" if view and view[0] else "postings"
    row = conn.execute(
        sql.SQL(
            "SELECT count(*) FROM pyretrieve.{} WHERE workspace_id = %s AND project_id = %s"
            " AND (%s::text[] IS NULL OR lexeme = ANY (%s::text[]))"
        ).format(sql.Identifier(table)),
        (args.workspace, args.project, lexemes, lexemes),
    ).fetchone()
    return int(row[0]) if row else 0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="a superuser DSN of a populated database")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--queries", type=Path, required=True, help="a BEIR queries.jsonl")
    parser.add_argument("--lengths", default="1,2,4,8,16")
    parser.add_argument("--limit-queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    lengths = sorted({int(x) for x in args.lengths.split(",")})
    reader = f"pyretrieve_lexlen_{secrets.token_hex(3)}"
    seconds: dict[int, list[float]] = {k: [] for k in lengths}
    shares: dict[int, list[float]] = {k: [] for k in lengths}
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        measured_on = provenance(conn)
        config = _config(conn, args)
        total = _postings(conn, args, None)
        plan = []
        for text in _queries(args.queries, args.limit_queries):
            for k, (cut, lexemes) in sorted(cuts(conn, config, text, lengths).items()):
                plan.append((k, cut))
                shares[k].append(_postings(conn, args, lexemes) / total if total else 0.0)
        _create_reader(conn, reader)
        try:
            _grant(conn, reader, args)
            try:
                for r in range(args.rounds):
                    for i, (k, cut) in enumerate(plan if r % 2 == 0 else plan[::-1]):
                        with acting_as(conn, reader):
                            decision = _decision(conn, args, f"{r}:{i}:{cut}")
                            started = time.perf_counter()
                            conn.execute(
                                "SELECT * FROM pyretrieve.lexical_candidates(%s, %s, %s)",
                                (decision, cut, LIMIT),
                            ).fetchall()
                            seconds[k].append(time.perf_counter() - started)
            finally:
                _revoke(conn, reader, args)
        finally:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(reader)))
    by_length = {
        (f"{k}+" if k == lengths[-1] else str(k)): {
            "queries": len(shares[k]),
            **(summary_ms(seconds[k]) if seconds[k] else {}),
            "postings_read_share_mean": round(statistics.fmean(shares[k]), 5)
            if shares[k]
            else None,
        }
        for k in lengths
    }
    result = {
        "benchmark": "lexical_candidates by query length, with the share of postings read",
        **measured_on,
        "settings": {
            "scope": f"{args.workspace}/{args.project}",
            "queries": str(args.queries.name),
            "lengths": lengths,
            "rounds": args.rounds,
            "limit": LIMIT,
            "scope_postings": total,
            "cut": "each query's first words holding exactly k distinct lexemes; the last"
            " length is the whole query when it holds at least that many",
            "order": "one decision per call, every cut of the plan in turn, reversed on odd rounds",
            "reads": "every posting of each query term in the scope (the leg does not prune), so"
            " postings_read_share_mean is the query terms' share of the scope's postings",
        },
        "by_length": by_length,
        "load_average_at_end": load_average(),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(by_length))
    return result


if __name__ == "__main__":
    main()
