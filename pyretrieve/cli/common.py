"""What every command shares: the --dsn and --as options, connections, and error output."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import click
import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from pyretrieve.db.connect import resolve_dsn
from pyretrieve.db.errors import translate
from pyretrieve.errors import PyretrieveError

P = ParamSpec("P")
R = TypeVar("R")

dsn_option = click.option(
    "--dsn",
    envvar="PYRETRIEVE_DSN",
    default=None,
    help="libpq connection string or URL (env PYRETRIEVE_DSN); default: the embedded server.",
)
as_option = click.option(
    "--as",
    "principal",
    default=None,
    metavar="ROLE",
    help="Act as this principal (SET LOCAL ROLE inside each transaction).",
)


def fail(error: PyretrieveError) -> None:
    """One clear line with the stable code, and a non-zero exit."""
    click.echo(f"error [{error.code}]: {error.message}", err=True)
    sys.exit(2)


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Typed errors become one line; database errors are translated first, never printed raw."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except PyretrieveError as exc:
            fail(exc)
        except psycopg.Error as exc:
            fail(translate(exc))
        raise AssertionError("unreachable")

    return wrapper


def connect(dsn: str | None) -> psycopg.Connection[dict[str, Any]]:
    try:
        return psycopg.connect(resolve_dsn(dsn), autocommit=True, row_factory=dict_row)
    except psycopg.Error as exc:
        raise translate(exc) from None


@contextmanager
def transaction(
    conn: psycopg.Connection[dict[str, Any]], principal: str | None
) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    with conn.transaction():
        if principal:
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(principal)))
        yield conn
