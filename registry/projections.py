"""Mechanical provider projections of one entry, and the catalog ETag.

Every provider projection names a tool by its listed name (``ToolEntry.listed_name``), the
form every provider accepts, and by nothing else (no MCP ``title``: a second name there was a
second name to read); the MCP projection carries the standard annotations derived from the
policy. A call by any name of the entry resolves to the same entry. Provider formats have
no field for where a tool comes from, so the description of a tool with an ``origin`` (a
saved recipe) ends in a bounded suffix naming it and its active revision
(``" [local recipe, rev 3]"``); the native portos form carries the ``origin`` itself.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from typing import Any

from doraforge.registry.errors import InvalidRequest
from doraforge.registry.model import ToolEntry
from doraforge.wire.canonical import canonical_bytes

FORMATS = ("portos", "openai", "anthropic", "mcp")


def etag(body: Any) -> str:
    """``"base64url-no-pad(sha256(canonical JSON))"``, quoted as an HTTP entity tag."""
    digest = hashlib.sha256(canonical_bytes(body)).digest()
    return '"' + base64.urlsafe_b64encode(digest).rstrip(b"=").decode() + '"'


def _network(entry: ToolEntry) -> bool:
    return any(permission.type == "network" for permission in entry.policy.permissions)


def mcp_annotations(entry: ToolEntry) -> dict[str, bool]:
    """MCP tool annotations as a function of the policy alone."""
    policy = entry.policy
    return {
        "readOnlyHint": policy.sideEffect == "read",
        "destructiveHint": policy.sideEffect == "write" and policy.risk in ("high", "critical"),
        "idempotentHint": policy.idempotent,
        # A tool that reaches hosts it did not declare (http_fetch: whatever the egress
        # policy allows) is as open-world as one that declares them.
        "openWorldHint": bool(policy.egressHosts) or _network(entry),
    }


#: The longest origin suffix a provider description gets (a revision of up to 12 digits).
MAX_ORIGIN_SUFFIX = 32


def origin_suffix(entry: ToolEntry) -> str:
    """The provider descriptions' origin and active-revision suffix; ``""`` for a tool
    without an origin."""
    if entry.origin is None:
        return ""
    return f" [local recipe, rev {entry.origin.revision}]"[:MAX_ORIGIN_SUFFIX]


def provider_description(entry: ToolEntry) -> str:
    """The description provider formats carry: the purpose, then the origin suffix."""
    return entry.description + origin_suffix(entry)


def _portos(entry: ToolEntry) -> dict[str, Any]:
    return entry.public()


def _openai(entry: ToolEntry) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": entry.listed_name,
            "description": provider_description(entry),
            "parameters": entry.input_schema,
        },
    }


def _anthropic(entry: ToolEntry) -> dict[str, Any]:
    return {
        "name": entry.listed_name,
        "description": provider_description(entry),
        "input_schema": entry.input_schema,
    }


def _mcp(entry: ToolEntry) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "name": entry.listed_name,
        "description": provider_description(entry),
        "inputSchema": entry.input_schema,
        "annotations": mcp_annotations(entry),
    }
    # MCP requires an outputSchema to describe an object; other result shapes go unadvertised.
    if entry.output_schema.get("type") == "object":
        tool["outputSchema"] = entry.output_schema
    return tool


_PROJECTIONS: dict[str, Callable[[ToolEntry], dict[str, Any]]] = {
    "portos": _portos,
    "openai": _openai,
    "anthropic": _anthropic,
    "mcp": _mcp,
}


def check_format(fmt: str) -> None:
    """:class:`InvalidRequest` TOOL_INVALID_QUERY unless ``fmt`` is a known catalog format."""
    if fmt not in _PROJECTIONS:
        raise InvalidRequest(
            "TOOL_INVALID_QUERY",
            f"unknown catalog format {fmt!r}",
            details={"field": "format", "allowed": list(FORMATS)},
        )


def project(entry: ToolEntry, fmt: str) -> dict[str, Any]:
    """The entry in ``fmt``; :class:`InvalidRequest` TOOL_INVALID_QUERY for an unknown format."""
    check_format(fmt)
    return _PROJECTIONS[fmt](entry)
