"""A sample application's own Alembic environment (tests/sample_app) upgrades its revisions and
pyretrieve's together, with the ``alembic`` command an application runs.

The sample's revision depends on a pyretrieve revision; ``alembic upgrade heads`` applies both
branches on a fresh database, the pyretrieve catalog equals the install script's, and the
application's branch comes down alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.engine import URL

from pyretrieve.db import migrate
from tests.conftest import HEAD, ROOT, Server, create_database, drop_database
from tests.db.test_migrations import catalog_diff, install_script, snapshot_of

SAMPLE = ROOT / "tests" / "sample_app"
INI = SAMPLE / "alembic.ini"
SAMPLE_HEAD = "sample_0001"


def url_of(dsn: str) -> str:
    """A SQLAlchemy URL (psycopg driver) for a libpq connection string."""
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    return URL.create(
        "postgresql+psycopg",
        username=params.pop("user", None),
        password=params.pop("password", None) or None,
        database=params.pop("dbname", None),
        query=params,
    ).render_as_string(hide_password=False)


def alembic(dsn: str, *args: str, cwd: Path) -> str:
    """``alembic -c tests/sample_app/alembic.ini ARGS`` as an application runs it."""
    env = {**os.environ, "DATABASE_URL": url_of(dsn), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(INI), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def versions(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {r[0] for r in conn.execute("SELECT version_num FROM public.alembic_version")}


def script() -> Any:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(Config(str(INI)))


def applied(dsn: str) -> set[str]:
    """Every revision the database is at or above: the rows of alembic_version and what they
    stand on, dependencies included (Alembic records a depended-upon head implicitly)."""
    rows = tuple(versions(dsn))
    return {r.revision for r in script().iterate_revisions(rows, "base")} if rows else set()


def assert_at_heads(dsn: str) -> None:
    heads = set(script().get_heads())
    assert heads == {SAMPLE_HEAD, HEAD}
    assert heads <= applied(dsn)
    assert versions(dsn) <= heads


def has_table(dsn: str, name: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        return bool(row and row[0])


@pytest.fixture
def fresh(server: Server) -> Iterator[str]:
    name = create_database(server, None)
    try:
        yield server.dsn(name)
    finally:
        drop_database(server, name)


@pytest.fixture(scope="module")
def script_catalog(server: Server) -> dict[str, list[tuple[object, ...]]]:
    """The catalog sql/pyretrieve.sql installs, from a database of its own."""
    name = create_database(server, None)
    try:
        install_script(server.dsn(name))
        return snapshot_of(server.dsn(name))
    finally:
        drop_database(server, name)


def test_the_sample_sees_both_branches(tmp_path: Path, fresh: str) -> None:
    lines = alembic(fresh, "heads", cwd=tmp_path).splitlines()
    assert f"{SAMPLE_HEAD} (sample) (head)" in lines
    # pyretrieve's head is an "effective head" while the sample depends on it directly.
    assert [x for x in lines if x.startswith(f"{HEAD} (pyretrieve) (") and x.endswith("head)")]
    # The sample depends on a pyretrieve revision by id, one at or below pyretrieve's head, so
    # later pyretrieve revisions stack above it.
    revisions = script()
    dependency = revisions.get_revision(SAMPLE_HEAD)._resolved_dependencies
    assert dependency == ("pyretrieve_0006",)
    below_head = {r.revision for r in revisions.iterate_revisions(HEAD, "base")}
    assert set(dependency) <= below_head
    # A branch label would not do: it names the branch's first revision.
    assert revisions.get_revision("pyretrieve").revision == "pyretrieve_0001"


def test_upgrade_heads_applies_both_branches_then_the_app_comes_down_alone(
    tmp_path: Path, fresh: str, script_catalog: dict[str, list[tuple[object, ...]]]
) -> None:
    alembic(fresh, "upgrade", "heads", cwd=tmp_path)

    assert_at_heads(fresh)
    assert has_table(fresh, "public.sample_notes")
    current = alembic(fresh, "current", cwd=tmp_path)
    assert SAMPLE_HEAD in current
    assert HEAD in current
    # pyretrieve's objects are exactly what the install script makes.
    with_app = snapshot_of(fresh)
    diff = catalog_diff(script_catalog, with_app, ("sql/pyretrieve.sql", "alembic upgrade heads"))
    assert not diff, diff
    # pyretrieve's own bookkeeping table is not used: one version table for every branch.
    assert not has_table(fresh, f"public.{migrate.VERSION_TABLE}")

    # Upgrading again is a no-op.
    alembic(fresh, "upgrade", "heads", cwd=tmp_path)
    assert_at_heads(fresh)

    # The application's branch alone comes down; pyretrieve stays as it was.
    alembic(fresh, "downgrade", "sample@base", cwd=tmp_path)
    assert versions(fresh) == {HEAD}
    assert not has_table(fresh, "public.sample_notes")
    assert not catalog_diff(with_app, snapshot_of(fresh), ("both", "pyretrieve only"))

    # And back up: only the application's revision runs.
    alembic(fresh, "upgrade", "heads", cwd=tmp_path)
    assert_at_heads(fresh)
    assert not catalog_diff(with_app, snapshot_of(fresh), ("before", "after"))


def test_pyretrieve_cannot_come_down_under_the_app_that_depends_on_it(
    tmp_path: Path, fresh: str
) -> None:
    alembic(fresh, "upgrade", "heads", cwd=tmp_path)
    # Downgrading pyretrieve below the revision the app depends on takes the app down first.
    alembic(fresh, "downgrade", "pyretrieve@base", cwd=tmp_path)
    assert versions(fresh) == set()
    assert not has_table(fresh, "public.sample_notes")
    with psycopg.connect(fresh) as conn:
        assert conn.execute("SELECT to_regnamespace('pyretrieve')").fetchone() == (None,)


def test_a_database_installed_by_pyretrieve_joins_the_app_by_a_stamp(
    tmp_path: Path, fresh: str
) -> None:
    """pyretrieve installed first (``pyretrieve install``, its own version table): the app
    stamps the installed revision, then ``upgrade heads`` runs only the app's revision."""
    migrate.upgrade(fresh)
    assert migrate.current(fresh) == HEAD
    before = snapshot_of(fresh)
    alembic(fresh, "stamp", HEAD, cwd=tmp_path)
    alembic(fresh, "upgrade", "heads", cwd=tmp_path)
    assert_at_heads(fresh)
    assert has_table(fresh, "public.sample_notes")
    assert not catalog_diff(before, snapshot_of(fresh), ("installed", "joined"))
