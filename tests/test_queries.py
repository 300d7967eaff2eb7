"""SQL lives in one module: ``pyretrieve/db/queries.py``.

The package's other modules are scanned (their syntax trees, so comments and docstrings do not
count) for string literals that begin an SQL statement; each statement must move to the
named-query module instead. Every name that module exports is used somewhere, and every call
it makes into the SQL API names its arguments.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pyretrieve.db import queries

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pyretrieve"
QUERIES = PACKAGE / "db" / "queries.py"

# Modules that still hold SQL, with the reason.
ALLOWED = {
    # Writes migration scripts: its SQL is the text of the file it drafts, never run.
    "pyretrieve/db/draft.py",
}

# The start of an SQL statement, in capitals as the package writes SQL (so prose such as
# "Show the traceback" or a table header "WITH CHECK" is not one).
_STATEMENT = re.compile(
    r"\s*(?:SELECT\s+\S|INSERT\s+INTO\s|UPDATE\s+\S+\s+SET\s|DELETE\s+FROM\s"
    r"|WITH\s+(?:RECURSIVE\s+)?\w+\s+AS\b|SET\s+(?:LOCAL\s+|SESSION\s+)?\w|RESET\s+\w"
    r"|CALL\s+\w|CREATE\s+[A-Z]|DROP\s+[A-Z]|ALTER\s+[A-Z]|GRANT\s+\S|REVOKE\s+\S"
    r"|SHOW\s+\w|TRUNCATE\s|COPY\s|EXPLAIN\s|LOCK\s|DO\s+\$)"
)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def inline_statements(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal in ``source`` that begins an SQL statement; an
    f-string counts with its literal parts joined."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    inside_fstring = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v for v in node.values if isinstance(v, ast.Constant)]
            inside_fstring.update(id(v) for v in parts)
            text = "{}".join(str(v.value) for v in parts)
            if _STATEMENT.match(text):
                found.append((node.lineno, text))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and id(node) not in inside_fstring
            and _STATEMENT.match(node.value)
        ):
            found.append((node.lineno, node.value))
    return sorted(found)


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != QUERIES)


def test_the_scan_finds_a_statement_and_ignores_prose() -> None:
    sample = '''
"""Module docstring: SELECT something FROM the docs is prose here."""
def f(conn, name):
    """SELECT in a docstring is prose too."""
    conn.execute("SELECT * FROM pyretrieve.fragments(p_decision => %s)", (1,))
    conn.execute(f"SET LOCAL ROLE {name}")
    conn.execute(
        "WITH x AS (SELECT 1)"
        " SELECT * FROM x"
    )
    help = "Show the traceback of an error"
    header = ["USING", "WITH CHECK"]
'''
    assert [line for line, _ in inline_statements(sample)] == [5, 6, 8]


def test_no_module_outside_the_named_query_module_holds_sql() -> None:
    found = []
    for path in _modules():
        name = path.relative_to(ROOT).as_posix()
        if name in ALLOWED:
            continue
        for line, text in inline_statements(path.read_text(encoding="utf-8")):
            found.append(f"{name}:{line}: {text.strip()[:60]!r}")
    assert found == [], "move these statements to pyretrieve/db/queries.py"


def test_the_allowed_modules_exist_and_still_need_their_exception() -> None:
    # An exception that is no longer needed is removed, so it cannot hide a new statement.
    for name in ALLOWED:
        path = ROOT / name
        assert path.exists(), name
        assert inline_statements(path.read_text(encoding="utf-8")), name


def _public_names() -> set[str]:
    tree = ast.parse(QUERIES.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            names.add(node.name)
        targets = (
            [node.target]
            if isinstance(node, ast.AnnAssign)
            else node.targets
            if isinstance(node, ast.Assign)
            else []
        )
        for target in targets:
            if isinstance(target, ast.Name) and not target.id.startswith("_"):
                names.add(target.id)
    return names - {"__all__"}


def test_every_name_is_exported() -> None:
    assert set(queries.__all__) == _public_names()
    assert list(queries.__all__) == sorted(queries.__all__)


def _uses() -> dict[str, set[str]]:
    """Names of the query module each other module refers to (``queries.NAME`` or imported)."""
    out: dict[str, set[str]] = {}
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        used = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "queries"
            ):
                used.add(node.attr)
            if isinstance(node, ast.ImportFrom) and node.module == "pyretrieve.db.queries":
                used.update(alias.name for alias in node.names)
        out[path.relative_to(ROOT).as_posix()] = used
    return out


def test_every_named_query_is_used() -> None:
    used = set().union(*_uses().values())
    assert sorted(set(queries.__all__) - used) == []
    assert sorted(used - set(queries.__all__)) == []


_CALL = re.compile(r"pyretrieve\.(\w+)\(([^()]*)\)")


@pytest.mark.parametrize("name", [n for n in queries.__all__ if n.isupper()])
def test_calls_into_the_sql_api_name_their_arguments(name: str) -> None:
    text = getattr(queries, name)
    for function, args in _CALL.findall(text):
        for arg in filter(None, (a.strip() for a in args.split(","))):
            assert re.match(r"p_[a-z_]+ => ", arg), f"{name}: {function}({arg})"
