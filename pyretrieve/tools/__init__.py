"""Tool discovery for LLM agents: tools are fragments, discovery is the policy-filtered search.

from pyretrieve.tools import register_tools, read_definitions
register_tools(conn, read_definitions("tools.json"), workspace="acme", project="agents")
found = retriever.discover_tools("cancel my order", scope=scope)
client.chat.completions.create(..., tools=found.openai_tools())
"""

from __future__ import annotations

from pyretrieve.tools.context import (
    anthropic_tools,
    count_tokens,
    mcp_tools_list,
    openai_tools,
    schema_tokens,
    tool_context_fingerprint,
)
from pyretrieve.tools.definitions import (
    ToolDefinition,
    operation_family,
    parse_definitions,
    query_operations,
    read_definitions,
)
from pyretrieve.tools.service import (
    DiscoveredTool,
    Discovery,
    Rediscovery,
    RegistrationReport,
    ToolOmission,
    ToolSession,
    register_tools,
    set_rollout,
)

__all__ = [
    "DiscoveredTool",
    "Discovery",
    "Rediscovery",
    "RegistrationReport",
    "ToolDefinition",
    "ToolOmission",
    "ToolSession",
    "anthropic_tools",
    "count_tokens",
    "mcp_tools_list",
    "openai_tools",
    "operation_family",
    "parse_definitions",
    "query_operations",
    "read_definitions",
    "register_tools",
    "schema_tokens",
    "set_rollout",
    "tool_context_fingerprint",
]
