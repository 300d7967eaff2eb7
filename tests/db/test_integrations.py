"""The LangChain and LlamaIndex adapters against the real frameworks and the real database.

Readers are the seed's principals (``tests/db/seed.py``): alice reads acme/docs up to
confidential, bob up to internal, and no reader holds a globex grant. Every globex fragment
and every fragment alice may not see sits exactly on the probe vector the test embedder
returns and carries the words searched for, so a leak through an adapter would rank first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

pytest.importorskip("langchain_core", reason="the langchain extra is not installed")
pytest.importorskip("llama_index.core", reason="the llamaindex extra is not installed")

from langchain_core.documents import Document
from llama_index.core.schema import Document as LlamaDocument
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from psycopg_pool import ConnectionPool

from pyretrieve import Retriever
from pyretrieve.errors import AccessDenied, InvalidInput, PyretrieveError
from pyretrieve.integrations import langchain as lc
from pyretrieve.integrations import llamaindex as li
from pyretrieve.integrations._core import METADATA_KEYS
from pyretrieve.types import TRUST_LABEL, Scope, iso_utc
from tests.conftest import Database, Server, role
from tests.db.seed import CASES, MODEL, PROBE, PURPOSE, Seeded, seed, seeded_database

ACME = Scope(workspace="acme", project="docs", purpose=PURPOSE)
GLOBEX = Scope(workspace="globex", project="docs", purpose=PURPOSE)
# Queries aimed at what must stay hidden: the restricted marker, a globex sentinel with the
# words globex bodies share with acme, the superseded/retracted/expired markers.
ATTACKS = (
    "ledger",
    "dagger restricted ledger",
    "GLOBEX-SENTINEL-1 apricot public internal ledger",
    "ember garnet harbor indigo juniper ledger",
    "globex",
)


def visible_to(s: Seeded, nick: str) -> set[UUID]:
    """acme/docs fragments under the reader's decision (alice: ceiling confidential, max_age
    30 days; bob: ceiling internal, no max_age)."""
    if nick == "alice":
        return s.visible
    return {s.acme[c] for c in ("public", "internal", "successor", "old")}


def forbidden_strings(s: Seeded, nick: str) -> list[str]:
    """What must not appear anywhere in the reader's output: the ids and marker words of the
    acme/docs fragments it may not see, and every globex sentinel, id and name."""
    hidden = [c for c, fid in s.acme.items() if fid not in visible_to(s, nick)]
    return [
        *(str(s.acme[c]) for c in hidden),
        *(CASES[c][0] for c in hidden),
        "restricted",
        *s.foreign_strings,
    ]


class ProbeEmbedder:
    """``test-3d``: every text on the probe vector, where the hidden rows sit."""

    model_id = MODEL
    dimension = 3

    def embed_query(self, text: str) -> list[float]:
        return list(PROBE)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(PROBE) for _ in texts]


@pytest.fixture(scope="module")
def seeded(server: Server, template_db: str) -> Iterator[tuple[Database, Seeded]]:
    with seeded_database(server, template_db) as pair:
        yield pair


@pytest.fixture
def app(seeded: tuple[Database, Seeded]) -> Iterator[psycopg.Connection[Any]]:
    """An authenticator connection (autocommit), as an application holds one."""
    db, _ = seeded
    with psycopg.connect(db.app_dsn, autocommit=True) as conn:
        yield conn


def lc_retriever(conn: Any, nick: str, scope: Scope = ACME, **kw: Any) -> lc.PyretrieveRetriever:
    return lc.PyretrieveRetriever(
        conn, principal=role(nick), scope=scope, embedder=ProbeEmbedder(), **kw
    )


def li_retriever(conn: Any, nick: str, scope: Scope = ACME, **kw: Any) -> li.PyretrieveRetriever:
    return li.PyretrieveRetriever(
        conn, principal=role(nick), scope=scope, embedder=ProbeEmbedder(), **kw
    )


def dump(items: Sequence[Document] | Sequence[NodeWithScore]) -> str:
    """Everything an adapter handed back, text and metadata, as one string."""
    parts = []
    for item in items:
        if isinstance(item, Document):
            parts += [item.page_content, str(item.id), json.dumps(item.metadata)]
        else:
            node = item.node
            parts += [node.get_content(), node.node_id, json.dumps(node.metadata)]
            parts.append(node.get_content(metadata_mode=MetadataMode.LLM))
    return "\n".join(parts)


def check_metadata(metadata: dict[str, Any], text: str, fragment_id: str) -> None:
    assert list(metadata) == list(METADATA_KEYS)
    assert metadata["trust"] == TRUST_LABEL == "untrusted-data"
    explanation = metadata["explanation"]
    assert metadata["fragment_id"] == fragment_id == explanation["fragment"]["fragment_id"]
    assert explanation["content"] == {"text": text, "trust": TRUST_LABEL}
    assert metadata["provenance"] == explanation["provenance"]
    assert metadata["source_uri"] == explanation["provenance"]["source_uri"]
    assert metadata["fused_rank"] == explanation["fused_rank"]
    assert metadata["confidence"] == explanation["confidence"]
    assert metadata["final_score"] == explanation["final_score"]
    assert metadata["classification"] == explanation["fragment"]["classification"]
    assert (metadata["workspace_id"], metadata["project_id"]) == ("acme", "docs")
    assert metadata["semantic"]["status"] == "used"
    assert metadata["retrieval_id"]


# ---------------------------------------------------------------------------------------------
# LangChain
# ---------------------------------------------------------------------------------------------


def test_langchain_documents_carry_the_explanation_and_the_untrusted_label(
    seeded: tuple[Database, Seeded], app: psycopg.Connection[Any]
) -> None:
    _, s = seeded
    docs = lc_retriever(app, "alice").invoke("ledger")
    assert {UUID(d.id) for d in docs if d.id} == s.visible
    assert [d.metadata["fused_rank"] for d in docs] == list(range(1, len(docs) + 1))
    for doc in docs:
        assert doc.id is not None
        check_metadata(doc.metadata, doc.page_content, doc.id)
    # The same order as the client itself gives for the same request.
    direct = Retriever(app, principal=role("alice"), embedders=[ProbeEmbedder()]).search(
        "ledger", scope=ACME, model=MODEL
    )
    assert [d.id for d in docs] == [str(r.fragment_id) for r in direct.results]


def test_langchain_async_path_gives_the_same_documents_and_serialises_one_connection(
    seeded: tuple[Database, Seeded], app: psycopg.Connection[Any]
) -> None:
    retriever = lc_retriever(app, "alice")
    sync_ids = [d.id for d in retriever.invoke("ledger")]

    async def many() -> list[list[Document]]:
        return await asyncio.gather(*(retriever.ainvoke("ledger") for _ in range(6)))

    # Six requests at once on one connection: each is its own transaction, one after another.
    for docs in asyncio.run(many()):
        assert [d.id for d in docs] == sync_ids


@pytest.mark.parametrize("nick", ["alice", "bob"])
def test_an_async_source_awaits_the_async_client_with_the_same_documents_and_bounds(
    seeded: tuple[Database, Seeded], app: psycopg.Connection[Any], nick: str
) -> None:
    """With a psycopg AsyncConnection both adapters search through AsyncRetriever (no worker
    thread); they return the sync adapters' results, nothing hidden, and refuse the
    synchronous path rather than block the event loop."""
    db, s = seeded
    allowed, forbidden = visible_to(s, nick), forbidden_strings(s, nick)
    sync_lc = [d.id for d in lc_retriever(app, nick).invoke("ledger")]
    sync_li = [n.node.node_id for n in li_retriever(app, nick).retrieve("ledger")]

    async def run() -> None:
        conn = await psycopg.AsyncConnection.connect(db.app_dsn, autocommit=True)
        try:
            lc_async, li_async = lc_retriever(conn, nick), li_retriever(conn, nick)
            assert lc_async._bound.is_async
            assert li_async._bound.is_async
            many = await asyncio.gather(*(lc_async.ainvoke("ledger") for _ in range(4)))
            assert all([d.id for d in docs] == sync_lc for docs in many)
            nodes = await li_async.aretrieve("ledger")
            assert [n.node.node_id for n in nodes] == sync_li
            for query in ATTACKS:
                docs = await lc_async.ainvoke(query)
                assert {UUID(d.id) for d in docs if d.id} <= allowed, query
                text = dump(docs)
                assert not [n for n in forbidden if n in text], query
            with pytest.raises(InvalidInput):
                lc_async.invoke("ledger")
        finally:
            await conn.close()

    asyncio.run(run())


@pytest.mark.parametrize("nick", ["alice", "bob"])
def test_langchain_never_returns_a_foreign_or_above_ceiling_fragment(
    seeded: tuple[Database, Seeded], app: psycopg.Connection[Any], nick: str
) -> None:
    _, s = seeded
    allowed, forbidden = visible_to(s, nick), forbidden_strings(s, nick)
    assert "dagger" in forbidden
    assert "GLOBEX-SENTINEL-1" in forbidden
    retriever = lc_retriever(app, nick, limit=50, candidate_limit=100)
    for query in ATTACKS:
        for docs in (retriever.invoke(query), asyncio.run(retriever.ainvoke(query))):
            assert {UUID(d.id) for d in docs if d.id} <= allowed, query
            text = dump(docs)
            for needle in forbidden:
                # Query words are not echoed: a hidden marker word searched for stays absent.
                assert needle not in text, (query, needle)
    assert {UUID(d.id) for d in retriever.invoke("ledger") if d.id} == allowed


def test_langchain_scope_and_principal_are_fixed(
    seeded: tuple[Database, Seeded], app: psycopg.Connection[Any]
) -> None:
    _, s = seeded
    retriever = lc_retriever(app, "alice")
    with pytest.raises(InvalidInput, match="no per-query arguments"):
        retriever.invoke("ledger", scope=GLOBEX)
    with pytest.raises(InvalidInput, match="no per-query arguments"):
        asyncio.run(retriever.ainvoke("ledger", principal=role("walt")))
    with pytest.raises(ValueError, match="frozen"):
        retriever.scope = GLOBEX  # type: ignore[misc]
    with pytest.raises(ValueError, match="frozen"):
        retriever.principal = role("walt")  # type: ignore[misc]
    assert (retriever.scope, retriever.principal) == (ACME, role("alice"))
    assert {UUID(d.id) for d in retriever.invoke("ledger") if d.id} == s.visible

    # A retriever made for a scope alice holds no grant in is refused by the database, with
    # pyretrieve's typed error and nothing of the foreign scope in it.
    foreign = lc_retriever(app, "alice", scope=GLOBEX)
    with pytest.raises(AccessDenied) as denied:
        foreign.invoke("GLOBEX-SENTINEL-1 ledger")
    assert not any(x in str(denied.value) for x in s.foreign_strings if x != "globex")
    with pytest.raises(AccessDenied):
        asyncio.run(foreign.ainvoke("ledger"))


def test_adapter_errors_are_typed_never_driver_errors(seeded: tuple[Database, Seeded]) -> None:
    db, _ = seeded
    # A pool that cannot reach its server fails inside the pool, before the client's own
    # translation applies.
    pool = ConnectionPool(
        "host=127.0.0.1 port=1 dbname=x user=x connect_timeout=1",
        min_size=1,
        open=False,
        timeout=1.0,
    )
    pool.open(wait=False)
    try:
        for retriever in (
            lc.PyretrieveRetriever(pool, principal=role("alice"), scope=ACME),
            li.PyretrieveRetriever(pool, principal=role("alice"), scope=ACME),
        ):
            with pytest.raises(PyretrieveError) as caught:
                retriever.search("ledger")
            assert not isinstance(caught.value, psycopg.Error)
            assert caught.value.__cause__ is None
    finally:
        pool.close(timeout=1.0)
    with psycopg.connect(db.app_dsn, autocommit=True) as conn:
        with pytest.raises(PyretrieveError) as caught:
            lc.PyretrieveRetriever(conn, principal="no_such_role", scope=ACME).invoke("ledger")
        assert not isinstance(caught.value, psycopg.Error)
    # Bad settings are refused when the adapter is made, not at the first query.
    with pytest.raises(InvalidInput):
        lc.PyretrieveRetriever(None, principal=role("alice"), scope=ACME, limit=0)
    with pytest.raises(InvalidInput):
        li.PyretrieveRetriever(None, principal=role("alice"), scope="acme/docs")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# LlamaIndex
# ---------------------------------------------------------------------------------------------


def test_llamaindex_nodes_carry_the_same_metadata_and_show_an_llm_the_trust_label(
    seeded: tuple[Database, Seeded], app: psycopg.Connection[Any]
) -> None:
    _, s = seeded
    retriever = li_retriever(app, "alice")
    nodes = retriever.retrieve("ledger")
    assert {UUID(n.node.node_id) for n in nodes} == s.visible
    for n in nodes:
        node = n.node
        assert isinstance(node, TextNode)
        check_metadata(node.metadata, node.text, node.node_id)
        assert n.score == node.metadata["final_score"]
        llm = node.get_content(metadata_mode=MetadataMode.LLM)
        assert f"trust: {TRUST_LABEL}" in llm
        assert f"source_uri: {node.metadata['source_uri']}" in llm
        assert "explanation" not in llm
        assert node.get_content(metadata_mode=MetadataMode.EMBED) == node.text
    lc_ids = [d.id for d in lc_retriever(app, "alice").invoke("ledger")]
    assert [n.node.node_id for n in nodes] == lc_ids
    assert [n.node.node_id for n in asyncio.run(retriever.aretrieve("ledger"))] == lc_ids


@pytest.mark.parametrize("nick", ["alice", "bob"])
def test_llamaindex_never_returns_a_foreign_or_above_ceiling_fragment(
    seeded: tuple[Database, Seeded], app: psycopg.Connection[Any], nick: str
) -> None:
    _, s = seeded
    allowed, forbidden = visible_to(s, nick), forbidden_strings(s, nick)
    retriever = li_retriever(app, nick, limit=50)
    for query in ATTACKS:
        for nodes in (retriever.retrieve(query), asyncio.run(retriever.aretrieve(query))):
            assert {UUID(n.node.node_id) for n in nodes} <= allowed, query
            text = dump(nodes)
            for needle in forbidden:
                assert needle not in text, (query, needle)
    assert {UUID(n.node.node_id) for n in retriever.retrieve("ledger")} == allowed


def test_llamaindex_scope_and_principal_are_fixed(
    seeded: tuple[Database, Seeded], app: psycopg.Connection[Any]
) -> None:
    retriever = li_retriever(app, "alice")
    other = li_retriever(app, "walt", scope=GLOBEX)
    with pytest.raises(AttributeError):
        retriever.scope = GLOBEX  # type: ignore[misc]
    with pytest.raises(AttributeError):
        retriever.principal = role("walt")  # type: ignore[misc]
    with pytest.raises(AttributeError, match="fixed"):
        retriever._bound = other._bound
    assert (retriever.scope, retriever.principal) == (ACME, role("alice"))
    with pytest.raises(AccessDenied):
        li_retriever(app, "bob", scope=GLOBEX).retrieve("ledger")


# ---------------------------------------------------------------------------------------------
# Ingestion
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def fresh(db: Database, conn: psycopg.Connection[Any]) -> tuple[Database, Seeded]:
    return db, seed(db, conn)


def test_langchain_documents_are_ingested_into_the_scope_and_reruns_write_nothing(
    fresh: tuple[Database, Seeded], conn: psycopg.Connection[Any]
) -> None:
    # Within alice's max_age of 30 days, or she would not see it.
    observed = (datetime.now(UTC) - timedelta(days=1)).replace(microsecond=0)
    docs = [
        Document(page_content="zeppelin handbook chapter one", metadata={"source": "hb.md"}),
        Document(page_content="zeppelin handbook chapter two", metadata={"source": "hb.md"}),
        Document(page_content="zeppelin frequently asked", id="faq-1"),
        Document(
            page_content="zeppelin public notice",
            metadata={
                "source_uri": "wiki://notice",
                "classification": "public",
                "observed_at": observed,
                "source_revision": "r7",
                "page": 3,  # not stored, and no reason to refuse the document
            },
        ),
        Document(
            page_content="zeppelin secret plan",
            metadata={"source_uri": "vault://plan", "classification": "confidential"},
        ),
    ]
    write = dict(workspace="acme", project="docs", principal=role("wally"))
    report = lc.ingest_documents(conn, docs, **write)
    assert (report.inserted, report.unchanged, report.skipped) == (4, 0, 1)
    # Wally's ceiling is internal: the confidential document is refused, and said where.
    assert [str(e) for e in report.errors] == [
        "documents.jsonl:5: classification is above the writer's ceiling"
    ]
    again = lc.ingest_documents(conn, docs[:4], **write)
    assert (again.inserted, again.unchanged, again.superseded) == (0, 4, 0)
    changed = [
        docs[0],
        Document(page_content="zeppelin handbook chapter 2", metadata=docs[1].metadata),
    ]
    assert lc.ingest_documents(conn, changed, **write).superseded == 1

    found = {
        d.metadata["source_uri"]: d
        for d in lc.PyretrieveRetriever(conn, principal=role("alice"), scope=ACME).invoke(
            "zeppelin"
        )
    }
    assert set(found) == {"hb.md#1", "hb.md#2", "faq-1", "wiki://notice"}
    assert found["hb.md#2"].page_content == "zeppelin handbook chapter 2"
    notice = found["wiki://notice"].metadata
    assert notice["classification"] == "public"
    assert notice["provenance"]["observed_at"] == iso_utc(observed)
    assert notice["provenance"]["source_revision"] == "r7"
    assert all(d.metadata["trust"] == TRUST_LABEL for d in found.values())


def test_ingesting_refuses_documents_without_identity_and_writes_nothing(
    fresh: tuple[Database, Seeded], conn: psycopg.Connection[Any]
) -> None:
    write = dict(workspace="acme", project="docs", principal=role("wally"))
    docs = [Document(page_content="zeppelin one", id="a"), Document(page_content="zeppelin two")]
    with pytest.raises(InvalidInput, match="document 2 has no identity"):
        lc.ingest_documents(conn, docs, **write)
    bad_time = [Document(page_content="zeppelin", id="t", metadata={"observed_at": 5})]
    with pytest.raises(InvalidInput, match="observed_at must be a string or a datetime"):
        lc.ingest_documents(conn, bad_time, **write)
    # A reader cannot write, and says so with a typed error.
    with pytest.raises(AccessDenied):
        lc.ingest_documents(
            conn, docs[:1], workspace="acme", project="docs", principal=role("alice")
        )
    retriever = lc.PyretrieveRetriever(conn, principal=role("alice"), scope=ACME)
    assert retriever.invoke("zeppelin") == []


def test_llamaindex_nodes_are_ingested_with_their_ids_and_found_by_a_reader(
    fresh: tuple[Database, Seeded], conn: psycopg.Connection[Any]
) -> None:
    nodes = [
        TextNode(id_="node-1", text="zeppelin node one"),
        LlamaDocument(text="zeppelin document", metadata={"source_uri": "file://d.txt"}),
    ]
    report = li.ingest_nodes(conn, nodes, workspace="acme", project="docs", principal=role("wally"))
    assert report.inserted == 2
    found = li.PyretrieveRetriever(conn, principal=role("alice"), scope=ACME).retrieve("zeppelin")
    assert {n.node.metadata["source_uri"] for n in found} == {"node-1", "file://d.txt"}
