"""Where the second wall's cost goes: the read functions against their copies past RLS, with
the read policies as installed, cut to the scope, to a constant, and to nothing.

Usage: python -m evals.bench.wall_parts [--rows 200,1000,5183] [--queries 100] [--dsn DSN]
       [--out PATH]

``evals.bench.second_wall`` measures what the installed policies cost as a whole. This bench
runs the same comparison (each function beside its copy owned by the superuser, with the
installed functions again as the control) three times in one throwaway database, each time with
the read policies of the tables a search reads in another form:

* ``installed``: as the schema writes them (since 0051 the scope as one row comparison with
  the binding's, then the ceiling, state, window and expiry, with the ceiling and the oldest
  observation time each read from ``bound_filter()`` in its own sub-select);
* ``scope``: only the scope (workspace and project of the binding, in one look-up of
  ``bound_filter()``), the rest of each policy removed: the least a policy that reads the
  transaction's binding can check;
* ``constant``: the bench's workspace as a constant, ``workspace_id = 'rtt'``: a policy that
  reads no binding (it admits every scope of the bench's one workspace);
* ``none``: ``USING (true)``, RLS still on and forced but admitting every row.

The functions filter every row by the decision themselves, so every form returns the same rows
(the run stops at the first difference). What ``none`` costs over the copy is the machinery of
RLS; what ``constant`` adds is a security qual's own evaluation; what ``scope`` adds is one
look-up of the binding per table read; what ``installed`` adds is the decision's other fields,
looked up and checked again on every row the statements read.

The policies are changed only for the time of one form and put back after it, whatever
happened; ``--dsn`` must still name a fresh database, never one in use. Writes ``evals/bench/wall-parts.json``. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from evals.bench import round_trips, second_wall
from evals.bench.runtime import DATASETS, load_average

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "evals" / "bench" / "wall-parts.json"
# The tables a search reads whose read policy checks the decision (the lexical index, the
# records and their embeddings, the corpus statistics and the scope's settings).
TABLES = (
    "fragments",
    "embeddings",
    "lexical_blocks",
    "lexical_pages",
    "lexical_tombstones",
    "statistics_log",
    "scope_configs",
    "projects",
    "generation_log",
)
# The least a policy that reads the transaction's binding can check: the scope, in one look-up
# (0051's form; before 0051 this form read the decision and the write scope in four).
SCOPE = (
    "(workspace_id, project_id) = (SELECT b.workspace_id, b.project_id"
    " FROM pyretrieve.bound_filter() b)"
)
# A security qual with no look-up (the bench's one workspace, a constant): what a policy's
# expression costs when it reads no binding.
CONSTANT = f"workspace_id = '{round_trips.WORKSPACE}'"
FORMS = {"installed": None, "scope": SCOPE, "constant": CONSTANT, "none": "true"}


def _read_policies(conn: psycopg.Connection[Any]) -> dict[str, tuple[str, str]]:
    rows = conn.execute(
        "SELECT c.relname, p.polname, pg_get_expr(p.polqual, p.polrelid)"
        "  FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid"
        " WHERE c.relnamespace = 'pyretrieve'::regnamespace AND p.polcmd = 'r'"
        "   AND c.relname = ANY(%s)",
        (list(TABLES),),
    ).fetchall()
    found = {table: (name, using) for table, name, using in rows}
    if sorted(found) != sorted(TABLES):
        raise SystemExit(f"expected one read policy on each of {TABLES}, found {sorted(found)}")
    return found


def _alter(conn: psycopg.Connection[Any], table: str, policy: str, using: str) -> None:
    conn.execute(
        sql.SQL("ALTER POLICY {} ON {} USING ({})").format(
            sql.Identifier(policy), sql.Identifier("pyretrieve", table), sql.SQL(using)
        )
    )


@contextlib.contextmanager
def policies(dsn: str, using: str | None) -> Iterator[None]:
    """The read policies of ``TABLES`` with ``using`` as their expression (None: as installed),
    put back at the end."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        installed = _read_policies(conn)
        if using is None:
            yield
            return
        try:
            with conn.transaction():
                for table, (policy, _) in installed.items():
                    _alter(conn, table, policy, using)
            yield
        finally:
            with conn.transaction():
                for table, (policy, expression) in installed.items():
                    _alter(conn, table, policy, expression)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", default="200,1000,5183", help="scope sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--dsn", help="a fresh database (superuser); default: a throwaway server")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.rows.split(",")]
    texts = round_trips.claims(DATASETS)[: args.queries]
    figures: dict[str, Any] = {}
    with second_wall.scopes(args.dsn, "parts", sizes) as (dsn, principals, facts, projects):
        for form, using in FORMS.items():
            print(form)
            with policies(dsn, using):
                figures[form] = second_wall.measure(dsn, principals, projects, texts)
    result = {
        "benchmark": "the second wall's cost by part: read policies as installed, cut to the scope, to a constant, to nothing",
        **facts,
        "settings": {
            "rows": list(projects),
            "queries": args.queries,
            "candidates": second_wall.CANDIDATES,
            "functions": second_wall.FUNCTIONS,
            "tables": list(TABLES),
            "forms": {form: using or "as installed" for form, using in FORMS.items()},
            "text": "SciFact abstracts and claims, random 384-d embeddings",
            "order": "per form, per claim, one transaction per arm, each arm on its own connection, in a rotating order",
        },
        "forms": figures,
        "load_average_at_end": load_average(),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
