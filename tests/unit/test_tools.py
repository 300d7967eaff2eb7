"""The pure parts of tool discovery: definitions, penalties, confidence, K, rendering."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from pyretrieve.errors import InvalidInput
from pyretrieve.tools import context, parse_definitions, query_operations
from pyretrieve.tools import select as sel
from pyretrieve.tools.definitions import entity_words, tool_entities


def cand(name: str, op: str, rank: int, score: float, description: str = "") -> sel.Candidate:
    entities = tool_entities(name, description)
    return sel.Candidate(uuid.uuid4(), name, op, 1, rank, score, rank, rank, 100, entities)


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


def test_a_write_tool_whose_description_names_the_requested_entity_is_not_penalised() -> None:
    """BFCL's terse names ("reschedule", "MakePayment") share no word with requests that their
    descriptions answer; the entity rule reads the description too, and still penalises a tool
    of the asked family that is about something else."""
    q = "Reschedule event 'Alice-One' to November 1 at 8pm London time"
    name, about = "reschedule", "Moves an event to a new specified time."
    assert not entity_words(name) & entity_words(q)  # the name alone would be penalised
    assert sel.penalties_for(q, cand(name, "update", 1, 1.0, about)) == ()
    other = cand("reschedule_flight", "update", 2, 1.0, "Moves a booked flight to a new date.")
    assert [p.code for p in sel.penalties_for(q, other)] == ["no_shared_entity"]


@pytest.mark.parametrize(
    ("plural", "singular"),
    [("games", "game"), ("boxes", "box"), ("batches", "batch"), ("wishes", "wish"),
     ("policies", "policy"), ("classes", "class"), ("invoices", "invoice"), ("files", "file")],
)  # fmt: skip
def test_entity_words_match_a_plural_with_its_singular(plural: str, singular: str) -> None:
    assert entity_words(plural) == entity_words(singular) != frozenset()
    assert entity_words("class") == {"class"}  # a final ss is not a plural


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


# ---------------------------------------------------------------------------------------------
# Token counting: o200k_base from the tokens extra, else the documented estimate
# ---------------------------------------------------------------------------------------------
def _without_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes the import fail as if the package were absent.
    monkeypatch.setitem(__import__("sys").modules, "bpe_openai", None)
    context._encoder.cache_clear()


def test_counts_are_o200k_base_when_the_tokens_extra_is_installed() -> None:
    bpe_openai = pytest.importorskip("bpe_openai")
    context._encoder.cache_clear()
    encoding = bpe_openai.get_encoding("o200k_base")
    text = '{"type":"function","function":{"name":"get_current_weather"}}'
    count, method = context.count_tokens(text)
    assert method == "o200k_base"
    assert count == len(encoding.encode(text))
    # BPE merges: far fewer tokens than characters, and not the estimate.
    assert count < len(text) / 2
    assert count != context.estimate_tokens(text)
    schema = {"name": "f", "description": "Get the weather.", "parameters": {"type": "dict"}}
    tokens, method = context.schema_tokens([schema])
    rendered = '[{"type":"function","function":{"name":"f","description":"Get the weather.","parameters":{"type":"object"}}}]'
    assert (tokens, method) == (len(encoding.encode(rendered)), "o200k_base")


def test_counts_fall_back_to_the_estimate_without_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without_tokenizer(monkeypatch)
    try:
        assert context.count_tokens("abcdefghi") == (3, "estimate-chars/4")
        assert context.schema_tokens([]) == (0, "estimate-chars/4")
        tokens, method = context.schema_tokens([{"name": "f", "description": "d"}])
        assert method == "estimate-chars/4"
        assert tokens == -(
            -len(
                context.json.dumps(
                    context.openai_tools([{"name": "f", "description": "d"}]), separators=(",", ":")
                )
            )
            // 4
        )
    finally:
        monkeypatch.undo()
        context._encoder.cache_clear()


BFCL = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "bfcl_tools"


@pytest.mark.skipif(not (BFCL / "corpus.jsonl").exists(), reason="BFCL tools is not available")
def test_the_estimate_errs_as_documented_on_bfcl_schemas() -> None:
    """docs/tools.md: ceil(chars / 4) is about 17% high against o200k_base on BFCL schemas."""
    pytest.importorskip("bpe_openai")
    context._encoder.cache_clear()
    lines = (BFCL / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:400]
    exact = estimate = 0
    for line in lines:
        schema = json.loads(line)["schema"]
        text = json.dumps(context.openai_tools([schema]), separators=(",", ":"))
        exact += context.count_tokens(text)[0]
        estimate += context.estimate_tokens(text)
    assert 1.08 <= estimate / exact <= 1.28


def test_near_keeps_tools_close_to_each_legs_best_and_cuts_the_rest() -> None:
    def c(name: str, rank: int, bm25: float | None, distance: float | None) -> sel.Candidate:
        return sel.Candidate(uuid.uuid4(), name, "other", 1, rank, 1 / (60 + rank), rank, rank,
                             100, frozenset(), bm25, distance)  # fmt: skip

    rows = [
        c("a", 1, 10.0, 0.20),
        c("b", 2, 7.5, 0.50),  # BM25 within 0.7 of the best
        c("c", 3, 1.0, 0.60),
        c("d", 4, 1.0, 0.60),
        c("e", 5, 1.0, 0.60),
        c("f", 6, 1.0, 0.61),
        c("g", 7, None, 0.29),  # cosine distance within 0.1 of the best
        c("h", 8, 2.0, 0.90),
        c("i", 9, 6.0, None),
    ]
    scored = sel.score("x", rows, 2 / 61)
    assert sel.recommended_k("near", "normal", scored, params=(0.7, 0.1, 1)) == 7
    assert sel.recommended_k("near", "normal", scored, params=(0.5, 0.1, 1)) == 9
    assert sel.recommended_k("near", "normal", scored, params=(0.7, 0.01, 3)) == 3
    assert sel.recommended_k("near", "normal", scored[:2], params=(0.9, 0.0, 5)) == 2
    assert sel.recommended_k("near", "none", [], params=(0.7, 0.1, 5)) == 0
    assert sel.assess(scored, "near").recommended_k == sel.recommended_k("near", "normal", scored)
