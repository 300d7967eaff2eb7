"""Bulk ingestion at the installed schema against an earlier schema revision, interleaved.

Usage: python -m evals.bench.ingest_revisions --dsn DSN [--baseline pyretrieve_0016]
       [--n 1000] [--rounds 10] [--embeddings] [--one-scope] [--corpus PATH] [--out PATH]

Two databases of the server at ``--dsn`` (a superuser DSN; its database is only used to create
and drop them) get the schema: one upgraded to ``--baseline``, one to the head. Each round
ingests the same N records (SciFact abstracts by default, as ``evals.bench.ingest`` builds
them) into a fresh project of each database through ``Ingestor.ingest_path`` on the bulk path,
as a writer (RLS on), alternating which goes first. The server backend's CPU time per batch is
the figure that other load on a shared machine disturbs least; wall time is kept beside it.
With ``--embeddings`` every record also carries a precomputed 384-d unit vector, written in
the same batch (default output ``ingest-revisions-embeddings.json``). With ``--one-scope`` every
round writes the next N records into the same project of each database, so the scope grows and
each batch joins an index that holds the earlier ones (default output
``ingest-revisions-one-scope.json``). With ``--stale-statistics`` (and ``--one-scope``) each
database first gets N other records in a project of their own, then ``ANALYZE`` and autovacuum
off on ``fragments``: the planner's statistics know nothing of the growing scope, as in a large
shared table where a new scope grows long before the next automatic analysis. Writes
``evals/bench/ingest-revisions.json`` with the medians per 1,000 fragments and their ratio, the
commit, settings and load. A measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import tempfile
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo, sql

from evals.bench import ingest
from evals.bench.runtime import load_average, provenance
from pyretrieve.db import migrate

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "ingest-revisions.json"
OUT_EMBEDDINGS = ROOT / "evals" / "bench" / "ingest-revisions-embeddings.json"
OUT_ONE_SCOPE = ROOT / "evals" / "bench" / "ingest-revisions-one-scope.json"


def _database(dsn: str, name: str) -> str:
    return conninfo.make_conninfo(dsn, dbname=name)


def _prepare(dsn: str, name: str, revision: str | None) -> str:
    """A new database at ``revision`` (the head when None) with the bench's writer."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = _database(dsn, name)
    if revision is None:
        migrate.upgrade(url)
    else:
        migrate.upgrade(url, revision)
    ingest.setup(url, [])
    return url


def _project(url: str) -> str:
    project = f"r{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pyretrieve.create_project(%s, %s)", (ingest.WORKSPACE, project))
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'ingest', 'internal')",
            (ingest.WRITER, ingest.WORKSPACE, project),
        )
    return project


def _stale_statistics(url: str, corpus: Path, batch: int) -> None:
    """``corpus`` written into a project of its own, then statistics taken and kept."""
    _round(url, corpus, batch, None)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE pyretrieve.fragments")
        conn.execute("ALTER TABLE pyretrieve.fragments SET (autovacuum_enabled = off)")


def _slices(corpus: Path, n: int, rounds: int) -> list[Path]:
    """The corpus file cut into ``rounds`` files of ``n`` records each, beside it."""
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    out = []
    for r in range(rounds):
        part = corpus.with_name(f"round{r}.jsonl")
        part.write_text("".join(lines[r * n : (r + 1) * n]), encoding="utf-8")
        part.chmod(0o644)
        out.append(part)
    return out


def _round(
    url: str,
    corpus: Path,
    batch: int,
    embedder: ingest.PrecomputedEmbedder | None,
    project: str | None = None,
) -> dict[str, Any]:
    project = project or _project(url)
    report, server, _ = ingest.timed(
        url, corpus, project, path="bulk", batch_size=batch, embedder=embedder
    )
    if report.inserted != report.read:
        raise SystemExit(f"{report.inserted} of {report.read} records written")
    if embedder is not None and report.embedded != report.read:
        raise SystemExit(f"{report.embedded} of {report.read} records embedded")
    return {"fragments": report.read, "seconds": report.seconds, "server_cpu_s": server}


def _per_thousand(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] / r["fragments"] * 1000 for r in runs if r[key] is not None]
    return round(statistics.median(values), 4) if values else None


def _total_per_thousand(runs: list[dict[str, Any]]) -> float | None:
    """Server CPU seconds per 1,000 fragments over every round together."""
    if not runs or any(r["server_cpu_s"] is None for r in runs):
        return None
    fragments = int(sum(r["fragments"] for r in runs))
    seconds = float(sum(r["server_cpu_s"] for r in runs))
    return round(seconds / fragments * 1000, 4)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="a superuser DSN of the server to use")
    parser.add_argument("--baseline", default="pyretrieve_0016", help="an Alembic revision")
    parser.add_argument("--n", type=int, default=1000, help="records per round and database")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--embeddings", action="store_true", help="each record with a precomputed 384-d vector"
    )
    parser.add_argument(
        "--one-scope",
        action="store_true",
        help="every round writes the next n records into one project per database",
    )
    parser.add_argument(
        "--stale-statistics",
        action="store_true",
        help="with --one-scope: statistics taken before the scope held a row, and kept",
    )
    parser.add_argument("--corpus", type=Path, default=ingest.DEFAULT_CORPUS)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.stale_statistics and not args.one_scope:
        parser.error("--stale-statistics needs --one-scope")
    out = args.out or (
        OUT_ONE_SCOPE if args.one_scope else OUT_EMBEDDINGS if args.embeddings else OUT
    )
    names = {side: f"pyretrieve_ingrev_{side}_{secrets.token_hex(3)}" for side in ("b", "c")}
    runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "current": []}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "records.jsonl"
        # With stale statistics, one slice more: the other scope's records.
        total = args.n * ((args.rounds + args.stale_statistics) if args.one_scope else 1)
        corpus_info, bodies = ingest.build_corpus(args.corpus, total, corpus)
        embedder = (
            ingest.PrecomputedEmbedder(ingest.MODEL_NO_INDEX, ingest.vectors_for(bodies))
            if args.embeddings
            else None
        )
        corpus.chmod(0o644)
        Path(tmp).chmod(0o755)
        try:
            urls = {
                "baseline": _prepare(args.dsn, names["b"], args.baseline),
                "current": _prepare(args.dsn, names["c"], None),
            }
            with psycopg.connect(urls["current"]) as conn:
                measured_on = provenance(conn)
            scopes = {side: _project(url) for side, url in urls.items()} if args.one_scope else {}
            files = (
                _slices(corpus, args.n, args.rounds + args.stale_statistics)
                if args.one_scope
                else []
            )
            if args.stale_statistics:
                seed = files.pop()
                for url in urls.values():
                    _stale_statistics(url, seed, args.n)
            for r in range(args.rounds):
                for side in ("baseline", "current") if r % 2 else ("current", "baseline"):
                    runs[side].append(
                        _round(
                            urls[side],
                            files[r] if files else corpus,
                            args.n,
                            embedder,
                            scopes.get(side),
                        )
                    )
        finally:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                for name in names.values():
                    conn.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            sql.Identifier(name)
                        )
                    )
    medians = {
        side: {
            "server_cpu_s_per_1000": _per_thousand(got, "server_cpu_s"),
            "wall_s_per_1000": _per_thousand(got, "seconds"),
        }
        for side, got in runs.items()
    }
    base, cur = (medians[s]["server_cpu_s_per_1000"] for s in ("baseline", "current"))
    # All rounds summed: in one growing scope a run that compacts costs more than one that
    # does not, which a median hides.
    totals = {side: _total_per_thousand(got) for side, got in runs.items()}
    result = {
        "benchmark": "bulk ingestion: the installed schema against an earlier revision",
        **measured_on,
        "settings": {
            "baseline": args.baseline,
            "n": args.n,
            "rounds": args.rounds,
            "corpus": corpus_info,
            "path": "Ingestor.ingest_path, bulk path, one batch of n, as a writer (RLS on),"
            + (
                " the next n records into one growing project per database each round,"
                if args.one_scope
                else " a fresh project per round,"
            )
            + " alternating which database goes first",
            "statistics": (
                "taken once before the rounds, with n other records in a project of their own"
                " and none of the growing one; autovacuum off on fragments"
                if args.stale_statistics
                else "as autovacuum keeps them"
            ),
            "embeddings": (
                f"precomputed {ingest.DIMENSION}-d unit vectors of model {ingest.MODEL_NO_INDEX}"
                " (no per-model index), in the same batches"
                if args.embeddings
                else None
            ),
        },
        "runs": runs,
        "median": medians,
        "server_cpu_ratio_current_to_baseline": round(cur / base, 3) if base and cur else None,
        "total": totals,
        "server_cpu_total_ratio_current_to_baseline": (
            round(totals["current"] / totals["baseline"], 3)
            if totals["baseline"] and totals["current"]
            else None
        ),
        "load_average_at_end": load_average(),
    }
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(medians))
    return result


if __name__ == "__main__":
    main()
