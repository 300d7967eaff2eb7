"""Draft the next migration from a catalog diff of the head schema against the last release.

    python -m pyretrieve.db.draft NAME [--dsn ADMIN_DSN]

A change to a function, policy, view or trigger is then written once, in ``sql/schema/``: the
drafter builds the last released revision (Alembic) and the head (``sql/pyretrieve.sql``) in
two scratch databases, compares their catalogs and writes
``sql/migrations/NNNN_NAME.sql`` and its ``.down.sql``:

* functions that changed or are new are re-created from the head's own definitions (as the
  role that owns them, with their comment and EXECUTE grants); removed ones are dropped;
* policies, views and triggers that changed are dropped and created again;
* table changes are listed as ``-- TODO`` lines: columns and data need a human.

The down script does the reverse from the release's definitions. The draft is a starting
point: read it, complete the TODOs, and let ``tests/db/test_migrations.py`` prove it.
"""

from __future__ import annotations

import argparse
import re
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from pyretrieve import resources
from pyretrieve.db import migrate, queries

Catalog = dict[str, dict[Any, Any]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Draft:
    """What a catalog diff asks for: the two scripts and the TODOs a human must complete."""

    up: str
    down: str
    todos: tuple[str, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return "-- (no change)" in self.up and not self.todos


# ------------------------------------------------------------------------------ catalogs


def snapshot(dsn: str) -> Catalog:
    """The parts of the pyretrieve schema a migration re-creates, keyed by identity."""
    with psycopg.connect(dsn, row_factory=psycopg.rows.dict_row) as conn:
        conn.execute(queries.PIN_SEARCH_PATH)
        rows = {
            key: conn.execute(query).fetchall()
            for key, query in (
                ("functions", queries.CATALOG_FUNCTIONS),
                ("policies", queries.CATALOG_POLICIES),
                ("views", queries.CATALOG_VIEWS),
                ("triggers", queries.CATALOG_TRIGGERS),
                ("columns", queries.CATALOG_COLUMNS),
            )
        }
    return {
        "functions": {r["signature"]: r for r in rows["functions"]},
        "policies": {(r["tbl"], r["name"]): r for r in rows["policies"]},
        "views": {r["name"]: r for r in rows["views"]},
        "triggers": {(r["tbl"], r["name"]): r for r in rows["triggers"]},
        "columns": {(r["tbl"], r["name"]): r for r in rows["columns"]},
    }


# ------------------------------------------------------------------------------- the diff


def _same(a: dict[str, Any], b: dict[str, Any], keys: tuple[str, ...]) -> bool:
    return all(a[k] == b[k] for k in keys)


_FUNCTION_KEYS = ("owner", "definition", "comment", "executors")
_POLICY_KEYS = ("qual", "check", "cmd", "permissive", "roles")
_VIEW_KEYS = ("compared", "options", "comment")


def _literal(text: str | None) -> str:
    return "NULL" if text is None else "'" + text.replace("'", "''") + "'"


def _create_function(f: dict[str, Any]) -> list[str]:
    name = f["signature"]
    out = [f"SET LOCAL ROLE {f['owner']};", f["definition"].rstrip() + ";"]
    out.append(f"COMMENT ON FUNCTION pyretrieve.{_bare(name)} IS {_literal(f['comment'])};")
    out.append(f"REVOKE ALL ON FUNCTION pyretrieve.{_bare(name)} FROM PUBLIC;")
    if f["executors"]:
        out.append(
            f"GRANT EXECUTE ON FUNCTION pyretrieve.{_bare(name)} TO {', '.join(f['executors'])};"
        )
    out.append("SET LOCAL ROLE pyretrieve_owner;")
    return out


def _bare(signature: str) -> str:
    # regprocedure renders pyretrieve.f(args) with search_path pinned to pg_catalog.
    return signature.removeprefix("pyretrieve.")


_COMMANDS = {"*": "ALL", "r": "SELECT", "a": "INSERT", "w": "UPDATE", "d": "DELETE"}


def _create_policy(p: dict[str, Any]) -> str:
    parts = [
        f"CREATE POLICY {p['name']} ON pyretrieve.{p['tbl']}",
        "" if p["permissive"] else "AS RESTRICTIVE",
        f"FOR {_COMMANDS[p['cmd']]} TO {', '.join(p['roles'])}",
    ]
    if p["qual"] is not None:
        parts.append(f"USING ({p['qual']})")
    if p["check"] is not None:
        parts.append(f"WITH CHECK ({p['check']})")
    return " ".join(x for x in parts if x) + ";"


def _create_view(v: dict[str, Any]) -> list[str]:
    options = f" WITH ({', '.join(v['options'])})" if v["options"] else ""
    return [
        f"CREATE VIEW pyretrieve.{v['name']}{options} AS\n{v['definition'].rstrip().rstrip(';')};",
        f"COMMENT ON VIEW pyretrieve.{v['name']} IS {_literal(v['comment'])};",
    ]


def diff(old: Catalog, new: Catalog) -> tuple[list[str], list[str]]:
    """Statements taking ``old`` to ``new``, and the TODOs no statement can cover."""
    drops: list[str] = []
    creates: list[str] = []
    todos: list[str] = []
    of, nf = old["functions"], new["functions"]
    for key in sorted(set(of) - set(nf)):
        drops.append(f"DROP FUNCTION pyretrieve.{_bare(key)} CASCADE;")
    changed_functions = [k for k in nf if k not in of or not _same(of[k], nf[k], _FUNCTION_KEYS)]
    for key in sorted(changed_functions, key=lambda k: int(nf[k]["oid"])):
        if key in of and of[key]["result"] != nf[key]["result"]:
            drops.append(f"DROP FUNCTION pyretrieve.{_bare(key)} CASCADE;")
        creates.extend(_create_function(nf[key]))
    ov, nv = old["views"], new["views"]
    for key in sorted(set(ov) | set(nv)):
        if key in ov and (key not in nv or not _same(ov[key], nv[key], _VIEW_KEYS)):
            drops.append(f"DROP VIEW pyretrieve.{key} CASCADE;")
        if key in nv and (key not in ov or not _same(ov[key], nv[key], _VIEW_KEYS)):
            creates.extend(_create_view(nv[key]))
    op, np_ = old["policies"], new["policies"]
    for key in sorted(set(op) | set(np_)):
        if key in op and (key not in np_ or not _same(op[key], np_[key], _POLICY_KEYS)):
            drops.append(f"DROP POLICY {key[1]} ON pyretrieve.{key[0]};")
        if key in np_ and (key not in op or not _same(op[key], np_[key], _POLICY_KEYS)):
            creates.append(_create_policy(np_[key]))
    ot, nt = old["triggers"], new["triggers"]
    for key in sorted(set(ot) | set(nt)):
        if key in ot and (key not in nt or ot[key]["definition"] != nt[key]["definition"]):
            drops.append(f"DROP TRIGGER {key[1]} ON pyretrieve.{key[0]};")
        if key in nt and (key not in ot or ot[key]["definition"] != nt[key]["definition"]):
            creates.append(nt[key]["definition"] + ";")
    oc, nc = old["columns"], new["columns"]
    for key in sorted(set(oc) | set(nc)):
        if key not in nc:
            todos.append(f"-- TODO column {key[0]}.{key[1]} is gone: drop it (and its data)")
        elif key not in oc:
            col = nc[key]
            todos.append(
                f"-- TODO column {key[0]}.{key[1]} {col['type']}"
                f"{' NOT NULL' if col['notnull'] else ''} is new: add and backfill it"
            )
        elif (oc[key]["type"], oc[key]["notnull"], oc[key]["default"]) != (
            nc[key]["type"],
            nc[key]["notnull"],
            nc[key]["default"],
        ):
            todos.append(f"-- TODO column {key[0]}.{key[1]} changed: {oc[key]} -> {nc[key]}")
    return [*drops, *creates], todos


def _roles_once(statements: list[str], role: str) -> list[str]:
    """``statements`` without a ``SET LOCAL ROLE`` to the role already in effect (``role`` at
    the start): each function's block sets its owner and then the migration's owner again, so
    two functions of one owner in a row would set the same role twice."""
    out = []
    for statement in statements:
        if statement.startswith("SET LOCAL ROLE "):
            wanted = statement.removeprefix("SET LOCAL ROLE ").rstrip(";")
            if wanted == role:
                continue
            role = wanted
        out.append(statement)
    return out


def _script(title: str, statements: list[str], todos: list[str], version: str) -> str:
    lines = [
        f"-- {title}",
        "-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.",
        "",
        "-- pyretrieve_api creates the functions it owns while the migration runs.",
        "GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;",
        "SET LOCAL ROLE pyretrieve_owner;",
        "SET LOCAL search_path = pg_catalog, pg_temp;",
        "",
        *todos,
        *(_roles_once(statements, "pyretrieve_owner") or ["-- (no change)"]),
        "",
        f"UPDATE pyretrieve.installation SET schema_version = '{version}';",
        "",
        "RESET ROLE;",
        "REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;",
        "",
    ]
    return "\n".join(lines)


def draft_between(old_dsn: str, new_dsn: str, *, number: str, previous: str, name: str) -> Draft:
    old, new = snapshot(old_dsn), snapshot(new_dsn)
    up, todos = diff(old, new)
    down, down_todos = diff(new, old)
    return Draft(
        up=_script(f"pyretrieve migration {number}: {name}", up, todos, number),
        down=_script(
            f"pyretrieve migration {number}, downgrade: back to {previous}",
            down,
            down_todos,
            previous,
        ),
        todos=tuple(todos),
    )


# ------------------------------------------------------------------------- the command


@contextmanager
def _scratch(admin_dsn: str) -> Iterator[str]:
    name = f"pyretrieve_draft_{secrets.token_hex(4)}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(queries.create_database(name))
    try:
        yield make_conninfo(admin_dsn, dbname=name)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(queries.drop_database(name))


def last_release() -> str:
    numbers = sorted(
        m.group(1)
        for p in (resources.sql_dir() / "migrations").glob("*.sql")
        if (m := re.fullmatch(r"(\d{4})_[a-z0-9_]+\.sql", p.name))
    )
    return numbers[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("name", help="the migration's name, e.g. contract")
    parser.add_argument("--dsn", help="a superuser DSN; default: the embedded server")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", args.name):
        parser.error("name: lower-case letters, digits and _")
    from pyretrieve.db.connect import resolve_dsn

    admin = resolve_dsn(args.dsn, installer=True)
    previous = last_release()
    number = f"{int(previous) + 1:04d}"
    with _scratch(admin) as released, _scratch(admin) as head:
        migrate.upgrade(released, f"{migrate.BRANCH}_{previous}")
        with psycopg.connect(head) as conn:
            conn.execute(migrate.install_script_sql().encode("utf-8"))
        result = draft_between(released, head, number=number, previous=previous, name=args.name)
    folder = resources.sql_dir() / "migrations"
    up = folder / f"{number}_{args.name}.sql"
    down = folder / f"{number}_{args.name}.down.sql"
    for path, text in ((up, result.up), (down, result.down)):
        if path.exists():
            print(f"{path.name} exists; not overwritten", file=sys.stderr)
            return 1
        Path(path).write_text(text, encoding="utf-8")
    print(f"wrote {up.name} and {down.name}; {len(result.todos)} TODO(s) to complete by hand")
    return 0


if __name__ == "__main__":
    sys.exit(main())
