"""docs/guarantees.md names only tests that exist.

Every `file::test` (or `file::Class::test`) reference in the document, with paths relative to
`tests/`, must name a test function defined in that file. The files are parsed with `ast`, not
collected, so renaming or removing a test the document cites fails here at once, with the
stale references listed.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "guarantees.md"
TESTS = ROOT / "tests"

# `db/test_writers.py::TestRefused::test_reader_cannot_write`, `unit/test_types.py::test_x`
REFERENCE = re.compile(r"`([\w./-]+\.py)((?:::\w+)+)`")


def references(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """Each distinct `file::name[::name]` reference in the text, in order of appearance."""
    seen: dict[tuple[str, tuple[str, ...]], None] = {}
    for match in REFERENCE.finditer(text):
        seen[(match.group(1), tuple(match.group(2).split("::")[1:]))] = None
    return list(seen)


def _test_names(body: list[ast.stmt], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Test functions at module level and test methods of `Test*` classes (nested too)."""
    names: set[tuple[str, ...]] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith("test"):
                names.add((*prefix, node.name))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names |= _test_names(node.body, (*prefix, node.name))
    return names


@cache
def defined_tests(relative: str) -> frozenset[tuple[str, ...]] | None:
    """The test names a file under tests/ defines, or None when there is no such file."""
    path = TESTS / relative
    if not path.is_file():
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return frozenset(_test_names(tree.body))


def stale_references(text: str) -> list[str]:
    stale = []
    for relative, name in references(text):
        ref = "::".join((relative, *name))
        tests = defined_tests(relative)
        if tests is None:
            stale.append(f"{ref}  (no file tests/{relative})")
        elif name not in tests:
            stale.append(f"{ref}  (no such test in tests/{relative})")
    return stale


def test_every_reference_names_an_existing_test() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert len(references(text)) >= 100, "the reference pattern no longer matches the document"
    stale = stale_references(text)
    assert not stale, (
        f"{DOC.relative_to(ROOT)} cites tests that do not exist (renamed or removed?):\n  "
        + "\n  ".join(stale)
    )


def test_the_check_notices_a_stale_reference() -> None:
    text = (
        "`unit/test_types.py::test_classification_order`"
        " `unit/test_types.py::test_no_such_thing`"
        " `db/test_writers.py::TestRefused::test_reader_cannot_write`"
        " `db/test_writers.py::test_reader_cannot_write`"
        " `db/no_such_file.py::test_x`"
    )
    assert stale_references(text) == [
        "unit/test_types.py::test_no_such_thing  (no such test in tests/unit/test_types.py)",
        "db/test_writers.py::test_reader_cannot_write  (no such test in tests/db/test_writers.py)",
        "db/no_such_file.py::test_x  (no file tests/db/no_such_file.py)",
    ]


def test_the_counts_table_is_current(request: pytest.FixtureRequest) -> None:
    """The Counts section equals `python docs/gen_test_counts.py` for the suite as collected in
    this run (only when the run collected every test file, as CI's does)."""
    import importlib.util
    from collections import Counter

    items = request.session.items
    files = {Path(str(item.fspath)).relative_to(TESTS).as_posix() for item in items}
    every = {p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py")}
    if files != every:
        pytest.skip("the counts cover the whole suite; this run collected part of it")
    spec = importlib.util.spec_from_file_location(
        "gen_test_counts", ROOT / "docs" / "gen_test_counts.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases: Counter[str] = Counter(
        re.sub(r"\[.*", "", item.nodeid).removeprefix("tests/") for item in items
    )
    text = DOC.read_text(encoding="utf-8")
    assert module.render(text, cases) == text, "run python docs/gen_test_counts.py"
