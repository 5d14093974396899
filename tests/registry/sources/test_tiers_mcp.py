"""A tier's Launch is what the official MCP SDK spawns: an SDK stdio server runs in each tier,
its stderr lands in a bounded errlog, and nothing of the registry's environment leaks even
though the SDK merges its default variables in."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextContent

from doraforge.registry.sources.logs import open_errlog
from doraforge.registry.sources.tiers import TIERS, LaunchSpec
from tests.registry.sources.tier_runs import SCRIPT, run_launch, spec_for

CALL_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 10.0

SDK_SERVER = """
import json, os, sys
from mcp.server.fastmcp import FastMCP

print("probe server starting", file=sys.stderr, flush=True)
server = FastMCP("probe")


@server.tool()
def where() -> str:
    return json.dumps({"cwd": os.getcwd(), "env": sorted(os.environ)})


server.run()
"""


@pytest.mark.anyio
@pytest.mark.parametrize("tier", [1, 2], ids=["subprocess", "sandbox"])
async def test_an_sdk_stdio_server_runs_in_each_tier_with_its_stderr_bounded(
    tier: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DORAFORGE_REGISTRY_TOKEN", secrets.token_hex(8))
    spec = spec_for(tmp_path)
    launch = TIERS[tier].launch(spec)
    (spec.workdir / SCRIPT).write_text(SDK_SERVER, encoding="utf-8")
    params = StdioServerParameters(
        command=launch.command, args=launch.args, env=launch.env, cwd=launch.cwd
    )
    errlog = open_errlog(spec.workdir.parent / "stderr.log")

    with anyio.fail_after(CALL_TIMEOUT_S):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("where", {})
    errlog.close()

    assert errlog.wait_drained(DRAIN_TIMEOUT_S)
    assert "probe server starting" in errlog.log.tail()
    content = result.content[0]
    assert isinstance(content, TextContent)
    report = json.loads(content.text)
    assert report["cwd"] == str(spec.workdir)
    assert set(report["env"]) <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR"}


def test_tier_2_runs_a_server_from_a_venv_of_its_own(tmp_path: Path) -> None:
    venv = tmp_path / "server-venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60
    )
    probe = "import sys; print(sys.prefix)"
    spec = LaunchSpec.under(
        tmp_path / "sources", "own-venv", str(venv / "bin" / "python"), ("-c", probe)
    )

    ran = run_launch(TIERS[2].launch(spec))

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == str(venv)


ENV_SERVER = """
import json, os
from mcp.server.fastmcp import FastMCP

server = FastMCP("env")


@server.tool()
def environment() -> str:
    return json.dumps(dict(os.environ))


server.run()
"""
# What the SDK's stdio_client merges into a server's declared environment from its own.
SDK_DEFAULTS = ("HOME", "LOGNAME", "SHELL", "TERM", "USER")


@pytest.mark.anyio
@pytest.mark.parametrize("tier", [1, 2], ids=["subprocess", "sandbox"])
async def test_the_server_sees_none_of_the_registrys_values_the_sdk_merges_in(
    tier: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry_values = {name: f"registry-{name}-{secrets.token_hex(6)}" for name in SDK_DEFAULTS}
    for name, value in registry_values.items():
        monkeypatch.setenv(name, value)
    spec = spec_for(tmp_path)
    launch = TIERS[tier].launch(spec)
    (spec.workdir / SCRIPT).write_text(ENV_SERVER, encoding="utf-8")
    params = StdioServerParameters(
        command=launch.command, args=launch.args, env=launch.env, cwd=launch.cwd
    )

    with anyio.fail_after(CALL_TIMEOUT_S):
        async with (
            stdio_client(params, errlog=sys.stderr) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("environment", {})

    content = result.content[0]
    assert isinstance(content, TextContent)
    env = json.loads(content.text)
    assert not set(registry_values.values()) & set(env.values())
    assert not {"LOGNAME", "SHELL", "TERM", "USER"} & set(env)
    assert env["HOME"] == launch.env["HOME"]
