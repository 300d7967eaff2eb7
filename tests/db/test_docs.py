"""docs/sql-api.md is generated from the installed schema's comments and must be current."""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path
from types import ModuleType

import psycopg

from tests.conftest import Database

ROOT = Path(__file__).resolve().parent.parent.parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_sql_api", ROOT / "docs" / "gen_sql_api.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sql_api_doc_is_current(db: Database) -> None:
    gen = _generator()
    with psycopg.connect(db.admin_dsn) as conn:
        expected = gen.render(conn)
    current = (ROOT / "docs" / "sql-api.md").read_text(encoding="utf-8")
    diff = "\n".join(
        difflib.unified_diff(
            current.splitlines(), expected.splitlines(), "docs/sql-api.md", "generated", lineterm=""
        )
    )
    assert current == expected, (
        "docs/sql-api.md is out of date; regenerate it with "
        "`python docs/gen_sql_api.py --dsn <server>`:\n" + diff
    )


def test_every_public_function_is_documented(db: Database) -> None:
    # A function a reader, writer or admin is meant to call directly carries a comment; the
    # uncommented ones are the helpers that policies, triggers and other functions call.
    with psycopg.connect(db.admin_dsn) as conn:
        text = _generator().render(conn)
    for name in (
        "authorize",
        "lexical_candidates",
        "vector_candidates",
        "fragments",
        "search",
        "put_fragment",
        "supersede_fragment",
        "retract_fragment",
        "put_embedding",
        "bind_write_scope",
        "create_workspace",
        "create_project",
        "grant_access",
        "revoke_access",
        "register_model",
        "create_model_index",
    ):
        assert f"### `pyretrieve.{name}`" in text, f"{name} has no COMMENT ON FUNCTION"
