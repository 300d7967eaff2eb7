"""Tools for LLM agents: registration, discovery, rediscovery, rollout, telemetry, security.

Every principal is a non-owner role acting through the SQL API. Layout:

* acme/agents: order tools (delete/create/update/get/search/list), weather and email at
  ``internal``; ``wire_transfer_funds`` at ``restricted`` (above alice's ceiling, and built to
  be the best match for the "transfer funds" queries); ``archive_transfer_log`` expired;
  ``purge_transfer_cache`` retracted.
* globex/agents: ``globex_transfer_funds``, also a perfect match for those queries.
* alice reads acme/agents (ceiling internal); bob reads acme/agents (ceiling restricted);
  carol holds no grant there; walt writes both workspaces; adam is the admin.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pyretrieve import Retriever, Scope
from pyretrieve.client import AsyncRetriever
from pyretrieve.embedders.hashing import HashNgramEmbedder
from pyretrieve.errors import AccessDenied
from pyretrieve.tools import (
    ToolSession,
    read_definitions,
    register_tools,
    set_rollout,
    tool_context_fingerprint,
)
from pyretrieve.tools import select as tool_select
from pyretrieve.types import canonical_json
from tests.conftest import Database, Server, acting_as, create_database, drop_database, role
from tests.db.seed import grant

PURPOSE = "agent"
EMBEDDER = HashNgramEmbedder()
SCOPE = Scope(workspace="acme", project="agents", purpose=PURPOSE)


def tool(name: str, description: str, **params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v} for k, v in params.items()},
            },
        },
    }


ORDER_TOOLS = [
    tool("delete_order", "Delete an order permanently.", order_id="The order to delete."),
    tool("create_order", "Create a new order for a customer.", customer="The customer."),
    tool("update_order", "Update the shipping address of an order.", order_id="The order."),
    tool("get_order", "Get one order by its id.", order_id="The order."),
    tool("search_orders", "Search orders by customer name.", query="Customer name."),
    tool("list_orders", "List all orders of a day.", day="The day."),
    tool("delete_invoice", "Delete an invoice.", invoice_id="The invoice."),
    tool("get_current_weather", "Get the current weather in a city.", city="The city."),
    tool("send_email", "Send an email message to a recipient.", to="Recipient address."),
]
TRANSFER = "transfer funds between bank accounts with wire transfer"
RESTRICTED = [tool("wire_transfer_funds", TRANSFER.capitalize() + ".", amount="Funds amount.")]
EXPIRED = [tool("archive_transfer_log", TRANSFER + " archive log.", day="Day.")]
RETRACTED = [tool("purge_transfer_cache", TRANSFER + " purge cache.", key="Key.")]
FOREIGN = [tool("globex_transfer_funds", TRANSFER.capitalize() + ".", amount="Funds amount.")]
HIDDEN_NAMES = (
    "wire_transfer_funds",
    "archive_transfer_log",
    "purge_transfer_cache",
    "globex_transfer_funds",
)


def _register(conn: psycopg.Connection[Any], tools: list[dict[str, Any]], **kw: Any) -> Any:
    return register_tools(
        conn,
        tools,
        workspace=kw.pop("workspace", "acme"),
        project="agents",
        principal=role("walt"),
        embedders=[EMBEDDER],
        **kw,
    )


@pytest.fixture(scope="module")
def tooldb(server: Server, template_db: str) -> Iterator[Database]:
    db = Database(server=server, name=create_database(server, template_db))
    try:
        with db.connect(autocommit=True) as conn:
            with acting_as(conn, "adam"):
                for ws in ("acme", "globex"):
                    conn.execute("SELECT pyretrieve.create_workspace(%s)", (ws,))
                    conn.execute("SELECT pyretrieve.create_project(%s, 'agents')", (ws,))
                    grant(conn, role("walt"), ws, "agents", "ingest", "restricted")
                conn.execute(
                    "SELECT pyretrieve.register_model(%s, %s)",
                    (EMBEDDER.model_id, EMBEDDER.dimension),
                )
                grant(conn, role("alice"), "acme", "agents", PURPOSE, "internal", max_age="30 days")
                grant(conn, role("bob"), "acme", "agents", PURPOSE, "restricted")
            _register(conn, ORDER_TOOLS)
            _register(conn, RESTRICTED, classification="restricted")
            _register(
                conn,
                EXPIRED,
                observed_at="2020-01-01T00:00:00Z",
                expires_at="2020-02-01T00:00:00Z",
            )
            report = _register(conn, RETRACTED)
            with acting_as(conn, "walt"):
                conn.execute(
                    "SELECT pyretrieve.retract_fragment('acme', 'agents', %s)",
                    (report.tools[0].fragment_id,),
                )
            _register(conn, FOREIGN, workspace="globex")
        yield db
    finally:
        drop_database(server, db.name)


@pytest.fixture
def app(tooldb: Database) -> Iterator[psycopg.Connection[Any]]:
    with tooldb.connect(autocommit=True) as c:
        yield c


def retriever(conn: psycopg.Connection[Any], nick: str = "alice") -> Retriever:
    return Retriever(conn, principal=role(nick), embedders=[EMBEDDER])


def discover(conn: psycopg.Connection[Any], query: str, nick: str = "alice", **kw: Any) -> Any:
    return retriever(conn, nick).discover_tools(query, scope=SCOPE, model=EMBEDDER.model_id, **kw)


# ---------------------------------------------------------------------------------------------
# 1. Registration
# ---------------------------------------------------------------------------------------------
def test_formats_openai_flat_and_mcp_read_alike(tmp_path: Path) -> None:
    flat = {"name": "get_order", "description": "Get an order.", "parameters": {"type": "object"}}
    wrapped = {"type": "function", "function": flat}
    mcp = {
        "tools": [
            {"name": "get_order", "description": "Get an order.", "inputSchema": {"type": "object"}}
        ]
    }
    (tmp_path / "a.json").write_text(json.dumps([wrapped]))
    (tmp_path / "b.jsonl").write_text(json.dumps(flat) + "\n")
    (tmp_path / "c.json").write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "result": mcp}))
    schemas = [read_definitions(tmp_path / f)[0].schema for f in ("a.json", "b.jsonl", "c.json")]
    assert schemas[0] == schemas[1] == schemas[2] == flat
    assert read_definitions(tmp_path / "a.json")[0].operation == "get"


def test_reregistering_unchanged_writes_nothing_and_a_change_bumps_the_version(
    server: Server, template_db: str
) -> None:
    db = Database(server=server, name=create_database(server, template_db))
    try:
        with db.connect(autocommit=True) as conn:
            with acting_as(conn, "adam"):
                conn.execute("SELECT pyretrieve.create_workspace('acme')")
                conn.execute("SELECT pyretrieve.create_project('acme', 'agents')")
                grant(conn, role("walt"), "acme", "agents", "ingest", "restricted")
                conn.execute("SELECT pyretrieve.register_model(%s, %s)", (EMBEDDER.model_id, 256))
            first = _register(conn, ORDER_TOOLS[:2])
            assert [t.status for t in first.tools] == ["created", "created"]
            assert first.embedded == 2

            again = _register(conn, ORDER_TOOLS[:2])
            assert [t.status for t in again.tools] == ["unchanged", "unchanged"]
            assert [t.fragment_id for t in again.tools] == [t.fragment_id for t in first.tools]
            assert again.embedded == 0

            changed = json.loads(json.dumps(ORDER_TOOLS[0]))
            changed["function"]["description"] = "Delete an order and its invoices permanently."
            bumped = _register(conn, [changed])
            assert bumped.tools[0].status == "superseded"
            assert bumped.tools[0].schema_version == 2
            assert bumped.tools[0].fragment_id != first.tools[0].fragment_id
            assert bumped.embedded == 1

            # A change the searchable text does not show (a required argument) keeps the
            # fragment and still bumps the version.
            required = json.loads(json.dumps(changed))
            required["function"]["parameters"]["required"] = ["order_id"]
            same_text = _register(conn, [required])
            assert same_text.tools[0].status == "updated"
            assert same_text.tools[0].schema_version == 3
            assert same_text.tools[0].fragment_id == bumped.tools[0].fragment_id
            with acting_as(conn, "walt"):
                conn.execute("SELECT pyretrieve.bind_write_scope('acme', 'agents')")
                active = conn.execute(
                    "SELECT fragment_id FROM pyretrieve.active_sources('acme', 'agents',"
                    " ARRAY['tool:delete_order'])"
                ).fetchall()
            assert [r["fragment_id"] for r in active] == [bumped.tools[0].fragment_id]
    finally:
        drop_database(server, db.name)


def test_registration_needs_a_writer(app: psycopg.Connection[Any]) -> None:
    with pytest.raises(AccessDenied):
        register_tools(
            app, ORDER_TOOLS[:1], workspace="acme", project="agents", principal=role("alice")
        )


def test_the_body_is_text_not_json(app: psycopg.Connection[Any]) -> None:
    with acting_as(app, "alice"):
        row = app.execute(
            "SELECT pyretrieve.tool_text(%s::jsonb) AS t",
            (json.dumps(ORDER_TOOLS[0]["function"]),),
        ).fetchone()
    assert row is not None
    text = row["t"]
    assert text.splitlines()[:3] == ["delete_order", "delete order", "Delete an order permanently."]
    assert "- order_id (string): The order to delete." in text
    assert "{" not in text
    assert '"properties"' not in text


# ---------------------------------------------------------------------------------------------
# 2. Discovery
# ---------------------------------------------------------------------------------------------
def test_discovery_returns_ranked_tools_confidence_k_schemas_and_omissions(
    app: psycopg.Connection[Any],
) -> None:
    found = discover(app, "what is the current weather in Paris", policy="tight", adaptive=True)
    assert found.ranked[0].name == "get_current_weather"
    assert found.confidence.level in tool_select.LEVELS
    assert found.k == found.confidence.recommended_k == len(found.chosen)
    assert 1 <= found.k < len(found.ranked)
    assert found.schemas[0]["name"] == "get_current_weather"
    assert [o.name for o in found.omissions] == [t.name for t in found.ranked[found.k :]]
    plain = found.to_plain()
    assert plain["tools"][0]["lexical_rank"] is not None
    assert plain["tools"][-1]["cut"] == "cut_by_k"
    # Omitted tools carry no schema.
    assert all(t.schema is None for t in found.ranked[found.k :])
    assert found.fingerprint == tool_context_fingerprint(
        (t.name, t.schema_version) for t in found.chosen
    )


def test_adaptive_k_only_truncates(app: psycopg.Connection[Any]) -> None:
    base = discover(app, "delete the order", policy="fixed-48")
    for policy in tool_select.POLICIES:
        found = discover(app, "delete the order", policy=policy, adaptive=True)
        assert found.k <= base.k
        assert [t.name for t in found.chosen] == [t.name for t in base.ranked[: found.k]]


# ---------------------------------------------------------------------------------------------
# 3. Similar-tool protection
# ---------------------------------------------------------------------------------------------
def test_operation_contradiction_is_penalised_and_explained(app: psycopg.Connection[Any]) -> None:
    found = discover(app, "delete order 42", policy="fixed-48")
    assert found.ranked[0].name == "delete_order"
    by_name = {t.name: t for t in found.ranked}
    create = by_name["create_order"].explanation["penalties"]
    assert create
    assert create[0]["code"] == "operation_contradiction"
    assert create[0]["asked"] == ["delete"]
    invoice = by_name["delete_invoice"].explanation["penalties"]
    assert invoice
    assert invoice[0]["code"] == "no_shared_entity"
    assert by_name["delete_order"].explanation["penalties"] == []
    unprotected = discover(app, "delete order 42", policy="fixed-48", protect=False)
    assert all(t.explanation["penalties"] == [] for t in unprotected.ranked)


# ---------------------------------------------------------------------------------------------
# 4. Rediscovery
# ---------------------------------------------------------------------------------------------
def test_rediscovery_outcomes(app: psycopg.Connection[Any]) -> None:
    found = discover(app, "weather in Paris", policy="tight", adaptive=True)
    session = ToolSession.after(found)
    assert session.offered == {t.name for t in found.chosen}
    session = ToolSession(offered={"get_current_weather"})
    r = retriever(app)
    # Authorised: queued for the next round, nothing executed.
    ok = r.rediscover_tool("send_email", scope=SCOPE, session=session)
    assert ok.status == "queued"
    assert [s["name"] for s in session.next_round()] == ["send_email"]
    assert session.next_round() == []
    # At most one retry per request.
    assert r.rediscover_tool("get_order", scope=SCOPE, session=session).status == "retry_limit"
    assert r.rediscover_tool("send_email", scope=SCOPE, session=session).status == (
        "already_offered"
    )
    # Unauthorised (above the ceiling, expired, retracted, other workspace) and absent: the
    # same rejection.
    outcomes = set()
    for name in (*HIDDEN_NAMES, "no_such_tool"):
        s = ToolSession()
        outcome = r.rediscover_tool(name, scope=SCOPE, session=s)
        assert s.pending == []
        outcomes.add(outcome)
    assert len(outcomes) == 1
    assert next(iter(outcomes)).status == "rejected"
    # No grant at all: the same rejection again.
    denied = retriever(app, "carol").rediscover_tool(
        "send_email", scope=SCOPE, session=ToolSession()
    )
    assert denied == next(iter(outcomes))
    # bob's ceiling admits the restricted tool.
    bob = retriever(app, "bob").rediscover_tool(
        "wire_transfer_funds", scope=SCOPE, session=ToolSession()
    )
    assert bob.status == "queued"


def test_the_async_client_discovers_and_rediscovers_as_the_sync_one(
    tooldb: Database, app: psycopg.Connection[Any]
) -> None:
    """AsyncRetriever runs the same steps: the same documents, the hidden tools absent from
    them, and the same single rejection for hidden, absent and ungranted names."""
    asked = ("what is the current weather in Paris", TRANSFER, "delete order 42")

    async def run() -> tuple[list[Any], list[tuple[Any, list[Any]]], Any]:
        async with await psycopg.AsyncConnection.connect(tooldb.app_dsn, autocommit=True) as c:
            alice = AsyncRetriever(c, principal=role("alice"), embedders=[EMBEDDER])
            found = [
                await alice.discover_tools(
                    q, scope=SCOPE, model=EMBEDDER.model_id, policy="tight", adaptive=True
                )
                for q in asked
            ]
            outcomes = []
            for name in ("send_email", *HIDDEN_NAMES, "no_such_tool"):
                session = ToolSession()
                outcome = await alice.rediscover_tool(name, scope=SCOPE, session=session)
                outcomes.append((outcome, session.pending))
            carol = AsyncRetriever(c, principal=role("carol"))
            denied = await carol.rediscover_tool("send_email", scope=SCOPE, session=ToolSession())
            return found, outcomes, denied

    found, outcomes, denied = asyncio.run(run())
    for query, got in zip(asked, found, strict=True):
        want = discover(app, query, policy="tight", adaptive=True)
        assert got.decision_id != want.decision_id
        # Scores carry freshness at each decision's own time: the choices must agree.
        assert _choices(got) == _choices(want)
        assert (got.schema_tokens, got.token_method) == (want.schema_tokens, want.token_method)
        assert not set(HIDDEN_NAMES) & {t.name for t in got.ranked}
    (queued, pending), *rest = outcomes
    assert queued.status == "queued"
    assert [s["name"] for s in pending] == ["send_email"]
    assert {o for o, _ in rest} == {denied}
    assert denied.status == "rejected"
    assert all(p == [] for _, p in rest)


def _choices(found: Any) -> str:
    return canonical_json(
        {
            "ranked": [
                (t.name, t.rank, t.chosen, t.explanation["penalties"]) for t in found.ranked
            ],
            "k": (found.k, found.confidence.level, found.confidence.recommended_k),
            "schemas": list(found.schemas),
            "fingerprint": found.fingerprint,
            "omissions": [(o.name, o.position, o.reason) for o in found.omissions],
        }
    )


# ---------------------------------------------------------------------------------------------
# 5. Provider context
# ---------------------------------------------------------------------------------------------
def test_provider_renderings(app: psycopg.Connection[Any]) -> None:
    found = discover(app, "list all orders of a day", policy="fixed-10")
    openai = found.openai_tools()
    anthropic = found.anthropic_tools()
    mcp = found.mcp_tools_list()
    assert len(openai) == len(anthropic) == len(mcp["tools"]) == found.k
    assert openai[0]["type"] == "function"
    assert openai[0]["function"]["name"] == found.chosen[0].name
    assert "cache_control" in anthropic[-1]
    assert all("cache_control" not in t for t in anthropic[:-1])
    assert anthropic[0]["input_schema"] == mcp["tools"][0]["inputSchema"]
    assert found.schema_tokens > 0


# ---------------------------------------------------------------------------------------------
# 6. Telemetry
# ---------------------------------------------------------------------------------------------
def test_events_carry_digests_and_counts_only(
    app: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    query = "transfer funds between bank accounts"
    with caplog.at_level(logging.INFO, logger="pyretrieve.tools"):
        found = discover(app, query, policy="tight", adaptive=True)
        retriever(app).rediscover_tool("wire_transfer_funds", scope=SCOPE, session=ToolSession())
        discover(app, "zzzqqq xxyyzz", mode="lexical")
    names = [r.getMessage() for r in caplog.records]
    assert {"tool_discovery", "tool_schema_round", "tool_rediscovery"} <= set(names)
    assert "empty_discovery" in names
    dumped = json.dumps([r.event for r in caplog.records])  # type: ignore[attr-defined]
    for secret in (query, "transfer", *HIDDEN_NAMES, *(t.name for t in found.ranked), "order_id"):
        assert secret not in dumped
    assert found.query_digest in dumped


# ---------------------------------------------------------------------------------------------
# 7. Rollout
# ---------------------------------------------------------------------------------------------
def test_rollout_stages_gate_adaptive_k_and_never_widen_access(
    app: psycopg.Connection[Any],
) -> None:
    query = "delete the order"
    baseline = {t.name for t in discover(app, query, policy="fixed-48").chosen}
    seen: dict[str, Any] = {}
    for stage in tool_select.STAGES:
        with acting_as(app, "adam"):
            set_rollout(app, "acme", "agents", stage)
        found = discover(app, query, policy="tight")
        seen[stage] = found
        assert found.stage == stage
        assert {t.name for t in found.chosen} <= baseline
        assert not {t.name for t in found.ranked} & set(HIDDEN_NAMES)
    applies = tool_select.adaptive_applies("full", "acme", role("alice"))
    assert applies
    assert seen["full"].applied
    assert seen["full"].k <= len(baseline)
    assert not seen["off"].applied
    assert seen["off"].k == len(baseline)
    # eval computes (and logs) the adaptive K but does not apply it.
    assert not seen["eval"].applied
    assert seen["eval"].k == len(baseline)
    assert seen["eval"].confidence.recommended_k == seen["full"].confidence.recommended_k
    # The master flag turns it off everywhere.
    assert not discover(app, query, policy="tight", master=False).applied
    with acting_as(app, "adam"):
        set_rollout(app, "acme", "agents", "off")
    # Readers cannot set a stage.
    with pytest.raises(AccessDenied), acting_as(app, "alice"):
        set_rollout(app, "acme", "agents", "full")


def test_rollout_assignment_is_stable_and_proportional() -> None:
    buckets = [tool_select.rollout_bucket("acme", f"user{i}") for i in range(2000)]
    assert buckets == [tool_select.rollout_bucket("acme", f"user{i}") for i in range(2000)]
    canary = sum(tool_select.adaptive_applies("canary", "acme", f"user{i}") for i in range(2000))
    majority = sum(
        tool_select.adaptive_applies("majority", "acme", f"user{i}") for i in range(2000)
    )
    assert 50 <= canary <= 150
    assert 900 <= majority <= 1100


# ---------------------------------------------------------------------------------------------
# 9. Security as non-owner principals
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["fixed-48", "tight", "wide", "gap"])
def test_hidden_tools_never_appear(
    app: psycopg.Connection[Any], policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    query = "wire transfer funds between bank accounts archive purge"
    with caplog.at_level(logging.INFO, logger="pyretrieve.tools"):
        found = discover(app, query, policy=policy, adaptive=True)
    plain = json.dumps(found.to_plain()) + json.dumps(found.openai_tools())
    for name in HIDDEN_NAMES:
        assert name not in plain
    assert "globex" not in plain
    # bob's ceiling admits the restricted tool, which then ranks first: the query does match it.
    bob = discover(app, query, "bob", policy=policy, adaptive=True)
    assert bob.ranked[0].name == "wire_transfer_funds"
    for name in HIDDEN_NAMES[1:]:
        assert name not in json.dumps(bob.to_plain())


def test_schemas_only_for_ids_the_decision_admits(app: psycopg.Connection[Any]) -> None:
    bob = discover(app, TRANSFER, "bob", policy="fixed-48")
    restricted = next(t.fragment_id for t in bob.ranked if t.name == "wire_transfer_funds")
    with acting_as(app, "walt"):
        app.execute("SELECT pyretrieve.bind_write_scope('globex', 'agents')")
        foreign = app.execute(
            "SELECT fragment_id FROM pyretrieve.active_sources('globex', 'agents',"
            " ARRAY['tool:globex_transfer_funds'])"
        ).fetchone()
    assert foreign is not None
    with acting_as(app, "alice"):
        d = app.execute(
            "SELECT decision_id FROM pyretrieve.authorize('acme', 'agents', %s, %s, 'disabled',"
            " NULL, 10)",
            (PURPOSE, b"\x00" * 32),
        ).fetchone()
        assert d is not None
        ids = [restricted, foreign["fragment_id"]]
        for fn in ("tool_schemas", "tool_entries"):
            rows = app.execute(f"SELECT * FROM pyretrieve.{fn}(%s, %s)", (d["decision_id"], ids))
            assert rows.fetchall() == []


def test_principals_cannot_read_the_tool_tables(app: psycopg.Connection[Any]) -> None:
    for table in ("tools", "tool_rollouts"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(app, "alice"):
            app.execute(f"SELECT count(*) FROM pyretrieve.{table}")


def test_a_fingerprint_never_authorises(app: psycopg.Connection[Any]) -> None:
    # The same fingerprint (names and versions) cannot bring a schema to a principal whose
    # decision does not admit it: carol has no grant, alice's ceiling is too low.
    bob = discover(app, TRANSFER, "bob", policy="fixed-48")
    fp = tool_context_fingerprint([("wire_transfer_funds", 1)])
    assert isinstance(fp, str)
    assert len(fp) == 64
    alice = discover(app, TRANSFER, policy="fixed-48")
    assert "wire_transfer_funds" in {t.name for t in bob.chosen}
    assert "wire_transfer_funds" not in {t.name for t in alice.ranked}
    with pytest.raises(AccessDenied):
        discover(app, TRANSFER, "carol")
