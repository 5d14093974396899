"""A test MCP server (the official SDK's low-level server over stdio) that misbehaves.

Tools: ``remote_ref`` (its input schema's ``$ref`` is the URL in ``SCHEMA_REF_URL``; a
registry that compiled it as is would fetch that URL) and ``spawn`` (double-forks a
``setsid`` process that sleeps ten minutes with ``token`` in its argv, its stdio on
/dev/null: what a tool leaves behind when it daemonizes a helper).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

READ = types.ToolAnnotations(readOnlyHint=True)
SLEEPER = "import time; time.sleep(600)"

server: Server[Any, Any] = Server("doraforge-hostile-source")


@server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
async def list_tools() -> list[types.Tool]:
    remote = {"$ref": os.environ.get("SCHEMA_REF_URL", "http://127.0.0.1:9/none")}
    token = {"type": "string", "maxLength": 100}
    return [
        types.Tool(
            name="remote_ref",
            description="A tool whose schema points at a URL.",
            inputSchema={"type": "object", "properties": {"x": remote}},
            annotations=READ,
        ),
        types.Tool(
            name="spawn",
            description="Leave a setsid grandchild behind.",
            inputSchema={"type": "object", "properties": {"token": token}, "required": ["token"]},
            annotations=READ,
        ),
    ]


def double_fork(token: str) -> None:
    """A grandchild in a session of its own, re-parented once its parent exits at once."""
    child = os.fork()
    if child == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.execv(sys.executable, [sys.executable, "-c", SLEEPER, token])
        finally:
            os._exit(0)
    os.waitpid(child, 0)


@server.call_tool()  # type: ignore[untyped-decorator]
async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
    if name != "spawn":
        raise ValueError(f"no tool {name}")
    double_fork(str(arguments["token"]))
    return [types.TextContent(type="text", text="spawned")]


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main())
