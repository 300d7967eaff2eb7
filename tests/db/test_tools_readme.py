"""The README's agent example runs as written (DSN, WRITER and READER filled in)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, acting_as, role
from tests.db.seed import grant

README = Path(__file__).resolve().parents[2] / "README.md"


def example() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- tools-example -->\n```python\n(.*?)```", text, re.S)
    assert match, "the README has no tools example"
    return match.group(1)


def test_the_readme_tools_example_runs(
    db: Database, conn: psycopg.Connection[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace('acme')")
        conn.execute("SELECT pyretrieve.create_project('acme', 'agents')")
        conn.execute("SELECT pyretrieve.register_model('hash-ngram-v1', 256)")
        grant(conn, role("wally"), "acme", "agents", "ingest", "internal")
        grant(conn, role("alice"), "acme", "agents", "agent", "internal")
    scope: dict[str, Any] = {"DSN": db.app_dsn, "WRITER": role("wally"), "READER": role("alice")}
    exec(compile(example(), "README.md", "exec"), scope)
    request = scope["request"]
    assert request["tools"][0]["type"] == "function"
    assert request["tools"][0]["function"]["name"] == "cancel_order"
    assert request["tools"][0]["function"]["parameters"]["required"] == ["order_id"]
    assert "cancel_order" in capsys.readouterr().out
