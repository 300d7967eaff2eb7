"""A request's grant look-ups at one revision against another, with many principals granted the
same project.

Usage: python -m evals.bench.grant_lookups [--baseline pyretrieve_0043] [--target REV]
       [--crowds 0,1000,5000] [--calls 300] [--server-dsn DSN] [--out PATH]

A workspace may grant one project to thousands of principals, one grant each. Per crowd size,
one server holds two databases, both ``CREATE DATABASE ... TEMPLATE`` copies of a third that is
migrated to ``--baseline`` and given the crowd's grants (each crowd role to read and to write
``acme/docs``) beside a reader's and a writer's own; the second copy is then migrated to
``--target`` (default: the head), and both are analysed. The reader calls ``authorize`` and the
writer ``put_fragment`` (each in a transaction rolled back afterwards), the two databases
alternating which goes first. Each call also counts the rows of the grants and of the
cluster's roles (``pg_authid``) its transaction read (``pg_stat_xact_all_tables``).

Writes p50/p95 per revision, crowd and call, the median of the per-pair ratios with a bootstrap
95% interval, and the rows of the grants and of the roles read per call, to ``evals/bench/grant-lookups.json`` with the
commit, machine and load. A measurement, not a test; the databases and roles are dropped at the
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

from evals.bench.runtime import (
    Principals,
    load_average,
    paired_ratio,
    provenance,
    rows_read,
    server_or_throwaway,
    summary_ms,
)
from pyretrieve.db import migrate

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "grant-lookups.json"
PURPOSE = "bench"
GRANT = "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', %s, 'internal')"
CALLS = {
    "authorize": (
        "reader",
        "SELECT * FROM pyretrieve.authorize('acme', 'docs', 'bench',"
        " pyretrieve.content_digest('q'), 'optional', NULL, 10)",
    ),
    "put_fragment": (
        "writer",
        "SELECT pyretrieve.put_fragment('acme', 'docs', 'a note of the bench', 'internal')",
    ),
}


@contextlib.contextmanager
def _crowd(server: str, size: int, tag: str) -> Iterator[list[str]]:
    """``size`` NOLOGIN roles of this run, dropped afterwards."""
    names = [f"pyretrieve_glk_{tag}_{i}" for i in range(size)]
    try:
        with psycopg.connect(server, autocommit=True) as admin:
            for name in names:
                admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(name)))
        yield names
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            for name in names:
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def _grant_all(conn: psycopg.Connection[Any], principals: Principals, crowd: list[str]) -> None:
    conn.execute("SELECT pyretrieve.create_workspace('acme')")
    conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
    for name in crowd:
        quoted = sql.Identifier(name).as_string(conn)
        conn.execute(GRANT, (quoted, PURPOSE))
        conn.execute(GRANT, (quoted, "ingest"))
    conn.execute(GRANT, (principals.reader, PURPOSE))
    conn.execute(GRANT, (principals.writer, "ingest"))


@contextlib.contextmanager
def _databases(
    server: str, args: argparse.Namespace, principals: Principals, crowd: list[str]
) -> Iterator[list[str]]:
    """The baseline and the target copies of one database holding the crowd's grants."""
    tag = secrets.token_hex(3)
    names = [f"grant_lookups_{tag}_{n}" for n in ("source", "base", "head")]
    dsns = [make_conninfo(server, dbname=n) for n in names]
    try:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(names[0])))
        migrate.upgrade(dsns[0], args.baseline)
        with psycopg.connect(dsns[0]) as conn:
            _grant_all(conn, principals, crowd)
        with psycopg.connect(server, autocommit=True) as admin:
            for name in names[1:]:
                admin.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(names[0])
                    )
                )
        if args.target:
            migrate.upgrade(dsns[2], args.target)
        else:
            migrate.upgrade(dsns[2])
        for dsn in dsns[1:]:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
        yield dsns[1:]
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            for name in names:
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )


def _timed(conn: psycopg.Connection[Any], role: str, statement: str) -> tuple[float, int, int]:
    """One call as ``role`` in a transaction rolled back afterwards: seconds, and the rows of
    the grants and of the cluster's roles (pg_authid) it read."""
    with conn.transaction(force_rollback=True):
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
        with rows_read(conn) as read:
            started = time.perf_counter()
            conn.execute(statement).fetchall()
            seconds = time.perf_counter() - started
    return seconds, read.get("pyretrieve.grants", 0), read.get("pg_catalog.pg_authid", 0)


def _measure(dsns: list[str], principals: Principals, calls: int) -> dict[str, Any]:
    conns = [psycopg.connect(d, autocommit=True) for d in dsns]
    out: dict[str, Any] = {}
    try:
        for name, (who, statement) in CALLS.items():
            role = getattr(principals, who)
            for conn in conns:  # warm: a session's first calls plan
                for _ in range(10):
                    _timed(conn, role, statement)
            times: list[list[float]] = [[], []]
            grants: list[set[int]] = [set(), set()]
            roles: list[set[int]] = [set(), set()]
            for turn in range(calls):
                for side in (0, 1) if turn % 2 == 0 else (1, 0):
                    seconds, grant_rows, role_rows = _timed(conns[side], role, statement)
                    times[side].append(seconds)
                    grants[side].add(grant_rows)
                    roles[side].add(role_rows)
            base, head = summary_ms(times[0]), summary_ms(times[1])
            out[name] = {
                "baseline": {
                    **base,
                    "grant_rows_read": sorted(grants[0]),
                    "role_rows_read": sorted(roles[0]),
                },
                "current": {
                    **head,
                    "grant_rows_read": sorted(grants[1]),
                    "role_rows_read": sorted(roles[1]),
                },
                "paired_ratio_current_to_baseline": paired_ratio(
                    times[1], times[0], np.random.default_rng(calls)
                ),
            }
    finally:
        for conn in conns:
            conn.close()
    return out


def run(args: argparse.Namespace, server: str) -> dict[str, Any]:
    crowds = sorted(int(s) for s in args.crowds.split(","))
    tag = secrets.token_hex(3)
    with psycopg.connect(server, autocommit=True) as admin:
        principals = Principals.create(admin, "glk")
    figures: dict[str, Any] = {}
    measured_on: dict[str, Any] = {}
    try:
        with _crowd(server, max(crowds), tag) as everyone:
            for size in crowds:
                with _databases(server, args, principals, everyone[:size]) as dsns:
                    with psycopg.connect(dsns[1], autocommit=True) as plain:
                        measured_on = measured_on or provenance(plain)
                    figures[str(size)] = _measure(dsns, principals, args.calls)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            principals.drop(admin)
    return {
        "benchmark": "grant look-ups of a request with many principals granted the same project",
        **measured_on,
        "settings": {
            "baseline": args.baseline,
            "target": args.target or "head",
            "crowds": crowds,
            "calls": args.calls,
            "grants": "each crowd role to read (purpose bench) and to write (ingest) acme/docs",
            "order": "the two databases alternate which goes first; each call rolled back",
        },
        "crowds": figures,
        "load_average_at_end": load_average(),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--baseline", default="pyretrieve_0043")
    parser.add_argument("--target", help="the revision compared (default: the head)")
    parser.add_argument("--crowds", default="0,1000,5000")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--server-dsn", help="a superuser DSN; default: a throwaway server")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    with server_or_throwaway(args.server_dsn) as server:
        result = run(args, server)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for size, calls in result["crowds"].items():
        for name, f in calls.items():
            print(
                f"{size:>6} others {name:>12}: p50 {f['baseline']['p50']} ->"
                f" {f['current']['p50']} ms, paired {f['paired_ratio_current_to_baseline']},"
                f" grant rows {f['baseline']['grant_rows_read']} ->"
                f" {f['current']['grant_rows_read']}, role rows {f['baseline']['role_rows_read']}"
                f" -> {f['current']['role_rows_read']}"
            )
    return result


if __name__ == "__main__":
    main()
