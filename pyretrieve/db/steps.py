"""A request as a sequence of statements, and the two drivers that run it.

The request path (:mod:`pyretrieve.request`) does no I/O. It is a generator that yields one
:class:`Call` (a named statement and its parameters) at a time and receives the call's rows,
or, for a call that asked for it, its failure as a :class:`Failed` value; it returns the
request's result. :func:`run` drives it on a ``psycopg.Connection``, :func:`arun` on a
``psycopg.AsyncConnection``: the only code that differs between the synchronous and the
asynchronous client is the handful of lines below that execute one call, the way psycopg keeps
its own sync and async twins on one code path.

A step may also yield a :class:`Batch`: calls that need no reply from one another, sent
together. On a connection in pipeline mode (``psycopg.Connection.pipeline()``, opened by
:func:`pyretrieve.db.session.pipelined_principal_transaction`) the driver sends each call, or
each batch, with one ``Sync``, together with whatever the transaction queued before it (its
``BEGIN``, its ``SET LOCAL ROLE``, a savepoint's ``RELEASE``), and waits once: one round trip
per yield instead of one per statement. Without a pipeline the same calls run one by one, with
the same replies and errors.

Errors are translated here (:func:`pyretrieve.db.errors.translate`), so no driver exception
reaches the request path or its caller.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from pyretrieve.db import queries
from pyretrieve.db.errors import translate
from pyretrieve.errors import PyretrieveError

__all__ = [
    "Batch",
    "Call",
    "Failed",
    "Received",
    "Replies",
    "Reply",
    "Row",
    "Steps",
    "arun",
    "replies",
    "rows",
    "run",
]

Row = dict[str, Any]
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class Call:
    """One statement for a driver to run.

    ``step``: the request step it belongs to (``authorize``, ``lexical``, ``vector``,
    ``fragments``, ...), for tracing and tests. ``on_error``: ``raise`` ends the request with
    the translated error; ``return`` hands it back as :class:`Failed` (the step decides what
    it means); ``savepoint`` runs the statement in a savepoint and hands a failure back, so it
    does not abort the request's transaction (the vector leg).
    """

    step: str
    query: str | sql.Composed
    params: Sequence[object] | None = None
    on_error: Literal["raise", "return", "savepoint"] = "raise"


@dataclass(frozen=True, slots=True)
class Failed:
    """A call's failure, translated, handed back as a value."""

    error: PyretrieveError


@dataclass(frozen=True, slots=True)
class Batch:
    """Calls sent together, in order, each ending the request if it fails (``on_error``
    ``raise``): the first that fails raises, and the server runs none after it. Their replies
    come back as a tuple, in the same order."""

    calls: tuple[Call, ...]

    def __post_init__(self) -> None:
        if not self.calls or any(c.on_error != "raise" for c in self.calls):
            raise ValueError("a batch holds calls that raise on error")


Reply: TypeAlias = list[Row] | Failed
Replies: TypeAlias = tuple[list[Row], ...]
Received: TypeAlias = Reply | Replies
# A request path: yields calls (or batches), receives their replies, returns its result.
Steps: TypeAlias = Generator[Call | Batch, Received, T]
# What the driver runs once the server has answered for the first time (the session's role
# is known then: see pipelined_principal_transaction).
AfterFirst: TypeAlias = Callable[[Any], None]


def rows(received: Received) -> list[Row]:
    """The rows of a call's reply (a call that asked for its failure checks for it first)."""
    if isinstance(received, Failed):
        raise received.error
    if isinstance(received, tuple):
        raise TypeError("a batch's replies where one call's rows were expected")
    return received


def replies(received: Received, count: int) -> Replies:
    """The replies of a batch of ``count`` calls."""
    if not isinstance(received, tuple) or len(received) != count:
        raise TypeError("one call's reply where a batch's replies were expected")
    return received


def run(
    conn: psycopg.Connection[Any],
    steps: Steps[T],
    *,
    pipeline: psycopg.Pipeline | None = None,
    after_first: AfterFirst | None = None,
) -> T:
    """Drive ``steps`` on ``conn``, inside the transaction the caller holds (in ``pipeline``
    when given: one round trip per yield). ``after_first`` runs once the first reply has come
    back, before the steps see it (not after a failure, which the steps then see)."""
    try:
        item = next(steps)
        first = True
        while True:
            failure: PyretrieveError | None = None
            try:
                received = _execute(conn, item, pipeline)
            except PyretrieveError as exc:
                failure = exc
            if first and after_first is not None:
                first = False
                # After a failure the server has undone the transaction's SET LOCAL (its
                # role included), so only a reply says who the request ran as; a failure
                # ends the request as its own error.
                if failure is None:
                    after_first(conn)
            item = _resume(steps, received if failure is None else failure)
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        steps.close()


async def arun(
    conn: psycopg.AsyncConnection[Any],
    steps: Steps[T],
    *,
    pipeline: psycopg.AsyncPipeline | None = None,
    after_first: AfterFirst | None = None,
) -> T:
    """:func:`run` on an async connection."""
    try:
        item = next(steps)
        first = True
        while True:
            failure: PyretrieveError | None = None
            try:
                received = await _aexecute(conn, item, pipeline)
            except PyretrieveError as exc:
                failure = exc
            if first and after_first is not None:
                first = False
                # After a failure the server has undone the transaction's SET LOCAL (its
                # role included), so only a reply says who the request ran as; a failure
                # ends the request as its own error.
                if failure is None:
                    after_first(conn)
            item = _resume(steps, received if failure is None else failure)
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        steps.close()


def _resume(steps: Steps[T], outcome: Received | PyretrieveError) -> Call | Batch:
    # A call that ends the request is raised inside the steps, at the statement that failed,
    # so the step sees its own error (a telemetry span records its code) and it propagates
    # from there; thrown outside any except block, it carries no driver error as context.
    if isinstance(outcome, PyretrieveError):
        return steps.throw(outcome)
    return steps.send(outcome)


# One call: in a pipeline, sent with what the transaction queued before it and one Sync (a
# savepoint's call syncs inside its savepoint, so a failure rolls back to it); without one,
# executed as usual. A batch: every call sent, then one Sync; the first failure is raised (the
# server skipped the calls after it).


def _execute(
    conn: psycopg.Connection[Any], item: Call | Batch, pipeline: psycopg.Pipeline | None
) -> Received:
    calls = item.calls if isinstance(item, Batch) else (item,)
    try:
        if isinstance(item, Call) and item.on_error == "savepoint":
            if pipeline is not None:
                return _pipelined_savepoint(conn, item, pipeline)
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                return cur.execute(item.query, item.params).fetchall()
        if pipeline is None:
            fetched = tuple(_fetch(conn, call) for call in calls)
        else:
            cursors = [conn.cursor(row_factory=dict_row) for _ in calls]
            try:
                for cur, call in zip(cursors, calls, strict=True):
                    cur.execute(call.query, call.params)
                pipeline.sync()
                fetched = tuple(cur.fetchall() for cur in cursors)
            finally:
                for cur in cursors:
                    cur.close()
        return fetched if isinstance(item, Batch) else fetched[0]
    except psycopg.Error as exc:
        failure = translate(exc)
    return _failed(calls[-1], failure)


def _pipelined_savepoint(
    conn: psycopg.Connection[Any], call: Call, pipeline: psycopg.Pipeline
) -> list[Row]:
    # The savepoint goes out with the call. Its release (or, after a failure, the rollback to
    # it) is queued, and reaches the server with the next statement: no round trip of its own.
    conn.execute(queries.SAVEPOINT)
    with conn.cursor(row_factory=dict_row) as cur:
        try:
            cur.execute(call.query, call.params)
            pipeline.sync()
            found = cur.fetchall()
        except psycopg.Error:
            conn.execute(queries.SAVEPOINT_ROLLBACK)
            conn.execute(queries.SAVEPOINT_RELEASE)
            raise
    conn.execute(queries.SAVEPOINT_RELEASE)
    return found


def _fetch(conn: psycopg.Connection[Any], call: Call) -> list[Row]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(call.query, call.params).fetchall()


async def _aexecute(
    conn: psycopg.AsyncConnection[Any], item: Call | Batch, pipeline: psycopg.AsyncPipeline | None
) -> Received:
    calls = item.calls if isinstance(item, Batch) else (item,)
    try:
        if isinstance(item, Call) and item.on_error == "savepoint":
            if pipeline is not None:
                return await _apipelined_savepoint(conn, item, pipeline)
            async with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                return await (await cur.execute(item.query, item.params)).fetchall()
        if pipeline is None:
            fetched = tuple([await _afetch(conn, call) for call in calls])
        else:
            cursors = [conn.cursor(row_factory=dict_row) for _ in calls]
            try:
                for cur, call in zip(cursors, calls, strict=True):
                    await cur.execute(call.query, call.params)
                await pipeline.sync()
                fetched = tuple([await cur.fetchall() for cur in cursors])
            finally:
                for cur in cursors:
                    await cur.close()
        return fetched if isinstance(item, Batch) else fetched[0]
    except psycopg.Error as exc:
        failure = translate(exc)
    return _failed(calls[-1], failure)


async def _apipelined_savepoint(
    conn: psycopg.AsyncConnection[Any], call: Call, pipeline: psycopg.AsyncPipeline
) -> list[Row]:
    await conn.execute(queries.SAVEPOINT)
    async with conn.cursor(row_factory=dict_row) as cur:
        try:
            await cur.execute(call.query, call.params)
            await pipeline.sync()
            found = await cur.fetchall()
        except psycopg.Error:
            await conn.execute(queries.SAVEPOINT_ROLLBACK)
            await conn.execute(queries.SAVEPOINT_RELEASE)
            raise
    await conn.execute(queries.SAVEPOINT_RELEASE)
    return found


async def _afetch(conn: psycopg.AsyncConnection[Any], call: Call) -> list[Row]:
    async with conn.cursor(row_factory=dict_row) as cur:
        return await (await cur.execute(call.query, call.params)).fetchall()


def _failed(call: Call, failure: PyretrieveError) -> Failed:
    # Raised or returned outside the except block: the typed error carries no driver
    # exception as its context (a printed traceback would show SQL and function names).
    if call.on_error == "raise":
        raise failure
    return Failed(failure)
