"""Bind addresses: what the Gateway and ``doraforge serve`` do when asked to listen off
loopback, on real processes (the wildcard-bound Gateway under ``dora run`` is in
``tests/e2e/security/test_bind_wildcard_gateway.py``).

Without a token a non-loopback bind must not start at all: the Gateway's node exits 2 with
one line before it touches Dora, ``doraforge serve`` exits 1 with one line before it binds.
With a token, or with the explicit insecure switch (which warns), they start, and the Host
and Origin checks stay on whatever the bind: a wildcard bind still names only the loopback
names, so a rebinding ``Host`` is refused there too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from doraforge.wire.tokens import write_token
from tests.paths import PROJECT_ROOT
from tests.security.attack_peers import gateway_config
from tests.security.attack_support import (
    ACCEPT_MCP,
    JSON,
    WILDCARD_ROWS,
    Headers,
    exchange,
)
from tests.support.live_server import (
    ServeProcess,
    serve_command,
    serve_environment,
    serve_process,
)

NON_LOOPBACK_BINDS = {
    "ipv4-wildcard": "0.0.0.0",
    "ipv6-wildcard": "::",
    "lan-address": "192.168.1.50",
}
RUN_TIMEOUT_S = 60.0
TOKEN_HINT = "needs a bearer token"


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines}"
    assert "Traceback" not in stderr
    return lines[0]


# ------------------------------------------------------------------------ Gateway


def run_gateway_node(
    config: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m doraforge.gateway --config config`` outside any dataflow."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DORAFORGE_GATEWAY")}
    return subprocess.run(
        [sys.executable, "-m", "doraforge.gateway", "--config", str(config)],
        cwd=PROJECT_ROOT,
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


@pytest.mark.parametrize("bind", list(NON_LOOPBACK_BINDS))
def test_a_gateway_bound_off_loopback_without_a_token_exits_2_with_one_line(
    tmp_path: Path, bind: str
) -> None:
    done = run_gateway_node(gateway_config(tmp_path, NON_LOOPBACK_BINDS[bind]))
    assert done.returncode == 2, done
    line = _one_line(done.stderr)
    assert line.startswith("doraforge-gateway: binding ")
    assert TOKEN_HINT in line


def test_a_gateway_token_file_readable_by_others_exits_2_with_one_line(tmp_path: Path) -> None:
    token = tmp_path / "gateway.token"
    write_token(token)
    token.chmod(0o644)
    config = gateway_config(tmp_path, "0.0.0.0")
    done = run_gateway_node(config, {"DORAFORGE_GATEWAY_TOKEN_FILE": str(token)})
    assert done.returncode == 2, done
    assert "chmod 600" in _one_line(done.stderr)


def test_a_gateway_token_shorter_than_16_characters_exits_2_with_one_line(
    tmp_path: Path,
) -> None:
    config = gateway_config(tmp_path, "127.0.0.1", token_env="ATTACK_SHORT_TOKEN")
    done = run_gateway_node(config, {"ATTACK_SHORT_TOKEN": "short"})
    assert done.returncode == 2, done
    assert "at least 16 characters" in _one_line(done.stderr)


# ------------------------------------------------------------------ doraforge serve


def run_serve(
    home: Path, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``doraforge serve`` that is expected to refuse, run to its exit."""
    return subprocess.run(
        serve_command(home, *options),
        cwd=PROJECT_ROOT,
        env=serve_environment(env),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


@pytest.mark.parametrize("bind", list(NON_LOOPBACK_BINDS))
def test_serve_bound_off_loopback_without_a_token_refuses_with_one_line(
    tmp_path: Path, bind: str
) -> None:
    done = run_serve(tmp_path / "home", "--host", NON_LOOPBACK_BINDS[bind], "--mcp")
    assert done.returncode == 1, done
    assert TOKEN_HINT in _one_line(done.stderr)
    assert "listening" not in done.stdout


def test_serve_with_a_token_file_readable_by_others_refuses_with_one_line(tmp_path: Path) -> None:
    token = tmp_path / "serve.token"
    write_token(token)
    token.chmod(0o640)
    done = run_serve(tmp_path / "home", "--token-file", str(token))
    assert done.returncode == 1, done
    assert "chmod 600" in _one_line(done.stderr)
    assert "listening" not in done.stdout


def test_serve_with_an_unset_token_variable_refuses_with_one_line(tmp_path: Path) -> None:
    done = run_serve(tmp_path / "home", "--token-env", "ATTACK_UNSET_TOKEN_VARIABLE")
    assert done.returncode == 1, done
    assert "ATTACK_UNSET_TOKEN_VARIABLE" in _one_line(done.stderr)


@pytest.fixture(scope="module")
def insecure_wildcard_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    directory = tmp_path_factory.mktemp("serve-insecure")
    with serve_process(directory, "--host", "0.0.0.0", "--insecure", "--mcp") as running:
        yield running


@pytest.fixture(scope="module")
def locked_wildcard_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    directory = tmp_path_factory.mktemp("serve-locked-wildcard")
    token = write_token(directory / "serve.token")
    options = ("--host", "0.0.0.0", "--token-file", str(directory / "serve.token"), "--mcp")
    with serve_process(directory, *options, token=token) as running:
        yield running


def test_serve_insecure_on_a_wildcard_starts_and_warns(
    insecure_wildcard_serve: ServeProcess,
) -> None:
    assert insecure_wildcard_serve.bound == "0.0.0.0"
    assert "INSECURE" in insecure_wildcard_serve.errors()
    answer = exchange(insecure_wildcard_serve.port, "GET", "/api/tools")
    assert answer.status == 200, answer


@pytest.mark.parametrize(("host", "headers", "code"), WILDCARD_ROWS)
def test_serve_on_a_wildcard_keeps_the_host_and_origin_checks(
    insecure_wildcard_serve: ServeProcess, host: str, headers: Headers, code: str | None
) -> None:
    port = insecure_wildcard_serve.port
    answer = exchange(port, "GET", "/api/tools", headers=headers, hosts=[host.format(port=port)])
    expected = (200, None) if code is None else (403, code)
    assert (answer.status, answer.code) == expected, answer
    assert (b'"tools"' in answer.body) == (code is None)


@pytest.mark.parametrize(
    ("authorise", "status", "code"),
    [
        pytest.param(False, 401, "AUTH_REQUIRED", id="no-token"),
        pytest.param(True, 200, None, id="token-passes"),
    ],
)
def test_serve_on_a_wildcard_with_a_token_file_needs_the_token(
    locked_wildcard_serve: ServeProcess, authorise: bool, status: int, code: str | None
) -> None:
    headers = locked_wildcard_serve.bearer() if authorise else ()
    answer = exchange(locked_wildcard_serve.port, "GET", "/api/tools", headers=headers)
    assert (answer.status, answer.code) == (status, code), answer


def test_mcp_is_off_until_enabled_and_the_manifest_says_so(tmp_path: Path) -> None:
    listing = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    with serve_process(tmp_path) as server:
        refused = exchange(server.port, "POST", "/mcp", headers=(JSON, ACCEPT_MCP), body=listing)
        manifest = exchange(server.port, "GET", "/api/agent-context/manifest")
    assert (refused.status, refused.code) == (403, "MCP_DISABLED"), refused
    assert b'"tools"' not in refused.body
    assert manifest.status == 200, manifest
    assert manifest.json()["enabled"] is False
