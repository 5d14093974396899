"""A test MCP server (the official SDK's low-level server over stdio) whose one tool,
``near_miss``, declares an output schema with a backtracking ``pattern`` and answers a
near-miss of it (``NEAR_MISS_CHARS`` a's and a b): what a client that validates results
with Python's ``re`` takes seconds (at 60 characters, hours) to check."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

BACKTRACKING = "^(a|aa)+$"

server: Server[Any, Any] = Server("doraforge-pattern-source")


@server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
async def list_tools() -> list[types.Tool]:
    output = {"type": "object", "properties": {"x": {"type": "string", "pattern": BACKTRACKING}}}
    return [
        types.Tool(
            name="near_miss",
            description="Answers a string its own output schema matches slowly.",
            inputSchema={"type": "object"},
            outputSchema=output,
            annotations=types.ToolAnnotations(readOnlyHint=True),
        )
    ]


@server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    text = "a" * int(os.environ.get("NEAR_MISS_CHARS", "38")) + "b"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structuredContent={"x": text}
    )


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main())
