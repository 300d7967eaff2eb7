"""A new session's first searches: generic plans from the first call against PL/pgSQL's default.

Usage: python -m evals.bench.session_start [--rows 5183] [--sessions 16] [--calls 8]
       [--dsn DSN] [--out PATH]

PL/pgSQL plans each statement of a function afresh (a custom plan) for a session's first five
calls, builds the generic plan at the sixth and keeps it when it costs no more. Since 0032,
``lexical_candidates`` and ``search`` pin ``plan_cache_mode = force_generic_plan``, so the
generic plan serves from the first call. On a scope of ``--rows`` SciFact abstracts, new
sessions of a reader make ``--calls`` searches each, two kinds taking turns call by call:

* ``client``: ``Retriever.search``, lexical (authorize, the lexical leg, records, the ranker);
* ``sql``: ``pyretrieve.search``, lexical, 10 results.

Sessions alternate between the two arms: ``generic`` (the functions as installed) and
``custom_first`` (the superuser resets the setting on both before the session opens, as 0031
had them; it is restored at the end). Per arm and kind: each call's p50 by its position in the
session, and the sum of the p50s of a session's calls. Writes
``evals/bench/session-start.json`` with the commit, settings, machine and load. A measurement,
not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import psycopg

from evals.bench import round_trips
from evals.bench.runtime import DATASETS, acting_as, load_average
from pyretrieve import Retriever, Scope

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "session-start.json"
FUNCTIONS = (
    "pyretrieve.lexical_candidates(uuid,text,integer,text)",
    "pyretrieve.search(text,text,text,text,public.vector,text,integer,text,double precision,"
    "double precision,text,text,integer,text)",
)
SQL_SEARCH = (
    "SELECT count(*) FROM pyretrieve.search(p_workspace => %s, p_project => %s,"
    " p_purpose => %s, p_query => %s, p_mode => 'lexical', p_limit => 10)"
)
SCOPE = (round_trips.WORKSPACE, round_trips.PROJECT, round_trips.PURPOSE)
ARMS = ("generic", "custom_first")
KINDS = ("client", "sql")


def _arm(admin: psycopg.Connection[Any], arm: str) -> None:
    """The functions' plan setting for the sessions opened next."""
    clause = (
        "SET plan_cache_mode = force_generic_plan" if arm == "generic" else "RESET plan_cache_mode"
    )
    for function in FUNCTIONS:
        admin.execute(f"ALTER FUNCTION {function} {clause}")


def _session(dsn: str, reader: str, texts: list[str], calls: int) -> dict[str, list[float]]:
    """One new session's searches, the two kinds taking turns: seconds by call position."""
    spent: dict[str, list[float]] = {kind: [] for kind in KINDS}
    scope = Scope(
        workspace=round_trips.WORKSPACE, project=round_trips.PROJECT, purpose=round_trips.PURPOSE
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        client = Retriever(conn, principal=reader)
        for i in range(calls):
            for kind in KINDS if i % 2 == 0 else reversed(KINDS):
                text = texts[(2 * i + (kind == "sql")) % len(texts)]
                started = time.perf_counter()
                if kind == "client":
                    client.search(text, scope=scope, mode="lexical", limit=10)
                else:
                    with acting_as(conn, reader), conn.transaction():
                        conn.execute(SQL_SEARCH, (*SCOPE, text)).fetchall()
                spent[kind].append(time.perf_counter() - started)
    return spent


def measure(dsn: str, reader: str, texts: list[str], sessions: int, calls: int) -> dict[str, Any]:
    by_arm: dict[str, dict[str, list[list[float]]]] = {
        arm: {kind: [[] for _ in range(calls)] for kind in KINDS} for arm in ARMS
    }
    with psycopg.connect(dsn, autocommit=True) as admin:
        try:
            for s in range(sessions):
                arm = ARMS[s % 2]
                _arm(admin, arm)
                offset = (s // 2) * 2 * calls
                spent = _session(dsn, reader, texts[offset:] + texts[:offset], calls)
                for kind, seconds in spent.items():
                    for position, value in enumerate(seconds):
                        by_arm[arm][kind][position].append(value)
        finally:
            _arm(admin, "generic")
    out: dict[str, Any] = {}
    for arm, kinds in by_arm.items():
        out[arm] = {}
        for kind, positions in kinds.items():
            p50s = [round(statistics.median(v) * 1000, 3) for v in positions]
            out[arm][kind] = {"p50_ms_by_call": p50s, "session_sum_of_p50s_ms": round(sum(p50s), 3)}
    out["generic_over_custom_first"] = {
        kind: round(
            out["generic"][kind]["session_sum_of_p50s_ms"]
            / out["custom_first"][kind]["session_sum_of_p50s_ms"],
            3,
        )
        for kind in KINDS
    }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5183)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--dsn", help="a fresh database (superuser); default: a throwaway server")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    bodies = round_trips._abstracts(DATASETS, args.rows)
    with round_trips.loaded(args.dsn, "start", bodies) as (dsn, principals, measured_on):
        figures = measure(
            dsn, principals.reader, round_trips.claims(DATASETS), args.sessions, args.calls
        )
    result = {
        "benchmark": "a new session's first searches, generic plans against custom ones first",
        **measured_on,
        "settings": {
            "rows": len(bodies),
            "sessions": args.sessions,
            "calls_per_session": args.calls,
            "kinds": {"client": "Retriever.search, lexical, 10 results", "sql": SQL_SEARCH},
            "order": "sessions alternate between the arms; within a session the kinds alternate",
        },
        **figures,
        "load_average_at_end": load_average(),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    ratio = result["generic_over_custom_first"]
    print(
        f"a session's calls, generic over custom first: client {ratio['client']}, sql {ratio['sql']}"
    )
    return result


if __name__ == "__main__":
    main()
