"""Tool definitions: OpenAI-style, flat and MCP ``tools/list`` JSON, read into one shape.

A definition becomes ``{"name", "description", "parameters"}`` (the canonical schema stored in
``pyretrieve.tools.schema``). The searchable text is built from it by the database
(``pyretrieve.tool_text``), never from raw JSON. The operation family (delete, update, create,
get, search, list, other) is read from the name and the first words of the description.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyretrieve.errors import InvalidInput

NAME_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")
OPERATIONS = ("delete", "update", "create", "get", "search", "list", "other")
READ_FAMILIES = frozenset({"get", "search", "list"})
WRITE_FAMILIES = frozenset({"delete", "update", "create"})

# Verbs (and their synonyms) by operation family. Matched as whole words, lower case.
OPERATION_SYNONYMS: dict[str, frozenset[str]] = {
    "delete": frozenset(
        [
            "delete",
            "deletes",
            "deleting",
            "remove",
            "removes",
            "removing",
            "erase",
            "drop",
            "purge",
            "destroy",
            "unregister",
            "uninstall",
            "cancel",
            "revoke",
            "discard",
            "clear",
            "wipe",
            "unsubscribe",
            "terminate",
        ]
    ),
    "update": frozenset(
        [
            "update",
            "updates",
            "updating",
            "modify",
            "edit",
            "change",
            "set",
            "rename",
            "patch",
            "replace",
            "adjust",
            "alter",
            "reschedule",
            "move",
            "enable",
            "disable",
            "toggle",
            "upgrade",
            "assign",
            "configure",
            "reset",
        ]
    ),
    "create": frozenset(
        [
            "create",
            "creates",
            "creating",
            "add",
            "adds",
            "new",
            "make",
            "insert",
            "register",
            "book",
            "schedule",
            "generate",
            "send",
            "submit",
            "upload",
            "open",
            "start",
            "reserve",
            "buy",
            "purchase",
            "invite",
            "build",
        ]
    ),
    "get": frozenset(
        [
            "get",
            "gets",
            "fetch",
            "retrieve",
            "read",
            "show",
            "display",
            "view",
            "lookup",
            "check",
            "describe",
            "obtain",
            "calculate",
            "compute",
            "estimate",
            "convert",
            "tell",
            "what",
            "whats",
            "how",
        ]
    ),
    "search": frozenset(
        ["search", "find", "query", "locate", "discover", "look", "seek", "filter", "match"]
    ),
    "list": frozenset(["list", "lists", "enumerate", "all", "browse"]),
}
_WORD_RE = re.compile(r"[A-Za-z][a-z]*|[0-9]+")
# The endings after which a plural takes "es" (boxes, matches, wishes).
_ES_PLURAL = ("s", "x", "z", "ch", "sh")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "for",
        "to",
        "in",
        "on",
        "by",
        "with",
        "and",
        "or",
        "from",
        "at",
        "is",
        "are",
        "be",
        "it",
        "this",
        "that",
        "my",
        "me",
        "i",
        "you",
        "your",
        "please",
        "can",
        "could",
        "would",
        "will",
        "should",
        "do",
        "does",
        "need",
        "want",
    ]
)
ALL_OPERATION_WORDS = frozenset().union(*OPERATION_SYNONYMS.values())


def words(text: str) -> list[str]:
    """Lower-case words of a text, with snake_case, camelCase and dotted names split."""
    return [w.lower() for w in _WORD_RE.findall(text)]


def _stem(word: str) -> str:
    # English plurals, lightly: policies -> policy, boxes -> box, games -> game (not "gam",
    # which a request's "game" would never match), class stays class.
    if len(word) > 5 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("es") and word[:-2].endswith(_ES_PLURAL):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def entity_words(text: str) -> frozenset[str]:
    """The words of a text that are neither operation verbs nor stop words, lightly stemmed."""
    return frozenset(
        _stem(w)
        for w in words(text)
        if w not in ALL_OPERATION_WORDS and w not in _STOP and len(w) > 1 and not w.isdigit()
    )


def tool_entities(name: str, description: str) -> frozenset[str]:
    """What a tool is about: the entity words of its name and description. The database stores
    them with each tool (``pyretrieve.tools.entities``); this is the same computation."""
    return entity_words(f"{name} {description}")


def query_operations(text: str) -> frozenset[str]:
    """The operation families a request asks for (by its verbs); empty when none is named."""
    found = set()
    for w in words(text):
        for family, verbs in OPERATION_SYNONYMS.items():
            if w in verbs and family not in ("get", "list"):
                found.add(family)
    # get/list verbs are too common in requests ("what", "show", "all") to contradict a
    # write tool on their own; they count only when no write or search verb is present.
    if not found:
        for w in words(text):
            for family in ("get", "list"):
                if w in OPERATION_SYNONYMS[family]:
                    found.add(family)
    return frozenset(found)


def operation_family(name: str, description: str = "") -> str:
    """A tool's operation family: from the verbs of its name, else its description's first."""
    for source in (words(name), words(description)[:3]):
        for w in source:
            for family, verbs in OPERATION_SYNONYMS.items():
                if w in verbs:
                    return family
    return "other"


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """One tool in canonical form. ``schema`` is ``{"name", "description", "parameters"}``."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    operation: str
    tags: tuple[str, ...] = ()
    server: str | None = None

    @property
    def schema(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }


def _definition(raw: Any, *, server: str | None, where: str) -> ToolDefinition:
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where}: a tool definition must be a JSON object")
    if raw.get("type") == "function" and isinstance(raw.get("function"), dict):
        raw = raw["function"]
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise InvalidInput(f"{where}: tool name must match {NAME_RE.pattern}")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise InvalidInput(f"{where}: description must be a string")
    parameters = raw.get("parameters", raw.get("inputSchema", raw.get("input_schema")))
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise InvalidInput(f"{where}: parameters must be a JSON object")
    tags = raw.get("tags", ())
    if not isinstance(tags, list | tuple) or not all(isinstance(t, str) for t in tags):
        raise InvalidInput(f"{where}: tags must be a list of strings")
    operation = raw.get("operation") or operation_family(name, description)
    if operation not in OPERATIONS:
        raise InvalidInput(f"{where}: operation must be one of {', '.join(OPERATIONS)}")
    return ToolDefinition(
        name=name,
        description=description,
        parameters=parameters,
        operation=operation,
        tags=tuple(tags),
        server=raw.get("server", server),
    )


def parse_definitions(data: Any, *, server: str | None = None) -> list[ToolDefinition]:
    """Definitions from parsed JSON: a list, one definition, or an MCP ``tools/list`` result
    (``{"tools": [...]}``, also inside a JSON-RPC ``{"result": {...}}``)."""
    if isinstance(data, dict) and isinstance(data.get("result"), dict):
        data = data["result"]
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    items = data if isinstance(data, list) else [data]
    tools = [_definition(raw, server=server, where=f"tool {i + 1}") for i, raw in enumerate(items)]
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise InvalidInput("tool names must be unique within one registration")
    return tools


def _jsonl(text: str) -> Iterator[Any]:
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                raise InvalidInput(f"line {number}: not JSON") from None


def read_definitions(path: Path | str, *, server: str | None = None) -> list[ToolDefinition]:
    """Definitions from a JSON file (list, object or MCP result) or a JSONL file."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        items: list[Any] = []
        for item in _jsonl(text):
            items.extend(item["tools"] if isinstance(item, dict) and "tools" in item else [item])
        data = items
    return parse_definitions(data, server=server)


def definitions(items: Iterable[ToolDefinition | Mapping[str, Any]]) -> list[ToolDefinition]:
    """Accept ready definitions or raw mappings alike."""
    out: list[ToolDefinition] = []
    raw: list[Any] = []
    for item in items:
        if isinstance(item, ToolDefinition):
            out.append(item)
        else:
            raw.append(dict(item))
    return out + (parse_definitions(raw) if raw else [])
