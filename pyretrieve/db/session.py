"""The session boundary: one transaction as one principal, written once.

Every request and every write batch is its own transaction: the client, the ingestor and the
CLI take a connection (from a connection or a pool), refuse one that is already inside a
transaction (its binding, its role and its fate would be the caller's), open a transaction,
switch identity with ``SET LOCAL ROLE`` (undone when the transaction ends) and translate
driver errors into pyretrieve's typed errors (:func:`pyretrieve.db.errors.translate`, which
chains nothing, so no SQL text or parameter crosses the boundary).

The ``async_`` functions are the same boundary for ``psycopg.AsyncConnection`` and
``psycopg_pool.AsyncConnectionPool``; every decision they make (idle, privileged, the role to
set) is one of the shared helpers here, so only the awaiting differs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    suppress,
)
from typing import Any, Protocol, TypeAlias, runtime_checkable

import psycopg
from psycopg.pq import TransactionStatus

from pyretrieve.db import queries
from pyretrieve.db.errors import translate
from pyretrieve.errors import InvalidInput, PrivilegedCaller, PyretrieveError

__all__ = [
    "AsyncConnectionPool",
    "AsyncConnectionSource",
    "ConnectionPool",
    "ConnectionSource",
    "as_principal",
    "async_as_principal",
    "async_connection",
    "async_pipelined_principal_transaction",
    "async_principal_transaction",
    "connection",
    "pipelined_principal_transaction",
    "principal_transaction",
    "refuse_privileged",
]


@runtime_checkable
class ConnectionPool(Protocol):
    """Anything that lends connections the way ``psycopg_pool.ConnectionPool`` does."""

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...


ConnectionSource: TypeAlias = "psycopg.Connection[Any] | ConnectionPool"


@runtime_checkable
class AsyncConnectionPool(Protocol):
    """Anything that lends connections the way ``psycopg_pool.AsyncConnectionPool`` does."""

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]: ...


AsyncConnectionSource: TypeAlias = "psycopg.AsyncConnection[Any] | AsyncConnectionPool"


@contextmanager
def connection(source: ConnectionSource, *, needs: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection from ``source`` that is not inside a transaction.

    A connection is used as it is; a pool lends one for the block. A connection already inside
    a transaction is refused with :class:`InvalidInput` (``needs`` names what needs its own,
    e.g. ``"a request"``). Errors from the pool are translated.
    """
    if isinstance(source, psycopg.Connection):
        _require_idle(source, needs)
        yield source
        return
    try:
        with source.connection() as pooled:
            _require_idle(pooled, needs)
            yield pooled
    except psycopg.Error as exc:
        raise translate(exc) from None


def _require_idle(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], needs: str) -> None:
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise InvalidInput(f"the connection is inside a transaction; {needs} needs its own")


def refuse_privileged(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """Raise :class:`PrivilegedCaller` when the session's current role is a superuser.

    The server reports ``is_superuser`` on every change of role, so this costs no round trip;
    the SQL API refuses superusers and ``BYPASSRLS`` roles in the database as well.
    """
    if conn.info.parameter_status("is_superuser") == "on":
        raise PrivilegedCaller()


def _reads_dates(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether the driver reads the session's dates and intervals as the server writes them
    (ISO dates, ``postgres`` intervals). The server reports a change of either only when it
    next waits for a command, so in a pipeline a request whose session writes them otherwise
    syncs once after its settings, before any value that holds one is read."""
    date_style = conn.info.parameter_status("DateStyle") or ""
    return date_style.startswith("ISO") and conn.info.parameter_status("IntervalStyle") in (
        None,
        "postgres",
    )


def _enter(conn: psycopg.Connection[Any], principal: str | None) -> None:
    """The start of every request's transaction: its role, then the settings its values are
    written as text by (:data:`~pyretrieve.db.queries.REQUEST_TEXT_SETTINGS`)."""
    if principal is not None:
        conn.execute(queries.set_local_role(principal))
    conn.execute(queries.REQUEST_TEXT_SETTINGS)


@contextmanager
def as_principal(
    conn: psycopg.Connection[Any], principal: str | None, *, privileged_ok: bool = True
) -> Iterator[psycopg.Connection[Any]]:
    """One transaction on ``conn`` as ``principal`` (``SET LOCAL ROLE``; without a principal
    the connection's own role). Commits when the block ends, rolls back when it raises.
    ``privileged_ok=False`` refuses a superuser session before the block runs. Driver errors
    become typed errors; every other exception passes unchanged."""
    try:
        with conn.transaction():
            _enter(conn, principal)
            if not privileged_ok:
                refuse_privileged(conn)
            yield conn
    except PyretrieveError:
        raise
    except psycopg.Error as exc:
        raise translate(exc) from None


@contextmanager
def principal_transaction(
    source: ConnectionSource,
    principal: str | None,
    *,
    needs: str = "a request",
    privileged_ok: bool = True,
) -> Iterator[psycopg.Connection[Any]]:
    """:func:`connection` then :func:`as_principal`: one transaction, as one principal, on a
    connection that was idle."""
    with (
        connection(source, needs=needs) as conn,
        as_principal(conn, principal, privileged_ok=privileged_ok),
    ):
        yield conn


@contextmanager
def pipelined_principal_transaction(
    source: ConnectionSource, principal: str | None, *, needs: str = "a request"
) -> Iterator[tuple[psycopg.Connection[Any], psycopg.Pipeline | None]]:
    """:func:`principal_transaction` in pipeline mode, for a request driven by
    :func:`pyretrieve.db.steps.run`: ``BEGIN`` and ``SET LOCAL ROLE`` are queued and reach the
    server with the request's first statement, each yield of the steps is then one round trip,
    and ``COMMIT`` the last. Yields the connection and its pipeline.

    The transaction is stated as statements, not with psycopg's transaction blocks, which wait
    for the server at each boundary. A connection that is not in autocommit mode (its driver
    opens transactions of its own), or a client library that cannot pipeline, gets
    :func:`as_principal` instead, and None for the pipeline: the same statements, one by one.

    The session's role is known only once the server has answered, so the caller refuses a
    superuser then: ``run(conn, steps, pipeline=p, after_first=refuse_privileged)``, before
    the steps see the first reply (``authorize()`` refuses one in the database as well)."""
    with connection(source, needs=needs) as conn:
        if not conn.autocommit or not psycopg.Pipeline.is_supported():
            with as_principal(conn, principal) as same:
                yield same, None
            return
        try:
            with conn.pipeline() as pipeline:
                readable = _reads_dates(conn)
                conn.execute(queries.TX_BEGIN)
                try:
                    # Inside the try: in a pipeline a statement's error may surface while a
                    # later one is sent, and whatever surfaces must roll the transaction back.
                    _enter(conn, principal)
                    if not readable:
                        pipeline.sync()
                    yield conn, pipeline
                except BaseException:
                    _roll_back(conn, pipeline)
                    raise
                # Sent, and its outcome read, when the pipeline closes (its last round trip).
                conn.execute(queries.TX_COMMIT)
        except PyretrieveError:
            raise
        except psycopg.Error as exc:
            raise translate(exc) from None


def _roll_back(conn: psycopg.Connection[Any], pipeline: psycopg.Pipeline) -> None:
    # The block's own error is what propagates; a connection too broken to roll back ends the
    # transaction anyway when it closes.
    with suppress(psycopg.Error):
        pipeline.sync()  # out of an aborted pipeline, if a statement failed unsynced
    with suppress(psycopg.Error):
        conn.execute(queries.TX_ROLLBACK)
        pipeline.sync()


# ------------------------------------------------------------------------------ async twins


@asynccontextmanager
async def async_connection(
    source: AsyncConnectionSource, *, needs: str
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """:func:`connection` for an async connection or pool."""
    if isinstance(source, psycopg.AsyncConnection):
        _require_idle(source, needs)
        yield source
        return
    try:
        async with source.connection() as pooled:
            _require_idle(pooled, needs)
            yield pooled
    except psycopg.Error as exc:
        raise translate(exc) from None


async def _async_enter(conn: psycopg.AsyncConnection[Any], principal: str | None) -> None:
    """:func:`_enter` on an async connection."""
    if principal is not None:
        await conn.execute(queries.set_local_role(principal))
    await conn.execute(queries.REQUEST_TEXT_SETTINGS)


@asynccontextmanager
async def async_as_principal(
    conn: psycopg.AsyncConnection[Any], principal: str | None, *, privileged_ok: bool = True
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """:func:`as_principal` on an async connection."""
    try:
        async with conn.transaction():
            await _async_enter(conn, principal)
            if not privileged_ok:
                refuse_privileged(conn)
            yield conn
    except PyretrieveError:
        raise
    except psycopg.Error as exc:
        raise translate(exc) from None


@asynccontextmanager
async def async_pipelined_principal_transaction(
    source: AsyncConnectionSource, principal: str | None, *, needs: str = "a request"
) -> AsyncIterator[tuple[psycopg.AsyncConnection[Any], psycopg.AsyncPipeline | None]]:
    """:func:`pipelined_principal_transaction` for an async connection or pool."""
    async with async_connection(source, needs=needs) as conn:
        if not conn.autocommit or not psycopg.AsyncPipeline.is_supported():
            async with async_as_principal(conn, principal) as same:
                yield same, None
            return
        try:
            async with conn.pipeline() as pipeline:
                readable = _reads_dates(conn)
                await conn.execute(queries.TX_BEGIN)
                try:
                    await _async_enter(conn, principal)
                    if not readable:
                        await pipeline.sync()
                    yield conn, pipeline
                except BaseException:
                    await _async_roll_back(conn, pipeline)
                    raise
                await conn.execute(queries.TX_COMMIT)
        except PyretrieveError:
            raise
        except psycopg.Error as exc:
            raise translate(exc) from None


async def _async_roll_back(
    conn: psycopg.AsyncConnection[Any], pipeline: psycopg.AsyncPipeline
) -> None:
    with suppress(psycopg.Error):
        await pipeline.sync()
    with suppress(psycopg.Error):
        await conn.execute(queries.TX_ROLLBACK)
        await pipeline.sync()


@asynccontextmanager
async def async_principal_transaction(
    source: AsyncConnectionSource,
    principal: str | None,
    *,
    needs: str = "a request",
    privileged_ok: bool = True,
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """:func:`principal_transaction` for an async connection or pool."""
    async with (
        async_connection(source, needs=needs) as conn,
        async_as_principal(conn, principal, privileged_ok=privileged_ok),
    ):
        yield conn
