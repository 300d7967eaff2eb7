"""What the second wall costs: each read function with row-level security against its twin
without it, call by call, in one transaction.

Usage: python -m evals.bench.second_wall [--rows 200,1000,5183] [--queries 100] [--dsn DSN]
       [--out PATH]

The functions a principal calls state every filter of the decision in their statements (the
first wall), and the tables' forced RLS policies apply the decision again (the second wall: the
policies read the transaction's decision in InitPlans). What the second wall costs is measured
here without a hand-written stand-in: each function is copied, body and settings unchanged, into
a scratch schema owned by the superuser, so the copy runs past RLS (a superuser bypasses it,
forced or not) and differs from the installed function in nothing else.

Scopes of the first ``--rows`` SciFact abstracts (one project per size, loaded by COPY, random
384-d embeddings), a reader granted each. For each of ``--queries`` SciFact claims, in one
transaction: ``authorize``, then the installed function, its twin, and the installed function
again (in one of the three rotations of that order, chosen by the decision's id), for the lexical leg (100 candidates), the
vector leg (100 candidates) and the records of both legs' union (``fragments``). Every twin
must return exactly the installed function's rows; the run stops at the first difference.
The installed function's second call against its first is the control: how far two identical
calls differ in this run.

Per size and function: p50 of each arm, the median of the per-call ratios (installed / twin,
and the control) with a bootstrap 95% interval. The scratch schema is dropped at the end.
Writes ``evals/bench/second-wall.json`` with the commit, settings, machine and load. A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from evals.bench import round_trips
from evals.bench.runtime import (
    DATASETS,
    Principals,
    acting_as,
    is_superuser,
    load_average,
    summary_ms,
)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "second-wall.json"
TWINS = "pyretrieve_bench_twin"
CANDIDATES = 100
# Each function a search reads through, by the signature pg_get_functiondef is asked for.
FUNCTIONS = {
    "lexical": "pyretrieve.lexical_candidates(uuid,text,integer,text)",
    "vector": "pyretrieve.vector_candidates(uuid,text,public.vector,integer)",
    "records": "pyretrieve.fragments(uuid,uuid[])",
}
CALLS = {
    "lexical": "SELECT * FROM {}.lexical_candidates(p_decision => %s, p_query => %s, p_limit => %s)",
    "vector": "SELECT * FROM {}.vector_candidates(p_decision => %s, p_model => %s,"
    " p_embedding => %s::public.vector, p_limit => %s)",
    "records": "SELECT * FROM {}.fragments(p_decision => %s, p_ids => %s)",
}
ARMS = ("installed", "twin", "control")


@contextlib.contextmanager
def twins(
    conn: psycopg.Connection[Any], reader: str, functions: Mapping[str, str] = FUNCTIONS
) -> Iterator[None]:
    """The ``functions`` copied into ``TWINS``, owned by the connecting superuser (so they run
    past RLS), executable by ``reader``; dropped at the end."""
    if not is_superuser(conn):
        raise SystemExit("the twins run past RLS only when a superuser owns them")
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(TWINS)))
    try:
        for signature in functions.values():
            row = conn.execute(
                "SELECT pg_get_functiondef(%s::regprocedure)", (signature,)
            ).fetchone()
            assert row is not None
            body, found = re.subn(
                r"^CREATE OR REPLACE FUNCTION pyretrieve\.", f"CREATE FUNCTION {TWINS}.", row[0]
            )
            if found != 1:
                raise SystemExit(f"cannot copy {signature}")
            conn.execute(body)
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(TWINS), sql.Identifier(reader)
            )
        )
        conn.execute(
            sql.SQL("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {} TO {}").format(
                sql.Identifier(TWINS), sql.Identifier(reader)
            )
        )
        yield
    finally:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(TWINS)))


def _add_scope(
    conn: psycopg.Connection[Any], principals: Principals, project: str, bodies: list[str]
) -> None:
    with acting_as(conn, principals.admin):
        conn.execute("SELECT pyretrieve.create_project(%s, %s)", (round_trips.WORKSPACE, project))
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, %s, 'internal')",
            (principals.reader, round_trips.WORKSPACE, project, round_trips.PURPOSE),
        )
    with conn.transaction():
        round_trips.copy_scope(
            conn, round_trips.WORKSPACE, project, bodies, np.random.default_rng(len(bodies))
        )


def _timed(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...]) -> tuple[float, Any]:
    started = time.perf_counter()
    rows = conn.execute(query, params).fetchall()
    return time.perf_counter() - started, rows


def _one_query(
    conn: psycopg.Connection[Any], reader: str, project: str, text: str, vector: str
) -> dict[str, dict[str, float]]:
    """One claim in one transaction: each function's three calls, in ``ARMS`` order rotated by
    the caller; seconds by function and arm."""
    spent: dict[str, dict[str, float]] = {}
    with acting_as(conn, reader), conn.transaction():
        row = conn.execute(
            "SELECT decision_id FROM pyretrieve.authorize(p_workspace => %s, p_project => %s,"
            " p_purpose => %s, p_query_digest => %s, p_semantic_intent => 'optional',"
            " p_embedding_digest => NULL, p_requested_limit => %s)",
            (
                round_trips.WORKSPACE,
                project,
                round_trips.PURPOSE,
                hashlib.sha256(text.encode()).digest(),
                CANDIDATES,
            ),
        ).fetchone()
        assert row is not None
        decision = row[0]
        ids: list[Any] = []
        for kind in FUNCTIONS:
            params: tuple[Any, ...] = {
                "lexical": (decision, text, CANDIDATES),
                "vector": (decision, round_trips.MODEL, vector, CANDIDATES),
                "records": (decision, sorted(set(ids))),
            }[kind]
            spent[kind], rows = _arms(conn, kind, params)
            if kind != "records":
                ids.extend(r[1] for r in rows)
    return spent


def _arms(
    conn: psycopg.Connection[Any], kind: str, params: tuple[Any, ...]
) -> tuple[dict[str, float], Any]:
    schema = {"installed": "pyretrieve", "twin": TWINS, "control": "pyretrieve"}
    spent: dict[str, float] = {}
    seen: dict[str, Any] = {}
    order = list(ARMS)
    shift = int(params[0].int % len(order))
    for arm in order[shift:] + order[:shift]:
        query = CALLS[kind].format(sql.Identifier(schema[arm]).as_string())
        spent[arm], seen[arm] = _timed(conn, query, params)
    if not seen["installed"] == seen["twin"] == seen["control"]:
        raise SystemExit(f"{kind}: the twin without RLS returned other rows")
    return spent, seen["installed"]


def _median_ratio(num: list[float], den: list[float], rng: np.random.Generator) -> dict[str, Any]:
    ratios = np.asarray(num) / np.asarray(den)
    boots = np.median(rng.choice(ratios, size=(2000, len(ratios)), replace=True), axis=1)
    return {
        "median": round(float(np.median(ratios)), 3),
        "ci95": [
            round(float(np.percentile(boots, 2.5)), 3),
            round(float(np.percentile(boots, 97.5)), 3),
        ],
    }


def measure(
    dsn: str, principals: Principals, projects: dict[int, str], texts: list[str]
) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    vectors = [round_trips.vector_text(round_trips._vector(rng)) for _ in texts]
    out: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn, twins(conn, principals.reader):
        for rows, project in projects.items():
            for text, vector in zip(texts[:5], vectors, strict=False):  # warm-up
                _one_query(conn, principals.reader, project, text, vector)
            spent = [
                _one_query(conn, principals.reader, project, text, vector)
                for text, vector in zip(texts, vectors, strict=True)
            ]
            out[str(rows)] = {kind: _summary(spent, kind, rng) for kind in FUNCTIONS}
            print(rows, {k: v["installed_over_twin"]["median"] for k, v in out[str(rows)].items()})
    return out


def _summary(
    spent: list[dict[str, dict[str, float]]], kind: str, rng: np.random.Generator
) -> dict[str, Any]:
    def arm(name: str) -> list[float]:
        return [s[kind][name] for s in spent]

    return {
        **{f"{a}_ms": summary_ms(arm(a)) for a in ARMS},
        "installed_over_twin": _median_ratio(arm("installed"), arm("twin"), rng),
        "control_over_installed": _median_ratio(arm("control"), arm("installed"), rng),
    }


def _texts(n: int) -> list[str]:
    with (DATASETS / "scifact" / "queries.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f][:n]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", default="200,1000,5183", help="scope sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--dsn", help="a fresh database (superuser); default: a throwaway server")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sizes = sorted({int(x) for x in args.rows.split(",")})
    bodies = round_trips._abstracts(DATASETS, sizes[-1])
    with round_trips.loaded(args.dsn, "wall", bodies) as (dsn, principals, measured_on):
        projects = {len(bodies): round_trips.PROJECT}
        with psycopg.connect(dsn, autocommit=True) as conn:
            for rows in sizes[:-1]:
                projects[rows] = f"{round_trips.PROJECT}_{rows}"
                _add_scope(conn, principals, projects[rows], bodies[:rows])
            conn.execute("VACUUM (ANALYZE) pyretrieve.fragments")
            conn.execute("VACUUM (ANALYZE) pyretrieve.embeddings")
        figures = measure(dsn, principals, dict(sorted(projects.items())), _texts(args.queries))
    result = {
        "benchmark": "the read functions under RLS against their twins without it",
        **measured_on,
        "settings": {
            "rows": sorted(projects),
            "queries": args.queries,
            "candidates": CANDIDATES,
            "functions": FUNCTIONS,
            "text": "SciFact abstracts and claims, random 384-d embeddings",
            "order": "per claim, one transaction: installed, twin and control in a rotating order",
        },
        "scopes": figures,
        "load_average_at_end": load_average(),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
