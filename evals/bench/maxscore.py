"""Exact MaxScore pruning of the lexical leg, written in SQL: measured against the leg as it is.

Usage: python -m evals.bench.maxscore [--corpus scifact|bfcl-tools] [--rows N] [--copies N]
       [--queries N] [--rounds R] [--dsn DSN] [--out PATH]

The leg scores every posting of every query term in the scope. MaxScore (Turtle and Flood)
skips what cannot reach the top k: with a lower bound theta on the k-th best score, the terms
whose upper bounds sum below theta are *non-essential*, a fragment holding none of the other
(*essential*) terms cannot reach theta, and only fragments holding an essential term are
scored, exactly. Whether that pays in SQL is measured here, on one scope:

* ``unpruned``: the installed ``lexical_candidates``' default statement as a plain statement
  (``evals.bench.scale.hand_written``: the same CTEs, the decision's fields as parameters),
  run by the superuser;
* ``maxscore``: the same statement with its scoring replaced by MaxScore: each term's upper
  bound from its blocks' largest tf and smallest length (a page slice's from its entries);
  theta, the k-th best score over the terms holding the smallest quarter of the postings (a
  partial score never exceeds the whole one); the non-essential terms by ascending bound; the
  fragments of the essential terms' postings, scored over every term. Both sides must return
  the same rows, query for query.

Beside the timings, computed in Python from the scope's index (its blocks and pages): the
share of the query terms' postings in the essential terms' lists at the *true* k-th best score
(the most any threshold could prune) and under the statement's theta, and the fragments
scored under that theta.

``--corpus scifact``: ``--rows`` SciFact abstracts, the judged claims as queries.
``--corpus bfcl-tools``: each of the 2,533 distinct BFCL tool texts (name and description),
``--copies`` times (a copy's body ends in its own word), the BFCL queries: with 40 copies
101,320 tools, about the tool bench's largest catalog. Writes
``evals/bench/maxscore-<corpus>.json`` with the commit, settings, machine and load. A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import psycopg

from evals.bench import round_trips
from evals.bench.runtime import (
    DATASETS,
    load_average,
    summary_ms,
)
from evals.bench.scale import CANDIDATES, hand_written

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench"
THETA_SHARE = 4  # theta from the terms holding the smallest 1/THETA_SHARE of the postings
MARGIN = 1e-9  # below theta by more than float summation in another order could move a sum

_K1 = "%(k1)s::double precision"
_B = "%(b)s::double precision"
_PART = f"w.wq * (p.tf * ({_K1} + 1.0)) / (p.tf + {_K1} * (1.0 - {_B} + {_B} * p.len / st.avgdl))"
_PRUNED_SCORING = f"""    ), post AS MATERIALIZED (
        SELECT y.ti, (y.entry >> 32)::integer AS docno,
               (((y.entry >> 24) & 255) + 1)::double precision AS tf,
               (y.entry & 16777215)::double precision AS len
          FROM (SELECT bl.ti, unnest(bl.entries) AS entry FROM bl WHERE bl.whole
                UNION ALL
                SELECT part.ti, part.entry FROM part) y
    ), ub AS MATERIALIZED (
        SELECT bl.ti, sum(bl.postings) AS n,
               max(w.wq * (bl.max_tf::double precision * ({_K1} + 1.0))
                   / (bl.max_tf::double precision + {_K1} * (1.0 - {_B} + {_B}
                      * bl.min_length::double precision / st.avgdl))) AS ub
          FROM bl JOIN w ON w.ti = bl.ti CROSS JOIN st
         GROUP BY bl.ti
    ), p1 AS MATERIALIZED (
        SELECT x.ti
          FROM (SELECT ub.ti, sum(ub.n) OVER (ORDER BY ub.n, ub.ti) AS cum,
                       sum(ub.n) OVER () AS total, row_number() OVER (ORDER BY ub.n, ub.ti) AS r
                  FROM ub) x
         WHERE x.r = 1 OR x.cum * {THETA_SHARE} <= x.total
    ), theta AS MATERIALIZED (
        SELECT coalesce((SELECT s.score
                           FROM (SELECT sum(h.part ORDER BY h.ti) AS score
                                   FROM (SELECT p.docno, p.ti, {_PART} AS part
                                           FROM post p JOIN w ON w.ti = p.ti CROSS JOIN st
                                          WHERE p.ti IN (SELECT p1.ti FROM p1)
                                          ORDER BY p.docno, p.ti) h
                                  GROUP BY h.docno) s
                          ORDER BY s.score DESC OFFSET {CANDIDATES - 1} LIMIT 1), 0.0)
               * (1.0 - {MARGIN}) AS t
    ), ne AS MATERIALIZED (
        SELECT x.ti
          FROM (SELECT ub.ti, sum(ub.ub) OVER (ORDER BY ub.ub, ub.ti) AS cum FROM ub) x, theta
         WHERE x.cum < theta.t
    ), dd AS MATERIALIZED (
        SELECT DISTINCT p.docno FROM post p WHERE p.ti NOT IN (SELECT ne.ti FROM ne)
    ), scored AS MATERIALIZED (
        SELECT h.docno, sum(h.part ORDER BY h.ti) AS score
          FROM (SELECT p.docno, p.ti, {_PART} AS part
                  FROM post p JOIN w ON w.ti = p.ti CROSS JOIN st
                 WHERE p.docno IN (SELECT dd.docno FROM dd)
                 ORDER BY p.docno, p.ti) h
         GROUP BY h.docno
"""
# The block bounds the pruned statement reads, added to the leg's bl CTE and the lists it reads
# (0048 on): (anchor, with them).
_BOUNDS = (
    (
        "SELECT t.ti, t.first_docno, t.last_docno, t.postings, t.entries,",
        "SELECT t.ti, t.first_docno, t.last_docno, t.postings, t.entries, t.max_tf, t.min_length,",
    ),
    (
        "SELECT ql.ti, b.first_docno, b.last_docno, b.postings, b.entries,",
        "SELECT ql.ti, b.first_docno, b.last_docno, b.postings, b.entries, b.max_tf, b.min_length,",
    ),
    (
        "SELECT b.first_docno, b.last_docno, b.postings, b.entries,\n",
        "SELECT b.first_docno, b.last_docno, b.postings, b.entries, b.max_tf, b.min_length,\n",
    ),
    (
        "cardinality(x.e), x.e, p.min_observed_at,",
        "cardinality(x.e), x.e,"
        " (SELECT max(((e >> 24) & 255) + 1)::integer FROM unnest(x.e) e),"
        " (SELECT min(e & 16777215)::integer FROM unnest(x.e) e), p.min_observed_at,",
    ),
)


def pruned_statement(unpruned: str) -> str:
    """The leg's statement with MaxScore scoring; SystemExit when the installed leg's text has
    changed so that the rewrite no longer applies."""
    out = unpruned
    for anchor, replacement in _BOUNDS:
        if out.count(anchor) != 1:
            raise SystemExit(f"the installed lexical leg has no single {anchor!r}")
        out = out.replace(anchor, replacement)
    start, end = (
        out.find("    ), scored AS MATERIALIZED ("),
        out.find("    ), top AS MATERIALIZED ("),
    )
    if start < 0 or end < start:
        raise SystemExit("the installed lexical leg has no scored CTE before its top CTE")
    return out[:start] + _PRUNED_SCORING + out[end:]


# ---------------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------------
def corpus(kind: str, rows: int, copies: int, queries: int) -> tuple[list[str], list[str]]:
    """Bodies and queries of ``kind``."""
    if kind == "scifact":
        bodies = round_trips._abstracts(DATASETS, rows)
        path = DATASETS / "scifact" / "queries.jsonl"
    else:
        with (DATASETS / "bfcl_tools" / "corpus.jsonl").open(encoding="utf-8") as f:
            tools = [json.loads(line) for line in f]
        # Variants of a tool may share their text; a scope holds each text once.
        texts_ = list(dict.fromkeys(f"{t['title']}\n{t['text']}" for t in tools))
        bodies = [f"{text} copy{n}" for n in range(copies) for text in texts_]
        path = DATASETS / "bfcl_tools" / "queries.jsonl"
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"][:2000] for line in f]
    return bodies, texts[:queries]


# ---------------------------------------------------------------------------------------------
# What pruning could skip, from the scope's index
# ---------------------------------------------------------------------------------------------
def _lists(conn: psycopg.Connection[Any]) -> dict[str, list[int]]:
    """Every lexeme's packed postings in the scope (blocks and page slices)."""
    lists: dict[str, list[int]] = collections.defaultdict(list)
    scope = (round_trips.WORKSPACE, round_trips.PROJECT)
    blocks = conn.execute(
        "SELECT lexeme, entries FROM pyretrieve.lexical_blocks"
        " WHERE workspace_id = %s AND project_id = %s",
        scope,
    )
    for lexeme, entries in blocks:
        lists[lexeme].extend(entries)
    pages = conn.execute(
        "SELECT lexemes, starts, entries, postings FROM pyretrieve.lexical_pages"
        " WHERE workspace_id = %s AND project_id = %s",
        scope,
    )
    for lexemes, starts, entries, n in pages:
        for i, lexeme in enumerate(lexemes):
            stop = starts[i + 1] - 1 if i + 1 < len(starts) else n
            lists[lexeme].extend(entries[starts[i] - 1 : stop])
    return lists


def _terms(
    conn: psycopg.Connection[Any], lists: dict[str, list[int]], text: str, stats: dict[str, Any]
) -> list[tuple[float, int, dict[int, float]]]:
    """Per query term in the scope: its upper bound, its postings and each fragment's part."""
    qtf: collections.Counter[str] = collections.Counter()
    for lexeme, positions in conn.execute(
        "SELECT lexeme, positions FROM unnest(to_tsvector(%s::regconfig, %s))",
        (stats["config"], text),
    ):
        qtf[lexeme] = max(len(positions or ()), 1)
    k1, b, n, avgdl = stats["k1"], stats["b"], stats["n"], stats["avgdl"]
    out = []
    for lexeme, count in qtf.items():
        entries = lists.get(lexeme, [])
        if not entries:
            continue
        idf = math.log(1.0 + (n - len(entries) + 0.5) / (len(entries) + 0.5))
        parts: dict[int, float] = {}
        for e in entries:
            tf, length = float(((e >> 24) & 255) + 1), float(e & 16777215)
            parts[e >> 32] = (
                count * idf * (tf * (k1 + 1.0)) / (tf + k1 * (1.0 - b + b * length / avgdl))
            )
        out.append((max(parts.values()), len(entries), parts))
    return out


def _essential(terms: list[tuple[float, int, dict[int, float]]], theta: float) -> list[int]:
    """Indexes of the essential terms: past the prefix (by ascending bound) summing below theta."""
    order = sorted(range(len(terms)), key=lambda i: terms[i][0])
    total = 0.0
    for pos, i in enumerate(order):
        if total + terms[i][0] >= theta:
            return order[pos:]
        total += terms[i][0]
    return []


def skipped(conn: psycopg.Connection[Any], texts: list[str], k: int) -> dict[str, Any]:
    """Shares of postings in essential lists and fragments scored, at the true k-th best score
    and at the statement's theta, over the queries matching at least k fragments."""
    lists = _lists(conn)
    row = conn.execute(
        "SELECT p.bm25_k1, p.bm25_b, p.ts_config::text, count(f.*), avg(f.doc_length)"
        " FROM pyretrieve.projects p JOIN pyretrieve.fragments f USING (workspace_id, project_id)"
        " WHERE p.workspace_id = %s AND p.project_id = %s GROUP BY 1, 2, 3",
        (round_trips.WORKSPACE, round_trips.PROJECT),
    ).fetchone()
    assert row is not None
    stats = {"k1": float(row[0]), "b": float(row[1]), "config": str(row[2]),
             "n": float(row[3]), "avgdl": float(row[4])}  # fmt: skip
    ideal: list[float] = []
    rule: list[float] = []
    scored_rule: list[float] = []
    for text in texts:
        terms = _terms(conn, lists, text, stats)
        scores = _sums(t[2] for t in terms)
        if len(scores) < k:
            continue
        postings = sum(t[1] for t in terms)
        smallest = sorted(range(len(terms)), key=lambda i: terms[i][1])
        held, chosen = 0, []
        for j, i in enumerate(smallest):
            if j > 0 and (held + terms[i][1]) * THETA_SHARE > postings:
                break
            held += terms[i][1]
            chosen.append(terms[i][2])
        seed = _sums(chosen)
        for theta, shares in (
            (sorted(scores.values(), reverse=True)[k - 1], ideal),
            ((sorted(seed.values(), reverse=True)[k - 1] if len(seed) >= k else 0.0), rule),
        ):
            essential = _essential(terms, theta * (1.0 - MARGIN))
            shares.append(sum(terms[i][1] for i in essential) / postings)
            if shares is rule:
                docs = {d for i in essential for d in terms[i][2]}
                scored_rule.append(len(docs) / len(scores))
    return {
        "queries_with_k_matches": len(ideal),
        "essential_postings_share_at_true_kth_score": _spread(ideal),
        "essential_postings_share_at_theta": _spread(rule),
        "fragments_scored_share_at_theta": _spread(scored_rule),
    }


def _sums(lists: Any) -> dict[int, float]:
    out: dict[int, float] = collections.defaultdict(float)
    for parts in lists:
        for doc, part in parts.items():
            out[doc] += part
    return out


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "mean": round(statistics.fmean(values), 3),
        "median": round(statistics.median(values), 3),
    }


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------
def measure(dsn: str, texts: list[str], rounds: int) -> dict[str, Any]:
    """Both statements query by query, in alternating order; their rows must agree."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        unpruned = hand_written(conn, "lexical_candidates")
        if unpruned is None:
            raise SystemExit("the installed lexical_candidates has no statement to follow")
        pruned = pruned_statement(unpruned)
        row = conn.execute(
            "SELECT bm25_k1, bm25_b FROM pyretrieve.projects WHERE workspace_id = %s",
            (round_trips.WORKSPACE,),
        ).fetchone()
        assert row is not None
        args = {"ws": round_trips.WORKSPACE, "pj": round_trips.PROJECT, "ceiling": "internal",
                "k1": row[0], "b": row[1]}  # fmt: skip
        times: dict[str, list[float]] = {"unpruned": [], "maxscore": []}
        different = 0
        for turn in range(rounds * len(texts)):
            text = texts[turn % len(texts)]
            order = ("unpruned", "maxscore") if turn % 2 else ("maxscore", "unpruned")
            rows = {}
            for side in order:
                started = time.perf_counter()
                statement = unpruned if side == "unpruned" else pruned
                rows[side] = conn.execute(statement, {**args, "q": text}).fetchall()
                times[side].append(time.perf_counter() - started)
            different += rows["unpruned"] != rows["maxscore"]
        summaries = {side: summary_ms(t) for side, t in times.items()}
        return {
            **summaries,
            "maxscore_over_unpruned_p50": round(
                float(summaries["maxscore"]["p50"]) / float(summaries["unpruned"]["p50"]), 3
            ),
            "calls_with_different_rows": different,
            "skippable": skipped(conn, texts, CANDIDATES),
        }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--corpus", choices=("scifact", "bfcl-tools"), default="scifact")
    parser.add_argument("--rows", type=int, default=5183, help="scifact: abstracts")
    parser.add_argument("--copies", type=int, default=40, help="bfcl-tools: copies of each tool")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dsn", help="a fresh database (superuser); default: a throwaway server")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    bodies, texts = corpus(args.corpus, args.rows, args.copies, args.queries)
    with round_trips.loaded(args.dsn, "maxscore", bodies) as (dsn, _, measured_on):
        figures = measure(dsn, texts, args.rounds)
    result = {
        "benchmark": "exact MaxScore pruning of the lexical leg in SQL against the leg",
        **measured_on,
        "settings": {
            "corpus": args.corpus,
            "fragments": len(bodies),
            "queries": len(texts),
            "rounds": args.rounds,
            "k": CANDIDATES,
            "theta_from": f"the terms holding the smallest 1/{THETA_SHARE} of the postings",
            "order": "the two statements take turns, alternating which goes first",
        },
        **figures,
        "load_average_at_end": load_average(),
    }
    out = args.out or OUT / f"maxscore-{args.corpus}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"unpruned p50 {result['unpruned']['p50']} ms, maxscore p50 {result['maxscore']['p50']}"
        f" ms ({result['maxscore_over_unpruned_p50']}x), different rows"
        f" {result['calls_with_different_rows']}"
    )
    return result


if __name__ == "__main__":
    main()
