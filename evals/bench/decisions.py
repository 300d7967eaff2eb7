"""What the read decision costs a search: its insert, its commit, and the look-ups of it, on the
monthly-partitioned log (head) against the single table of 0006, in the same run, on a
throwaway embedded PostgreSQL server with its tuned defaults.

Usage: python evals/bench/decisions.py [--iterations 400] [--history 200000] [--out PATH]

Each database gets a reader, a grant and ``--history`` past decisions spread over four months
(the 0006 table holds them in one table, head in four monthly partitions), then, one client,
the variants interleaved round by round so that other load falls on all alike:

* ``no decision``: BEGIN, SET LOCAL ROLE, ``schema_version()``, COMMIT: a transaction that
  writes nothing (the floor of any request);
* ``authorize, rollback``: the decision is inserted and thrown away: authorize's own cost;
* ``authorize, commit``: the decision is durable when COMMIT returns (the shipped behaviour);
* ``authorize, commit, synchronous_commit off``: COMMIT returns before the WAL is flushed; a
  crash in the next few hundred milliseconds would lose the decision (not the default);
* ``authorize, 3 look-ups, commit``: three calls that find the decision of the transaction
  again (``fragments(decision, '{}')``), as the legs of a search do.

Writes ``evals/bench/decisions.json`` (p50, p95 in ms per variant and database, the derived
insert and commit costs, git commit, settings, machine, load). A measurement, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pyretrieve import embedded  # noqa: E402
from pyretrieve.db import migrate  # noqa: E402

READER = "pyretrieve_bench_reader"
WS, PJ = "bench", "docs"
DIGEST = hashlib.sha256(b"query").digest()
AUTHORIZE = "SELECT decision_id FROM pyretrieve.authorize(%s, %s, 'read', %s, 'optional', NULL, 10)"


def _show(conn: psycopg.Connection[Any], name: str) -> str:
    row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
    assert row is not None
    return str(row[0])


def prepare(admin: str, database: str, revision: str, history: int) -> str:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (READER,)).fetchone():
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(READER)))
    dsn = make_conninfo(admin, dbname=database)
    migrate.upgrade(dsn, revision)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("GRANT pyretrieve_reader TO {}").format(sql.Identifier(READER)))
        conn.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
        conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, PJ))
        grant = conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'read', 'internal')",
            (READER, WS, PJ),
        ).fetchone()
        assert grant is not None
        partitioned = conn.execute(
            "SELECT relkind = 'p' FROM pg_class WHERE oid = 'pyretrieve.decisions'::regclass"
        ).fetchone()
        if partitioned and partitioned[0]:
            conn.execute("SET ROLE pyretrieve_owner")
            conn.execute(
                "SELECT count(*) FROM pyretrieve.ensure_decision_partitions("
                "p_from => now() - interval '4 months')"
            )
            conn.execute("RESET ROLE")
        conn.execute(
            "INSERT INTO pyretrieve.decisions (workspace_id, principal, project_id, purpose,"
            " grant_id, evaluated_at, ceiling, semantic_policy, requested_limit, candidate_limit,"
            " query_digest, semantic_intent, xact_id)"
            " SELECT %s, %s, %s, 'read', %s, now() - (i %% 120) * interval '1 day'"
            "        - (i %% 86400) * interval '1 second', 'internal', 'optional', 10, 100,"
            "        sha256(i::text::bytea), 'optional', (i + 3)::text::xid8"
            " FROM generate_series(1, %s) i",
            (WS, READER, PJ, grant[0], history),
        )
        conn.execute("VACUUM ANALYZE pyretrieve.decisions")
    return dsn


def variants() -> dict[str, Callable[[psycopg.Connection[Any]], None]]:
    def begin(conn: psycopg.Connection[Any]) -> None:
        conn.execute("BEGIN")
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(READER)))

    def no_decision(conn: psycopg.Connection[Any]) -> None:
        begin(conn)
        conn.execute("SELECT pyretrieve.schema_version()")
        conn.execute("COMMIT")

    def rollback(conn: psycopg.Connection[Any]) -> None:
        begin(conn)
        conn.execute(AUTHORIZE, (WS, PJ, DIGEST))
        conn.execute("ROLLBACK")

    def commit(conn: psycopg.Connection[Any]) -> None:
        begin(conn)
        conn.execute(AUTHORIZE, (WS, PJ, DIGEST))
        conn.execute("COMMIT")

    def commit_async(conn: psycopg.Connection[Any]) -> None:
        begin(conn)
        conn.execute("SET LOCAL synchronous_commit = off")
        conn.execute(AUTHORIZE, (WS, PJ, DIGEST))
        conn.execute("COMMIT")

    def lookups(conn: psycopg.Connection[Any]) -> None:
        begin(conn)
        row = conn.execute(AUTHORIZE, (WS, PJ, DIGEST)).fetchone()
        assert row is not None
        for _ in range(3):
            conn.execute("SELECT count(*) FROM pyretrieve.fragments(%s, '{}')", (row[0],))
        conn.execute("COMMIT")

    return {
        "no decision": no_decision,
        "authorize, rollback": rollback,
        "authorize, commit": commit,
        "authorize, commit, synchronous_commit off": commit_async,
        "authorize, 3 look-ups, commit": lookups,
    }


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_ms": round(1000 * statistics.median(ordered), 3),
        "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 3),
        "mean_ms": round(1000 * statistics.fmean(ordered), 3),
    }


def git_commit() -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--history", type=int, default=200_000)
    parser.add_argument("--out", type=Path, default=ROOT / "evals" / "bench" / "decisions.json")
    args = parser.parse_args()

    load_before = os.getloadavg()
    base = Path(tempfile.mkdtemp(prefix="pyretrieve-bench-"))
    os.chmod(base, 0o755)
    samples: dict[str, dict[str, list[float]]] = {}
    try:
        url = embedded.start(base)
        admin = make_conninfo(url, dbname="postgres")
        dsns = {
            "head (monthly partitions)": prepare(
                admin, "bench_head", f"{migrate.BRANCH}@head", args.history
            ),
            "0006 (one table)": prepare(admin, "bench_0006", "pyretrieve_0006", args.history),
        }
        with psycopg.connect(url) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            settings = {
                name: _show(conn, name)
                for name in (*embedded.MEMORY_SETTINGS, "synchronous_commit", "wal_sync_method")
            }
        conns = {name: psycopg.connect(dsn, autocommit=True) for name, dsn in dsns.items()}
        try:
            runs = variants()
            for db in dsns:
                samples[db] = {v: [] for v in runs}
            for i in range(args.warmup + args.iterations):
                for db, conn in conns.items():
                    for name, run in runs.items():
                        started = time.perf_counter()
                        run(conn)
                        if i >= args.warmup:
                            samples[db][name].append(time.perf_counter() - started)
        finally:
            for conn in conns.values():
                conn.close()
    finally:
        embedded.stop(base)
        shutil.rmtree(base, ignore_errors=True)

    results = {db: {v: summary(s) for v, s in by.items()} for db, by in samples.items()}
    derived = {}
    for db, r in results.items():
        derived[db] = {
            "decision_insert_p50_ms": round(
                r["authorize, rollback"]["p50_ms"] - r["no decision"]["p50_ms"], 3
            ),
            "durable_commit_p50_ms": round(
                r["authorize, commit"]["p50_ms"] - r["authorize, rollback"]["p50_ms"], 3
            ),
            "async_commit_p50_ms": round(
                r["authorize, commit, synchronous_commit off"]["p50_ms"]
                - r["authorize, rollback"]["p50_ms"],
                3,
            ),
            "three_lookups_p50_ms": round(
                r["authorize, 3 look-ups, commit"]["p50_ms"] - r["authorize, commit"]["p50_ms"], 3
            ),
        }
    out = {
        "benchmark": "decisions",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_1m_before": round(load_before[0], 2),
            "load_average_1m_after": round(os.getloadavg()[0], 2),
        },
        "settings": {
            "iterations": args.iterations,
            "warmup": args.warmup,
            "history_decisions": args.history,
            "server": f"embedded PostgreSQL {version[0] if version else '?'}",
            "server_settings": settings,
            "client": "one connection per database, psycopg, one statement per round trip",
        },
        "results": results,
        "derived": derived,
    }
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(derived, indent=2), file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
