"""What every command shares: the --dsn and --as options, connections, and error output."""

from __future__ import annotations

import functools
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import click
import psycopg
from psycopg.rows import dict_row, tuple_row

from pyretrieve.db import queries, session
from pyretrieve.db.connect import resolve_dsn
from pyretrieve.db.errors import translate
from pyretrieve.embedded import APP_ROLE
from pyretrieve.errors import InternalError, InvalidInput, PyretrieveError, UnknownPrincipal

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


# ``pyretrieve --debug`` (or PYRETRIEVE_DEBUG=1): let exceptions through with their traceback.
_debug = {"on": False}


def set_debug(on: bool) -> None:
    _debug["on"] = on


def debugging() -> bool:
    return _debug["on"]


def fail(error: PyretrieveError) -> None:
    """One clear line with the stable code, and a non-zero exit."""
    click.echo(f"error [{error.code}]: {error.message}", err=True)
    sys.exit(2)


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Typed errors become one line; database errors are translated first, never printed raw;
    anything else becomes an internal error naming only its type. No traceback is printed
    unless ``--debug``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if debugging():
                raise
            fail(as_typed(exc))
        raise AssertionError("unreachable")

    return wrapper


def as_typed(exc: Exception) -> PyretrieveError:
    if isinstance(exc, PyretrieveError):
        return exc
    if isinstance(exc, psycopg.Error):
        return translate(exc)
    # SQLAlchemy (under Alembic, for install) wraps the driver's exception.
    orig = getattr(exc, "orig", None)
    if isinstance(orig, psycopg.Error):
        return translate(orig)
    return InternalError(
        f"unexpected {type(exc).__name__}; run `pyretrieve --debug ...` for the traceback"
    )


def connect(dsn: str | None, *, installer: bool = False) -> psycopg.Connection[dict[str, Any]]:
    """A connection for one command. On the embedded default, ``installer`` commands (install,
    audit, role management) connect as its superuser and every other one as the application
    login role, which may only SET ROLE to principals."""
    try:
        return psycopg.connect(
            resolve_dsn(dsn, installer=installer), autocommit=True, row_factory=dict_row
        )
    except psycopg.Error as exc:
        raise translate(exc) from None


def require_principal(conn: psycopg.Connection[Any], principal: str | None) -> None:
    """The embedded default's login role is no principal: a command must name one, and one
    the login role may act as (a role that does not exist is answered alike)."""
    if not principal:
        if conn.info.user == APP_ROLE:
            raise InvalidInput(
                f"choose a principal with --as ROLE: the embedded server's login role {APP_ROLE}"
                " acts only as a principal granted to it (create one with"
                " `pyretrieve principals create NAME --reader`)"
            )
        return
    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(queries.MAY_ACT_AS, (principal,)).fetchone()
    if row is None or not row[0]:
        raise UnknownPrincipal(
            f"no principal {principal!r} that the login role {conn.info.user!r} may act as:"
            " the role does not exist or is not granted to it (create it with"
            f" `pyretrieve principals create {shlex.quote(principal)} --reader`, --writer or"
            " --admin)"
        )


@contextmanager
def transaction(
    conn: psycopg.Connection[dict[str, Any]], principal: str | None
) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    """One transaction as the command's principal (see :func:`pyretrieve.db.session.as_principal`)."""
    require_principal(conn, principal)
    with session.as_principal(conn, principal or None):
        yield conn
