"""What the second wall costs: each read function with row-level security against its twin
without it, claim by claim.

Usage: python -m evals.bench.second_wall [--rows 200,1000,5183] [--queries 100] [--dsn DSN]
       [--out PATH]

The functions a principal calls state every filter of the decision in their statements (the
first wall), and the tables' forced RLS policies apply the decision again (the second wall: the
policies read the transaction's decision in InitPlans). What the second wall costs is measured
here without a hand-written stand-in: each function is copied, body and settings unchanged, into
a scratch schema owned by the superuser, so the copy runs past RLS (a superuser bypasses it,
forced or not) and differs from the installed function in nothing else.

Scopes of the first ``--rows`` SciFact abstracts (one project per size, loaded by COPY, random
384-d embeddings), a reader granted each. Each of ``--queries`` SciFact claims is read three
times, as a search reads it (one transaction: ``authorize``, the lexical leg, the vector leg,
each of 100 candidates, and the records of their union, ``fragments``): by the installed
functions, by their twins, and by the installed functions again (the control: how far two
identical reads differ in this run). Each arm has its own connection, so no session runs both
the installed functions and the twins, and the arms take turns in a rotating order. The twins
must return exactly the installed functions' rows; the run stops at the first difference.

Per size and function: p50 of each arm, the median of the per-claim ratios (installed / twin,
and control / installed) with a bootstrap 95% interval. The scratch schema is dropped at the
end. Writes ``evals/bench/second-wall.json`` with the commit, settings, machine and load. A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
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
    paired_ratio,
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


def _unchanged(definition: str) -> str:
    return definition


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """What a run compares: the installed functions against their copies (``copies``, owned by
    ``owner``, each definition passed through ``edit``), named ``arm``, for the reads ``kinds``
    (in the order a search makes them), with the installed functions again as the control."""

    arm: str
    kinds: tuple[str, ...]
    owner: str | None = None
    edit: Callable[[str], str] = _unchanged

    @property
    def arms(self) -> tuple[str, str, str]:
        return ("installed", self.arm, "control")


SECOND_WALL = Comparison(arm="twin", kinds=tuple(FUNCTIONS))
ARMS = SECOND_WALL.arms


@contextlib.contextmanager
def copies(
    conn: psycopg.Connection[Any],
    reader: str,
    functions: Mapping[str, str] = FUNCTIONS,
    *,
    owner: str | None = None,
    edit: Callable[[str], str] = _unchanged,
) -> Iterator[None]:
    """The ``functions`` copied into ``TWINS`` (each definition passed through ``edit``), owned
    by the connecting superuser, so they run past RLS, or by ``owner``, executable by
    ``reader``; dropped at the end."""
    if not is_superuser(conn):
        raise SystemExit("the copies are made by a superuser")
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
            conn.execute(edit(body))
            if owner is not None:
                copied = signature.replace("pyretrieve.", f"{TWINS}.", 1)
                conn.execute(
                    sql.SQL("ALTER FUNCTION {} OWNER TO {}").format(
                        sql.SQL(copied), sql.Identifier(owner)
                    )
                )
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


def _transaction(
    conn: psycopg.Connection[Any],
    schema: str,
    kinds: tuple[str, ...],
    reader: str,
    project: str,
    text: str,
    vector: str,
) -> tuple[dict[str, float], dict[str, Any]]:
    """One claim as a search reads it, in one transaction of ``conn``: authorize, then each of
    ``kinds`` (the lexical leg, the vector leg, the records of their union) from ``schema``.
    Seconds and rows by function."""
    spent: dict[str, float] = {}
    seen: dict[str, Any] = {}
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
        ids: set[Any] = set()
        for kind in kinds:
            params: tuple[Any, ...] = {
                "lexical": (decision, text, CANDIDATES),
                "vector": (decision, round_trips.MODEL, vector, CANDIDATES),
                "records": (decision, sorted(ids)),
            }[kind]
            query = CALLS[kind].format(sql.Identifier(schema).as_string())
            started = time.perf_counter()
            seen[kind] = conn.execute(query, params).fetchall()
            spent[kind] = time.perf_counter() - started
            if kind != "records":
                ids.update(r[1] for r in seen[kind])
    return spent, seen


def _one_claim(
    conns: dict[str, psycopg.Connection[Any]],
    comparison: Comparison,
    turn: int,
    reader: str,
    project: str,
    text: str,
    vector: str,
) -> dict[str, dict[str, float]]:
    """The claim on each arm's own connection (a session never runs another arm's functions:
    a copy may run as another user, and a session's cached plans of the functions they share
    would be made again for that user at every switch), the arms in one of three rotations by
    ``turn``. Seconds by function and arm."""
    arms = comparison.arms
    schema = dict(zip(arms, ("pyretrieve", TWINS, "pyretrieve"), strict=True))
    spent: dict[str, dict[str, float]] = {kind: {} for kind in comparison.kinds}
    seen: dict[str, dict[str, Any]] = {}
    for arm in arms[turn % 3 :] + arms[: turn % 3]:
        times, seen[arm] = _transaction(
            conns[arm], schema[arm], comparison.kinds, reader, project, text, vector
        )
        for kind, seconds in times.items():
            spent[kind][arm] = seconds
    if not seen[arms[0]] == seen[arms[1]] == seen[arms[2]]:
        raise SystemExit(f"the {comparison.arm} copies returned other rows")
    return spent


def measure(
    dsn: str,
    principals: Principals,
    projects: dict[int, str],
    texts: list[str],
    comparison: Comparison = SECOND_WALL,
) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    vectors = [round_trips.vector_text(round_trips._vector(rng)) for _ in texts]
    out: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        admin = stack.enter_context(psycopg.connect(dsn, autocommit=True))
        stack.enter_context(
            copies(
                admin,
                principals.reader,
                {kind: FUNCTIONS[kind] for kind in comparison.kinds},
                owner=comparison.owner,
                edit=comparison.edit,
            )
        )
        arms = comparison.arms
        conns = {arm: stack.enter_context(psycopg.connect(dsn, autocommit=True)) for arm in arms}
        reader = principals.reader
        for rows, project in projects.items():
            for turn, (text, vector) in enumerate(zip(texts[:6], vectors, strict=False)):
                _one_claim(conns, comparison, turn, reader, project, text, vector)  # warm-up
            spent = [
                _one_claim(conns, comparison, turn, reader, project, text, vector)
                for turn, (text, vector) in enumerate(zip(texts, vectors, strict=True))
            ]
            out[str(rows)] = {kind: _summary(spent, kind, arms, rng) for kind in comparison.kinds}
            ratio = f"installed_over_{comparison.arm}"
            print(rows, {k: v[ratio]["median"] for k, v in out[str(rows)].items()})
    return out


def _summary(
    spent: list[dict[str, dict[str, float]]],
    kind: str,
    arms: tuple[str, str, str],
    rng: np.random.Generator,
) -> dict[str, Any]:
    def arm(name: str) -> list[float]:
        return [s[kind][name] for s in spent]

    installed, copy, control = arms
    return {
        **{f"{a}_ms": summary_ms(arm(a)) for a in arms},
        f"installed_over_{copy}": paired_ratio(arm(installed), arm(copy), rng),
        "control_over_installed": paired_ratio(arm(control), arm(installed), rng),
    }


def _bodies(n: int) -> list[str]:
    """``n`` distinct SciFact abstracts, the collection repeated with a numbered mark past its
    end (a scope holds each content once)."""
    abstracts = round_trips._abstracts(DATASETS, n)
    return [
        body if i < len(abstracts) else f"{body} [{i // len(abstracts)}]"
        for i, body in ((i, abstracts[i % len(abstracts)]) for i in range(n))
    ]


@contextlib.contextmanager
def scopes(
    dsn: str | None, tag: str, sizes: list[int]
) -> Iterator[tuple[str, Principals, dict[str, Any], dict[int, str]]]:
    """A database (``dsn``, else a throwaway server) with a scope per size (the largest is
    ``round_trips``' project, the others one each), a reader granted each: its URL, the
    principals, the provenance and the project of each size."""
    bodies = _bodies(max(sizes))
    with round_trips.loaded(dsn, tag, bodies) as (url, principals, measured_on):
        projects = {len(bodies): round_trips.PROJECT}
        with psycopg.connect(url, autocommit=True) as conn:
            for rows in sorted(set(sizes))[:-1]:
                projects[rows] = f"{round_trips.PROJECT}_{rows}"
                _add_scope(conn, principals, projects[rows], bodies[:rows])
            conn.execute("VACUUM (ANALYZE) pyretrieve.fragments")
            conn.execute("VACUUM (ANALYZE) pyretrieve.embeddings")
        yield url, principals, measured_on, dict(sorted(projects.items()))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", default="200,1000,5183", help="scope sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--dsn", help="a fresh database (superuser); default: a throwaway server")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.rows.split(",")]
    with scopes(args.dsn, "wall", sizes) as (dsn, principals, measured_on, projects):
        figures = measure(dsn, principals, projects, round_trips.claims(DATASETS)[: args.queries])
    result = {
        "benchmark": "the read functions under RLS against their twins without it",
        **measured_on,
        "settings": {
            "rows": list(projects),
            "queries": args.queries,
            "candidates": CANDIDATES,
            "functions": FUNCTIONS,
            "text": "SciFact abstracts and claims, random 384-d embeddings",
            "order": "per claim, one transaction per arm, each arm on its own connection, in a rotating order",
        },
        "scopes": figures,
        "load_average_at_end": load_average(),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
