"""The harness itself: a real server, a clean database per test, principals that are not superusers."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.conftest import SCHEMA_VERSION, Database, acting_as, role


def test_each_test_gets_the_installed_schema(db: Database) -> None:
    with db.admin() as admin:
        row = admin.execute("SELECT schema_version FROM pyretrieve.installation").fetchone()
        assert row == {"schema_version": SCHEMA_VERSION}
        ext = admin.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        assert ext is not None
        assert ext["extversion"] >= "0.7"


def test_databases_are_isolated(db: Database) -> None:
    with db.admin() as admin:
        admin.execute("SELECT pyretrieve.create_workspace('isolation-check')")
        admin.commit()
        n = admin.execute("SELECT count(*) AS n FROM pyretrieve.workspaces").fetchone()
        assert n == {"n": 1}


def test_databases_are_isolated_second(db: Database) -> None:
    # Runs after the test above: the workspace it created must not be here.
    with db.admin() as admin:
        n = admin.execute("SELECT count(*) AS n FROM pyretrieve.workspaces").fetchone()
        assert n == {"n": 0}


def test_principals_are_neither_superuser_nor_bypassrls(conn: psycopg.Connection[Any]) -> None:
    for nick in ("alice", "wally", "adam"):
        with acting_as(conn, nick):
            row = conn.execute(
                "SELECT current_user AS who, r.rolsuper, r.rolbypassrls FROM pg_roles r WHERE r.rolname = current_user"
            ).fetchone()
            assert row == {"who": role(nick), "rolsuper": False, "rolbypassrls": False}
    who = conn.execute("SELECT session_user AS s, current_setting('is_superuser') AS su").fetchone()
    assert who is not None
    assert who["su"] == "off"
