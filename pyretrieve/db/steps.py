"""A request as a sequence of statements, and the two drivers that run it.

The request path (:mod:`pyretrieve.request`) does no I/O. It is a generator that yields one
:class:`Call` (a named statement and its parameters) at a time and receives the call's rows,
or, for a call that asked for it, its failure as a :class:`Failed` value; it returns the
request's result. :func:`run` drives it on a ``psycopg.Connection``, :func:`arun` on a
``psycopg.AsyncConnection``: the only code that differs between the synchronous and the
asynchronous client is the handful of lines below that execute one call, the way psycopg keeps
its own sync and async twins on one code path.

Errors are translated here (:func:`pyretrieve.db.errors.translate`), so no driver exception
reaches the request path or its caller.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from pyretrieve.db.errors import translate
from pyretrieve.errors import PyretrieveError

__all__ = ["Call", "Failed", "Reply", "Row", "Steps", "arun", "run"]

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


Reply: TypeAlias = list[Row] | Failed
# A request path: yields calls, receives their replies, returns its result.
Steps: TypeAlias = Generator[Call, Reply, T]


def run(conn: psycopg.Connection[Any], steps: Steps[T]) -> T:
    """Drive ``steps`` on ``conn``, inside the transaction the caller holds."""
    try:
        call = next(steps)
        while True:
            failure: PyretrieveError | None = None
            try:
                reply = _execute(conn, call)
            except PyretrieveError as exc:
                failure = exc
            call = _resume(steps, reply if failure is None else failure)
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        steps.close()


async def arun(conn: psycopg.AsyncConnection[Any], steps: Steps[T]) -> T:
    """:func:`run` on an async connection."""
    try:
        call = next(steps)
        while True:
            failure: PyretrieveError | None = None
            try:
                reply = await _aexecute(conn, call)
            except PyretrieveError as exc:
                failure = exc
            call = _resume(steps, reply if failure is None else failure)
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        steps.close()


def _resume(steps: Steps[T], outcome: Reply | PyretrieveError) -> Call:
    # A call that ends the request is raised inside the steps, at the statement that failed,
    # so the step sees its own error (a telemetry span records its code) and it propagates
    # from there; thrown outside any except block, it carries no driver error as context.
    if isinstance(outcome, PyretrieveError):
        return steps.throw(outcome)
    return steps.send(outcome)


def _execute(conn: psycopg.Connection[Any], call: Call) -> Reply:
    try:
        if call.on_error == "savepoint":
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                return cur.execute(call.query, call.params).fetchall()
        with conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(call.query, call.params).fetchall()
    except psycopg.Error as exc:
        failure = translate(exc)
    return _failed(call, failure)


async def _aexecute(conn: psycopg.AsyncConnection[Any], call: Call) -> Reply:
    try:
        if call.on_error == "savepoint":
            async with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                return await (await cur.execute(call.query, call.params)).fetchall()
        async with conn.cursor(row_factory=dict_row) as cur:
            return await (await cur.execute(call.query, call.params)).fetchall()
    except psycopg.Error as exc:
        failure = translate(exc)
    return _failed(call, failure)


def _failed(call: Call, failure: PyretrieveError) -> Failed:
    # Raised or returned outside the except block: the typed error carries no driver
    # exception as its context (a printed traceback would show SQL and function names).
    if call.on_error == "raise":
        raise failure
    return Failed(failure)
