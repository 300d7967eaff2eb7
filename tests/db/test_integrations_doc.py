"""docs/integrations.md: every Python block runs, in order, against a test database.

The page's first block holds its settings (``DSN``, ``WRITER``, ``READER``); only those three
lines are replaced, with the test database's authenticator and the session's writer and
reader roles. The scope and grants are made as the page's SQL block describes.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("langchain_core", reason="the langchain extra is not installed")
pytest.importorskip("llama_index.core", reason="the llamaindex extra is not installed")

from pyretrieve.types import TRUST_LABEL
from tests.conftest import Database, acting_as, role

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "integrations.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
SETTINGS = ("DSN", "WRITER", "READER")


def python_blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def substitute(block: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        block, count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", block, flags=re.M)
        assert count == 1, f"the settings block of {DOC.name} has no single {name} line"
    return block


def test_the_integration_examples_run(db: Database, conn: psycopg.Connection[Any]) -> None:
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace('acme')")
        conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
        conn.execute("SELECT pyretrieve.register_model('hash-ngram-v1', 256)")
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'ingest', 'internal')",
            (role("wally"),),
        )
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'support',"
            " 'confidential')",
            (role("alice"),),
        )
    blocks = python_blocks()
    assert len(blocks) == 4
    blocks[0] = substitute(
        blocks[0], {"DSN": db.app_dsn, "WRITER": role("wally"), "READER": role("alice")}
    )
    namespace: dict[str, Any] = {"__name__": "integrations_doc"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)
    lines = out.getvalue().splitlines()

    assert lines[0] == "inserted 2 unchanged 0 skipped 0"
    # The retriever's first hit is the credentials page, labelled untrusted, vectors used.
    assert lines[1] == f"1 {TRUST_LABEL} handbook.md#1 used"
    assert lines[2].strip() == "Rotate credentials every 90 days from the admin console."
    assert "async: handbook.md#2" in lines
    llama = lines[lines.index("async: handbook.md#2") + 1 :]
    assert llama[0].endswith(" faq#credentials")
    assert f"trust: {TRUST_LABEL}" in llama
    assert "Credentials expire after 90 days." in llama
    # An LLM is shown the label and the source beside the text, not the whole explanation.
    assert not any("explanation" in line for line in llama)
