"""``pyretrieve audit``: formats, exit codes and the errors a DBA can meet."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest
from click.testing import CliRunner, Result

from pyretrieve.audit import read_report
from pyretrieve.cli import main
from pyretrieve.db import migrate
from tests.conftest import Database, Server, create_database, drop_database, role


def audit(dsn: str, *args: str) -> Result:
    return CliRunner().invoke(main, ["audit", "--dsn", dsn, *args], catch_exceptions=False)


def infos(db: Database) -> int:
    """Info findings of a clean database: three here, more on a cluster with other login roles
    that may SET ROLE to the owner."""
    with psycopg.connect(db.admin_dsn, autocommit=True) as conn:
        return read_report(conn).counts()["info"]


def weaken(db: Database, *statements: str) -> None:
    with psycopg.connect(db.admin_dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


@pytest.fixture
def empty_db(server: Server) -> Iterator[str]:
    name = create_database(server, None)
    try:
        yield server.dsn(name)
    finally:
        drop_database(server, name)


def test_text_report_of_the_shipped_schema(db: Database) -> None:
    result = audit(db.admin_dsn)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for title in ("Tables", "Policies", "Privileges", "Functions", "Views", "Roles", "Access"):
        assert title in out
    assert "PostgreSQL " in out.splitlines()[0]
    assert "INFO  security_definer  function pyretrieve.create_model_index(text)" in out
    assert out.rstrip().endswith(f"findings: 0 error, 0 warning, {infos(db)} info")


def test_markdown_report(db: Database) -> None:
    result = audit(db.admin_dsn, "--format", "markdown")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "# pyretrieve audit"
    assert f"findings: 0 error, 0 warning, {infos(db)} info" in lines
    assert lines.index("## Findings") < lines.index("## Tables")
    assert "| severity | code | object | evidence | fix |" in lines
    assert any(line.startswith("| info | security_definer |") for line in lines)
    # Every table row has as many cells as its header.
    policy_header = lines.index("## Policies") + 2
    assert lines[policy_header].count(" | ") == 6


def test_json_report_is_canonical_and_stable(db: Database) -> None:
    first = audit(db.admin_dsn, "--format", "json")
    second = audit(db.admin_dsn, "--format", "json")
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    doc = json.loads(first.stdout)
    assert first.stdout.strip() == json.dumps(
        doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert set(doc) == {
        "server",
        "summary",
        "tables",
        "policies",
        "privileges",
        "functions",
        "views",
        "keys",
        "objects",
        "roles",
        "access",
        "findings",
    }
    assert doc["summary"] == {"error": 0, "warning": 0, "info": infos(db)}
    assert [t["table_name"] for t in doc["tables"]] == sorted(
        t["table_name"] for t in doc["tables"]
    )
    assert {f["code"] for f in doc["findings"]} == {"security_definer", "login_can_become_owner"}
    assert all(
        set(f) == {"severity", "code", "object_type", "object", "evidence", "fix"}
        for f in doc["findings"]
    )


def test_json_access_matrix_renders_times_and_durations(db: Database) -> None:
    weaken(
        db,
        "SELECT pyretrieve.create_workspace('acme')",
        "SELECT pyretrieve.create_project('acme', 'docs')",
        f"SELECT pyretrieve.grant_access('\"{role('alice')}\"', 'acme', 'docs', 'support',"
        " 'internal', interval '2 days', 'optional', timestamptz '2030-01-01 00:00:00+00')",
    )
    doc = json.loads(audit(db.admin_dsn, "--format", "json").stdout)
    [entry] = [a for a in doc["access"] if a["principal"] == role("alice")]
    assert entry["max_age_us"] == 2 * 24 * 3600 * 1_000_000
    assert entry["expires_at"] == "2030-01-01T00:00:00.000000Z"
    assert (entry["can_read"], entry["can_write"], entry["live"]) == (True, False, True)


def test_fail_on_decides_the_exit_code(db: Database) -> None:
    # Info only: clean at either threshold.
    assert audit(db.admin_dsn, "--fail-on", "warning").exit_code == 0
    # A warning fails --fail-on warning only.
    weaken(
        db,
        "CREATE POLICY grants_all ON pyretrieve.grants FOR ALL TO pyretrieve_api"
        " USING (granted_at > now() - interval '1 day')",
    )
    assert audit(db.admin_dsn).exit_code == 0
    assert audit(db.admin_dsn, "--fail-on", "error").exit_code == 0
    result = audit(db.admin_dsn, "--fail-on", "warning")
    assert result.exit_code == 1
    assert "WARNING  overlapping_permissive_policies  table pyretrieve.grants" in result.stdout
    # An error fails both.
    weaken(db, "ALTER TABLE pyretrieve.grants DISABLE ROW LEVEL SECURITY")
    assert audit(db.admin_dsn).exit_code == 1
    assert audit(db.admin_dsn, "--format", "json", "--fail-on", "warning").exit_code == 1


def test_as_an_admin_principal_and_not_as_a_reader(db: Database) -> None:
    assert audit(db.app_dsn, "--as", role("adam"), "--format", "json").exit_code == 0
    result = audit(db.app_dsn, "--as", role("alice"))
    assert result.exit_code == 2
    assert result.stderr.strip() == "error [VES_MEMORY_ACCESS_DENIED]: access denied"
    assert result.stdout == ""


def test_a_database_without_pyretrieve_is_one_clear_error(empty_db: str) -> None:
    result = audit(empty_db)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error [VES_MEMORY_NOT_INSTALLED]: pyretrieve is not installed in this database"
        " (run `pyretrieve install`)"
    ]


def test_a_schema_older_than_the_audit_views_says_to_upgrade(empty_db: str) -> None:
    migrate.upgrade(empty_db, "pyretrieve_0001")
    result = audit(empty_db)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error [VES_MEMORY_NOT_INSTALLED]: the pyretrieve schema predates the audit views"
        " (0002): run `pyretrieve install` to upgrade it"
    ]
    migrate.upgrade(empty_db)
    assert audit(empty_db).exit_code == 0
