"""``pyretrieve.discover_tools(...)`` as a hostile non-owner principal, and its plan.

The catalog is tests/db/test_tools.py's (the ``tooldb`` fixture): acme/agents holds order,
weather and email tools, a restricted ``wire_transfer_funds`` (above alice's ceiling), an
expired ``archive_transfer_log`` and a retracted ``purge_transfer_cache``; globex/agents holds
``globex_transfer_funds``. Every hidden tool is built to be the best match for the transfer
queries, so a leak would rank it first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pyretrieve.tools import select as sel
from pyretrieve.vectors import canonical_embedding, to_pgvector_text
from tests.conftest import (
    Database,
    Server,
    acting_as,
    create_database,
    drop_database,
    role,
    rolled_back,
)
from tests.db.test_plans import captured_plans, nodes
from tests.db.test_tools import EMBEDDER, HIDDEN_NAMES, PURPOSE, TRANSFER, tooldb  # noqa: F401

QUERY = "wire transfer funds between bank accounts archive purge cache log"
CALL = (
    "SELECT pyretrieve.discover_tools(p_workspace => %s, p_project => 'agents',"
    " p_purpose => %s, p_query => %s, p_embedding => %s::public.vector, p_model => %s,"
    " p_policy => %s, p_adaptive => %s) AS d"
)


def _vector(query: str) -> str:
    return to_pgvector_text(canonical_embedding(EMBEDDER.embed_query(query)))


def discover_sql(
    conn: psycopg.Connection[Any],
    nick: str,
    query: str = QUERY,
    *,
    workspace: str = "acme",
    policy: str | None = None,
    adaptive: bool | None = True,
) -> dict[str, Any]:
    with acting_as(conn, nick):
        row = conn.execute(
            CALL, (workspace, PURPOSE, query, _vector(query), EMBEDDER.model_id, policy, adaptive)
        ).fetchone()
    assert row is not None
    return dict(row["d"])


@pytest.fixture
def app(tooldb: Database) -> Iterator[psycopg.Connection[Any]]:  # noqa: F811
    with tooldb.connect(autocommit=True) as c:
        yield c


@pytest.mark.parametrize("policy", sel.POLICIES)
def test_hidden_tools_never_appear_in_the_sql_document(
    app: psycopg.Connection[Any], policy: str
) -> None:
    doc = discover_sql(app, "alice", policy=policy)
    text = json.dumps(doc)
    for name in HIDDEN_NAMES:
        assert name not in text
    assert "globex" not in text
    assert doc["tools"], "the query matches visible tools too"
    # The same query as bob, whose ceiling admits the restricted tool: it ranks first, so the
    # query does reach it; the expired, retracted and foreign ones stay hidden for him too.
    bob = discover_sql(app, "bob", policy=policy)
    assert bob["tools"][0]["name"] == "wire_transfer_funds"
    for name in HIDDEN_NAMES[1:]:
        assert name not in json.dumps(bob)


def test_no_grant_and_a_foreign_workspace_are_the_same_denial(app: psycopg.Connection[Any]) -> None:
    errors = []
    for nick, workspace in (("carol", "acme"), ("alice", "globex"), ("alice", "no-such-ws")):
        with pytest.raises(psycopg.Error) as caught:
            discover_sql(app, nick, workspace=workspace)
        errors.append((caught.value.sqlstate, caught.value.diag.message_primary))
    assert set(errors) == {("PR001", "access denied")}


def test_one_decision_per_transaction(app: psycopg.Connection[Any]) -> None:
    # A second discovery in the same transaction, which could mix two decisions' rows, is
    # refused; so is a discovery after the caller bound a decision of its own.
    with acting_as(app, "alice"):
        app.execute(CALL, ("acme", PURPOSE, QUERY, _vector(QUERY), EMBEDDER.model_id, None, True))
        with pytest.raises(psycopg.Error) as caught:
            app.execute(CALL, ("acme", PURPOSE, "x", _vector("x"), EMBEDDER.model_id, None, True))
    assert caught.value.sqlstate == "PR003"


def test_settings_the_caller_controls_change_nothing(app: psycopg.Connection[Any]) -> None:
    args = ("acme", PURPOSE, QUERY, _vector(QUERY), EMBEDDER.model_id, "fixed-48", True)
    with acting_as(app, "alice"):
        # The baseline in a rolled-back savepoint of the same transaction: the same now(), so
        # freshness and every score are the same (a transaction holds one decision).
        with rolled_back(app):
            row = app.execute(CALL, args).fetchone()
            assert row is not None
            baseline = dict(row["d"])
        # Custom settings any role may set, float digits, a search_path that would shadow
        # pg_catalog functions: none widens or alters the document.
        app.execute("SELECT set_config('pyretrieve.workspace', 'globex', true)")
        app.execute("SELECT set_config('pyretrieve.ceiling', 'restricted', true)")
        app.execute("SET LOCAL extra_float_digits = -15")
        app.execute("SET LOCAL search_path = public, pg_temp")
        row = app.execute(CALL, args).fetchone()
    assert row is not None
    doc = dict(row["d"])
    assert doc["decision_id"] != baseline["decision_id"]
    doc["decision_id"] = baseline["decision_id"]
    assert doc == baseline


def test_the_helpers_and_the_tables_are_closed_to_principals(app: psycopg.Connection[Any]) -> None:
    for statement in (
        "SELECT pyretrieve.tool_words('a')",
        "SELECT pyretrieve.tool_rollout_bucket('acme', 'x')",
        "SELECT * FROM pyretrieve.tool_operation_words()",
        "SELECT pyretrieve.tool_recommended_k('near', 'high', '{1}', '{1}', '{0}')",
        "SELECT count(*) FROM pyretrieve.tools",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(app, "alice"):
            app.execute(statement)


def test_explain_of_a_discovery_reveals_no_counts(app: psycopg.Connection[Any]) -> None:
    # EXPLAIN ANALYZE of the call shows one function scan: the statements inside the SECURITY
    # DEFINER function, and the rows RLS or the filters removed there, are not in the plan.
    with acting_as(app, "alice"):
        rows = app.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + CALL,
            ("acme", PURPOSE, QUERY, _vector(QUERY), EMBEDDER.model_id, None, True),
        ).fetchone()
    assert rows is not None
    plan = rows["QUERY PLAN"][0]["Plan"]
    assert [n["Node Type"] for n in nodes(plan)] == ["Result"]
    assert "Rows Removed by Filter" not in json.dumps(plan)
    assert "tools" not in json.dumps(plan)


def test_the_rollout_stage_never_widens_access(app: psycopg.Connection[Any]) -> None:
    seen = {}
    for stage in sel.STAGES:
        with acting_as(app, "adam"):
            app.execute("SELECT pyretrieve.set_tool_rollout('acme', 'agents', %s)", (stage,))
        doc = discover_sql(app, "alice", adaptive=None)
        assert doc["stage"] == stage
        seen[stage] = doc
    with acting_as(app, "adam"):
        app.execute("SELECT pyretrieve.set_tool_rollout('acme', 'agents', 'off')")
    ranked = {s: [t["name"] for t in d["tools"]] for s, d in seen.items()}
    # The stage changes how many of the same ranked tools are offered, never which ones rank.
    assert len({tuple(r) for r in ranked.values()}) == 1
    assert seen["off"]["k"] == len(seen["off"]["tools"])
    assert seen["full"]["applied"]
    assert seen["full"]["k"] == seen["full"]["confidence"]["recommended_k"]
    for doc in seen.values():
        assert not set(HIDDEN_NAMES) & {t["name"] for t in doc["tools"]}


# ---------------------------------------------------------------------------------------------
# The plan: tools are read by their keys, one scope at a time, never by a scan of the table
# ---------------------------------------------------------------------------------------------
WORKSPACES, TOOLS_PER_WORKSPACE = 8, 300


@pytest.fixture(scope="module")
def catalog(server: Server, template_db: str) -> Iterator[Database]:
    """TOOLS_PER_WORKSPACE tools in each of WORKSPACES workspaces, inserted by the superuser
    in bulk (setup only) and analysed; alice reads ws0/agents."""
    db = Database(server=server, name=create_database(server, template_db))
    try:
        with db.admin(autocommit=True) as admin:
            admin.execute(
                "SELECT pyretrieve.create_workspace(format('ws%%s', w)),"
                " pyretrieve.create_project(format('ws%%s', w), 'agents')"
                " FROM generate_series(0, %s) w",
                (WORKSPACES - 1,),
            )
            admin.execute(
                "INSERT INTO pyretrieve.fragments"
                " (workspace_id, project_id, body, classification, observed_at)"
                " SELECT format('ws%%s', i %% %s), 'agents',"
                "        pyretrieve.tool_text(jsonb_build_object('name', format('get_item_%%s', i),"
                "            'description', format('Get item %%s of topic%%s', i, i %% 17))),"
                "        'internal', now() - interval '1 day'"
                " FROM generate_series(0, %s) i",
                (WORKSPACES, WORKSPACES * TOOLS_PER_WORKSPACE - 1),
            )
            admin.execute(
                "INSERT INTO pyretrieve.tools (workspace_id, project_id, fragment_id, name, schema,"
                " schema_version, operation, classification, observed_at)"
                " SELECT f.workspace_id, f.project_id, f.fragment_id, split_part(f.body, E'\\n', 1),"
                "        jsonb_build_object('name', split_part(f.body, E'\\n', 1)), 1, 'get',"
                "        f.classification, f.observed_at"
                " FROM pyretrieve.fragments f"
            )
            admin.execute(
                "SELECT pyretrieve.grant_access(%s::regrole, 'ws0', 'agents', %s, 'internal')",
                (role("alice"), PURPOSE),
            )
            admin.execute("ANALYZE")
        yield db
    finally:
        drop_database(server, db.name)


def test_discovery_reads_tools_by_key(catalog: Database) -> None:
    got: dict[str, Any] = {}

    def call(conn: psycopg.Connection[Any]) -> None:
        row = conn.execute(
            "SELECT pyretrieve.discover_tools(p_workspace => 'ws0', p_project => 'agents',"
            " p_purpose => %s, p_query => 'get item topic5', p_mode => 'lexical',"
            " p_policy => 'fixed-10') AS d",
            (PURPOSE,),
        ).fetchone()
        assert row is not None
        got["doc"] = row["d"]

    plans = captured_plans(catalog, "alice", call)
    assert got["doc"]["k"] == 10
    tool_scans = [n for p in plans for n in nodes(p) if n.get("Relation Name") == "tools"]
    assert tool_scans, "no plan read the tools table"
    for node in tool_scans:
        # By key: an index scan per id, or a bitmap of the ids' keys; either way never more
        # rows than the 48 ids of the pool, and never a scan of the table.
        assert node["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan"), node
        index_nodes = [n for n in nodes(node) if "Index Name" in n]
        assert index_nodes, node
        assert {n["Index Name"] for n in index_nodes} == {"tools_pkey"}, node
        assert node["Actual Rows"] <= sel.POOL * max(1, node["Actual Loops"]), node
    fragment_scans = [n for p in plans for n in nodes(p) if n.get("Relation Name") == "fragments"]
    assert fragment_scans
    assert all(n["Node Type"] != "Seq Scan" for n in fragment_scans)
