"""A test MCP server written with the official SDK (FastMCP over stdio), run as a script.

Tools: ``echo`` (read only), ``add_note`` (a write: appends to ``notes.txt`` in the scratch
directory given as ``NOTES_DIR``), ``plain`` (no annotations), ``crash`` / ``crash_write``
(the process exits mid-call), ``hang`` (blocks far past any deadline), ``flood`` (writes
``kib`` KiB to stderr, then answers), ``pid`` (its process id), ``grow`` (adds a tool
and sends ``notifications/tools/list_changed``), and the containment probes ``hog``
(allocates ``mib`` MiB), ``peek`` (reads a file), ``dial`` (opens a TCP connection) and
``env`` (one environment variable).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations

READ = ToolAnnotations(readOnlyHint=True)
WRITE = ToolAnnotations(readOnlyHint=False, idempotentHint=False)

server = FastMCP("doraforge-test-source")


@server.tool(annotations=READ, structured_output=False)
def echo(text: str) -> str:
    """Answer the text given."""
    return f"echo: {text}"


@server.tool(annotations=WRITE)
def add_note(text: str) -> dict[str, int]:
    """Append a note; answers how many notes there are."""
    path = Path(os.environ.get("NOTES_DIR", ".")) / "notes.txt"
    with path.open("a") as notes:
        notes.write(text + "\n")
    return {"count": len(path.read_text().splitlines())}


@server.tool(structured_output=False)
def plain(value: int) -> str:
    """A tool without annotations."""
    return str(value * 2)


@server.tool(annotations=READ)
def crash() -> str:
    """The process exits during the call."""
    os._exit(3)


@server.tool(annotations=WRITE)
def crash_write() -> str:
    """A write whose process exits during the call (its outcome is unknown)."""
    os._exit(3)


@server.tool(annotations=READ)
def hang() -> str:
    """Block far past any deadline."""
    time.sleep(3600)
    return "never"


@server.tool(annotations=READ, structured_output=False)
def flood(kib: int) -> str:
    """Write ``kib`` KiB to stderr, then answer."""
    line = "x" * 1023 + "\n"
    for _ in range(kib):
        sys.stderr.write(line)
    sys.stderr.flush()
    return "flooded"


@server.tool(annotations=READ)
def pid() -> dict[str, int]:
    """This server's process id."""
    return {"pid": os.getpid()}


@server.tool(annotations=READ, structured_output=False)
async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
    """Add the ``grown`` tool and say the list changed."""

    def grown() -> str:
        """A tool added at run time."""
        return "grown"

    server.add_tool(grown, annotations=READ, structured_output=False)
    await ctx.session.send_tool_list_changed()
    return "grew"


@server.tool(annotations=READ, structured_output=False)
def hog(mib: int) -> str:
    """Allocate ``mib`` MiB and touch it."""
    block = bytearray(mib * 1024 * 1024)
    return f"allocated {len(block)}"


@server.tool(annotations=READ, structured_output=False)
def peek(path: str) -> str:
    """The first 100 characters of a file."""
    return Path(path).read_text()[:100]


@server.tool(annotations=READ, structured_output=False)
def dial(port: int) -> str:
    """Open a TCP connection to this machine's ``port``."""
    with socket.create_connection(("127.0.0.1", port), timeout=3):
        return "connected"


@server.tool(annotations=READ, structured_output=False)
def env(variable: str) -> str:
    """The value of one environment variable ("" when unset)."""
    return os.environ.get(variable, "")


if __name__ == "__main__":
    server.run("stdio")
