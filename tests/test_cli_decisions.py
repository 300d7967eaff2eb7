"""``pyretrieve decisions``: list who searched what scope when, list the monthly partitions,
prune by retention, create months ahead; admins only, one-line typed errors otherwise."""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg
from click.testing import CliRunner, Result

from pyretrieve.cli import main
from tests.conftest import Database, acting_as, role

WS, PJ = "acme", "docs"


def cli(db: Database, nick: str, *args: str) -> Result:
    return CliRunner(env={"COLUMNS": "250"}).invoke(
        main, [*args, "--dsn", db.app_dsn, "--as", role(nick)]
    )


def setup(db: Database, conn: psycopg.Connection[Any]) -> None:
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
        conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, PJ))
        conn.execute(
            "SELECT pyretrieve.grant_access(%s::regrole, %s, %s, 'support', 'internal')",
            (role("alice"), WS, PJ),
        )
    for query in ("first", "second"):
        with acting_as(conn, "alice"):
            conn.execute(
                "SELECT pyretrieve.authorize(%s, %s, 'support', %s, 'optional', NULL, 10)",
                (WS, PJ, hashlib.sha256(query.encode()).digest()),
            )


def test_list_partitions_prune_and_ensure(db: Database, conn: psycopg.Connection[Any]) -> None:
    setup(db, conn)
    listed = cli(db, "adam", "decisions", "list", "--since", "-1 day", "--workspace", WS)
    assert listed.exit_code == 0, listed.output
    assert listed.output.count(role("alice")) == 2
    assert "first" not in listed.output  # digests only, never the query
    none = cli(db, "adam", "decisions", "list", "--since", "-1 day", "--workspace", "globex")
    assert none.exit_code == 0
    assert role("alice") not in none.output

    parts = cli(db, "adam", "decisions", "partitions")
    assert parts.exit_code == 0, parts.output
    with db.admin() as admin:
        names = [
            r["partition_name"]
            for r in admin.execute(
                "SELECT partition_name FROM pyretrieve.decision_partition_ranges()"
            )
        ]
    assert names
    assert all(n in parts.output for n in names)

    dry = cli(db, "adam", "decisions", "prune", "--older-than", "90d", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "would drop 0 partition(s), 0 decision(s)" in dry.output
    ensured = cli(db, "adam", "decisions", "ensure", "--months-ahead", "4")
    assert ensured.exit_code == 0, ensured.output
    assert ensured.output.startswith("created decisions_")
    again = cli(db, "adam", "decisions", "ensure", "--months-ahead", "4")
    assert again.output.strip() == "every partition already exists"


def test_non_admins_and_bad_retentions_get_one_line_with_a_code(
    db: Database, conn: psycopg.Connection[Any]
) -> None:
    setup(db, conn)
    for args in (
        ("decisions", "prune", "--older-than", "90d"),
        ("decisions", "list", "--since", "-1 day"),
        ("decisions", "partitions"),
    ):
        out = cli(db, "alice", *args)
        assert out.exit_code == 2
        assert out.output.startswith("error [VES_MEMORY_")
        assert "Traceback" not in out.output
        assert len(out.output.strip().splitlines()) == 1
    short = cli(db, "adam", "decisions", "prune", "--older-than", "2 hours")
    assert short.exit_code == 2
    assert short.output.startswith("error [VES_MEMORY_INVALID_INPUT]")
    with db.admin() as admin:
        assert admin.execute("SELECT count(*) AS n FROM pyretrieve.decisions").fetchone() == {
            "n": 2
        }
