"""A new install where autovacuum is off: what its calls cost after the first load, the head
against an earlier revision, in one run.

Usage: python -m evals.bench.first_statistics --dsn DSN [--baseline pyretrieve_0046]
       [--n 3000] [--batch 500] [--searches 100] [--out PATH]

Two new databases of the server at ``--dsn`` (a superuser DSN; its own database is only used to
create and drop them) get the schema, one at ``--baseline`` and one at the head, with
autovacuum off on the five tables ``take_first_statistics`` covers: the state of a new install
before autovacuum's first analyse, and for good where autovacuum is off. Each gets the same
``--n`` SciFact abstracts in one scope through ``Ingestor`` (bulk path, batches of ``--batch``,
as a writer). Then, the databases taking turns call by call, each of ``--searches`` SciFact
claims is searched (SQL ``pyretrieve.search``, lexical, 10 results, as a reader), and every
tenth search is followed by a writer's duplicate ``put_fragment`` and a ``retract_fragment``.
Each call runs in its own transaction; its wall time and the fragment rows it read
(``pg_stat_xact_all_tables``: index fetches and sequential reads) are recorded. Rows, unlike
milliseconds, do not depend on the machine's load.

Writes ``evals/bench/first-statistics.json``: per database the load's time, the tables
analysed, and per call kind the p50/p95 milliseconds and the median and largest rows read, with
the head's p50 over the baseline's; the commit, settings and load. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import gzip
import json
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from evals.bench import ingest, ingest_revisions
from evals.bench.runtime import (
    DATASETS,
    acting_as,
    load_average,
    provenance,
    rows_read,
    summary_ms,
)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "first-statistics.json"
READER = "pyretrieve_bench_reader"
PROJECT = "first"
TABLES = ("fragments", "lexical_blocks", "lexical_pages", "lexical_tombstones", "embeddings")
CALLS = ("search", "put_duplicate", "retract")


def _prepare(dsn: str, name: str, revision: str | None) -> str:
    """A database at ``revision`` with the bench's writer and reader on one project, and
    autovacuum off on the tables before they hold a row."""
    url = ingest_revisions._prepare(dsn, name, revision)
    with psycopg.connect(url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (READER,)).fetchone():
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(READER)))
            conn.execute(sql.SQL("GRANT pyretrieve_reader TO {}").format(sql.Identifier(READER)))
        conn.execute("SELECT pyretrieve.create_project(%s, %s)", (ingest.WORKSPACE, PROJECT))
        for role, purpose in ((ingest.WRITER, "ingest"), (READER, "qa")):
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, %s, 'internal')",
                (role, ingest.WORKSPACE, PROJECT, purpose),
            )
        for table in TABLES:
            conn.execute(
                sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = off)").format(
                    sql.Identifier("pyretrieve", table)
                )
            )
    return url


def _analysed(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT relname, analyze_count + autoanalyze_count FROM pg_stat_user_tables"
            " WHERE schemaname = 'pyretrieve' AND relname = ANY(%s) ORDER BY relname",
            (list(TABLES),),
        ).fetchall()
    return {str(name): int(n) for name, n in rows}


def _call(
    conn: psycopg.Connection[Any], role: str, statement: str, params: tuple[Any, ...]
) -> tuple[float, int]:
    """One call in a transaction of its own, as ``role``: seconds, fragment rows read."""
    with acting_as(conn, role), rows_read(conn) as read:
        started = time.perf_counter()
        conn.execute(statement, params).fetchall()
        spent = time.perf_counter() - started
    return spent, read.get("pyretrieve.fragments", 0)


_SEARCH = "SELECT * FROM pyretrieve.search(%s, %s, 'qa', %s, p_limit := 10, p_mode := 'lexical')"
_PUT = "SELECT pyretrieve.put_fragment(%s, %s, %s, 'internal')"
_RETRACT = "SELECT pyretrieve.retract_fragment(%s, %s, %s)"


def _claims(n: int) -> list[str]:
    path = DATASETS / "scifact" / "queries.jsonl"
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f][:n]


def _victims(url: str, k: int) -> tuple[list[str], list[str]]:
    """Bodies to put again and bodies whose fragments to retract, ``k`` each: the databases
    hold the same abstracts, so both get the same calls."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT body FROM pyretrieve.fragments WHERE project_id = %s"
            " ORDER BY content_digest LIMIT %s",
            (PROJECT, 2 * k),
        ).fetchall()
    return [r[0] for r in rows[:k]], [r[0] for r in rows[k:]]


def _ids(url: str, bodies: list[str]) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [
            conn.execute(
                "SELECT fragment_id FROM pyretrieve.fragments WHERE project_id = %s AND body = %s",
                (PROJECT, body),
            ).fetchone()[0]  # type: ignore[index]
            for body in bodies
        ]


def _measure(urls: dict[str, str], searches: int) -> dict[str, dict[str, list[float]]]:
    claims = _claims(searches)
    puts, gone = _victims(urls["current"], (searches + 9) // 10)
    retract = {side: _ids(url, gone) for side, url in urls.items()}
    got: dict[str, dict[str, list[float]]] = {
        side: {f"{c}_{m}": [] for c in CALLS for m in ("s", "rows")} for side in urls
    }
    conns = {side: psycopg.connect(url, autocommit=True) for side, url in urls.items()}
    try:
        for i, claim in enumerate(claims):
            order = ("baseline", "current") if i % 2 else ("current", "baseline")
            for side in order:
                calls = [("search", READER, _SEARCH, (ingest.WORKSPACE, PROJECT, claim))]
                if i % 10 == 0:
                    calls += [
                        ("put_duplicate", ingest.WRITER, _PUT,
                         (ingest.WORKSPACE, PROJECT, puts[i // 10])),
                        ("retract", ingest.WRITER, _RETRACT,
                         (ingest.WORKSPACE, PROJECT, retract[side][i // 10])),
                    ]  # fmt: skip
                for name, role, statement, params in calls:
                    spent, rows = _call(conns[side], role, statement, params)
                    got[side][f"{name}_s"].append(spent)
                    got[side][f"{name}_rows"].append(rows)
    finally:
        for conn in conns.values():
            conn.close()
    return got


def _summary(got: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for call in CALLS:
        rows = got[f"{call}_rows"]
        out[call] = {
            "ms": summary_ms(got[f"{call}_s"]),
            "fragment_rows_read": {"median": statistics.median(rows), "max": max(rows)},
        }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="a superuser DSN of the server to use")
    parser.add_argument("--baseline", default="pyretrieve_0046", help="an Alembic revision")
    parser.add_argument("--n", type=int, default=3000, help="records loaded into each database")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--searches", type=int, default=100)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    names = {side: f"pyretrieve_first_{side}_{secrets.token_hex(3)}" for side in ("b", "c")}
    loads: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "records.jsonl"
        corpus_info, _ = ingest.build_corpus(ingest.DEFAULT_CORPUS, args.n, corpus)
        corpus.chmod(0o644)
        Path(tmp).chmod(0o755)
        try:
            urls = {
                "baseline": _prepare(args.dsn, names["b"], args.baseline),
                "current": _prepare(args.dsn, names["c"], None),
            }
            with psycopg.connect(urls["current"]) as conn:
                measured_on = provenance(conn)
            for side, url in urls.items():
                report, server, _ = ingest.timed(
                    url, corpus, PROJECT, path="bulk", batch_size=args.batch
                )
                loads[side] = {
                    "fragments": report.inserted,
                    "seconds": round(report.seconds, 3),
                    "server_cpu_s": None if server is None else round(server, 3),
                    "analysed_after_load": _analysed(url),
                }
            got = _measure(urls, args.searches)
            for side, url in urls.items():
                loads[side]["analysed_at_end"] = _analysed(url)
        finally:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                for name in names.values():
                    conn.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            sql.Identifier(name)
                        )
                    )
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(READER)))
    calls = {side: _summary(v) for side, v in got.items()}
    result = {
        "benchmark": "a new install with autovacuum off: calls after the first load",
        **measured_on,
        "settings": {
            "baseline": args.baseline,
            "n": args.n,
            "batch": args.batch,
            "searches": args.searches,
            "corpus": corpus_info,
            "autovacuum": "off on " + ", ".join(TABLES) + " from before the first row",
            "calls": "SQL search (lexical, 10 results) per claim as a reader; every tenth"
            " claim also a writer's duplicate put_fragment and a retract_fragment; each call"
            " its own transaction; the databases take turns call by call",
        },
        "load": loads,
        "calls": calls,
        "current_over_baseline_p50": {
            c: round(
                float(calls["current"][c]["ms"]["p50"]) / float(calls["baseline"][c]["ms"]["p50"]),
                3,
            )
            for c in CALLS
        },
        "load_average_at_end": load_average(),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for side in ("baseline", "current"):
        print(
            side,
            loads[side]["analysed_after_load"],
            {c: (calls[side][c]["ms"]["p50"], calls[side][c]["fragment_rows_read"]) for c in CALLS},
        )
    return result


if __name__ == "__main__":
    main()
