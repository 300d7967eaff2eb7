"""Errors for operators: one line with a stable code, no traceback unless ``--debug``.

Each case runs the console script as a user would, against a real server: the embedded one in
its own ``PYRETRIEVE_HOME``, or a database of the test server for ``--dsn`` cases.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pyretrieve import contract
from pyretrieve.db.errors import translate
from pyretrieve.errors import (
    AuthenticationFailed,
    SchemaMissing,
    ServerUnreachable,
    UnknownPrincipal,
)
from tests.conftest import (
    Database,
    Server,
    acting_as,
    create_database,
    drop_database,
    role,
)
from tests.test_cli import cli, home, ok  # noqa: F401  (home is a fixture)


def one_line(result: object, code: str) -> str:
    stderr = getattr(result, "stderr", "")
    assert getattr(result, "returncode", None) == 2, stderr
    assert "Traceback" not in stderr
    (line,) = stderr.strip().splitlines()
    assert line.startswith(f"error [{code}]: "), line
    return line


def test_unreachable_server(home: Path) -> None:  # noqa: F811
    dsn = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=5"
    for command in (["install"], ["workspaces"], ["search", "q", "--workspace", "a",
                    "--project", "b", "--purpose", "c", "--as", "x", "--mode", "lexical"]):  # fmt: skip
        line = one_line(cli(home, *command, "--dsn", dsn), "VES_MEMORY_SERVER_UNREACHABLE")
        assert "is it running" in line
    # --debug shows the traceback instead.
    debug = cli(home, "--debug", "install", "--dsn", dsn)
    assert debug.returncode != 0
    assert "Traceback" in debug.stderr


def test_install_with_a_malformed_dsn_prints_one_line(home: Path) -> None:  # noqa: F811
    line = one_line(cli(home, "install", "--dsn", "not a dsn"), "VES_MEMORY_INVALID_INPUT")
    assert "connection string" in line


def test_authentication_failure(server: Server, db: Database, home: Path) -> None:  # noqa: F811
    params = conninfo_to_dict(db.admin_dsn)
    params.update(user="no_such_login_role", password="wrong")
    dsn = make_conninfo(**{k: str(v) for k, v in params.items() if v is not None})
    line = one_line(cli(home, "workspaces", "--dsn", dsn), "VES_MEMORY_AUTHENTICATION_FAILED")
    assert "refused the login" in line
    # The driver's text for a wrong password (no SQLSTATE at connect) maps alike.
    wrong = psycopg.OperationalError(
        'connection failed: FATAL:  password authentication failed for user "app"'
    )
    assert isinstance(translate(wrong), AuthenticationFailed)
    refused = psycopg.OperationalError("connection failed: ... failed: Connection refused")
    assert isinstance(translate(refused), ServerUnreachable)


def test_schema_missing(server: Server, home: Path) -> None:  # noqa: F811
    name = create_database(server, None)
    try:
        dsn = server.dsn(name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE ROLE first_hour_admin NOLOGIN")
        try:
            line = one_line(
                cli(home, "workspaces", "--dsn", dsn, "--as", "first_hour_admin"),
                "VES_MEMORY_SCHEMA_MISSING",
            )
            assert "pyretrieve install" in line
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("DROP ROLE first_hour_admin")
        # An older schema without a function called: 42883 on a pyretrieve.* function.
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA pyretrieve")
            with pytest.raises(psycopg.Error) as caught:
                conn.execute("SELECT pyretrieve.list_projects()")
        assert caught.value.sqlstate == "42883"
        assert isinstance(translate(caught.value), SchemaMissing)
    finally:
        drop_database(server, name)


def test_unknown_principal(db: Database, home: Path) -> None:  # noqa: F811
    for command in (
        ["workspaces"],
        ["search", "q", "--workspace", "a", "--project", "b", "--purpose", "c"],
        ["ingest", str(Path(__file__)), "-w", "a", "-p", "b", "--no-embed"],
    ):
        line = one_line(
            cli(home, *command, "--dsn", db.app_dsn, "--as", "no_such_principal"),
            "VES_MEMORY_UNKNOWN_PRINCIPAL",
        )
        assert "'no_such_principal'" in line
        assert "pyretrieve principals create no_such_principal" in line
    # The library paths (SET ROLE inside Ingestor and Retriever) map the SQLSTATE alike.
    with (
        psycopg.connect(db.app_dsn, autocommit=True) as conn,
        pytest.raises(psycopg.Error) as caught,
    ):
        conn.execute("SET ROLE no_such_principal")
    assert caught.value.sqlstate == "22023"
    assert isinstance(translate(caught.value), UnknownPrincipal)


def test_unknown_model_in_search_fails_like_ingest(db: Database, home: Path) -> None:  # noqa: F811
    args = ["--workspace", "a", "--project", "b", "--purpose", "c", "--dsn", db.app_dsn]
    line = one_line(
        cli(home, "search", "q", *args, "--model", "no-such-model", "--as", "x"),
        "VES_MEMORY_UNKNOWN_MODEL",
    )
    assert "no embedder for model 'no-such-model'" in line
    assert line == one_line(
        cli(home, "ingest", os.devnull, "-w", "a", "-p", "b", "--model", "no-such-model",
            "--dsn", db.app_dsn, "--as", "x"),
        "VES_MEMORY_UNKNOWN_MODEL",
    )  # fmt: skip


def test_bad_grant_arguments_name_the_option_and_the_rule(
    db: Database,
    conn: psycopg.Connection[Any],
    home: Path,  # noqa: F811
) -> None:
    """A grant's arguments fail with what to fix, not "invalid input" or "internal error",
    and all grantees or none are granted."""
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace('acme')")
        conn.execute("SELECT pyretrieve.create_project('acme', 'docs')")
    admin = ["--dsn", db.app_dsn, "--as", role("adam")]
    scope = ["--workspace", "acme", "--project", "docs", "--purpose", "support"]
    grant = ["grant", role("alice"), *scope, "--ceiling", "internal", *admin]

    def grants() -> int:
        with db.admin() as c:
            row = c.execute("SELECT count(*) AS n FROM pyretrieve.grants").fetchone()
        assert row is not None
        return int(row["n"])

    line = one_line(
        cli(home, "grant", role("alice"), "no_such_role", *scope, "--ceiling", "internal", *admin),
        "VES_MEMORY_UNKNOWN_PRINCIPAL",
    )
    assert "no role 'no_such_role' to grant to" in line
    assert "pyretrieve principals create no_such_role --reader" in line
    assert grants() == 0
    line = one_line(cli(home, *grant, "--max-age", "banana"), "VES_MEMORY_INVALID_INPUT")
    assert line.endswith("--max-age 'banana' does not read as an interval: write e.g. '30 days'"
                         " or '12 hours'")  # fmt: skip
    line = one_line(cli(home, *grant, "--max-age", "3 months"), "VES_MEMORY_INVALID_INPUT")
    assert line.endswith("max_age must be positive days/hours (no months or years)")
    line = one_line(cli(home, *grant, "--expires-at", "soonish"), "VES_MEMORY_INVALID_INPUT")
    assert "--expires-at 'soonish' does not read as a timestamptz" in line
    for option, value, what in (
        ("--workspace", "Acme", "workspace"),
        ("--project", "my docs", "project"),
        ("--purpose", "-x", "purpose"),
    ):
        args = [a if a != {"workspace": "acme", "project": "docs", "purpose": "support"}[what]
                else value for a in grant]  # fmt: skip
        assert option in args
        line = one_line(cli(home, *args), "VES_MEMORY_INVALID_INPUT")
        assert line.endswith(contract.identifier_error(what)), line
    assert grants() == 0

    revoke = cli(home, "revoke", "no_such_role", *scope, *admin)
    assert "no role 'no_such_role' to revoke a grant from" in one_line(
        revoke, "VES_MEMORY_UNKNOWN_PRINCIPAL"
    )
    created = cli(home, "workspaces", "create", "Acme", *admin)
    assert one_line(created, "VES_MEMORY_INVALID_INPUT").endswith(
        contract.identifier_error("workspace")
    )
    searched = cli(home, "search", "q", "--workspace", "acme", "--project", "Docs",
                   "--purpose", "support", "--dsn", db.app_dsn, "--as", role("alice"))  # fmt: skip
    assert one_line(searched, "VES_MEMORY_INVALID_INPUT").endswith(
        contract.identifier_error("project")
    )
    ok(cli(home, *grant, "--max-age", "30 days"))
    assert grants() == 1
