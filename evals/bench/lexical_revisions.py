"""The installed lexical leg against an earlier revision's, on the same data, interleaved.

Usage: python -m evals.bench.lexical_revisions --dsn DSN --workspace W --project P
       --queries FILE [--baseline REV | --baseline-dsn DSN] [--limit-queries N] [--out PATH]

The database must hold a populated scope (for example one kept by ``python -m evals.quality
--keep``). The run installs ``lexical_candidates`` as it was at ``--baseline`` (read from git)
beside the current one, under another name and owned by ``pyretrieve_api`` like the original,
grants a throwaway reader the scope, and then, query by query, calls both under one decision,
alternating which goes first. Every pair of results must be identical, rows, scores and terms;
the run stops on the first difference. Writes p50/p95 per revision and the ratio
(``evals/bench/lexical-revisions.json``), with the commit, settings, machine and load. A
measurement, not a test; the baseline function and the reader are dropped at the end.

A change of the tables or indexes, not only of the function, is measured with
``--baseline-dsn``: a second database of the same server holding the same data at the earlier
schema (for example a ``CREATE DATABASE ... TEMPLATE`` copy made before upgrading the first).
Each query is then authorised in both databases and the two installed legs are called in
turn, alternating which goes first, on two connections. Two databases loaded apart (each
through its own schema's write path, where what changed is how the index is written) give
their fragments ids and generations of their own: ``--by-content`` compares each row by its
rank, content digest, score and terms, which for a corpus of distinct texts is the same test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from evals.bench.runtime import (
    LEXICAL_TABLES,
    acting_as,
    gin_index_bytes,
    load_average,
    provenance,
    summary_ms,
)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "lexical-revisions.json"
BASELINE_NAME = "lexical_candidates_baseline"
SIGNATURE = "(uuid, text, integer, text)"
LIMIT = 100


def baseline_function(
    rev: str, function: str = "lexical_candidates", renamed: str = BASELINE_NAME
) -> str:
    """``function``'s CREATE statement in ``sql/schema/40_read_api.sql`` at ``rev``, renamed."""
    source = subprocess.run(
        ["git", "show", f"{rev}:sql/schema/40_read_api.sql"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    match = re.search(rf"CREATE FUNCTION pyretrieve\.{function}\(.*?\n\$\$;\n", source, flags=re.S)
    if match is None:
        raise SystemExit(f"no {function} in {rev}")
    return match.group(0).replace(f"pyretrieve.{function}(", f"pyretrieve.{renamed}(", 1)


def _queries(path: Path, limit: int) -> list[str]:
    texts = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                texts.append(str(json.loads(line)["text"]))
    return texts[:limit]


def _install_function(
    conn: psycopg.Connection[Any], create: str, signature: str = BASELINE_NAME + SIGNATURE
) -> None:
    """Create a function as pyretrieve_api (which owns the API, so RLS applies alike) and let
    readers call it."""
    conn.execute("GRANT CREATE ON SCHEMA pyretrieve TO pyretrieve_api")
    conn.execute("SET ROLE pyretrieve_api")
    conn.execute(create)
    conn.execute("RESET ROLE")
    conn.execute("REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api")
    conn.execute(f"GRANT EXECUTE ON FUNCTION pyretrieve.{signature} TO pyretrieve_reader")


def _create_reader(conn: psycopg.Connection[Any], reader: str) -> None:
    conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(reader)))
    conn.execute(sql.SQL("GRANT pyretrieve_reader TO {}").format(sql.Identifier(reader)))


def _grant(conn: psycopg.Connection[Any], reader: str, args: Any) -> None:
    conn.execute(
        "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'compare', 'restricted')",
        (reader, args.workspace, args.project),
    )


def _revoke(
    conn: psycopg.Connection[Any],
    reader: str,
    args: Any,
    signature: str = BASELINE_NAME + SIGNATURE,
) -> None:
    """Drop the baseline function and the reader's grant."""
    conn.execute(f"DROP FUNCTION IF EXISTS pyretrieve.{signature}")
    conn.execute(
        "SELECT pyretrieve.revoke_access(%s::regrole, %s, %s, 'compare')",
        (reader, args.workspace, args.project),
    )


def _database_name(dsn: str) -> str:
    """The database a DSN names and its installed schema version, for the settings."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT current_database(), (SELECT schema_version FROM pyretrieve.installation)"
        ).fetchone()
    assert row is not None
    return f"database {row[0]} (schema {row[1]})"


# The lexical index of every revision (runtime.LEXICAL_TABLES): a row per posting (up to 0020),
# or blocks, their tombstones and the fragments' document-number key (0021), and pages (0022).
def _lexical_storage(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Bytes of the lexical index's tables (with their TOAST) and of each of their indexes,
    and of the fragments' document-number key where there is one."""
    rows = conn.execute(
        "SELECT c.relname::text, pg_table_size(c.oid) FROM pg_class c"
        " WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind = 'r'"
        "   AND c.relname = ANY (%s)"
        " UNION ALL"
        " SELECT i.relname::text, pg_relation_size(i.oid) FROM pg_index x"
        "   JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid"
        " WHERE t.relnamespace = 'pyretrieve'::regnamespace"
        "   AND (t.relname = ANY (%s) OR i.relname = 'fragments_docno_key')"
        " ORDER BY 1",
        (list(LEXICAL_TABLES), list(LEXICAL_TABLES)),
    ).fetchall()
    return {str(name): int(size) for name, size in rows}


def _against_gin(current: dict[str, int], gin: int) -> dict[str, Any]:
    """The current lexical index's bytes against a GIN index over the same fragments' text."""
    total = sum(current.values())
    return {
        "gin_index_bytes": gin,
        "current_lexical_bytes": total,
        "current_to_gin": round(total / gin, 2) if gin else None,
    }


def _decision(
    conn: psycopg.Connection[Any],
    args: Any,
    text: str,
    intent: str = "disabled",
    limit: int = LIMIT,
) -> Any:
    row = conn.execute(
        "SELECT decision_id FROM pyretrieve.authorize(%s, %s, 'compare',"
        " sha256(convert_to(%s, 'UTF8')), %s, NULL, %s)",
        (args.workspace, args.project, text, intent, limit),
    ).fetchone()
    assert row is not None
    return row[0]


# The leg's columns a database assigns for itself: the fragment's id and lexical generation.
_DATABASE_LOCAL = frozenset({"fragment_id", "lexical_generation"})


def _comparable(cur: psycopg.Cursor[Any], rows: list[Any], args: Any) -> list[Any]:
    """The rows as compared: whole, or without the columns each database assigns itself
    (found by name in the cursor's description, not by position)."""
    if not args.by_content:
        return rows
    kept = [i for i, c in enumerate(cur.description or ()) if c.name not in _DATABASE_LOCAL]
    return [tuple(r[i] for i in kept) for r in rows]


def _compare(
    conns: dict[str, psycopg.Connection[Any]], reader: str, args: Any, queries: list[str]
) -> dict[str, list[float]]:
    """Each query under one decision per database, the two legs in turn. ``conns`` maps
    "baseline" and "current" to their connections, one and the same without a baseline
    database (the baseline leg is then the renamed function beside the current one)."""
    seconds: dict[str, list[float]] = {"baseline": [], "current": []}
    one = conns["baseline"] is conns["current"]
    names = {
        "baseline": BASELINE_NAME if one else "lexical_candidates",
        "current": "lexical_candidates",
    }
    for i, text in enumerate(queries):
        with contextlib.ExitStack() as stack:
            for conn in [conns["current"]] if one else [conns["current"], conns["baseline"]]:
                stack.enter_context(acting_as(conn, reader))
            decisions = {"current": _decision(conns["current"], args, text)}
            decisions["baseline"] = (
                decisions["current"] if one else _decision(conns["baseline"], args, text)
            )
            rows = {}
            for which in ("baseline", "current") if i % 2 else ("current", "baseline"):
                started = time.perf_counter()
                cur = conns[which].execute(
                    f"SELECT * FROM pyretrieve.{names[which]}(%s, %s, %s)",
                    (decisions[which], text, LIMIT),
                )
                fetched = cur.fetchall()
                seconds[which].append(time.perf_counter() - started)
                rows[which] = _comparable(cur, fetched, args)
            if rows["baseline"] != rows["current"]:
                raise SystemExit(f"query {i}: the revisions return different candidates")
    return seconds


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="a superuser DSN of a populated database")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--queries", type=Path, required=True, help="a BEIR queries.jsonl")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--baseline", default="HEAD~1", help="the git revision to compare with")
    which.add_argument(
        "--baseline-dsn",
        help="a superuser DSN of another database of the same server holding the same data at"
        " the earlier schema, whose installed lexical_candidates is the baseline",
    )
    parser.add_argument(
        "--by-content",
        action="store_true",
        help="compare rows without their fragment ids and generations (with --baseline-dsn, for"
        " two databases loaded apart)",
    )
    parser.add_argument("--limit-queries", type=int, default=300)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--gin",
        action="store_true",
        help="also build a GIN index over the current database's fragments (and drop it), for"
        " the size of the lexical index against it",
    )
    args = parser.parse_args(argv)
    queries = _queries(args.queries, args.limit_queries)
    reader = f"pyretrieve_lexrev_{secrets.token_hex(3)}"
    with contextlib.ExitStack() as stack:
        current_conn = stack.enter_context(psycopg.connect(args.dsn, autocommit=True))
        baseline_conn = (
            stack.enter_context(psycopg.connect(args.baseline_dsn, autocommit=True))
            if args.baseline_dsn
            else current_conn
        )
        # The databases the run touches: one, or the current one and the baseline's.
        databases = (
            [current_conn] if baseline_conn is current_conn else [current_conn, baseline_conn]
        )
        measured_on = provenance(current_conn)
        storage = {
            "baseline": _lexical_storage(baseline_conn),
            "current": _lexical_storage(current_conn),
        }
        gin = gin_index_bytes(current_conn)[0] if args.gin else None
        _create_reader(current_conn, reader)  # a role is the server's, for both databases
        try:
            if baseline_conn is current_conn:
                _install_function(current_conn, baseline_function(args.baseline))
            for conn in databases:
                _grant(conn, reader, args)
            try:
                seconds = _compare(
                    {"baseline": baseline_conn, "current": current_conn}, reader, args, queries
                )
            finally:
                for conn in databases:
                    _revoke(conn, reader, args)
        finally:
            current_conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(reader)))
    baseline_ms, current_ms = summary_ms(seconds["baseline"]), summary_ms(seconds["current"])
    result = {
        "benchmark": "lexical_candidates: the installed revision against an earlier one",
        **measured_on,
        "settings": {
            "baseline": (
                f"the same data at the schema installed in {_database_name(args.baseline_dsn)}"
                if args.baseline_dsn
                else subprocess.run(
                    ["git", "rev-parse", args.baseline], cwd=ROOT, capture_output=True, text=True
                ).stdout.strip()
            ),
            "scope": f"{args.workspace}/{args.project}",
            "queries": str(args.queries.name),
            "query_count": len(queries),
            "limit": LIMIT,
            "order": "alternating, one decision per query",
            "compared": (
                "rank, content digest, score and terms (databases loaded apart)"
                if args.by_content
                else "every column"
            ),
        },
        "identical_results": len(queries),
        "baseline": baseline_ms,
        "current": current_ms,
        "p50_ratio_current_to_baseline": round(
            float(current_ms["p50"]) / float(baseline_ms["p50"]), 3
        ),
        "postings_bytes": storage,
        **({} if gin is None else _against_gin(storage["current"], gin)),
        "load_average_at_end": load_average(),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("baseline", "current")}))
    return result


if __name__ == "__main__":
    main()
