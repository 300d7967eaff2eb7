"""Where the SQL and the Alembic revisions are, installed or in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _find(installed: str, source: str) -> Path:
    # A wheel carries the files inside the package; a source checkout (editable install) keeps
    # them at the top of the repository, their canonical home.
    for candidate in (_PACKAGE / installed, _PACKAGE.parent / source):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pyretrieve resource directory {source!r} is missing")


def sql_dir() -> Path:
    return _find("_sql", "sql")


def alembic_dir() -> Path:
    return _find("_alembic", "alembic")


def install_script() -> Path:
    return sql_dir() / "pyretrieve.sql"


def migration_script(name: str) -> Path:
    return sql_dir() / "migrations" / name
