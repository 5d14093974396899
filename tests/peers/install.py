"""Build every peer environment the tests use, before pytest starts.

``make test`` runs ``python -m tests.peers.install`` so that no test's own time limit
covers a download (a clean clone's first PhyAgentOS install can take minutes on a loaded
machine). Each peer is built by the module the tests use, reused while its stamp is
current, and the builds run side by side (they wait on the package indexes, not the CPU).
One line per peer says it is ready and how long it took; a failure is one line that says
what to do, and the exit status is 1.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.peers import mcp_inspector, mcp_server_time, mcp_ts, openarm_mujoco, phyagentos

PEERS: dict[str, Callable[[], Any]] = {
    f"PhyAgentOS {phyagentos.VERSION}": phyagentos.python,
    f"dora-openarm-mujoco {openarm_mujoco.VERSION}": openarm_mujoco.venv,
    f"mcp-server-time {mcp_server_time.VERSION}": mcp_server_time.venv,
    f"MCP TypeScript SDK {mcp_ts.version()}": mcp_ts.client_dir,
    f"MCP Inspector {mcp_inspector.version()}": mcp_inspector.cli_dir,
}


def build(name: str, make: Callable[[], Any]) -> str | None:
    """Build one peer; None when it is ready, else the one line that says what failed."""
    started = time.monotonic()
    try:
        make()
    except Exception as exc:  # every failure becomes one line for the user
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return (
            f"peer {name} could not be built ({first}); check access to PyPI and npm, "
            "then run make test again"
        )
    print(f"==> peer {name} ready ({time.monotonic() - started:.0f} s)", flush=True)
    return None


def main() -> int:
    print(
        f"==> building {len(PEERS)} peer environments under .peers/ (reused when current)",
        flush=True,
    )
    with ThreadPoolExecutor(len(PEERS)) as pool:
        failures = [line for line in pool.map(build, PEERS, PEERS.values()) if line]
    for line in failures:
        print(line, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
