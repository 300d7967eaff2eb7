"""Faults during a search: a statement timeout inside each leg, and the connection killed in the
middle of each leg. The client raises a typed error that names the cause (or, for an optional
semantic leg that timed out, degrades it and says why), never hangs, keeps nothing of the
failed request (no decision is recorded), and the same search succeeds when it is retried.

A leg is held up by an admin session that takes an exclusive lock on the one table that leg
reads (``lexical_blocks`` for the lexical leg, ``embeddings`` for the vector leg): the
authorization and the other leg run as usual, and the held leg waits inside its statement.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import psycopg
import pytest
from psycopg import sql

from pyretrieve import AsyncRetriever, Retriever, Scope
from pyretrieve.embedders.hashing import HashNgramEmbedder
from pyretrieve.errors import (
    DatabaseUnavailable,
    LexicalFailure,
    PyretrieveError,
    SemanticRequired,
    Timeout,
)
from pyretrieve.types import DegradationReason, SearchResult, SemanticOutcome
from tests.conftest import Database, acting_as, role
from tests.db.test_ingest_bulk import MODEL, WS, ingestor, setup, write_jsonl

SCOPE = Scope(workspace=WS, project="docs", purpose="support")
HELD = {"lexical": "pyretrieve.lexical_blocks", "vector": "pyretrieve.embeddings"}


@pytest.fixture
def scope(db: Database, tmp_path: Path) -> None:
    """acme/docs with 12 ledger notes and their embeddings; alice reads it."""
    with db.connect(autocommit=True) as conn:
        setup(conn, ["docs"])
        with acting_as(conn, "adam"):
            conn.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, %s, 'docs', 'support', 'internal')",
                (role("alice"), WS),
            )
        rows = [
            {"id": f"d{i}", "text": f"ledger note {i} on quarterly accounts"} for i in range(12)
        ]
        path = write_jsonl(tmp_path / "notes.jsonl", rows)
        ingestor(conn, "bulk").ingest_path(path, workspace=WS, project="docs")


@pytest.fixture
def holder(db: Database) -> Iterator[psycopg.Connection[Any]]:
    """An admin session, in a transaction, that may take the lock."""
    conn = db.admin()
    try:
        yield conn
    finally:
        conn.rollback()
        conn.close()


def hold(conn: psycopg.Connection[Any], leg: str) -> None:
    conn.execute(
        sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
            sql.Identifier(*HELD[leg].split("."))
        )
    )


def search(
    conn: psycopg.Connection[Any],
    *,
    pipeline: bool = True,
    semantic: Literal["optional", "required"] = "optional",
) -> SearchResult:
    client = Retriever(
        conn, principal=role("alice"), embedders=[HashNgramEmbedder()], pipeline=pipeline
    )
    return client.search("ledger accounts", scope=SCOPE, model=MODEL, semantic=semantic)


def decisions(db: Database) -> int:
    with db.admin() as admin:
        row = admin.execute(
            "SELECT count(*) AS n FROM pyretrieve.decisions WHERE principal = %s",
            (role("alice"),),
        ).fetchone()
    assert row is not None
    return int(row["n"])


def short_timeout(db: Database, **kw: Any) -> psycopg.Connection[Any]:
    return db.connect(autocommit=True, options="-c statement_timeout=300ms", **kw)


@pytest.mark.usefixtures("scope")
@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one-by-one"])
def test_a_statement_timeout_in_the_lexical_leg_raises_timeout_and_keeps_nothing(
    db: Database, holder: psycopg.Connection[Any], pipeline: bool
) -> None:
    before = decisions(db)
    hold(holder, "lexical")
    with short_timeout(db) as conn:
        started = time.monotonic()
        with pytest.raises(PyretrieveError) as exc:
            search(conn, pipeline=pipeline)
        waited = time.monotonic() - started
        # The cause, not a generic lexical failure: the caller can tell a slow database from
        # a broken index and retry the one.
        assert type(exc.value) is Timeout, repr(exc.value)
        assert exc.value.sqlstate == "57014"
        assert waited < 5
        assert decisions(db) == before
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        holder.rollback()
        # The same connection, retried: the search runs whole.
        result = search(conn, pipeline=pipeline)
    assert result.results
    assert result.semantic.status is SemanticOutcome.USED
    assert decisions(db) == before + 1


@pytest.mark.usefixtures("scope")
@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one-by-one"])
def test_a_statement_timeout_in_an_optional_vector_leg_degrades_it_and_names_the_timeout(
    db: Database, holder: psycopg.Connection[Any], pipeline: bool
) -> None:
    hold(holder, "vector")
    with short_timeout(db) as conn:
        started = time.monotonic()
        result = search(conn, pipeline=pipeline)
        assert time.monotonic() - started < 5
        holder.rollback()
        again = search(conn, pipeline=pipeline)
    assert result.results, "the lexical leg's results, without the vector leg"
    assert not result.vector_ran
    assert result.semantic.status is SemanticOutcome.DEGRADED
    assert result.semantic.reason is DegradationReason.UNAVAILABLE
    assert result.semantic.evidence == {"model": MODEL, "cause": Timeout.code}
    assert again.vector_ran
    assert again.semantic.status is SemanticOutcome.USED


@pytest.mark.usefixtures("scope")
def test_a_statement_timeout_in_a_required_vector_leg_raises_timeout_and_keeps_nothing(
    db: Database, holder: psycopg.Connection[Any]
) -> None:
    """A required leg cannot degrade; the error names the timeout rather than only saying the
    leg was unavailable."""
    before = decisions(db)
    hold(holder, "vector")
    with short_timeout(db) as conn:
        with pytest.raises(PyretrieveError) as exc:
            search(conn, semantic="required")
        assert type(exc.value) is Timeout, repr(exc.value)
        assert not isinstance(exc.value, SemanticRequired)
        assert decisions(db) == before
        holder.rollback()
        assert search(conn, semantic="required").vector_ran
    assert decisions(db) == before + 1


def wait_for_lock_wait(db: Database, application: str) -> int:
    with db.admin(autocommit=True) as admin:
        for _ in range(600):
            row = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
                " AND wait_event_type = 'Lock'",
                (application,),
            ).fetchone()
            if row is not None:
                return int(row["pid"])
            time.sleep(0.05)
    raise AssertionError("the search never waited on the lock")


@pytest.mark.usefixtures("scope")
@pytest.mark.parametrize("leg", ["lexical", "vector"])
@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one-by-one"])
def test_a_connection_killed_in_a_leg_raises_a_typed_error_and_a_retry_succeeds(
    db: Database, holder: psycopg.Connection[Any], leg: str, pipeline: bool
) -> None:
    """Killed while a leg waits (``pg_terminate_backend``): the client raises
    ``DatabaseUnavailable`` (the connection is gone; neither a lexical failure nor a degraded
    vector leg, which would go on with a request that cannot finish), the request's decision
    is not recorded, and the search on a new connection succeeds."""
    before = decisions(db)
    hold(holder, leg)
    application = f"search-killed-{leg}-{pipeline}"
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with db.connect(autocommit=True, application_name=application) as conn:
                search(conn, pipeline=pipeline)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    pid = wait_for_lock_wait(db, application)
    with db.admin(autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    worker.join(timeout=60)
    assert not worker.is_alive()
    holder.rollback()

    (error,) = errors
    assert isinstance(error, DatabaseUnavailable), repr(error)
    assert not isinstance(error, LexicalFailure | SemanticRequired)
    # Unchained: no driver exception (with its SQL or server text) travels with it.
    assert error.__cause__ is None
    assert error.__suppress_context__ or error.__context__ is None
    assert "ledger" not in str(error)
    assert decisions(db) == before
    with db.connect(autocommit=True) as conn:
        result = search(conn, pipeline=pipeline)
    assert result.results
    assert result.vector_ran
    assert decisions(db) == before + 1


@pytest.mark.usefixtures("scope")
@pytest.mark.parametrize("leg", ["lexical", "vector"])
def test_the_async_client_meets_a_timeout_in_each_leg_as_the_sync_one(
    db: Database, holder: psycopg.Connection[Any], leg: str
) -> None:
    """The same steps, the same outcome: the lexical leg's timeout raises ``Timeout``, the
    optional vector leg's degrades it naming the timeout."""
    hold(holder, leg)

    async def go() -> Any:
        conn = await psycopg.AsyncConnection.connect(
            db.app_dsn, autocommit=True, options="-c statement_timeout=300ms"
        )
        async with conn:
            client = AsyncRetriever(conn, principal=role("alice"), embedders=[HashNgramEmbedder()])
            try:
                return await client.search("ledger accounts", scope=SCOPE, model=MODEL)
            except PyretrieveError as exc:
                return exc

    got = asyncio.run(go())
    if leg == "lexical":
        assert type(got) is Timeout, repr(got)
    else:
        assert got.semantic.status is SemanticOutcome.DEGRADED
        assert got.semantic.evidence == {"model": MODEL, "cause": Timeout.code}


@pytest.mark.usefixtures("scope")
def test_a_pooled_connection_killed_in_a_search_is_replaced_and_the_same_retriever_retries(
    db: Database, holder: psycopg.Connection[Any]
) -> None:
    """Through a one-connection pool, the "log in once, SET ROLE per request" pattern: the
    connection killed in the lexical leg gives ``DatabaseUnavailable``, the pool discards it,
    and the same ``Retriever`` answers the retry on a new connection."""
    from psycopg_pool import ConnectionPool

    before = decisions(db)
    hold(holder, "lexical")
    application = "search-killed-pooled"
    errors: list[BaseException] = []
    kwargs = {"autocommit": True, "application_name": application}
    with ConnectionPool(db.app_dsn, min_size=1, max_size=1, kwargs=kwargs, open=True) as pool:
        client = Retriever(pool, principal=role("alice"), embedders=[HashNgramEmbedder()])

        def run() -> None:
            try:
                client.search("ledger accounts", scope=SCOPE, model=MODEL)
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        pid = wait_for_lock_wait(db, application)
        with db.admin(autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        worker.join(timeout=60)
        assert not worker.is_alive()
        holder.rollback()
        (error,) = errors
        assert isinstance(error, DatabaseUnavailable), repr(error)
        result = client.search("ledger accounts", scope=SCOPE, model=MODEL)
    assert result.results
    assert result.vector_ran
    assert decisions(db) == before + 1
