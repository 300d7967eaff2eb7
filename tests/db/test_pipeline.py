"""The request driver in pipeline mode: what the server runs, what it skips, and what is kept.

A pipelined request sends statements without waiting for the ones before them, so its
guarantees rest on the protocol: after a failed statement the server skips everything up to
the next Sync, and the transaction is the request's own. Each test drives steps through
``pyretrieve.db.steps.run`` in ``pipelined_principal_transaction`` on a real server and looks
at the server's state afterwards: a sequence (which no rollback resets) shows whether a
statement ran, a table shows what was committed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from pyretrieve.db import steps as driver
from pyretrieve.db.session import (
    async_pipelined_principal_transaction,
    pipelined_principal_transaction,
)
from pyretrieve.db.steps import Batch, Call, Failed, Steps, replies, rows
from pyretrieve.errors import InvalidInput, PyretrieveError
from tests.conftest import Database

PROBE = "SELECT nextval('pipeline_probe') AS n"
# The driver runs statements that return rows, as every call of the SQL API does.
WRITE = "INSERT INTO pipeline_kept (note) VALUES (%s) RETURNING note"
FAIL = "SELECT 1 / 0 AS n"


@pytest.fixture
def setup(db: Database) -> Database:
    with db.admin(autocommit=True) as c:
        c.execute("CREATE SEQUENCE pipeline_probe")
        c.execute("CREATE TABLE pipeline_kept (note text)")
    return db


def probe_value(db: Database) -> int:
    with db.admin(autocommit=True) as c:
        row = c.execute("SELECT last_value, is_called FROM pipeline_probe").fetchone()
    assert row is not None
    return int(row["last_value"]) if row["is_called"] else 0


def kept(db: Database) -> list[str]:
    with db.admin(autocommit=True) as c:
        return [r["note"] for r in c.execute("SELECT note FROM pipeline_kept ORDER BY note")]


def run_pipelined(db: Database, steps: Steps[Any], *, autocommit: bool = True) -> Any:
    with (
        psycopg.connect(db.admin_dsn, autocommit=autocommit) as conn,
        pipelined_principal_transaction(conn, None) as (c, pipeline),
    ):
        assert (pipeline is not None) is autocommit
        return driver.run(c, steps, pipeline=pipeline)


def test_a_batch_stops_at_its_first_failure_and_the_server_runs_nothing_after_it(
    setup: Database,
) -> None:
    """The attack a pipelined request invites: a statement queued behind a failed one. The
    server skips it (the probe's sequence never moves), the failure comes back typed, and the
    write before the failure is rolled back with the transaction."""

    def steps() -> Steps[None]:
        yield Batch(
            (
                Call(step="write", query=WRITE, params=("before",)),
                Call(step="x", query=FAIL),
                Call(step="probe", query=PROBE),
            )
        )

    with pytest.raises(PyretrieveError) as caught:
        run_pipelined(setup, steps())
    assert caught.value.__cause__ is None
    assert "division" not in str(caught.value)
    assert probe_value(setup) == 0
    assert kept(setup) == []


def test_a_batch_returns_each_calls_rows_in_order(setup: Database) -> None:
    def steps() -> Steps[list[Any]]:
        got = replies((yield Batch((Call(step="a", query=PROBE), Call(step="b", query=PROBE)))), 2)
        return [r[0]["n"] for r in got]

    assert run_pipelined(setup, steps()) == [1, 2]
    assert run_pipelined(setup, steps(), autocommit=False) == [3, 4]


def test_a_failed_savepoint_call_keeps_the_request_and_what_it_wrote(setup: Database) -> None:
    """A call in a savepoint (the vector leg) fails: the failure comes back as a value, the
    writes before and after it are committed, and the savepoint's rollback rode along with
    the next statement."""

    def steps() -> Steps[str]:
        rows((yield Call(step="write", query=WRITE, params=("a before",))))
        failed = yield Call(step="leg", query=FAIL, on_error="savepoint")
        assert isinstance(failed, Failed)
        rows((yield Call(step="write", query=WRITE, params=("b after",))))
        ok = yield Call(step="leg", query=PROBE, on_error="savepoint")
        return str(rows(ok)[0]["n"])

    assert run_pipelined(setup, steps()) == "1"
    assert kept(setup) == ["a before", "b after"]


def test_steps_that_raise_between_calls_leave_nothing_written(setup: Database) -> None:
    """The ranker's recheck (or any step) raising after statements were sent rolls the whole
    request back, including a release still queued in the pipeline."""

    def steps() -> Steps[None]:
        rows((yield Call(step="write", query=WRITE, params=("lost",))))
        rows((yield Call(step="leg", query=PROBE, on_error="savepoint")))
        raise InvalidInput("refused after the legs")

    with pytest.raises(InvalidInput):
        run_pipelined(setup, steps())
    assert kept(setup) == []
    assert probe_value(setup) == 1


def test_the_async_driver_skips_and_keeps_alike(setup: Database) -> None:
    def steps() -> Steps[int]:
        rows((yield Call(step="write", query=WRITE, params=("async",))))
        failed = yield Call(step="leg", query=FAIL, on_error="savepoint")
        assert isinstance(failed, Failed)
        got = replies((yield Batch((Call(step="a", query=PROBE), Call(step="b", query=PROBE)))), 2)
        return int(got[1][0]["n"])

    async def go() -> int:
        conn = await psycopg.AsyncConnection.connect(setup.admin_dsn, autocommit=True)
        async with conn, async_pipelined_principal_transaction(conn, None) as (c, pipeline):
            assert pipeline is not None
            return await driver.arun(c, steps(), pipeline=pipeline)

    assert asyncio.run(go()) == 2
    assert kept(setup) == ["async"]


def test_a_batch_holds_only_calls_that_end_the_request_on_failure() -> None:
    """A call that hands its failure back must be the only one in flight: after a failure the
    server skips the rest, so nothing after it could be told apart from not run."""
    with pytest.raises(ValueError):
        Batch((Call(step="a", query=PROBE), Call(step="b", query=PROBE, on_error="return")))
    with pytest.raises(ValueError):
        Batch(())
