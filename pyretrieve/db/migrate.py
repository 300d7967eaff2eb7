"""Install and upgrade the schema with Alembic; the revisions execute versioned SQL files."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from pyretrieve import resources
from pyretrieve.db import queries

BRANCH = "pyretrieve"
VERSION_TABLE = queries.VERSION_TABLE

log = logging.getLogger(__name__)


def run_sql_file(bind: Connection, name: str) -> None:
    """Execute one file of sql/migrations on the Alembic connection, in its transaction."""
    sql = resources.migration_script(name).read_text(encoding="utf-8")
    raw: Any = bind.connection.dbapi_connection
    # No parameters: psycopg sends the simple query protocol, which runs many statements and
    # keeps the file's dollar-quoted bodies intact.
    raw.execute(sql)
    # The file may SET LOCAL ROLE and search_path; make sure Alembic's own bookkeeping runs as the installer.
    bind.execute(text(queries.RESET_ROLE))
    bind.execute(text(queries.RESET_SEARCH_PATH))


def _config(connection: Connection) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.alembic_dir()))
    cfg.attributes["connection"] = connection
    return cfg


def _log_notice(diag: psycopg.errors.Diagnostic) -> None:
    # The migration files report what they deliberately leave in place (a vector extension
    # other objects use, a role another database still uses) as server notices.
    level = logging.WARNING if diag.severity_nonlocalized == "WARNING" else logging.INFO
    log.log(level, "%s", diag.message_primary)


def _connect(dsn: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn)
    conn.add_notice_handler(_log_notice)
    return conn


def _engine(dsn: str) -> Any:
    return create_engine("postgresql+psycopg://", creator=lambda: _connect(dsn), poolclass=NullPool)


def _sql_installed_revision(conn: Connection) -> str | None:
    """The revision of a schema installed from sql/pyretrieve.sql (not by Alembic), if any."""
    installed = conn.execute(text(queries.INSTALLATION_EXISTS)).scalar()
    if not installed:
        return None
    tracked = conn.execute(text(queries.VERSION_TABLE_EXISTS)).scalar()
    if tracked and conn.execute(text(queries.VERSION_TABLE_ROWS)).scalar():
        return None
    version = conn.execute(text(queries.INSTALLED_SCHEMA_VERSION)).scalar()
    return f"{BRANCH}_{version}" if version else None


def upgrade(dsn: str, revision: str = f"{BRANCH}@head") -> None:
    """Bring the database to ``revision`` (default: pyretrieve's head). Idempotent.

    A schema installed with the SQL script (psql, the Docker image) is first stamped with the
    revision it corresponds to, so Alembic continues from there instead of re-creating it.
    """
    from alembic import command

    with _engine(dsn).begin() as conn:
        cfg = _config(conn)
        stamped = _sql_installed_revision(conn)
        if stamped is not None:
            command.stamp(cfg, stamped)
        command.upgrade(cfg, revision)


def downgrade(dsn: str, revision: str = "base") -> None:
    """Undo revisions down to ``revision``; at ``base`` the version table goes too.

    What the downgrade keeps (an extension or a role still used elsewhere) is logged by the
    ``pyretrieve.db.migrate`` logger.
    """
    from alembic import command

    with _engine(dsn).begin() as conn:
        command.downgrade(_config(conn), revision)
        if not conn.execute(text(queries.VERSION_TABLE_ROWS)).scalar():
            # Nothing of pyretrieve is applied any more: remove its bookkeeping as well.
            conn.execute(text(queries.DROP_VERSION_TABLE))


def current(dsn: str) -> str | None:
    """The applied pyretrieve revision, or None when the schema is not installed."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(queries.VERSION_TABLE_EXISTS).fetchone()
        if not row or not row[0]:
            return None
        rev = conn.execute(queries.VERSION_NUM).fetchone()
        return str(rev[0]) if rev else None


def install_script_sql() -> str:
    return resources.install_script().read_text(encoding="utf-8")
