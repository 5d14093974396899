"""The official MCP TypeScript SDK as a second MCP client, for the tests that use it.

``tests/peers/mcp_typescript/`` holds the client (``client.mjs``), its ``package.json``
pinning ``@modelcontextprotocol/sdk`` to one exact version and the ``package-lock.json``
that pins the rest. On first use :func:`client_dir` copies them under ``.peers/`` in the
checkout (``DORAFORGE_PEERS_DIR`` moves it) and runs ``npm ci`` there, once, bounded and
under a file lock so concurrent test processes never install over each other; a stamp
with the lock file's digest says the install is complete and current. So a clean clone
needs only ``node``/``npm`` on PATH and the npm registry, nothing run beforehand.

:func:`run` drives the client as a subprocess that is always ended: it connects to a URL,
runs a plan of steps (``list_tools()``, ``call_tool(name, arguments)``) and answers one
JSON record per step, content blocks kept with their types and image data replaced by its
length, first bytes and digest (``dataLength``, ``byteLength``, ``headHex``, ``sha256``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.peers.npm import npm_peer, pinned
from tests.support.processes import run_bounded

SOURCE = Path(__file__).resolve().parent / "mcp_typescript"
PACKAGE = "@modelcontextprotocol/sdk"
RUN_TIMEOUT_S = 300.0
#: The variable the client reads its bearer token from.
TOKEN_VARIABLE = "MCP_BEARER_TOKEN"

type Step = dict[str, Any]


def version() -> str:
    """The exact SDK version ``package.json`` pins (one place names it)."""
    return pinned(SOURCE, PACKAGE)


def list_tools() -> Step:
    return {"op": "listTools"}


def call_tool(name: str, arguments: Mapping[str, Any] | None = None) -> Step:
    return {"op": "callTool", "name": name, "arguments": dict(arguments or {})}


def client_dir() -> Path:
    """The installed client's directory, installed on first use (bounded, locked)."""
    return npm_peer(SOURCE, f"mcp-ts-{version()}", label="MCP_TS", scripts=["client.mjs"])


def run(
    url: str,
    plan: Sequence[Step],
    *,
    token: str | None = None,
    timeout: float = RUN_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """Run ``plan`` against the MCP endpoint ``url``; the connection record, then one
    record per step. The client is killed if it outlives ``timeout``; an exit other than 0
    or a missing record fails the test with its output."""
    directory = client_dir()
    env = {key: value for key, value in os.environ.items() if key != TOKEN_VARIABLE}
    if token is not None:
        env[TOKEN_VARIABLE] = token
    try:
        finished = run_bounded(
            ["node", str(directory / "client.mjs"), url],
            cwd=directory,
            env=env,
            stdin=json.dumps(list(plan)),
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as expired:
        raise AssertionError(
            f"the TypeScript MCP client did not end within {timeout} s and was killed:\n"
            f"{str(expired.output)[-3000:]}\n{str(expired.stderr)[-3000:]}"
        ) from None
    out, err = finished.stdout, finished.stderr
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    if finished.returncode != 0 or len(records) != len(plan) + 1:
        raise AssertionError(
            f"the TypeScript MCP client exited {finished.returncode} with "
            f"{len(records)} of {len(plan) + 1} records:\n{out[-3000:]}\n{err[-3000:]}"
        )
    return records
