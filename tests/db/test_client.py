"""The thin client against the real database: call order, one transaction, degradation, errors.

Every test here watches the SQL the client sends. A recording connection captures each
statement (with its parameters and the transaction status at the time) and the transaction
control commands (BEGIN, SAVEPOINT, RELEASE, COMMIT, ROLLBACK) psycopg issues for
``conn.transaction()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import threading
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from evals.bench.latency_proxy import LatencyProxy
from pyretrieve import ranking
from pyretrieve.client import AsyncRetriever, Retriever
from pyretrieve.errors import (
    AccessDenied,
    InvalidInput,
    LexicalFailure,
    PyretrieveError,
    SemanticRequired,
    UnknownPrincipal,
)
from pyretrieve.types import Scope, SearchResult, SemanticStatus, Weights, canonical_json
from pyretrieve.vectors import canonical_embedding, embedding_digest, to_pgvector_text
from tests.conftest import Database, Server, acting_as, create_database, drop_database, role
from tests.db.seed import embed, grant, sha

MODEL = "m8"
DIM = 8
WS = "acme"
# Distinctive query values: none of them may reach authorize() or the decisions table.
QUERY_VECTOR = [0.8125, 0.0625, 0.123456, 0.0, 0.5, 0.0, 0.03125, 0.25]
QUERY = "ledger reconciliation quarterly"
ADAPTER_SECRET = "ADAPTER-SECRET-c41d"

# Bodies of the docs scope: every one matches "ledger"; repetition gives distinct lexical ranks.
DOCS = [
    "ledger ledger ledger reconciliation quarterly close",
    "ledger reconciliation for the quarterly audit",
    "ledger entries and journal postings",
    "the general ledger and the trial balance",
    "quarterly ledger review notes",
    "ledger archive index",
]


# ----------------------------------------------------------------------------- recording


@dataclass(frozen=True)
class Statement:
    text: str
    params: Any
    status: TransactionStatus

    @property
    def kind(self) -> str:
        text = self.text.strip()
        upper = text.upper()
        for word in ("BEGIN", "COMMIT", "ROLLBACK TO", "ROLLBACK", "RELEASE"):
            if upper.startswith(word):
                return word
        if upper.startswith("SAVEPOINT"):
            return "SAVEPOINT"
        if upper.startswith("SET LOCAL ROLE"):
            return "set_role"
        if "set_config('extra_float_digits'" in text:
            return "text_settings"
        for name in (
            "authorize",
            "lexical_candidates",
            "vector_candidates",
            "model_defaults",
            "fragments",
        ):
            if f"pyretrieve.{name}(" in text:
                return name
        return text


def _record(
    cursor: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any], query: Any, params: Any
) -> None:
    conn = cursor.connection
    if isinstance(conn, _Recorder) and conn.recording:
        text = query.as_string(conn) if isinstance(query, sql.Composable) else str(query)
        conn.statements.append(Statement(text, params, conn.info.transaction_status))


class RecordingCursor(psycopg.Cursor[Any]):
    def execute(self, query: Any, params: Any = None, **kw: Any) -> RecordingCursor:
        _record(self, query, params)
        super().execute(query, params, **kw)
        return self


class AsyncRecordingCursor(psycopg.AsyncCursor[Any]):
    async def execute(self, query: Any, params: Any = None, **kw: Any) -> AsyncRecordingCursor:
        _record(self, query, params)
        await super().execute(query, params, **kw)
        return self


class _Recorder:
    """Records cursor statements and psycopg's own transaction-control commands (which
    psycopg issues from one generator for both of its connection classes)."""

    statements: list[Statement]
    recording: bool
    info: Any

    def _exec_command(self, command: Any, *args: Any, **kw: Any) -> Any:
        if getattr(self, "recording", False):
            if isinstance(command, sql.Composable):
                text = command.as_string(self)  # type: ignore[arg-type]
            elif isinstance(command, bytes):
                text = command.decode()
            else:
                text = str(command)
            self.statements.append(Statement(text, None, self.info.transaction_status))
        return super()._exec_command(command, *args, **kw)  # type: ignore[misc]

    def kinds(self) -> list[str]:
        return [s.kind for s in self.statements]

    def of(self, kind: str) -> list[Statement]:
        return [s for s in self.statements if s.kind == kind]

    def reset(self) -> None:
        self.statements = []
        self.recording = True


class RecordingConnection(_Recorder, psycopg.Connection[Any]):
    pass


class AsyncRecordingConnection(_Recorder, psycopg.AsyncConnection[Any]):
    pass


class Blocking:
    """An :class:`AsyncRetriever` whose calls block: the async client under the same tests."""

    def __init__(self, retriever: AsyncRetriever, runner: asyncio.Runner) -> None:
        self._retriever = retriever
        self._runner = runner

    def search(self, query: str, **kw: Any) -> SearchResult:
        return self._runner.run(self._retriever.search(query, **kw))


class Harness:
    """One recording connection, synchronous or asynchronous, and the client of that flavour.

    The tests talk to it as to the connection (``kinds()``, ``of()``, ``reset()``,
    ``statements``, ``recording``, ``info``); ``client()`` is a :class:`Retriever` or an
    :class:`AsyncRetriever` run to completion on the harness's own event loop.
    """

    def __init__(self, flavor: str, dsn: str) -> None:
        self.flavor = flavor
        self.runner = asyncio.Runner() if flavor == "async" else None
        if self.runner is None:
            self.conn: RecordingConnection | AsyncRecordingConnection = RecordingConnection.connect(
                dsn, autocommit=True, cursor_factory=RecordingCursor, row_factory=dict_row
            )
        else:
            self.conn = self.runner.run(
                AsyncRecordingConnection.connect(
                    dsn, autocommit=True, cursor_factory=AsyncRecordingCursor, row_factory=dict_row
                )
            )
        self.conn.statements = []
        self.conn.recording = False

    def client(
        self, principal: str, *embedders: Any, pipeline: bool = True
    ) -> Retriever | Blocking:
        if self.runner is None:
            return Retriever(self.conn, principal=principal, embedders=embedders, pipeline=pipeline)
        return Blocking(
            AsyncRetriever(self.conn, principal=principal, embedders=embedders, pipeline=pipeline),
            self.runner,
        )

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if isinstance(self.conn, RecordingConnection):
            with self.conn.transaction():
                yield
            return
        assert self.runner is not None
        tx = self.conn.transaction()
        self.runner.run(tx.__aenter__())
        try:
            yield
        finally:
            self.runner.run(tx.__aexit__(None, None, None))

    def close(self) -> None:
        if self.runner is None:
            self.conn.close()
            return
        assert isinstance(self.conn, AsyncRecordingConnection)
        self.runner.run(self.conn.close())
        self.runner.close()

    @property
    def statements(self) -> list[Statement]:
        return self.conn.statements

    @property
    def recording(self) -> bool:
        return self.conn.recording

    @recording.setter
    def recording(self, value: bool) -> None:
        self.conn.recording = value

    @property
    def info(self) -> Any:
        return self.conn.info

    def kinds(self) -> list[str]:
        return self.conn.kinds()

    def of(self, kind: str) -> list[Statement]:
        return self.conn.of(kind)

    def reset(self) -> None:
        self.conn.reset()


FLAVORS = ["sync", "async"]


# --------------------------------------------------------------------------------- corpus


class FixedEmbedder:
    model_id = MODEL
    dimension = DIM

    def __init__(self) -> None:
        self.calls: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(QUERY_VECTOR) for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls.append(text)
        return list(QUERY_VECTOR)


class FailingEmbedder(FixedEmbedder):
    def embed_query(self, text: str) -> list[float]:
        raise RuntimeError(f"{ADAPTER_SECRET}: upstream rejected the input {text!r}")


def put(
    conn: psycopg.Connection[Any],
    project: str,
    body: str,
    classification: str = "internal",
    *,
    workspace: str = WS,
) -> UUID:
    row = conn.execute(
        "SELECT pyretrieve.put_fragment(p_workspace => %s, p_project => %s, p_body => %s,"
        " p_classification => %s::pyretrieve.classification) AS id",
        (workspace, project, body, classification),
    ).fetchone()
    assert row is not None
    return UUID(str(row["id"]))


def doc_vector(n: int) -> list[float]:
    """A distinct, non-zero 8-d vector per fragment, at a growing angle from the query."""
    values = [0.0] * DIM
    values[0] = 1.0
    values[(n % (DIM - 1)) + 1] = 0.25 * (n + 1)
    return values


def seed_scopes(conn: psycopg.Connection[Any]) -> dict[str, list[UUID]]:
    """Scopes ``acme/docs`` (fresh embeddings) and ``acme/stale`` (one stale embedding).

    alice: purpose ``support`` (optional semantic), ``strict`` (required) and ``nosem``
    (disabled) on both projects, ceiling confidential, no max_age (freshness 1.0).
    """
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
        for project in ("docs", "stale"):
            conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, project))
            for purpose, policy in (("support", "optional"), ("strict", "required")):
                grant(
                    conn,
                    role("alice"),
                    WS,
                    project,
                    purpose,
                    "confidential",
                    semantic_policy=policy,
                )
            grant(
                conn,
                role("alice"),
                WS,
                project,
                "nosem",
                "confidential",
                semantic_policy="disabled",
            )
            grant(conn, role("wally"), WS, project, "ingest", "restricted")
        conn.execute("SELECT pyretrieve.register_model(%s, %s)", (MODEL, DIM))
    ids: dict[str, list[UUID]] = {"docs": [], "stale": []}
    with acting_as(conn, "wally"):
        for n, body in enumerate(DOCS):
            fid = put(conn, "docs", body)
            embed(conn, WS, "docs", fid, doc_vector(n), body, model=MODEL)
            ids["docs"].append(fid)
        for n, body in enumerate(DOCS[:3]):
            fid = put(conn, "stale", body)
            # The last one was embedded from some other text: its embedding is stale.
            source = body if n < 2 else body + " (an earlier revision)"
            embed(conn, WS, "stale", fid, doc_vector(n), source, model=MODEL)
            ids["stale"].append(fid)
    return ids


@pytest.fixture(scope="module")
def mdb(server: Server, template_db: str) -> Iterator[tuple[Database, dict[str, list[UUID]]]]:
    """One seeded database shared by the read-only tests of this module."""
    name = create_database(server, template_db)
    try:
        database = Database(server=server, name=name)
        with database.connect(autocommit=True) as c:
            ids = seed_scopes(c)
        yield database, ids
    finally:
        drop_database(server, name)


@pytest.fixture(params=FLAVORS)
def flavor(request: pytest.FixtureRequest) -> str:
    """Every client test runs against Retriever and against AsyncRetriever."""
    return str(request.param)


@pytest.fixture
def rec(mdb: tuple[Database, dict[str, list[UUID]]], flavor: str) -> Iterator[Harness]:
    harness = Harness(flavor, mdb[0].app_dsn)
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def ids(mdb: tuple[Database, dict[str, list[UUID]]]) -> dict[str, list[UUID]]:
    return mdb[1]


def scope(project: str = "docs", purpose: str = "support") -> Scope:
    return Scope(workspace=WS, project=project, purpose=purpose)


def alice(rec: Harness, *embedders: Any) -> Retriever | Blocking:
    return rec.client(role("alice"), *embedders)


def decision_row(database: Database, decision_id: UUID) -> dict[str, Any] | None:
    with database.admin(autocommit=True) as c:
        return c.execute(
            "SELECT * FROM pyretrieve.decisions WHERE decision_id = %s", (decision_id,)
        ).fetchone()


def decision_count(database: Database) -> int:
    with database.admin(autocommit=True) as c:
        row = c.execute("SELECT count(*) AS n FROM pyretrieve.decisions").fetchone()
    assert row is not None
    return int(row["n"])


def assert_sanitized(exc: PyretrieveError, *secrets: str, chain: bool = True) -> None:
    """A typed error tells nothing about SQL, the driver or stored content.

    ``chain``: also check the whole printed traceback, chained exceptions included.
    """
    shown = " ".join([str(exc), repr(exc), json.dumps(exc.as_dict())])
    for needle in ("psycopg", "pyretrieve.", "SELECT", "CONTEXT", "permission denied", *secrets):
        assert needle not in shown
    assert exc.__cause__ is None
    assert set(exc.as_dict()) >= {"code", "message"}
    if not chain:
        return
    printed = "".join(traceback.format_exception(exc))
    for needle in ("psycopg.errors", "permission denied", "CONTEXT:", "SQL statement", *secrets):
        assert needle not in printed
    # A driver exception may sit in __context__ only if it is suppressed from tracebacks.
    assert exc.__context__ is None or exc.__suppress_context__ is True


# ----------------------------------------------------------------------- controller order

HYBRID_ORDER = [
    "BEGIN",
    "set_role",
    "text_settings",
    "authorize",
    # No fusion or weights given: the named model's registered defaults, read right after the
    # decision, as search() in SQL does.
    "model_defaults",
    "lexical_candidates",
    "SAVEPOINT",
    "vector_candidates",
    "RELEASE",
    "fragments",
    "COMMIT",
]


def test_without_the_pipeline_the_same_statements_go_one_by_one(rec: Harness) -> None:
    """``pipeline=False``: the same statements in the same order, each sent once the one before
    it has come back (so each sees the transaction open and idle), and the same result."""
    rec.reset()
    piped = alice(rec).search(QUERY, scope=scope(), embedding=QUERY_VECTOR, model=MODEL, limit=3)
    rec.reset()
    plain = rec.client(role("alice"), pipeline=False).search(
        QUERY, scope=scope(), embedding=QUERY_VECTOR, model=MODEL, limit=3
    )
    rec.recording = False
    assert rec.kinds() == HYBRID_ORDER
    assert all(s.status == TransactionStatus.INTRANS for s in rec.statements[1:])
    assert rec.statements[0].status == TransactionStatus.IDLE
    assert rec.info.transaction_status == TransactionStatus.IDLE
    assert [r.record.fragment_id for r in plain.results] == [
        r.record.fragment_id for r in piped.results
    ]
    assert [r.explanation["final_score"] for r in plain.results] == [  # type: ignore[index]
        r.explanation["final_score"]
        for r in piped.results  # type: ignore[index]
    ]


def test_a_requests_fusion_and_weights_win_without_reading_the_models(rec: Harness) -> None:
    rec.reset()
    result = alice(rec).search(
        QUERY,
        scope=scope(),
        embedding=QUERY_VECTOR,
        model=MODEL,
        limit=3,
        weights=Weights(lexical=2.0, vector=0.5),
        fusion="rrf",
    )
    rec.recording = False
    assert "model_defaults" not in rec.kinds()
    assert result.fusion.source.value == "request"
    assert result.fusion.fusion_source.value == "request"
    assert result.weights == Weights(lexical=2.0, vector=0.5)
    assert all(
        r.explanation["fusion"]["weights"]  # type: ignore[index]
        == {"lexical": 2.0, "vector": 0.5, "source": "request", "model": None}
        for r in result.results
    )


def test_hybrid_calls_authorize_lexical_vector_fragments_in_one_transaction(
    rec: Harness, mdb: tuple[Database, Any]
) -> None:
    before = decision_count(mdb[0])
    rec.reset()
    result = alice(rec).search(QUERY, scope=scope(), embedding=QUERY_VECTOR, model=MODEL, limit=3)
    rec.recording = False
    assert rec.kinds() == HYBRID_ORDER
    # Everything between BEGIN and COMMIT was sent inside the one transaction (in pipeline mode
    # a statement goes out while others are in flight: ACTIVE, never IDLE), and it is closed.
    assert all(
        s.status in (TransactionStatus.INTRANS, TransactionStatus.ACTIVE)
        for s in rec.statements[1:]
    )
    assert rec.statements[0].status == TransactionStatus.IDLE
    assert rec.info.transaction_status == TransactionStatus.IDLE
    set_role = rec.of("set_role")[0]
    assert set_role.text == f'SET LOCAL ROLE "{role("alice")}"'
    # The decision the lexical, vector and fragments calls used is the one authorize made.
    decision_id = result.decision.decision_id
    for kind in ("lexical_candidates", "vector_candidates", "fragments"):
        assert rec.of(kind)[0].params[0] == decision_id
    assert decision_count(mdb[0]) == before + 1
    assert result.semantic.status.value == "used"
    assert result.lexical_ran
    assert result.vector_ran
    assert result.decision.principal == role("alice")


def test_authorize_receives_only_digests_and_intent(
    rec: Harness, mdb: tuple[Database, Any]
) -> None:
    rec.reset()
    result = alice(rec).search(QUERY, scope=scope(), embedding=QUERY_VECTOR, model=MODEL, limit=4)
    rec.recording = False
    (auth,) = rec.of("authorize")
    canonical = canonical_embedding(QUERY_VECTOR)
    query_digest = hashlib.sha256(QUERY.encode("utf-8")).digest()
    vector_digest = embedding_digest(canonical)
    assert auth.params == (WS, "docs", "support", query_digest, "optional", vector_digest, 4)
    # Neither the text nor any rendering of the embedding is in the statement or its values.
    rendered = [
        to_pgvector_text(canonical),
        canonical.tobytes(),
        *(repr(float(x)) for x in canonical),
    ]
    for value in [auth.text, *auth.params]:
        for needle in (QUERY, "ledger", *rendered):
            if (isinstance(value, bytes) and isinstance(needle, bytes)) or (
                isinstance(value, str) and isinstance(needle, str)
            ):
                assert needle not in value
    # The query text goes to the lexical function only; the vector to the vector function only.
    assert [s.kind for s in rec.statements if QUERY in map(str, s.params or ())] == [
        "lexical_candidates"
    ]
    assert [
        s.kind for s in rec.statements if to_pgvector_text(canonical) in map(str, s.params or ())
    ] == ["vector_candidates"]

    # The audit row holds the digests and the intent, never the values.
    row = decision_row(mdb[0], result.decision.decision_id)
    assert row is not None
    assert row["query_digest"] == query_digest
    assert row["embedding_digest"] == vector_digest
    assert row["semantic_intent"] == "optional"
    assert row["requested_limit"] == 4
    assert row["principal"] == role("alice")
    for value in row.values():
        assert QUERY not in str(value)
        assert "ledger" not in str(value)
        assert value != canonical.tobytes()
    # The SQL side computes the same float32-LE digest (pyretrieve.search records it too).
    with mdb[0].connect(autocommit=True) as c, acting_as(c, "alice"):
        sql_digest = c.execute(
            "SELECT pyretrieve.embedding_digest(%s::public.vector) AS d",
            (to_pgvector_text(canonical),),
        ).fetchone()
    assert sql_digest == {"d": vector_digest}
    assert result.embedding_digest == vector_digest
    assert result.query_digest == query_digest


def test_a_deny_raises_access_denied_and_nothing_runs_after_authorize(
    rec: Harness, mdb: tuple[Database, Any]
) -> None:
    before = decision_count(mdb[0])
    for denied in (
        scope(purpose="billing"),
        scope(project="nowhere"),
        Scope(workspace="globex", project="docs", purpose="support"),
    ):
        rec.reset()
        with pytest.raises(AccessDenied) as info:
            alice(rec).search(QUERY, scope=denied, embedding=QUERY_VECTOR, model=MODEL)
        rec.recording = False
        # The model's defaults travel in authorize's round trip; the server skips what follows
        # a failed statement until the Sync, so they are sent but never run (the driver's
        # batch test shows the skipping), and nothing else is sent.
        assert rec.kinds() == [
            "BEGIN",
            "set_role",
            "text_settings",
            "authorize",
            "model_defaults",
            "ROLLBACK",
        ]
        assert info.value.as_dict() == {
            "code": "VES_MEMORY_ACCESS_DENIED",
            "message": "access denied",
        }
        assert_sanitized(info.value, QUERY)
        assert rec.info.transaction_status == TransactionStatus.IDLE
    assert decision_count(mdb[0]) == before


def test_a_principal_without_a_group_is_denied(rec: Harness, mdb: tuple[Database, Any]) -> None:
    rec.reset()
    with pytest.raises(AccessDenied):
        rec.client(role("nobody")).search(QUERY, scope=scope())
    rec.recording = False
    assert "lexical_candidates" not in rec.kinds()
    assert "fragments" not in rec.kinds()


def test_lexical_mode_never_calls_the_vector_function(rec: Harness) -> None:
    embedder = FixedEmbedder()
    rec.reset()
    result = alice(rec, embedder).search(
        QUERY, scope=scope(), mode="lexical", embedding=QUERY_VECTOR, model=MODEL
    )
    rec.recording = False
    assert rec.kinds() == [
        "BEGIN",
        "set_role",
        "text_settings",
        "authorize",
        "model_defaults",
        "lexical_candidates",
        "fragments",
        "COMMIT",
    ]
    (auth,) = rec.of("authorize")
    assert auth.params[4] == "disabled"  # intent
    assert auth.params[5] is None  # no embedding digest: the vector is not used at all
    assert embedder.calls == []
    assert result.semantic.to_plain() == {
        "status": "not_requested",
        "reason": None,
        "evidence": {},
        "lowers_confidence": False,
    }
    assert result.embedding_digest is None
    assert not result.vector_ran


def test_semantic_disabled_by_the_caller_never_calls_the_vector_function(
    rec: Harness,
) -> None:
    rec.reset()
    result = alice(rec).search(
        QUERY, scope=scope(), semantic="disabled", embedding=QUERY_VECTOR, model=MODEL
    )
    rec.recording = False
    assert "vector_candidates" not in rec.kinds()
    assert result.semantic.status.value == "not_requested"
    assert not result.semantic.lowers_confidence


def test_vector_mode_never_calls_the_lexical_function(rec: Harness) -> None:
    rec.reset()
    result = alice(rec).search(
        QUERY, scope=scope(), mode="vector", embedding=QUERY_VECTOR, model=MODEL, limit=3
    )
    rec.recording = False
    assert rec.kinds() == [
        "BEGIN",
        "set_role",
        "text_settings",
        "authorize",
        "model_defaults",
        "SAVEPOINT",
        "vector_candidates",
        "RELEASE",
        "fragments",
        "COMMIT",
    ]
    # Vector mode cannot do without the semantic leg: the decision records it as required,
    # as pyretrieve.search() does (pyretrieve.contract.semantic_intent).
    assert rec.of("authorize")[0].params[4] == "required"
    assert not result.lexical_ran
    assert all(r.lexical is None and r.vector is not None for r in result.results)


def test_policy_disabled_semantic_is_a_degradation_without_a_vector_call(
    rec: Harness,
) -> None:
    embedder = FixedEmbedder()
    rec.reset()
    result = alice(rec, embedder).search(
        QUERY, scope=scope(purpose="nosem"), embedding=QUERY_VECTOR, model=MODEL
    )
    rec.recording = False
    assert rec.kinds() == [
        "BEGIN",
        "set_role",
        "text_settings",
        "authorize",
        "model_defaults",
        "lexical_candidates",
        "fragments",
        "COMMIT",
    ]
    assert result.semantic.status.value == "degraded"
    assert result.semantic.reason is not None
    assert result.semantic.reason.value == "disabled"
    assert result.semantic.lowers_confidence
    assert result.decision.semantic_policy.value == "disabled"
    assert not result.vector_ran


def test_the_embedder_is_used_when_no_embedding_is_given(rec: Harness) -> None:
    embedder = FixedEmbedder()
    rec.reset()
    result = alice(rec, embedder).search(QUERY, scope=scope(), model=MODEL)
    rec.recording = False
    assert embedder.calls == [QUERY]
    assert "vector_candidates" in rec.kinds()
    assert result.semantic.status.value == "used"
    assert result.embedding_digest == embedding_digest(canonical_embedding(QUERY_VECTOR))


def test_a_connection_inside_a_transaction_is_refused(rec: Harness) -> None:
    with rec.transaction():
        rec.reset()
        with pytest.raises(InvalidInput):
            alice(rec).search(QUERY, scope=scope())
        rec.recording = False
        assert rec.statements == []


def test_a_principal_that_cannot_be_set_leaves_the_connection_idle(rec: Harness) -> None:
    """Attack: requests as principals the login may not become (absent, privileged, a quoted
    payload). In a pipeline SET LOCAL ROLE's error may surface while the statements after it
    are sent, so each is tried again and again (a timing-dependent escape happened about half
    the time): every one is refused as an unknown principal, and the connection is idle after
    each, able to search as alice."""
    for attempt in range(12):
        for principal in ("no_such_principal_x", "postgres", f'{role("alice")}"; RESET ROLE; --'):
            with pytest.raises(UnknownPrincipal):
                rec.client(principal).search(QUERY, scope=scope())
            assert rec.info.transaction_status == psycopg.pq.TransactionStatus.IDLE, attempt
    assert alice(rec).search(QUERY, scope=scope()).results


def test_invalid_input_is_refused_before_any_sql(rec: Harness, mdb: tuple[Database, Any]) -> None:
    before = decision_count(mdb[0])
    long_query = "ledger " * 715  # 5005 characters
    cases: list[dict[str, Any]] = [
        {"query": long_query},
        {"query": ""},
        {"query": QUERY, "limit": 0},
        {"query": QUERY, "limit": 1001},
        {"query": QUERY, "mode": "fuzzy"},
        {"query": QUERY, "scope": Scope(workspace="Acme", project="docs", purpose="support")},
        {"query": QUERY, "embedding": [0.0] * DIM, "model": MODEL},
        {"query": QUERY, "embedding": [float("nan")] * DIM, "model": MODEL},
        {"query": QUERY, "mode": "vector", "semantic": "disabled"},
    ]
    for case in cases:
        kwargs = {"scope": scope(), **case}
        query = kwargs.pop("query")
        rec.reset()
        with pytest.raises(PyretrieveError) as info:
            alice(rec).search(query, **kwargs)
        rec.recording = False
        assert rec.statements == [], case
        assert info.value.code in ("VES_MEMORY_INVALID_INPUT", "VES_MEMORY_INVALID_EMBEDDING")
        assert_sanitized(info.value, "ledger ledger")
    assert decision_count(mdb[0]) == before


# --------------------------------------------------------------------------- degradation


def _degraded_search(conn: Harness, case: str, **kw: Any) -> SearchResult:
    if case == "missing_embedding":
        return alice(conn).search(
            QUERY, scope=scope(purpose=kw.pop("purpose", "support")), model=MODEL, **kw
        )
    if case == "adapter_failure":
        return alice(conn, FailingEmbedder()).search(
            QUERY, scope=scope(purpose=kw.pop("purpose", "support")), model=MODEL, **kw
        )
    if case == "unavailable":
        return alice(conn).search(
            QUERY,
            scope=scope(purpose=kw.pop("purpose", "support")),
            embedding=QUERY_VECTOR,
            model="no-such-model",
            **kw,
        )
    if case == "corrupt":
        return alice(conn).search(
            QUERY,
            scope=scope(purpose=kw.pop("purpose", "support")),
            embedding=[0.5, 0.25, 0.125],
            model=MODEL,
            **kw,
        )
    if case == "stale":
        return alice(conn).search(
            QUERY,
            scope=scope("stale", kw.pop("purpose", "support")),
            embedding=QUERY_VECTOR,
            model=MODEL,
            **kw,
        )
    if case == "disabled":
        kw.pop("purpose", None)
        return alice(conn).search(
            QUERY, scope=scope(purpose="nosem"), embedding=QUERY_VECTOR, model=MODEL, **kw
        )
    raise AssertionError(case)


DEGRADATIONS = [
    "missing_embedding",
    "adapter_failure",
    "unavailable",
    "corrupt",
    "stale",
    "disabled",
]
# Cases whose vector call reaches the database (and fails or is found stale there).
VECTOR_CALLED = {"unavailable", "corrupt", "stale"}


@pytest.mark.parametrize("case", DEGRADATIONS)
def test_optional_semantic_degrades_and_lowers_confidence(
    rec: Harness, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    project = "stale" if case == "stale" else "docs"
    baseline = alice(rec).search(QUERY, scope=scope(project), mode="lexical", limit=2)
    rec.reset()
    result = _degraded_search(rec, case, limit=2)
    rec.recording = False

    assert result.semantic.status.value == "degraded"
    assert result.semantic.reason is not None
    assert result.semantic.reason.value == case
    assert result.semantic.lowers_confidence
    assert result.semantic.to_plain()["lowers_confidence"] is True
    assert not result.vector_ran
    assert result.lexical_ran
    assert ("vector_candidates" in rec.kinds()) == (case in VECTOR_CALLED)
    if case in VECTOR_CALLED:
        # The vector leg ran in a savepoint; its failure did not abort the request.
        assert rec.kinds()[-1] == "COMMIT"
        assert ("ROLLBACK TO" in rec.kinds()) == (case != "stale")

    # Same fragments, same order, confidence exactly 0.75 times the lexical-only run's.
    assert [r.fragment_id for r in result.results] == [r.fragment_id for r in baseline.results]
    assert [o.fragment_id for o in result.omissions] == [o.fragment_id for o in baseline.omissions]
    assert result.results
    assert result.omissions
    for got, base in zip(result.results, baseline.results, strict=True):
        assert got.confidence == base.confidence * 0.75
        assert got.rrf_score == base.rrf_score
        assert got.vector is None
    for got_o, base_o in zip(result.omissions, baseline.omissions, strict=True):
        assert got_o.confidence == base_o.confidence * 0.75

    # The adapter's error text (which quotes the query) goes nowhere.
    output = result.to_json()
    assert ADAPTER_SECRET not in output
    assert "upstream rejected" not in output
    for record in caplog.records:
        assert ADAPTER_SECRET not in record.getMessage()
        assert "upstream rejected" not in str(record.exc_info)


@pytest.mark.parametrize("case", DEGRADATIONS)
def test_required_semantic_raises_instead_of_degrading(
    rec: Harness, mdb: tuple[Database, Any], case: str
) -> None:
    before = decision_count(mdb[0])
    rec.reset()
    with pytest.raises(SemanticRequired) as info:
        _degraded_search(rec, case, semantic="required")
    rec.recording = False
    assert info.value.code == "VES_MEMORY_SEMANTIC_REQUIRED"
    assert "fragments" not in rec.kinds()
    assert rec.kinds()[-1] == "ROLLBACK"
    assert rec.info.transaction_status == TransactionStatus.IDLE
    assert_sanitized(info.value, ADAPTER_SECRET, QUERY)
    assert decision_count(mdb[0]) == before


@pytest.mark.parametrize("case", [c for c in DEGRADATIONS if c != "disabled"])
def test_a_grant_requiring_semantic_raises_instead_of_degrading(rec: Harness, case: str) -> None:
    rec.reset()
    with pytest.raises(SemanticRequired) as info:
        _degraded_search(rec, case, purpose="strict")
    rec.recording = False
    assert rec.of("authorize")[0].params[4] == "optional"  # the caller only asked for optional
    assert "fragments" not in rec.kinds()
    assert_sanitized(info.value, ADAPTER_SECRET, QUERY)


@pytest.mark.parametrize("case", DEGRADATIONS)
def test_semantic_required_carries_no_driver_error_in_its_traceback(
    rec: Harness, case: str
) -> None:
    with pytest.raises(SemanticRequired) as info:
        _degraded_search(rec, case, semantic="required")
    assert_sanitized(info.value, ADAPTER_SECRET, QUERY, chain=True)


@pytest.mark.parametrize("case", ["missing_embedding", "unavailable", "corrupt", "stale"])
def test_vector_mode_requires_semantic(rec: Harness, case: str) -> None:
    with pytest.raises(SemanticRequired):
        _degraded_search(rec, case, mode="vector")


def test_a_grant_requiring_semantic_succeeds_when_the_vector_leg_runs(
    rec: Harness,
) -> None:
    result = alice(rec).search(
        QUERY, scope=scope(purpose="strict"), embedding=QUERY_VECTOR, model=MODEL
    )
    assert result.semantic.status.value == "used"
    assert result.decision.semantic_policy.value == "required"


def test_a_grant_requiring_semantic_refuses_a_lexical_only_request(
    rec: Harness, mdb: tuple[Database, Any]
) -> None:
    before = decision_count(mdb[0])
    for kw in ({"mode": "lexical"}, {"semantic": "disabled"}):
        rec.reset()
        with pytest.raises(SemanticRequired):
            alice(rec).search(
                QUERY, scope=scope(purpose="strict"), embedding=QUERY_VECTOR, model=MODEL, **kw
            )
        rec.recording = False
        assert "vector_candidates" not in rec.kinds()
        assert rec.kinds()[-1] == "ROLLBACK"
    assert decision_count(mdb[0]) == before


def _pooled_searches(dsn: str, flavor: str) -> tuple[SearchResult, SearchResult, Any, Any]:
    """Two searches through a pool of the flavour, then the state of a pooled connection:
    (first, second, transaction status, current_user)."""
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    kw: dict[str, Any] = {"min_size": 1, "max_size": 2, "kwargs": {"autocommit": True}}
    search: dict[str, Any] = {"scope": scope(), "embedding": QUERY_VECTOR, "model": MODEL}
    if flavor == "sync":
        with ConnectionPool(dsn, open=True, **kw) as pool:
            retriever = Retriever(pool, principal=role("alice"))
            first = retriever.search(QUERY, **search)
            second = retriever.search(QUERY, **search)
            with pool.connection() as c:
                row = c.execute("SELECT current_user AS u").fetchone()
                return first, second, c.info.transaction_status, row

    async def run() -> tuple[SearchResult, SearchResult, Any, Any]:
        async with AsyncConnectionPool(dsn, open=False, **kw) as pool:
            retriever = AsyncRetriever(pool, principal=role("alice"))
            first = await retriever.search(QUERY, **search)
            second = await retriever.search(QUERY, **search)
            async with pool.connection() as c:
                row = await (await c.execute("SELECT current_user AS u")).fetchone()
                return first, second, c.info.transaction_status, row

    return asyncio.run(run())


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_connection_pool_source_runs_each_request_in_its_own_transaction(
    mdb: tuple[Database, Any], flavor: str
) -> None:
    first, second, status, row = _pooled_searches(mdb[0].app_dsn, flavor)
    assert first.decision.decision_id != second.decision.decision_id
    assert _stable(first) == _stable(second)
    assert status == TransactionStatus.IDLE
    # SET LOCAL ROLE ended with the request's transaction.
    assert row is not None
    assert row[0] != role("alice")


# ----------------------------------------------------------------------- lexical failures


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_lexical_failure_is_a_hard_sanitized_error(db: Database, flavor: str) -> None:
    with db.connect(autocommit=True) as c:
        seed_scopes(c)
    with db.admin(autocommit=True) as admin:
        admin.execute(
            "REVOKE EXECUTE ON FUNCTION pyretrieve.lexical_candidates(uuid, text, integer, text)"
            " FROM pyretrieve_reader"
        )
    conn = Harness(flavor, db.app_dsn)
    try:
        for mode in ("hybrid", "lexical"):
            conn.reset()
            with pytest.raises(LexicalFailure) as info:
                alice(conn, FixedEmbedder()).search(
                    QUERY, scope=scope(), mode=mode, embedding=QUERY_VECTOR, model=MODEL
                )
            conn.recording = False
            # No fallback to the vector leg: the request ends at the failed lexical call.
            assert conn.kinds() == [
                "BEGIN",
                "set_role",
                "text_settings",
                "authorize",
                "model_defaults",
                "lexical_candidates",
                "ROLLBACK",
            ]
            exc = info.value
            assert exc.as_dict() == {
                "code": "VES_MEMORY_LEXICAL_FAILURE",
                "message": "lexical retrieval failed",
            }
            assert_sanitized(exc, QUERY, "lexical_candidates", "InsufficientPrivilege")
            assert exc.__cause__ is None
            assert exc.__suppress_context__ is True
            assert conn.info.transaction_status == TransactionStatus.IDLE
        # The vector-only mode does not need the lexical function.
        result = alice(conn).search(
            QUERY, scope=scope(), mode="vector", embedding=QUERY_VECTOR, model=MODEL
        )
        assert result.results
    finally:
        conn.close()
    with db.admin(autocommit=True) as c:
        row = c.execute("SELECT count(*) AS n FROM pyretrieve.decisions").fetchone()
    assert row == {"n": 1}  # only the vector-mode request committed its decision


# --------------------------------------------------------------------------- determinism


def _stable(result: SearchResult) -> tuple[str, str]:
    """The results and omissions, without the per-request decision id and timestamp."""
    results = []
    for r in result.results:
        plain = r.to_plain()
        assert isinstance(plain, dict)
        plain.pop("decision_id")
        provenance = plain["provenance"]
        assert isinstance(provenance, dict)
        provenance.pop("retrieved_at")
        freshness = plain["freshness"]
        assert isinstance(freshness, dict)
        freshness.pop("age_us")  # evaluated_at - observed_at grows between requests
        results.append(plain)
    return (
        canonical_json(results),
        canonical_json([o.to_plain() for o in result.omissions]),
    )


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "vector"])
def test_the_same_request_twice_gives_the_same_results(rec: Harness, mode: str) -> None:
    retriever = alice(rec)
    first = retriever.search(
        QUERY, scope=scope(), mode=mode, embedding=QUERY_VECTOR, model=MODEL, limit=3
    )
    second = retriever.search(
        QUERY, scope=scope(), mode=mode, embedding=QUERY_VECTOR, model=MODEL, limit=3
    )
    assert first.decision.decision_id != second.decision.decision_id
    assert _stable(first) == _stable(second)
    assert len(first.results) == 3
    assert first.omissions


@pytest.fixture(scope="module")
def captured(mdb: tuple[Database, Any]) -> dict[str, Any]:
    """The rows of one hybrid request, read once through the SQL functions as alice."""
    vector = canonical_embedding(QUERY_VECTOR)
    with mdb[0].connect(autocommit=True) as c, acting_as(c, "alice"):
        decision = c.execute(
            "SELECT * FROM pyretrieve.authorize(%s, %s, %s, %s, 'optional', %s, 3)",
            (WS, "docs", "support", sha(QUERY), embedding_digest(vector)),
        ).fetchone()
        assert decision is not None
        lexical = c.execute(
            "SELECT * FROM pyretrieve.lexical_candidates(%s, %s, 100)",
            (decision["decision_id"], "ledger quarterly"),
        ).fetchall()
        vectors = c.execute(
            "SELECT * FROM pyretrieve.vector_candidates(%s, %s, %s::public.vector, 100)",
            (decision["decision_id"], MODEL, to_pgvector_text(vector)),
        ).fetchall()
        ids = sorted({r["fragment_id"] for r in lexical} | {r["fragment_id"] for r in vectors})
        records = c.execute(
            "SELECT * FROM pyretrieve.fragments(%s, %s)", (decision["decision_id"], ids)
        ).fetchall()
    return {
        "decision": decision,
        "lexical": lexical,
        "vector": vectors,
        "records": records,
        "query_digest": sha(QUERY),
        "embedding_digest": embedding_digest(vector),
    }


def _rank_captured(captured: dict[str, Any], lexical: Any, vector: Any, records: Any) -> str:
    return ranking.rank(
        decision=captured["decision"],
        lexical=lexical,
        vector=vector,
        records=records,
        limit=3,
        semantic=SemanticStatus.used({"model": MODEL}),
        query_digest=captured["query_digest"],
        embedding_digest=captured["embedding_digest"],
    ).to_json()


def test_the_captured_rows_are_a_real_hybrid_case(captured: dict[str, Any]) -> None:
    assert len(captured["records"]) == len(DOCS)
    assert len(captured["lexical"]) == len(DOCS)
    assert len(captured["vector"]) == len(DOCS)
    # The two modalities disagree somewhere, so fusion actually decides the order.
    lexical_order = [r["fragment_id"] for r in captured["lexical"]]
    vector_order = [r["fragment_id"] for r in captured["vector"]]
    assert lexical_order != vector_order


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_ranking_db_rows_in_any_order_gives_byte_identical_json(
    captured: dict[str, Any], data: st.DataObject
) -> None:
    reference = _rank_captured(
        captured, captured["lexical"], captured["vector"], captured["records"]
    )
    lexical = data.draw(st.permutations(captured["lexical"]))
    vector = data.draw(st.permutations(captured["vector"]))
    records = data.draw(st.permutations(captured["records"]))
    assert _rank_captured(captured, lexical, vector, records) == reference
    # Even with the rows themselves rebuilt with their keys in another order.
    shuffled = [dict(reversed(list(r.items()))) for r in records]
    assert _rank_captured(captured, vector=vector, lexical=lexical, records=shuffled) == reference


def test_the_digest_of_a_numpy_and_a_list_embedding_agree(rec: Harness) -> None:
    as_list = alice(rec).search(QUERY, scope=scope(), embedding=QUERY_VECTOR, model=MODEL)
    as_array = alice(rec).search(
        QUERY, scope=scope(), embedding=np.array(QUERY_VECTOR, dtype=np.float64), model=MODEL
    )
    assert as_list.embedding_digest == as_array.embedding_digest
    assert _stable(as_list) == _stable(as_array)


# ------------------------------------------------------------------------ sync and async


def _statements(harness: Harness, decision_id: UUID) -> list[tuple[str, Any]]:
    """What a request sent, with its own decision id blanked (each request has its own)."""
    return [
        (
            s.kind,
            None if s.params is None else tuple("*" if p == decision_id else p for p in s.params),
        )
        for s in harness.statements
    ]


@pytest.mark.parametrize(
    "kw",
    [
        {"embedding": QUERY_VECTOR, "model": MODEL, "limit": 3},
        {"model": MODEL, "limit": 2},  # no embedding and no embedder: degraded
        {"embedding": QUERY_VECTOR, "model": "no-such-model"},  # a vector leg that fails
        {"mode": "vector", "embedding": QUERY_VECTOR, "model": MODEL},
    ],
    ids=["hybrid", "missing_embedding", "unavailable", "vector"],
)
def test_sync_and_async_send_the_same_statements_and_return_the_same_bytes(
    mdb: tuple[Database, Any], kw: dict[str, Any]
) -> None:
    seen = []
    for flavor in FLAVORS:
        harness = Harness(flavor, mdb[0].app_dsn)
        try:
            harness.reset()
            result = harness.client(role("alice")).search(QUERY, scope=scope(), **kw)
            harness.recording = False
            seen.append((_statements(harness, result.decision.decision_id), _stable(result)))
        finally:
            harness.close()
    (sync_statements, sync_result), (async_statements, async_result) = seen
    assert async_statements == sync_statements
    assert "authorize" in [kind for kind, _ in sync_statements]
    assert async_result == sync_result


def test_the_async_client_embeds_off_the_event_loop(mdb: tuple[Database, Any]) -> None:
    class ThreadRecordingEmbedder(FixedEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.threads: list[int] = []

        def embed_query(self, text: str) -> list[float]:
            self.threads.append(threading.get_ident())
            return super().embed_query(text)

    embedder = ThreadRecordingEmbedder()

    async def run() -> tuple[SearchResult, int]:
        async with await psycopg.AsyncConnection.connect(mdb[0].app_dsn, autocommit=True) as c:
            retriever = AsyncRetriever(c, principal=role("alice"), embedders=[embedder])
            result = await retriever.search(QUERY, scope=scope(), model=MODEL)
            return result, threading.get_ident()

    result, loop_thread = asyncio.run(run())
    assert result.semantic.status.value == "used"
    assert embedder.calls == [QUERY]
    assert embedder.threads
    assert loop_thread not in embedder.threads


def test_async_connect_closes_its_own_connection_and_refuses_a_sync_one(
    mdb: tuple[Database, Any], rec: Harness
) -> None:
    async def run() -> tuple[SearchResult, bool]:
        async with await AsyncRetriever.connect(mdb[0].app_dsn, principal=role("alice")) as r:
            result = await r.search(QUERY, scope=scope(), mode="lexical")
            own = r._source
        return result, own.closed

    result, closed = asyncio.run(run())
    assert result.results
    assert closed
    with pytest.raises(InvalidInput):
        AsyncRetriever(rec.conn, principal=role("alice")) if rec.flavor == "sync" else Retriever(
            rec.conn, principal=role("alice")
        )


# ------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_hybrid_search_takes_five_round_trips_and_eleven_without_the_pipeline(
    mdb: tuple[Database, Any], flavor: str
) -> None:
    """Counted on the wire, by a proxy between the client and the server: BEGIN, SET LOCAL
    ROLE, the text settings, authorize and the model's defaults; lexical; the savepoint and
    vector; its release and the records; COMMIT. One by one, each of the eleven statements is a
    round trip. Both give the same results."""
    database = mdb[0]
    # A delay on the wire keeps the count exact: a client that waits for an answer sends
    # only after the proxy has passed the answer on, and a pipelined batch goes out whole.
    with psycopg.connect(database.app_dsn) as probe:
        proxy = LatencyProxy.to_server(probe.info, one_way_ms=0.5)
    with proxy:
        dsn = proxy.dsn(database.app_dsn)
        turns: dict[bool, int] = {}
        finals: dict[bool, list[Any]] = {}
        for pipeline in (True, False):
            if flavor == "sync":
                with psycopg.connect(dsn, autocommit=True) as conn:
                    client = Retriever(conn, principal=role("alice"), pipeline=pipeline)
                    before = proxy.turns
                    result = client.search(
                        QUERY, scope=scope(), embedding=QUERY_VECTOR, model=MODEL, limit=3
                    )
                    turns[pipeline] = proxy.turns - before
            else:

                async def one(pipeline: bool = pipeline) -> tuple[SearchResult, int]:
                    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
                    async with conn:
                        client = AsyncRetriever(conn, principal=role("alice"), pipeline=pipeline)
                        before = proxy.turns
                        found = await client.search(
                            QUERY, scope=scope(), embedding=QUERY_VECTOR, model=MODEL, limit=3
                        )
                        return found, proxy.turns - before

                result, turns[pipeline] = asyncio.run(one())
            finals[pipeline] = [(r.record.fragment_id, r.final_score) for r in result.results]
    assert turns == {True: 5, False: 11}
    assert finals[True] == finals[False]
    assert finals[True]
