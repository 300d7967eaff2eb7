"""``pyretrieve tools register`` and ``pyretrieve tools rollout`` against a real server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from pyretrieve.cli import main
from tests.conftest import Database, acting_as, role

WS, PJ = "acme", "agents"


@pytest.fixture
def scope(db: Database, conn: psycopg.Connection[Any]) -> Database:
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
        conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, PJ))
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'ingest', 'internal')",
            (role("wally"), WS, PJ),
        )
        conn.execute("SELECT pyretrieve.register_model('hash-ngram-v1', 256)")
    return db


def run(db: Database, nick: str, *args: str) -> Result:
    return CliRunner().invoke(
        main, [*args, "--dsn", db.app_dsn, "--as", role(nick)], catch_exceptions=False
    )


def mcp(path: Path, description: str) -> Path:
    tools = [
        {
            "name": "delete_order",
            "description": description,
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
        {"name": "get_order", "description": "Get an order.", "inputSchema": {"type": "object"}},
    ]
    path.write_text(json.dumps({"tools": tools}), encoding="utf-8")
    return path


def test_register_then_reregister(scope: Database, tmp_path: Path) -> None:
    first = run(
        scope,
        "wally",
        "tools",
        "register",
        str(mcp(tmp_path / "t.json", "Delete.")),
        "--workspace",
        WS,
        "--project",
        PJ,
    )
    assert first.exit_code == 0, first.output
    assert json.loads(first.output) == {
        "tools": 2,
        "created": 2,
        "superseded": 0,
        "updated": 0,
        "unchanged": 0,
        "embedded": 2,
    }
    same = run(
        scope,
        "wally",
        "tools",
        "register",
        str(tmp_path / "t.json"),
        "--workspace",
        WS,
        "--project",
        PJ,
    )
    assert json.loads(same.output)["unchanged"] == 2
    changed = run(
        scope,
        "wally",
        "tools",
        "register",
        str(mcp(tmp_path / "t.json", "Delete an order for good.")),
        "-w",
        WS,
        "-p",
        PJ,
    )
    assert json.loads(changed.output)["superseded"] == 1
    with scope.admin() as admin:
        rows = admin.execute(
            "SELECT name, schema_version FROM pyretrieve.tools ORDER BY name, schema_version"
        ).fetchall()
    assert [(r["name"], r["schema_version"]) for r in rows] == [
        ("delete_order", 1),
        ("delete_order", 2),
        ("get_order", 1),
    ]


def test_errors_are_one_line(scope: Database, tmp_path: Path) -> None:
    denied = run(
        scope,
        "alice",
        "tools",
        "register",
        str(mcp(tmp_path / "t.json", "Delete.")),
        "-w",
        WS,
        "-p",
        PJ,
    )
    assert denied.exit_code == 2
    assert denied.output.strip().startswith("error [")
    assert len(denied.output.strip().splitlines()) == 1
    rollout = run(scope, "adam", "tools", "rollout", WS, PJ, "canary")
    assert rollout.exit_code == 0, rollout.output
    assert rollout.output.strip() == "canary"
    refused = run(scope, "wally", "tools", "rollout", WS, PJ, "full")
    assert refused.exit_code == 2
