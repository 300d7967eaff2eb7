"""``pyretrieve.discover_tools(...)`` (SQL) and ``Retriever.discover_tools`` (Python) return the
same document, and the SQL door keeps every hidden tool hidden.

The property test builds a random small tool catalog in a fresh project per example (names made
of operation verbs and entities so penalties fire, descriptions from a small vocabulary so
lexical scores tie, classifications above and below alice's ceiling, expired tools, random 8-d
embeddings, a random rollout stage), then, in ONE transaction as alice, calls
``pyretrieve.discover_tools`` in a rolled-back savepoint and the client's own discovery path
(the search request, then ``select_tools``) with the same arguments. Both see the same evaluation
time, so the documents must be the same bytes as canonical JSON (with the SQL decision's id read
as the client's), across policies, modes, weights, penalties on and off, ``adaptive`` and
``master``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pyretrieve.client import Retriever
from pyretrieve.db import steps
from pyretrieve.tools import register_tools
from pyretrieve.tools import select as sel
from pyretrieve.tools.definitions import _STOP, OPERATION_SYNONYMS, entity_words, tool_entities
from pyretrieve.tools.service import discovery_request, select_tools
from pyretrieve.types import Scope, Weights, canonical_json
from pyretrieve.vectors import canonical_embedding, to_pgvector_text
from tests.conftest import Database, Server, acting_as, create_database, drop_database, role
from tests.db.seed import grant
from tests.db.test_plans import captured_plans, nodes, turn_index_scans_off

WS = "toolprop"
MODEL = "t8"
DIM = 8
VERBS = ["delete", "remove", "create", "add", "update", "rename", "get", "find", "list", "sync"]
ENTITIES = ["order", "orders", "invoice", "policy", "policies", "user", "report"]
VOCAB = ["customer", "ledger", "shipping", "address", "monthly", "archive", "account"]
CLASSIFICATIONS = ["public", "internal", "confidential"]  # alice's ceiling: internal
_PROJECTS = itertools.count(1)


@dataclass(frozen=True)
class ToolCase:
    verb: str
    entity: str
    words: tuple[str, ...]
    classification: str
    expired: bool
    embedding: tuple[float, ...] | None


@dataclass(frozen=True)
class Case:
    tools: tuple[ToolCase, ...]
    query: str
    query_embedding: tuple[float, ...]
    mode: str
    policy: str | None
    protect: bool
    adaptive: bool | None
    master: bool
    weights: tuple[float, float]
    stage: str


_vector = st.lists(st.integers(-2, 2), min_size=DIM, max_size=DIM).map(
    lambda v: (*tuple(float(x) for x in v[:-1]), float(v[-1] or 1))
)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    tools = []
    seen = set()
    for _ in range(draw(st.integers(14, 40))):
        verb, entity = draw(st.sampled_from(VERBS)), draw(st.sampled_from(ENTITIES))
        if (verb, entity) in seen:
            continue
        seen.add((verb, entity))
        tools.append(
            ToolCase(
                verb=verb,
                entity=entity,
                words=tuple(draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4))),
                classification=draw(st.sampled_from([*CLASSIFICATIONS, "internal", "public"])),
                expired=draw(st.sampled_from([False] * 5 + [True])),
                embedding=draw(_vector) if draw(st.integers(0, 5)) else None,
            )
        )
    words = draw(
        st.lists(
            st.sampled_from(VERBS + ENTITIES + VOCAB + ["the", "zebra"]), min_size=1, max_size=4
        )
    )
    return Case(
        tools=tuple(tools),
        query=" ".join(words),
        query_embedding=draw(_vector),
        mode=draw(st.sampled_from(["hybrid", "hybrid", "lexical", "vector"])),
        policy=draw(st.sampled_from([None, *sel.POLICIES])),
        protect=draw(st.booleans()),
        adaptive=draw(st.sampled_from([None, None, True, False])),
        master=draw(st.sampled_from([True, True, False])),
        weights=(draw(st.sampled_from([0.5, 1.0, 2.0])), draw(st.sampled_from([0.5, 1.0, 3.0]))),
        stage=draw(st.sampled_from(sel.STAGES)),
    )


@pytest.fixture(scope="module")
def pdb(server: Server, template_db: str) -> Iterator[Database]:
    name = create_database(server, template_db)
    try:
        database = Database(server=server, name=name)
        with database.connect(autocommit=True) as c, acting_as(c, "adam"):
            c.execute("SELECT pyretrieve.create_workspace(%s)", (WS,))
            c.execute("SELECT pyretrieve.register_model(%s, %s)", (MODEL, DIM))
        yield database
    finally:
        drop_database(server, name)


@pytest.fixture(scope="module")
def pconn(pdb: Database) -> Iterator[psycopg.Connection[Any]]:
    with pdb.connect(autocommit=True) as c:
        yield c


def build(conn: psycopg.Connection[Any], case: Case) -> str:
    project = f"p{next(_PROJECTS)}"
    with acting_as(conn, "adam"):
        conn.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, project))
        grant(conn, role("alice"), WS, project, "agent", "internal")
        grant(conn, role("wally"), WS, project, "ingest", "restricted")
        conn.execute("SELECT pyretrieve.set_tool_rollout(%s, %s, %s)", (WS, project, case.stage))
    for t in case.tools:
        name = f"{t.verb}_{t.entity}"
        schema = {
            "name": name,
            "description": f"{t.verb.capitalize()} the {t.entity} " + " ".join(t.words) + ".",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
        }
        expiry = {"observed_at": "2020-01-01T00:00:00Z", "expires_at": "2020-02-01T00:00:00Z"}
        report = register_tools(
            conn, [schema], workspace=WS, project=project, classification=t.classification,
            principal=role("wally"), **(expiry if t.expired else {}),
        )  # fmt: skip
        if t.embedding is not None:
            with acting_as(conn, "wally"):
                body = conn.execute(
                    "SELECT pyretrieve.tool_text(%s::jsonb) AS b", (json.dumps(schema),)
                ).fetchone()
                assert body is not None
                conn.execute(
                    "SELECT pyretrieve.put_embedding(%s, %s, %s, %s, %s::public.vector,"
                    " pyretrieve.content_digest(%s))",
                    (WS, project, report.tools[0].fragment_id, MODEL,
                     to_pgvector_text(canonical_embedding(t.embedding)), body["b"]),
                )  # fmt: skip
    return project


def sql_document(conn: psycopg.Connection[Any], project: str, case: Case) -> dict[str, Any]:
    row = conn.execute(
        "SELECT pyretrieve.discover_tools(p_workspace => %s, p_project => %s, p_purpose => 'agent',"
        " p_query => %s, p_embedding => %s::public.vector, p_model => %s, p_policy => %s,"
        " p_mode => %s, p_lexical_weight => %s, p_vector_weight => %s, p_protect => %s,"
        " p_adaptive => %s, p_master => %s) AS d",
        (WS, project, case.query, to_pgvector_text(canonical_embedding(case.query_embedding)),
         MODEL, case.policy, case.mode, *case.weights, case.protect, case.adaptive, case.master),
    ).fetchone()  # fmt: skip
    assert row is not None
    return dict(row["d"])


def python_document(conn: psycopg.Connection[Any], project: str, case: Case) -> dict[str, Any]:
    request = discovery_request(
        case.query,
        scope=Scope(workspace=WS, project=project, purpose="agent"),
        mode=case.mode,
        model=MODEL,
        embedding=list(case.query_embedding),
        weights=Weights(lexical=case.weights[0], vector=case.weights[1]),
    )
    result = Retriever(conn)._execute_in_transaction(conn, request)
    found = steps.run(conn, select_tools(
        result, request, policy=case.policy, protect=case.protect, adaptive=case.adaptive,
        master=case.master,
    ))  # fmt: skip
    return found.document()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=cases())
def test_sql_and_python_discover_the_same_document(
    pconn: psycopg.Connection[Any], case: Case
) -> None:
    project = build(pconn, case)
    with acting_as(pconn, "alice"):
        try:
            with pconn.transaction():
                got = sql_document(pconn, project, case)
                raise _Undo
        except _Undo:
            pass
        want = python_document(pconn, project, case)
    assert got["decision_id"] != want["decision_id"]
    got["decision_id"] = want["decision_id"]
    assert canonical_json(got) == canonical_json(want)
    event(f"policy={got['policy']} cut={got['k'] < len(got['tools'])}")
    event(f"penalties={any(t['penalties'] for t in got['tools'])}")
    # Hidden tools (above the ceiling, expired) never appear, whatever the policy.
    hidden = {
        f"{t.verb}_{t.entity}"
        for t in case.tools
        if t.expired or t.classification == "confidential"
    }
    assert not hidden & {t["name"] for t in got["tools"]}
    assert got["k"] == len(got["schemas"]) <= len(got["tools"])


class _Undo(Exception):
    pass


def test_the_sql_word_lists_are_the_python_ones(pdb: Database) -> None:
    with pdb.admin(autocommit=True) as admin:
        _word_lists_match(admin)


_ENTITY_PIECES = [
    "games", "game", "boxes", "box", "batches", "wishes", "policies", "policy", "classes",
    "class", "status", "bus", "buses", "ies", "es", "s", "ss", "delete", "Removes", "the", "my",
    "getUserFiles", "order_items", "api.v2", "HTTPServer", "42", "x", "églises", "naïve",
]  # fmt: skip
_entity_text = st.lists(
    st.one_of(st.sampled_from(_ENTITY_PIECES), st.text("abcehiorsxyzASEH_.-", max_size=8)),
    max_size=12,
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(text=_entity_text)
def test_the_sql_entity_words_are_the_python_ones(pdb: Database, text: str) -> None:
    """The stored tool entities and the request's entity words are computed in SQL by
    discover_tools and in Python by the client and the evaluation's replay: one rule, twice."""
    with pdb.admin(autocommit=True) as admin:
        row = admin.execute("SELECT pyretrieve.tool_entity_words(%s) AS e", (text,)).fetchone()
    assert row is not None
    assert row["e"] == sorted(entity_words(text))


def test_a_tool_stores_the_entity_words_of_its_name_and_description(pdb: Database) -> None:
    """The column is the database's: computed from the name and the description on every write,
    whatever a statement sets (even the owner's)."""
    with pdb.admin(autocommit=True) as admin:
        project = f"p{next(_PROJECTS)}"
        with acting_as(admin, "adam"):
            admin.execute("SELECT pyretrieve.create_project(%s, %s)", (WS, project))
            grant(admin, role("wally"), WS, project, "ingest", "restricted")
        schema = {"name": "reschedule", "description": "Moves events to a new time.",
                  "parameters": {"type": "object", "properties": {}}}  # fmt: skip
        register_tools(admin, [schema], workspace=WS, project=project, principal=role("wally"))
        stored = "SELECT entities FROM pyretrieve.tools WHERE project_id = %s"
        row = admin.execute(stored, (project,)).fetchone()
        assert row is not None
        assert row["entities"] == sorted(tool_entities("reschedule", "Moves events to a new time."))
        # "reschedule" and "new" are operation words: they name no entity.
        assert row["entities"] == ["event", "move", "time"]
        with pytest.raises(psycopg.errors.GeneratedAlways):
            admin.execute(
                "UPDATE pyretrieve.tools SET entities = '{order}' WHERE project_id = %s", (project,)
            )
        admin.execute(
            "UPDATE pyretrieve.tools SET schema = jsonb_set(schema, '{description}',"
            " '\"Cancels orders.\"') WHERE project_id = %s",
            (project,),
        )
        row = admin.execute(stored, (project,)).fetchone()
        assert row is not None
        assert row["entities"] == ["cancel", "order"]


def _word_lists_match(pconn: psycopg.Connection[Any]) -> None:
    rows = pconn.execute("SELECT family, word FROM pyretrieve.tool_operation_words()").fetchall()
    got: dict[str, set[str]] = {}
    for r in rows:
        got.setdefault(r["family"], set()).add(r["word"])
    assert got == {f: set(w) for f, w in OPERATION_SYNONYMS.items()}
    assert len(rows) == sum(len(w) for w in OPERATION_SYNONYMS.values())
    stop = pconn.execute("SELECT pyretrieve.tool_stop_words() AS s").fetchone()
    assert stop is not None
    assert sorted(stop["s"]) == sorted(_STOP)
    default = pconn.execute(
        "SELECT pg_get_functiondef('pyretrieve.discover_tools(text, text, text, text, public.vector,"
        " text, text, text, double precision, double precision, boolean, boolean, boolean)'"
        "::regprocedure) AS d"
    ).fetchone()
    assert default is not None
    assert f"coalesce(p_policy, '{sel.DEFAULT_POLICY}')" in default["d"]
    k = pconn.execute(
        "SELECT pg_get_functiondef('pyretrieve.tool_recommended_k(text, text, double precision[],"
        " double precision[], double precision[])'::regprocedure) AS d"
    ).fetchone()
    assert k is not None
    a, b, kmin = sel.NEAR_DEFAULT
    assert f"c_a constant double precision := {a!r};" in k["d"]
    assert f"c_b constant double precision := {b!r};" in k["d"]
    assert f"c_kmin constant integer := {kmin!r};" in k["d"]


def test_a_callers_planner_settings_do_not_turn_discovery_into_a_scan_of_every_scope(
    pdb: Database, pconn: psycopg.Connection[Any]
) -> None:
    """Attack: the caller turns every index scan off before it discovers tools. No statement of
    discovery (the authorization, both legs, the records, the tool rows, their schemas, the
    rollout) reads a tenant table whole: each goes through an index, whatever the caller set."""
    case = Case(
        tools=tuple(
            ToolCase(
                verb=verb, entity=entity, words=("customer", "ledger"), classification="internal",
                expired=False, embedding=(1.0, 0, 0, 0, 0, 0, 0, float(i + 1)),
            )
            for i, (verb, entity) in enumerate(itertools.product(VERBS[:4], ENTITIES[:4]))
        ),
        query="delete the customer orders", query_embedding=(1.0, 0, 0, 0, 0, 0, 0, 1.0),
        mode="hybrid", policy=None, protect=True, adaptive=True, master=True,
        weights=(1.0, 1.0), stage="full",
    )  # fmt: skip
    project = build(pconn, case)

    def call(conn: psycopg.Connection[Any]) -> None:
        turn_index_scans_off(conn)
        assert sql_document(conn, project, case)["tools"]

    plans = captured_plans(pdb, "alice", call)
    tenant = {"tools", "fragments", "embeddings", "lexical_blocks", "lexical_pages", "grants"}
    read = [n for p in plans for n in nodes(p) if n.get("Relation Name") in tenant]
    assert {n["Relation Name"] for n in read} >= {"tools", "fragments", "grants"}
    whole = [(n["Relation Name"], n["Node Type"]) for n in read if n["Node Type"] == "Seq Scan"]
    assert whole == []
