"""sql/tests/pyretrieve_test.sql is generated from the installed schema and must be current."""

from __future__ import annotations

import difflib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

from tests.conftest import Server, create_database, drop_database

ROOT = Path(__file__).resolve().parent.parent.parent
PGTAP_TEST = ROOT / "sql" / "tests" / "pyretrieve_test.sql"
GENERATOR = ROOT / "sql" / "tests" / "gen_pyretrieve_test.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_pyretrieve_test", GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: its dataclasses look their module up by name.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_pgtap_file_is_current(server: Server, tmp_path: Path) -> None:
    gen = _generator()
    # A fresh database with sql/pyretrieve.sql installed, as the generator builds its own.
    name = create_database(server, None)
    try:
        text = gen.render_in(server.dsn(name))
    finally:
        drop_database(server, name)
    generated = tmp_path / "pyretrieve_test.sql"
    generated.write_text(text, encoding="utf-8")

    current = PGTAP_TEST.read_text(encoding="utf-8")
    expected = generated.read_text(encoding="utf-8")
    diff = "\n".join(
        difflib.unified_diff(
            current.splitlines(),
            expected.splitlines(),
            "sql/tests/pyretrieve_test.sql",
            "generated",
            lineterm="",
        )
    )
    assert current == expected, (
        "sql/tests/pyretrieve_test.sql is out of date; regenerate it with "
        "`python sql/tests/gen_pyretrieve_test.py` (a throwaway embedded server) or "
        "`python sql/tests/gen_pyretrieve_test.py --dsn <superuser connection string>`:\n" + diff
    )


def test_the_generator_refuses_a_schema_that_breaks_a_rule(server: Server) -> None:
    # The file states rules for every object; a weakened schema is not written as shipped.
    gen = _generator()
    name = create_database(server, None)
    try:
        with psycopg.connect(server.dsn(name)) as conn:
            gen.install(conn)
            conn.execute("ALTER TABLE pyretrieve.grants NO FORCE ROW LEVEL SECURITY")
            conn.commit()
            with pytest.raises(gen.SchemaRefused, match=r"forced; offending: grants"):
                gen.render(conn)
    finally:
        drop_database(server, name)
