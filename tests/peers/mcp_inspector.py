"""The official MCP Inspector CLI as a third MCP client, for the tests that use it.

``tests/peers/mcp_inspector/`` holds a ``package.json`` pinning
``@modelcontextprotocol/inspector`` to one exact version and the ``package-lock.json`` that
pins the rest. On first use :func:`cli_dir` copies them under ``.peers/`` in the checkout
(``DORAFORGE_PEERS_DIR`` moves it) and runs ``npm ci`` there, once, bounded and under a
file lock so concurrent test processes never install over each other; a stamp with the
digest of both files says the install is complete and current (:mod:`tests.peers.npm`).
The package declares ``node >= 22.19``; the CLI paths used here (Streamable HTTP, ``tools/list``,
``tools/call``) run on the ``node`` 20 that ``make node`` requires, so the install does
not enforce the engine range (the tests that use it would fail if that stopped being so).

:func:`run` drives ``inspector --cli URL --transport http`` as a subprocess that is always
ended, with JSON output (``--format json``), nothing but the payload (``--quiet``) and no
interactive OAuth (``--stored-auth-only``: a 401 ends the run as ``auth_required``). Its
home is a fresh temporary directory, so the Inspector's catalog, storage and secrets never
touch the user's ``~/.mcp-inspector``. The answer is the exit status and both parsed JSON
documents: ``{"result": ...}`` on stdout and the ``{"error": {code, message}}`` envelope on
stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.peers.npm import npm_peer, pinned
from tests.support.processes import run_bounded

SOURCE = Path(__file__).resolve().parent / "mcp_inspector"
PACKAGE = "@modelcontextprotocol/inspector"
RUN_TIMEOUT_S = 120.0
#: The Inspector declares ``node >= 22.19``, which is not enforced (see the docstring).
ENGINES = ("--engine-strict=false",)
#: Every run: JSON out, only the payload, and a 401 ends the run instead of asking for a
#: browser login.
COMMON = ("--format", "json", "--quiet", "--stored-auth-only")
#: The CLI's exit statuses that the tests expect.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_AUTH_REQUIRED = 3
EXIT_TOOL_IS_ERROR = 5
#: Variables of the caller's environment that would point the Inspector at other files.
_FOREIGN = ("MCP_", "INSPECTOR_")


@dataclass(frozen=True)
class Answer:
    """One CLI run: its exit status, stdout's JSON (``{"result": ...}``) and stderr's
    error envelope (``{"error": {"code", "message"}}``), each ``None`` when absent."""

    exit_code: int
    output: dict[str, Any] | None
    error: dict[str, Any] | None

    @property
    def result(self) -> dict[str, Any]:
        """The MCP result the CLI printed (a test failure when it printed none)."""
        assert self.output is not None, self
        assert "result" in self.output, self
        result: dict[str, Any] = self.output["result"]
        return result


def version() -> str:
    """The exact Inspector version ``package.json`` pins (one place names it)."""
    return pinned(SOURCE, PACKAGE)


def list_tools() -> list[str]:
    return ["--method", "tools/list"]


def call_tool(name: str, arguments: Mapping[str, str | int] | None = None) -> list[str]:
    """``tools/call`` with ``--tool-arg key=value`` pairs (the CLI coerces a value to the
    type the tool's input schema names)."""
    pairs = [f"{key}={value}" for key, value in (arguments or {}).items()]
    tool_args = ["--tool-arg", *pairs] if pairs else []
    return ["--method", "tools/call", "--tool-name", name, *tool_args]


def cli_dir() -> Path:
    """The installed Inspector's directory, installed on first use (bounded, locked)."""
    return npm_peer(SOURCE, f"mcp-inspector-{version()}", label="MCP_INSPECTOR", npm_flags=ENGINES)


def executable() -> Path:
    """The installed ``inspector`` launcher (a node script)."""
    return cli_dir() / "node_modules" / ".bin" / "inspector"


def run(
    url: str,
    args: Sequence[str],
    *,
    token: str | None = None,
    exit_code: int = EXIT_OK,
    timeout: float = RUN_TIMEOUT_S,
) -> Answer:
    """``inspector --cli url --transport http`` with ``args``, sending ``token`` as a
    bearer token when given. The CLI (and anything it started) is killed if it outlives
    ``timeout``; an exit status other than ``exit_code``, or no JSON result on a successful
    run, fails the test with the tail of its output."""
    command = ["node", str(executable()), "--cli", url, "--transport", "http", *COMMON]
    if token is not None:
        command += ["--header", f"Authorization: Bearer {token}"]
    command += list(args)
    with tempfile.TemporaryDirectory(prefix="mcp-inspector-home-") as home:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(_FOREIGN) and key not in ("XDG_CONFIG_HOME", "XDG_DATA_HOME")
        }
        env.update(HOME=home, USERPROFILE=home, NO_COLOR="1")
        try:
            finished = run_bounded(command, env=env, cwd=home, timeout=timeout)
        except subprocess.TimeoutExpired as expired:
            raise AssertionError(
                f"the MCP Inspector CLI did not end within {timeout} s and was killed:\n"
                f"{str(expired.output)[-3000:]}\n{str(expired.stderr)[-3000:]}"
            ) from None
    out, err, status = finished.stdout, finished.stderr, finished.returncode
    answer = Answer(status, _json(out), _json(err.strip().splitlines()[-1] if err.strip() else ""))
    if status != exit_code or (exit_code == EXIT_OK and answer.output is None):
        raise AssertionError(
            f"the MCP Inspector CLI exited {status} (expected {exit_code}) for "
            f"{' '.join(args)}:\n{out[-3000:]}\n{err[-3000:]}"
        )
    return answer


def _json(text: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None
