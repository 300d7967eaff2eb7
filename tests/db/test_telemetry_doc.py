"""docs/telemetry.md: the Python blocks run, in order, in a fresh interpreter (OpenTelemetry
allows one tracer provider per process) against a test database; only the settings block's
``DSN`` and ``READER`` lines are replaced."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel test dependencies are not installed")

from tests.conftest import ROOT, Database, acting_as, role

DOC = ROOT / "docs" / "telemetry.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def substitute(block: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        block, count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", block, flags=re.M)
        assert count == 1, f"the settings block of {DOC.name} has no single {name} line"
    return block


def test_the_telemetry_example_runs(
    db: Database, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace('acme')")
        conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'ingest', 'internal')",
            (role("wally"),),
        )
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, 'acme', 'docs', 'support', 'internal')",
            (role("alice"),),
        )
    with acting_as(conn, "wally"):
        conn.execute(
            "SELECT pyretrieve.put_fragment('acme', 'docs',"
            " 'Rotate credentials every 90 days from the admin console.')"
        )

    blocks = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 3
    blocks[0] = substitute(blocks[0], {"DSN": db.app_dsn, "READER": role("alice")})
    script = tmp_path / "telemetry_doc.py"
    script.write_text("\n".join(blocks))
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    names = [line.split(" ", 1)[0] for line in lines]
    assert names == [
        "pyretrieve.search",
        "pyretrieve.embed",
        "pyretrieve.authorize",
        "pyretrieve.lexical",
        "pyretrieve.vector",
        "pyretrieve.records",
        "pyretrieve.fuse",
    ]
    shown = {
        name: ast.literal_eval(line.split(" ", 1)[1])
        for name, line in zip(names, lines, strict=True)
    }
    assert shown["pyretrieve.search"] == {
        "workspace": "acme",
        "project": "docs",
        "mode": "lexical",
        "results": 1,
        "semantic.status": "not_requested",
    }
    assert shown["pyretrieve.lexical"] == {"candidates": 1}
    assert shown["pyretrieve.vector"] == {"status": "not_requested"}
    assert "credentials" not in result.stdout
