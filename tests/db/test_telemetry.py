"""OpenTelemetry spans (pyretrieve.telemetry) with the SDK's in-memory exporter, and the package
working with OpenTelemetry absent.

Each request is one span with a child per leg; the spans carry scope, mode, counts, the
semantic status and timings, and never the query text, a fragment's content, an embedding, a
tool's name or its schema. Everything runs as non-owner principals against a real database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel test dependencies are not installed")

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from pyretrieve import Retriever, Scope, telemetry
from pyretrieve.embedders.hashing import HashNgramEmbedder
from pyretrieve.errors import AccessDenied
from pyretrieve.ingest import Ingestor
from pyretrieve.tools import ToolSession, register_tools
from tests.conftest import ROOT, Database, acting_as, role

MODEL = HashNgramEmbedder().model_id
SCOPE = Scope(workspace="acme", project="docs", purpose="support")
TOOLS_SCOPE = Scope(workspace="acme", project="agents", purpose="support")
# Words of the queries and bodies that appear nowhere else, so any copy of them is a leak.
QUERY = "quartzite zephyr rotation"
BODIES = [
    "Quartzite keys rotate every zephyr quarter from the console.",
    "Zephyr support answers quartzite tickets on weekdays.",
    "A third page about rotation schedules and quartzite audits.",
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "rotate_quartzite_key",
            "description": "Rotate a zephyr quartzite key for an account.",
            "parameters": {
                "type": "object",
                "properties": {"account": {"type": "string", "description": "Zephyr account."}},
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_quartzite_keys",
            "description": "List the quartzite keys of an account.",
            "parameters": {
                "type": "object",
                "properties": {"account": {"type": "string", "description": "The account."}},
            },
        },
    },
]
# The query embedding the tests pass; its digits must not appear in a span.
EMBEDDING = [0.123456789 * (i % 7 + 1) for i in range(256)]


# ---------------------------------------------------------------------------------------------
# The exporter: one global tracer provider per process (OpenTelemetry allows one), recording
# only while a test of this module asks for the spans.
# ---------------------------------------------------------------------------------------------
class _Gate(SpanProcessor):
    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter
        self.open = False

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if self.open:
            self.exporter.export([span])


_GATE = _Gate(InMemorySpanExporter())


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(_GATE)
        trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider
    _GATE.exporter.clear()
    _GATE.open = True
    try:
        yield _GATE.exporter
    finally:
        _GATE.open = False
        _GATE.exporter.clear()


def by_name(finished: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name]


def one(finished: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = by_name(finished, name)
    assert len(found) == 1, [s.name for s in finished]
    return found[0]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def children(finished: Sequence[ReadableSpan], parent: ReadableSpan) -> list[str]:
    return [
        s.name
        for s in sorted(finished, key=lambda s: s.start_time or 0)
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


# ---------------------------------------------------------------------------------------------
# Setup: a scope with fragments and tools, written by the writer, read by alice
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def scope(db: Database, conn: psycopg.Connection[Any], tmp_path: Path) -> Database:
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_workspace('acme')")
        for project in ("docs", "agents"):
            conn.execute("SELECT pyretrieve.create_project('acme', %s)", (project,))
            for nick, purpose, ceiling in (
                ("wally", "ingest", "internal"),
                ("alice", "support", "internal"),
            ):
                conn.execute(
                    "SELECT pyretrieve.grant_access(%s::regrole, 'acme', %s, %s, %s)",
                    (role(nick), project, purpose, ceiling),
                )
        conn.execute("SELECT pyretrieve.register_model(%s, 256)", (MODEL,))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": b}) + "\n" for i, b in enumerate(BODIES))
    )
    Ingestor(conn, principal=role("wally"), embedder=HashNgramEmbedder(), batch_size=2).ingest_path(
        corpus, workspace="acme", project="docs"
    )
    register_tools(
        conn, TOOLS, workspace="acme", project="agents", principal=role("wally"),
        embedders=[HashNgramEmbedder()],
    )  # fmt: skip
    return db


# ---------------------------------------------------------------------------------------------
# 1. One span per request, one child per leg
# ---------------------------------------------------------------------------------------------
def test_a_search_is_one_span_with_a_child_per_leg(
    scope: Database, conn: psycopg.Connection[Any], spans: InMemorySpanExporter
) -> None:
    retriever = Retriever(conn, principal=role("alice"))
    result = retriever.search(QUERY, scope=SCOPE, embedding=EMBEDDING, model=MODEL, limit=2)
    finished = spans.get_finished_spans()

    root = one(finished, "pyretrieve.search")
    assert root.parent is None
    assert children(finished, root) == [
        "pyretrieve.embed",
        "pyretrieve.authorize",
        "pyretrieve.lexical",
        "pyretrieve.vector",
        "pyretrieve.records",
        "pyretrieve.fuse",
    ]
    assert {s.context.trace_id for s in finished} == {root.context.trace_id}
    a = attrs(root)
    assert (a["pyretrieve.workspace"], a["pyretrieve.project"], a["pyretrieve.purpose"]) == (
        "acme",
        "docs",
        "support",
    )
    assert (a["pyretrieve.mode"], a["pyretrieve.limit"], a["pyretrieve.model"]) == (
        "hybrid",
        2,
        MODEL,
    )
    assert a["pyretrieve.results"] == len(result.results) == 2
    assert a["pyretrieve.omissions"] == len(result.omissions) == 1
    assert a["pyretrieve.semantic.status"] == "used"
    assert a["pyretrieve.degraded"] is False
    assert a["pyretrieve.decision_id"] == str(result.decision.decision_id)
    assert a["pyretrieve.retrieval_id"] == result.retrieval_id
    assert root.status.status_code is StatusCode.UNSET
    legs = {s.name: attrs(s) for s in finished}
    assert legs["pyretrieve.authorize"]["pyretrieve.candidate_limit"] == 100
    assert legs["pyretrieve.lexical"]["pyretrieve.candidates"] == 3
    assert legs["pyretrieve.vector"]["pyretrieve.candidates"] == 3
    assert legs["pyretrieve.vector"]["pyretrieve.status"] == "used"
    assert legs["pyretrieve.records"]["pyretrieve.records"] == 3
    # Timings: every span has its elapsed milliseconds, the legs within the request's.
    for name, values in legs.items():
        assert values["pyretrieve.elapsed_ms"] >= 0, name
    assert (
        sum(legs[f"pyretrieve.{n}"]["pyretrieve.elapsed_ms"] for n in ("authorize", "lexical"))
        <= (a["pyretrieve.elapsed_ms"])
    )


def test_degradation_and_denial_are_attributes_and_codes(
    scope: Database, conn: psycopg.Connection[Any], spans: InMemorySpanExporter
) -> None:
    retriever = Retriever(conn, principal=role("alice"))
    # No embedding and no embedder for the model: the vector leg degrades.
    retriever.search(QUERY, scope=SCOPE, model=MODEL)
    finished = spans.get_finished_spans()
    root = one(finished, "pyretrieve.search")
    assert attrs(root)["pyretrieve.semantic.status"] == "degraded"
    assert attrs(root)["pyretrieve.semantic.reason"] == "missing_embedding"
    assert attrs(root)["pyretrieve.degraded"] is True
    vector = attrs(one(finished, "pyretrieve.vector"))
    assert (vector["pyretrieve.status"], vector["pyretrieve.reason"]) == (
        "degraded",
        "missing_embedding",
    )
    assert "pyretrieve.candidates" not in vector

    spans.clear()
    with pytest.raises(AccessDenied):
        retriever.search(QUERY, scope=Scope(workspace="globex", project="docs", purpose="support"))
    finished = spans.get_finished_spans()
    root = one(finished, "pyretrieve.search")
    authorize = one(finished, "pyretrieve.authorize")
    for failed in (root, authorize):
        assert failed.status.status_code is StatusCode.ERROR
        assert failed.status.description == AccessDenied.code
        assert attrs(failed)["error.type"] == AccessDenied.code
        # No exception event: OpenTelemetry's would copy the message and the stack.
        assert failed.events == ()
    # The request ended at authorize: no candidate leg ran.
    assert children(finished, root) == ["pyretrieve.embed", "pyretrieve.authorize"]


def test_tool_discovery_events_become_span_events(
    scope: Database, conn: psycopg.Connection[Any], spans: InMemorySpanExporter
) -> None:
    retriever = Retriever(conn, principal=role("alice"), embedders=[HashNgramEmbedder()])
    discovery = retriever.discover_tools(QUERY, scope=TOOLS_SCOPE, model=MODEL)
    finished = spans.get_finished_spans()
    root = one(finished, "pyretrieve.discover_tools")
    assert root.parent is None
    assert not by_name(finished, "pyretrieve.search")  # the search legs are the discovery's
    assert children(finished, root) == [
        "pyretrieve.embed",
        "pyretrieve.authorize",
        "pyretrieve.lexical",
        "pyretrieve.vector",
        "pyretrieve.records",
        "pyretrieve.fuse",
    ]
    a = attrs(root)
    assert a["pyretrieve.tools.k"] == discovery.k >= 1
    assert a["pyretrieve.tools.candidates"] == len(discovery.ranked) == 2
    assert a["pyretrieve.tools.level"] == discovery.confidence.level
    assert a["pyretrieve.policy"] == discovery.policy
    events = {e.name: dict(e.attributes or {}) for e in root.events}
    assert {"tool_discovery", "tool_schema_round"} <= set(events)
    assert events["tool_discovery"]["pyretrieve.k"] == discovery.k
    assert events["tool_schema_round"]["pyretrieve.fingerprint"] == discovery.fingerprint

    spans.clear()
    session = ToolSession.after(discovery)
    outcome = retriever.rediscover_tool("no_such_tool", scope=TOOLS_SCOPE, session=session)
    assert outcome.status == "rejected"
    root = one(spans.get_finished_spans(), "pyretrieve.rediscover_tool")
    assert attrs(root)["pyretrieve.outcome"] == "rejected"
    assert [e.name for e in root.events] == ["tool_rediscovery"]


def test_an_event_outside_any_span_is_a_span_of_its_own(spans: InMemorySpanExporter) -> None:
    from pyretrieve.tools import events

    events.emit("empty_discovery", query_digest="ab" * 32, decision_id="d")
    (alone,) = spans.get_finished_spans()
    assert alone.name == "pyretrieve.empty_discovery"
    assert attrs(alone)["pyretrieve.query_digest"] == "ab" * 32


def test_each_ingest_batch_is_a_span_with_what_it_changed(
    scope: Database, conn: psycopg.Connection[Any], spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    corpus = tmp_path / "more.jsonl"
    corpus.write_text(
        json.dumps({"id": "d0", "text": BODIES[0]}) + "\n"  # unchanged
        + json.dumps({"id": "n1", "text": "A new page about glaciers."}) + "\n"
        + json.dumps({"id": "n2", "text": "Another new page about moraines."}) + "\n"
    )  # fmt: skip
    Ingestor(conn, principal=role("wally"), embedder=HashNgramEmbedder(), batch_size=2).ingest_path(
        corpus, workspace="acme", project="docs"
    )
    batches = by_name(spans.get_finished_spans(), "pyretrieve.ingest_batch")
    assert [attrs(b)["pyretrieve.records"] for b in batches] == [2, 1]
    assert sum(attrs(b)["pyretrieve.inserted"] for b in batches) == 2
    assert sum(attrs(b)["pyretrieve.unchanged"] for b in batches) == 1
    assert sum(attrs(b)["pyretrieve.embedded"] for b in batches) == 2
    assert {attrs(b)["pyretrieve.model"] for b in batches} == {MODEL}


# ---------------------------------------------------------------------------------------------
# 2. Nothing of a query, a content, an embedding or a schema in any span
# ---------------------------------------------------------------------------------------------
def _everything(finished: Sequence[ReadableSpan]) -> list[str]:
    """Every string a tracing back end receives: span names, attribute keys and values,
    event names and their attributes, status descriptions."""
    out: list[str] = []
    for s in finished:
        out.append(s.name)
        out.append(s.status.description or "")
        for key, value in attrs(s).items():
            out += [key, str(value)]
        for e in s.events:
            out.append(e.name)
            for key, value in (e.attributes or {}).items():
                out += [key, str(value)]
    return out


def test_no_span_carries_query_text_content_embeddings_or_schemas(
    scope: Database, conn: psycopg.Connection[Any], spans: InMemorySpanExporter
) -> None:
    retriever = Retriever(conn, principal=role("alice"), embedders=[HashNgramEmbedder()])
    results = retriever.search(QUERY, scope=SCOPE, model=MODEL, limit=10)
    assert {r.text for r in results.results} == set(BODIES)
    retriever.search(QUERY, scope=SCOPE, embedding=EMBEDDING, model=MODEL, mode="vector")
    retriever.search(QUERY, scope=SCOPE, mode="lexical")
    with pytest.raises(AccessDenied):
        retriever.search(QUERY, scope=Scope(workspace="acme", project="nowhere", purpose="x"))
    discovery = retriever.discover_tools(QUERY, scope=TOOLS_SCOPE, model=MODEL)
    assert discovery.schemas
    session = ToolSession.after(discovery)
    retriever.rediscover_tool("rotate_quartzite_secret", scope=TOOLS_SCOPE, session=session)
    finished = spans.get_finished_spans()
    assert len(by_name(finished, "pyretrieve.search")) == 4
    strings = _everything(finished)
    assert len(strings) > 100

    forbidden = [QUERY, *QUERY.split(), *BODIES, "rotate_quartzite_secret"]
    for t in TOOLS:
        function = t["function"]
        forbidden += [function["name"], function["description"], json.dumps(t)]
        forbidden += [p["description"] for p in function["parameters"]["properties"].values()]
    forbidden += [json.dumps(s) for s in discovery.schemas]
    forbidden += [repr(EMBEDDING[0])[:8], repr(EMBEDDING[1])[:8]]
    lowered = [s.lower() for s in strings]
    for word in forbidden:
        hits = [s for s in lowered if word.lower() in s]
        assert not hits, (word, hits)


# ---------------------------------------------------------------------------------------------
# 3. Without OpenTelemetry
# ---------------------------------------------------------------------------------------------
ABSENT = """
import sys

# Every opentelemetry import fails, as when the package is not installed.
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, _Absent())
for name in [m for m in sys.modules if m.startswith("opentelemetry")]:
    del sys.modules[name]

import psycopg
from pyretrieve import Retriever, Scope, telemetry
from pyretrieve.embedders.hashing import HashNgramEmbedder

assert telemetry.ENABLED is False
with telemetry.span("anything", workspace="acme") as span:
    span.set(results=1)
    span.event("nothing", count=1)
telemetry.annotate(results=1)
telemetry.event("tool_discovery", {"k": 1})

dsn, principal = sys.argv[1], sys.argv[2]
with psycopg.connect(dsn, autocommit=True) as conn:
    retriever = Retriever(conn, principal=principal, embedders=[HashNgramEmbedder()])
    scope = Scope(workspace="acme", project="docs", purpose="support")
    result = retriever.search("quartzite", scope=scope, model="hash-ngram-v1")
    tools = retriever.discover_tools(
        "quartzite", scope=Scope(workspace="acme", project="agents", purpose="support"),
        model="hash-ngram-v1",
    )
print(len(result.results), result.semantic.status.value, tools.k > 0)
print(any(m.startswith("opentelemetry") for m in sys.modules))
"""


def test_everything_works_without_opentelemetry(scope: Database, tmp_path: Path) -> None:
    script = tmp_path / "absent.py"
    script.write_text(textwrap.dedent(ABSENT))
    result = subprocess.run(
        [sys.executable, str(script), scope.app_dsn, role("alice")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == ["3 used True", "False"]


def test_telemetry_is_on_here() -> None:
    # The suite runs with the otel extra: the in-process tests above exercise the real path.
    assert telemetry.ENABLED is True
