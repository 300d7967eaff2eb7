"""The schema stays distributable by workspace (docs/scale-out.md).

Sharding by ``workspace_id`` (PostgreSQL list partitions, or Citus with ``workspace_id`` as the
distribution column) needs three things of the schema, checked here on the installed catalog:

- every primary and unique key of a table that has a ``workspace_id`` column starts with it
  (a partitioned or distributed table cannot enforce a key that does not hold the partition
  key, and a key that does not lead with it is a cross-workspace existence oracle);
- every request-path statement that reads a tenant table states the workspace explicitly, so
  the planner can prune to one partition and a distributed planner can route to one shard;
- every table of the schema is classified once, in docs/scale-out.md, as distributed by
  ``workspace_id`` or as a reference table, so a new table cannot arrive unclassified.

The statement checker is a regular expression over ``pg_get_functiondef``; the mutation tests
below prove it reports a statement whose workspace predicate was removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Database

ROOT = Path(__file__).resolve().parent.parent.parent
SCALE_OUT = ROOT / "docs" / "scale-out.md"

# The request path: what one search or one tool discovery runs, as a principal.
REQUEST_PATH = (
    "authorize",
    "lexical_candidates",
    "vector_candidates",
    "fragments",
    "search",
    "discover_tools",
    "tool_entries",
    "tool_schemas",
)
# Tenant tables whose every read on the request path must name the workspace.
TENANT_TABLES = (
    "fragments",
    "lexical_blocks",
    "lexical_pages",
    "lexical_tombstones",
    "embeddings",
    "scope_configs",
    "projects",
    "grants",
    "tools",
    "tool_rollouts",
)

_SQL_WORDS = frozenset(
    {
        "where", "join", "on", "cross", "left", "right", "inner", "full", "lateral", "using",
        "group", "order", "limit", "offset", "union", "except", "intersect", "set", "values",
        "returning", "as", "for", "into", "window", "having", "natural", "fetch",
    }
)  # fmt: skip
_REFERENCE = re.compile(
    r"(?:\bfrom\s+|\bjoin\s+|,\s*)pyretrieve\.(?P<table>"
    + "|".join(TENANT_TABLES)
    + r")\b(?!\s*\()"
    r"(?:\s+(?:as\s+)?(?P<alias>[a-z_][a-z0-9_]*))?",
    re.IGNORECASE,
)


@dataclass(frozen=True, kw_only=True)
class Unscoped:
    """A reference to a tenant table in a statement that does not state its workspace.
    ``via_join``: the reference is pinned only through an equality with another reference's
    workspace column that is itself pinned (PostgreSQL derives the predicate; a distributed
    planner must too)."""

    function: str
    table: str
    alias: str
    via_join: bool
    statement: str


def _strip_comments(body: str) -> str:
    body = re.sub(r"--[^\n]*", "", body)
    return re.sub(r"/\*.*?\*/", "", body, flags=re.DOTALL)


def _statements(body: str) -> list[str]:
    """The body split into statements at semicolons outside string literals."""
    out: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in _strip_comments(body):
        if ch == "'":
            quoted = not quoted
        if ch == ";" and not quoted:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return [s for s in out if s.strip()]


def _explicit(statement: str, qualifier: str, aliases: set[str]) -> int:
    """How many times the statement equates ``qualifier.workspace_id`` with a value that is
    not a workspace column of the statement (a parameter, a field of the decision, a literal):
    each such predicate pins one reference to one workspace."""
    q = re.escape(qualifier)
    other = r"(?:" + "|".join(re.escape(a) for a in sorted(aliases)) + r")\.workspace_id\b"
    rhs = re.compile(rf"\b{q}\.workspace_id\s*=\s*(?!{other})(?=[\w'(])", re.IGNORECASE)
    lhs = re.compile(rf"(?<![\w.])(?!{other})[\w.']+\s*=\s*{q}\.workspace_id\b", re.IGNORECASE)
    return len(rhs.findall(statement)) + len(lhs.findall(statement))


def _join_edges(statement: str, aliases: set[str]) -> list[tuple[str, str]]:
    names = "|".join(re.escape(a) for a in sorted(aliases))
    edge = re.compile(rf"\b({names})\.workspace_id\s*=\s*({names})\.workspace_id\b", re.IGNORECASE)
    return [(a.lower(), b.lower()) for a, b in edge.findall(statement) if a.lower() != b.lower()]


def unscoped_references(function: str, body: str) -> list[Unscoped]:
    """Every read of a tenant table whose statement does not pin it to one workspace. A
    qualifier used for several references must have as many workspace predicates; a join
    equality with a pinned reference pins one more (reported with ``via_join``)."""
    found: list[Unscoped] = []
    for statement in _statements(body):
        refs: list[tuple[str, str]] = []
        for m in _REFERENCE.finditer(statement):
            alias = m.group("alias")
            qualifier = alias if alias and alias.lower() not in _SQL_WORDS else m.group("table")
            refs.append((m.group("table"), qualifier.lower()))
        aliases = {q for _, q in refs}
        need = {q: sum(1 for _, r in refs if r == q) for q in aliases}
        have = {q: _explicit(statement, q, aliases) for q in aliases}
        joined = dict.fromkeys(aliases, 0)
        edges = _join_edges(statement, aliases)
        changed = True
        while changed:
            changed = False
            for a, b in list(edges):
                for x, y in ((a, b), (b, a)):
                    if have[y] + joined[y] >= need[y] and have[x] + joined[x] < need[x]:
                        joined[x] += 1
                        edges.remove((a, b))
                        changed = True
                        break
                if changed:
                    break
        for q in sorted(aliases):
            if have[q] >= need[q]:
                continue
            via_join = have[q] + joined[q] >= need[q]
            found.extend(
                Unscoped(
                    function=function,
                    table=t,
                    alias=q,
                    via_join=via_join,
                    statement=statement.strip(),
                )
                for t, r in refs
                if r == q
            )
    return found


def _request_path_bodies(db: Database) -> dict[str, str]:
    with db.admin() as c:
        rows = c.execute(
            """SELECT p.oid::regprocedure::text AS signature, pg_get_functiondef(p.oid) AS body
                 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'pyretrieve' AND p.proname = ANY (%s)
                ORDER BY 1""",
            (list(REQUEST_PATH),),
        ).fetchall()
    return {r["signature"]: r["body"] for r in rows}


# -- keys ------------------------------------------------------------------------------------


def test_every_key_of_a_workspace_table_leads_with_workspace_id(db: Database) -> None:
    with db.admin() as c:
        keys = c.execute(
            """SELECT table_name, index_name, kind, key_columns, leads_with_workspace_id
                 FROM pyretrieve.audit_keys WHERE table_has_workspace_id ORDER BY 1, 2"""
        ).fetchall()
        # The audit view reads pg_index; cross-check it against the constraints themselves,
        # so a key the view missed (or a view gone wrong) is still caught.
        constraints = c.execute(
            """SELECT format('%%I.%%I', n.nspname, t.relname) AS table_name, co.conname,
                      (SELECT a.attname FROM pg_attribute a
                        WHERE a.attrelid = t.oid AND a.attnum = co.conkey[1]) AS first_column
                 FROM pg_constraint co
                 JOIN pg_class t ON t.oid = co.conrelid
                 JOIN pg_namespace n ON n.oid = t.relnamespace
                WHERE n.nspname = 'pyretrieve' AND co.contype IN ('p', 'u')
                  AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = t.oid
                                 AND a.attname = 'workspace_id' AND NOT a.attisdropped)"""
        ).fetchall()
    assert keys, "no key of a workspace table found: the audit view or the schema is broken"
    tables = {k["table_name"] for k in keys}
    assert {
        "pyretrieve.fragments", "pyretrieve.lexical_blocks", "pyretrieve.lexical_pages",
        "pyretrieve.lexical_tombstones",
        "pyretrieve.embeddings",
    } <= tables  # fmt: skip
    assert any(k["kind"] == "UNIQUE INDEX" for k in keys), "the partial content key is missing"
    bad = [
        (k["table_name"], k["index_name"], k["key_columns"])
        for k in keys
        if not k["leads_with_workspace_id"]
    ]
    assert bad == []
    assert constraints
    assert [
        (c["table_name"], c["conname"]) for c in constraints if c["first_column"] != "workspace_id"
    ] == []


def test_a_key_that_does_not_lead_with_workspace_id_is_reported(db: Database) -> None:
    """The check above can fail: a unique key on (project_id, workspace_id) is flagged."""
    with db.admin() as c:
        c.execute(
            "CREATE UNIQUE INDEX distributable_probe ON pyretrieve.generation_log "
            "(project_id, workspace_id, kind, generation)"
        )
        row = c.execute(
            """SELECT leads_with_workspace_id FROM pyretrieve.audit_keys
                WHERE index_name = 'pyretrieve.distributable_probe'"""
        ).fetchone()
        c.rollback()
    assert row is not None
    assert row["leads_with_workspace_id"] is False


# -- request-path statements -----------------------------------------------------------------


def test_the_request_path_functions_exist(db: Database) -> None:
    bodies = _request_path_bodies(db)
    names = {sig.split("(")[0].removeprefix("pyretrieve.") for sig in bodies}
    assert names == set(REQUEST_PATH)


def test_every_request_path_read_of_a_tenant_table_states_the_workspace(db: Database) -> None:
    bodies = _request_path_bodies(db)
    seen = 0
    problems: list[Unscoped] = []
    for signature, body in bodies.items():
        seen += len(list(_REFERENCE.finditer(_strip_comments(body))))
        problems.extend(unscoped_references(signature, body))
    # The legs read the tenant tables: a checker that finds no reference checks nothing.
    assert seen >= 14
    # Pinned only through a join equality is not enough either: a distributed planner need not
    # derive the predicate (docs/scale-out.md), so every reference states it.
    assert problems == []


@pytest.mark.parametrize(
    ("function", "predicate"),
    [
        ("pyretrieve.fragments(uuid,uuid[])", r"f\.workspace_id = d\.workspace_id\s+AND "),
        (
            "pyretrieve.vector_candidates(uuid,text,vector,integer)",
            r"e\.workspace_id = d\.workspace_id\s+AND ",
        ),
        (
            "pyretrieve.lexical_candidates(uuid,text,integer,text)",
            r"p\.workspace_id = d\.workspace_id AND ",
        ),
        # Both tables of the tool look-ups state it: a cut on either side is reported, although
        # the join would still let PostgreSQL derive it.
        ("pyretrieve.tool_entries(uuid,uuid[])", r"t\.workspace_id = d\.workspace_id AND "),
        ("pyretrieve.tool_entries(uuid,uuid[])", r"f\.workspace_id = d\.workspace_id\s+AND "),
        ("pyretrieve.tool_schemas(uuid,uuid[])", r"f\.workspace_id = d\.workspace_id\s+AND "),
    ],
)
def test_removing_a_workspace_predicate_is_reported(
    db: Database, function: str, predicate: str
) -> None:
    """Mutation check: the installed body with one workspace predicate cut out is reported."""
    bodies = {re.sub(r"\s", "", k): v for k, v in _request_path_bodies(db).items()}
    body = bodies[re.sub(r"\s", "", function)]
    assert unscoped_references(function, body) == []
    mutated, n = re.subn(predicate, "", body, count=1)
    assert n == 1, f"the predicate {predicate!r} is not in {function}"
    assert unscoped_references(function, mutated) != []


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT 1 FROM pyretrieve.fragments f WHERE f.project_id = d.project_id",
        "SELECT 1 FROM pyretrieve.lexical_blocks WHERE lexeme = 'x'",
        # A join on workspace columns alone pins nothing.
        "SELECT 1 FROM pyretrieve.fragments f JOIN pyretrieve.embeddings e ON e.workspace_id = f.workspace_id",
        # One predicate for an alias used twice covers only one of the references.
        "WITH a AS (SELECT 1 FROM pyretrieve.fragments f WHERE f.workspace_id = d.workspace_id) "
        "SELECT 1 FROM a, pyretrieve.fragments f WHERE f.project_id = 'p'",
    ],
)
def test_the_checker_reports_unscoped_statements(statement: str) -> None:
    assert [p for p in unscoped_references("probe", statement) if not p.via_join] != []


def test_a_join_with_a_pinned_reference_is_reported_as_via_join() -> None:
    statement = (
        "SELECT 1 FROM pyretrieve.tools t JOIN pyretrieve.fragments f ON f.workspace_id = t.workspace_id "
        "WHERE t.workspace_id = d.workspace_id"
    )
    assert [(p.alias, p.via_join) for p in unscoped_references("probe", statement)] == [("f", True)]


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT 1 FROM pyretrieve.fragments f WHERE f.workspace_id = d.workspace_id",
        "SELECT 1 FROM pyretrieve.projects p WHERE p_workspace = p.workspace_id",
        "SELECT 1 FROM pyretrieve.fragments f JOIN pyretrieve.embeddings e "
        "ON e.workspace_id = p_workspace WHERE f.workspace_id = p_workspace",
        "SELECT pyretrieve.fragments(d.decision_id, ids) FROM x",
    ],
)
def test_the_checker_accepts_scoped_statements(statement: str) -> None:
    assert unscoped_references("probe", statement) == []


# -- classification --------------------------------------------------------------------------

_CLASS_ROW = re.compile(
    r"^\|\s*`pyretrieve\.(?P<table>[a-z_]+)`\s*\|\s*(?P<kind>distributed|reference)\s*\|", re.M
)


def classification() -> list[tuple[str, str]]:
    """The table of docs/scale-out.md: (table, 'distributed' | 'reference') per row."""
    text = SCALE_OUT.read_text(encoding="utf-8")
    return [(m.group("table"), m.group("kind")) for m in _CLASS_ROW.finditer(text)]


def test_every_table_is_classified_exactly_once(db: Database) -> None:
    with db.admin() as c:
        rows: list[dict[str, Any]] = c.execute(
            """SELECT t.relname AS table_name,
                      EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = t.oid
                                 AND a.attname = 'workspace_id' AND NOT a.attisdropped) AS has_workspace
                 FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace
                WHERE n.nspname = 'pyretrieve' AND t.relkind IN ('r', 'p') AND NOT t.relispartition
                ORDER BY 1"""
        ).fetchall()
    listed = classification()
    names = [t for t, _ in listed]
    assert len(names) == len(set(names)), "a table is classified twice in docs/scale-out.md"
    assert sorted(names) == [r["table_name"] for r in rows]
    kinds = dict(listed)
    has_workspace = {r["table_name"]: r["has_workspace"] for r in rows}
    # A distributed table needs its distribution column; a tenant table may not be replicated
    # to every node as a reference table.
    assert [t for t, k in kinds.items() if k == "distributed" and not has_workspace[t]] == []
    assert [t for t, k in kinds.items() if k == "reference" and has_workspace[t]] == []
    assert {"fragments", "lexical_blocks", "lexical_pages", "lexical_tombstones", "embeddings"} <= {
        t for t, k in kinds.items() if k == "distributed"
    }
