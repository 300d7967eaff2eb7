"""The pure parts of tool discovery: definitions, penalties, confidence, K, rendering."""

from __future__ import annotations

import uuid

import pytest

from pyretrieve.errors import InvalidInput
from pyretrieve.tools import context, parse_definitions, query_operations
from pyretrieve.tools import select as sel


def cand(name: str, op: str, rank: int, score: float) -> sel.Candidate:
    return sel.Candidate(uuid.uuid4(), name, op, 1, rank, score, rank, rank, 100)


def test_query_operations_and_synonyms() -> None:
    assert query_operations("please remove the user account") == {"delete"}
    assert query_operations("rename my project") == {"update"}
    assert query_operations("add a new customer") == {"create"}
    assert query_operations("show the weather") == {"get"}
    assert query_operations("weather in paris") == frozenset()


def test_penalties_are_explained() -> None:
    q = "delete the user account"
    assert sel.penalties_for(q, cand("create_user", "create", 1, 1.0))[0].code == (
        "operation_contradiction"
    )
    assert sel.penalties_for(q, cand("delete_invoice", "delete", 1, 1.0))[0].code == (
        "no_shared_entity"
    )
    assert sel.penalties_for(q, cand("delete_user", "delete", 1, 1.0)) == ()
    assert sel.penalties_for("search users", cand("list_users", "list", 1, 1.0)) == ()


def test_k_policies_never_exceed_the_candidates() -> None:
    scored = sel.score("x", [cand(f"t{i}", "other", i, 1 / (60 + i)) for i in range(1, 8)], 2 / 61)
    for policy in sel.POLICIES:
        assert sel.assess(scored, policy).recommended_k <= len(scored)
    assert sel.assess([], "wide").level == "none"
    assert sel.assess([], "wide").recommended_k == 0
    with pytest.raises(ValueError, match="unknown"):
        sel.recommended_k("nope", "high", scored)


def test_confidence_levels() -> None:
    ideal = 2 / 61
    high = sel.score("x", [cand("a", "other", 1, 2 / 61), cand("b", "other", 2, 1 / 62)], ideal)
    assert sel.assess(high, "tight").level == "high"
    low = sel.score("x", [cand("a", "other", 1, 1 / 61), cand("b", "other", 2, 1 / 62)], ideal)
    assert sel.assess(low, "tight").level == "low"


def test_renderings_and_fingerprint() -> None:
    schema = {"name": "f", "description": "d", "parameters": {"type": "dict", "properties": {}}}
    assert context.openai_tools([schema])[0]["function"]["parameters"]["type"] == "object"
    a = context.anthropic_tools([schema, {**schema, "name": "g"}])
    assert "cache_control" not in a[0]
    assert a[1]["cache_control"] == {"type": "ephemeral"}
    assert context.mcp_tools_list([schema])["tools"][0]["inputSchema"]["type"] == "object"
    fp = context.tool_context_fingerprint([("a", 1), ("b", 2)])
    assert fp == context.tool_context_fingerprint([("b", 2), ("a", 1)])
    assert fp != context.tool_context_fingerprint([("a", 1), ("b", 3)])
    assert context.estimate_tokens("abcdefgh") == 2


def test_bad_definitions_are_refused() -> None:
    with pytest.raises(InvalidInput):
        parse_definitions([{"name": "bad name"}])
    with pytest.raises(InvalidInput):
        parse_definitions([{"name": "a"}, {"name": "a"}])
    with pytest.raises(InvalidInput):
        parse_definitions({"name": "a", "parameters": []})
