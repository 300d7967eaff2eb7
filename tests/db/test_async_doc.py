"""docs/async.md: its Python blocks run, in order, against a test database.

The first block's ``DSN`` and ``READER`` lines are replaced with the test database's
authenticator (a login role that may only SET ROLE, as the page describes) and the session's
reader; the scope, grants and fragments are made here.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database, acting_as, role
from tests.db.seed import grant

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "async.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_the_async_page_runs(db: Database, conn: psycopg.Connection[Any]) -> None:
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace('acme')")
        conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
        grant(conn, role("alice"), "acme", "docs", "support", "internal")
        grant(conn, role("wally"), "acme", "docs", "ingest", "internal")
    with acting_as(conn, "wally"):
        for uri, body in (
            ("handbook.md", "rotate credentials every 90 days"),
            ("faq.md", "credentials expire after 90 days"),
        ):
            conn.execute(
                "SELECT pyretrieve.put_fragment(p_workspace => 'acme', p_project => 'docs',"
                " p_body => %s, p_classification => 'internal', p_source_uri => %s)",
                (body, uri),
            )
    blocks = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 2
    for name, value in (("DSN", db.app_dsn), ("READER", role("alice"))):
        blocks[0], count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", blocks[0], flags=re.M)
        assert count == 1
    namespace: dict[str, Any] = {"__name__": "async_doc"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)
    assert out.getvalue().splitlines() == [
        "sync: handbook.md not_requested",
        "async: ['handbook.md', 'faq.md']",
    ]
