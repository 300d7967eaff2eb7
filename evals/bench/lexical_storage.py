"""The lexical index's bytes as a load leaves them, relation by relation, against GIN.

Usage: python -m evals.bench.lexical_storage [--fragments 200000] [--dsn DSN] [--quick]
       [--out PATH]

Loads the scale benchmark's corpus and scopes (``evals.bench.scale``: probe scopes of 0.1% to
20% of the table, a 100,000-row scope where there is room, the rest spread over 200 filler
scopes) through ``Ingestor.ingest_path`` as a writer principal, fragments only, then measures
each relation of the lexical index (heap, TOAST, each index) three times: as loaded, after a
plain ``VACUUM`` (what autovacuum would make of it), and after ``VACUUM FULL`` (the index's own
size). The baseline of the same run is a GIN index over every fragment's ``tsv``, built in one
go by the superuser: issue 13's bar is the lexical index at most 3 times its size.

A freshly built GIN index is that index at its most compact, so it is the baseline of the
repacked figures. ``--gin-during-load`` adds the baseline of the figures as loaded: the same GIN
index created before the load and maintained by it (with its default pending list), measured
as the load leaves it and after ``VACUUM`` of the fragments (which merges that list).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evals.bench import scale, synth  # noqa: E402
from evals.bench.runtime import (  # noqa: E402
    LEXICAL_TABLES,
    Principals,
    acting_as,
    create_gin_index,
    drop_gin_index,
    ensure_installed,
    exit_cleanly_on_sigterm,
    gin_index_bytes,
    gin_size,
    provenance,
    throwaway_database,
)
from pyretrieve.ingest import Ingestor  # noqa: E402

OUT = ROOT / "evals" / "bench" / "lexical-storage.json"
MB = 1024 * 1024
MAINTAINED_GIN = "pyretrieve_bench_gin_maintained"

# Each relation of the lexical index: its tables (heap and TOAST) and their indexes, and the
# fragments' document-number key, which exists for the lexical index only.
_RELATIONS = """
SELECT c.relname::text, pg_relation_size(c.oid),
       coalesce(pg_total_relation_size(c.reltoastrelid), 0)
  FROM pg_class c
 WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind = 'r'
   AND c.relname = ANY (%(tables)s)
UNION ALL
SELECT i.relname::text, pg_relation_size(i.oid), 0
  FROM pg_index x
  JOIN pg_class i ON i.oid = x.indexrelid
  JOIN pg_class t ON t.oid = x.indrelid
 WHERE t.relnamespace = 'pyretrieve'::regnamespace
   AND (t.relname = ANY (%(tables)s) OR i.relname = 'fragments_docno_key')
 ORDER BY 1
"""


def relations(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Bytes of each relation of the lexical index (MB), and their sum."""
    rows = conn.execute(_RELATIONS, {"tables": list(LEXICAL_TABLES)}).fetchall()
    out: dict[str, Any] = {}
    total = 0
    for name, size, toast in rows:
        out[str(name)] = {"mb": round(int(size) / MB, 2)}
        if toast:
            out[str(name)]["toast_mb"] = round(int(toast) / MB, 2)
        total += int(size) + int(toast)
    return {"relations": out, "total_mb": round(total / MB, 2)}


def _tables(conn: psycopg.Connection[Any]) -> list[str]:
    """The lexical index's tables in this revision (``postings`` before 0021)."""
    rows = conn.execute(
        "SELECT c.relname::text FROM pg_class c"
        " WHERE c.relnamespace = 'pyretrieve'::regnamespace AND c.relkind = 'r'"
        "   AND c.relname = ANY (%s) ORDER BY 1",
        (list(LEXICAL_TABLES),),
    ).fetchall()
    return [str(t) for (t,) in rows]


def counts(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Rows of the lexical index's tables (live), and its postings."""
    out: dict[str, int] = {}
    for table in _tables(conn):
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM pyretrieve.{}").format(sql.Identifier(table))
        ).fetchone()
        out[table] = int(row[0]) if row else 0
    row = conn.execute(
        "SELECT (SELECT coalesce(sum(postings), 0) FROM pyretrieve.lexical_blocks)"
        " + (SELECT coalesce(sum(postings), 0) FROM pyretrieve.lexical_pages)"
    ).fetchone()
    out["postings"] = int(row[0]) if row else 0
    return out


# Where the repacked bytes lie, by the size of their scope: a page or block row's own bytes
# (pg_column_size of the row, before TOAST's compression is undone), and the postings it holds.
_BY_SCOPE_SIZE = """
WITH s AS (SELECT workspace_id, project_id, count(*) AS n,
                  CASE WHEN count(*) < 1000 THEN 'under 1,000'
                       WHEN count(*) < 20000 THEN '1,000 to 20,000'
                       ELSE '20,000 and over' END AS size
             FROM pyretrieve.fragments GROUP BY 1, 2),
     r AS (SELECT workspace_id, project_id, 'pages' AS kind, postings, pg_column_size(p.*) AS bytes
             FROM pyretrieve.lexical_pages p
           UNION ALL
           SELECT workspace_id, project_id, 'blocks', postings, pg_column_size(b.*)
             FROM pyretrieve.lexical_blocks b)
SELECT s.size, r.kind, count(DISTINCT (s.workspace_id, s.project_id)),
       (SELECT sum(t.n) FROM s t WHERE t.size = s.size), count(*), sum(r.postings), sum(r.bytes)
  FROM r JOIN s USING (workspace_id, project_id)
 GROUP BY 1, 2 ORDER BY 1, 2
"""


def by_scope_size(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """Rows, postings and row bytes of pages and blocks, by the size of their scope."""
    out = []
    for size, kind, scopes, fragments, rows, postings, nbytes in conn.execute(_BY_SCOPE_SIZE):
        out.append(
            {
                "scope_size": size,
                "kind": kind,
                "scopes": int(scopes),
                "fragments_per_scope": round(float(fragments) / int(scopes)),
                "rows": int(rows),
                "postings": int(postings),
                "row_mb": round(int(nbytes) / MB, 2),
                "bytes_per_posting": round(int(nbytes) / int(postings), 2),
            }
        )
    return out


def _vacuum(conn: psycopg.Connection[Any], full: bool) -> float:
    started = time.perf_counter()
    for table in _tables(conn):
        conn.execute(
            sql.SQL("VACUUM {} pyretrieve.{}").format(
                sql.SQL("FULL") if full else sql.SQL(""), sql.Identifier(table)
            )
        )
    return round(time.perf_counter() - started, 2)


def load(dsn: str, s: scale.Settings, principals: Principals) -> dict[str, Any]:
    """The scale benchmark's scopes, fragments only, through the writer API."""
    plans, _sample = scale.plan_scopes(s)
    vocabulary = scale._vocabulary(s)
    gen = synth.Generator(
        vocabulary, clusters=s.clusters or max(16, s.fragments // 500), seed=s.seed
    )
    with psycopg.connect(dsn, autocommit=True) as conn, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        with acting_as(conn, principals.admin):
            for ws in sorted({p.workspace for p in plans}):
                conn.execute("SELECT pyretrieve.create_workspace(%s)", (ws,))
            for plan in plans:
                conn.execute(
                    "SELECT pyretrieve.create_project(%s, %s)", (plan.workspace, plan.project)
                )
                conn.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'ingest', 'confidential')",
                    (principals.writer, plan.workspace, plan.project),
                )
        scale.generate(gen, plans, tmp)

        def put_fragments(c: psycopg.Connection[Any], plan: scale.ScopePlan) -> int:
            path, _ = scale._files(tmp, plan)
            return (
                Ingestor(c, principal=principals.writer, batch_size=s.batch_size)
                .ingest_path(path, workspace=plan.workspace, project=plan.project)
                .inserted
            )

        loaded = scale._parallel(dsn, plans, s.threads, put_fragments)
    # The words the text was drawn from: the datasets' SciFact frequencies, or a Zipf
    # vocabulary where they are not found (a different corpus: its bytes do not compare).
    loaded["vocabulary"] = vocabulary.source
    loaded["planned"] = sum(p.rows for p in plans)
    loaded["largest_scopes"] = sorted((p.rows for p in plans), reverse=True)[:6]
    return loaded


def _maintained_gin(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The GIN index the load maintained: as loaded, after VACUUM of its table; then dropped."""
    as_loaded_mb = round(gin_size(conn, MAINTAINED_GIN) / MB, 2)
    conn.execute("VACUUM pyretrieve.fragments")
    vacuumed_mb = round(gin_size(conn, MAINTAINED_GIN) / MB, 2)
    drop_gin_index(conn, MAINTAINED_GIN)
    return {"as_loaded_mb": as_loaded_mb, "vacuumed_mb": vacuumed_mb}


def run(s: scale.Settings, dsn: str | None = None, gin_during_load: bool = False) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        if dsn:
            ensure_installed(dsn)
            url = dsn
        else:
            url = stack.enter_context(throwaway_database())
        conn = stack.enter_context(psycopg.connect(url, autocommit=True))
        facts = provenance(conn)
        principals = Principals.create(conn, "storage")
        stack.callback(principals.drop, conn)
        if gin_during_load:
            create_gin_index(conn, MAINTAINED_GIN)
            # Not left behind in the database given, whatever happens to the load.
            stack.callback(drop_gin_index, conn, MAINTAINED_GIN)
        loaded = load(url, s, principals)
        print(f"fragments: {loaded}", file=sys.stderr)
        as_loaded = relations(conn)
        maintained = _maintained_gin(conn) if gin_during_load else None
        rows = counts(conn)
        gin, gin_seconds = gin_index_bytes(conn)
        gin_mb = round(gin / MB, 2)
        vacuum_seconds = _vacuum(conn, full=False)
        vacuumed = relations(conn)
        full_seconds = _vacuum(conn, full=True)
        repacked = relations(conn)
        repacked["by_scope_size"] = by_scope_size(conn)
    stages = {"as_loaded": as_loaded, "vacuumed": vacuumed, "repacked": repacked}
    for stage in stages.values():
        stage["over_gin"] = round(stage["total_mb"] / gin_mb, 2) if gin_mb else None
    if maintained:
        for key, stage in (("as_loaded_mb", as_loaded), ("vacuumed_mb", vacuumed)):
            base = maintained[key]
            stage["over_maintained_gin"] = round(stage["total_mb"] / base, 2) if base else None
    return {
        "benchmark": "the lexical index's bytes as loaded, vacuumed and repacked, against GIN",
        **facts,
        "settings": {
            "fragments": s.fragments,
            "threads": s.threads,
            "batch_size": s.batch_size,
            "text": s.text,
            "scopes": "evals.bench.scale's probe and filler scopes, without its HNSW sample",
            "path": "Ingestor.ingest_path as a writer principal (RLS on), fragments only",
            "gin_during_load": gin_during_load,
        },
        "load": loaded,
        "rows": rows,
        "gin": {"mb": gin_mb, "build_seconds": round(gin_seconds, 2)},
        "maintained_gin": maintained,
        "vacuum_seconds": vacuum_seconds,
        "vacuum_full_seconds": full_seconds,
        **stages,
        "bytes_per_posting_as_loaded": round(as_loaded["total_mb"] * MB / rows["postings"], 2)
        if rows["postings"]
        else None,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=200_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--dsn", help="a database (superuser); default: a throwaway server")
    parser.add_argument("--quick", action="store_true", help="3,000 fragments, a few seconds")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--gin-during-load",
        action="store_true",
        help="also measure a GIN index over tsv that the load maintains (a second baseline)",
    )
    args = parser.parse_args(argv)
    exit_cleanly_on_sigterm()
    s = scale.Settings(
        fragments=3_000 if args.quick else args.fragments,
        threads=args.threads,
        batch_size=200 if args.quick else args.batch_size,
        workspaces=4 if args.quick else scale.Settings.workspaces,
        projects=2 if args.quick else scale.Settings.projects,
        target_scope=not args.quick,
    )
    result = run(s, args.dsn, gin_during_load=args.gin_during_load)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"lexical index {result['as_loaded']['total_mb']} MB as loaded"
        f" ({result['as_loaded']['over_gin']}x GIN), {result['vacuumed']['total_mb']} MB"
        f" vacuumed, {result['repacked']['total_mb']} MB repacked"
        f" ({result['repacked']['over_gin']}x); GIN {result['gin']['mb']} MB",
        file=sys.stderr,
    )
    if result["maintained_gin"]:
        print(f"GIN maintained by the load: {result['maintained_gin']}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
