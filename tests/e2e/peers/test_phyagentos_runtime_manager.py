"""PhyAgentOS 1.1.1's own RuntimeManager runs a bundle doraforge packed, on dora-rs 1.1.

A user's path, every step a real part: ``doraforge skill pack`` a copy of pick-place,
PhyAgentOS's ``SkillInstaller`` installs it, ``paos skill start pick-place --profile sim``
starts it (PhyAgentOS's ``dora check``, ``dora up``, ``dora start --name``), PhyAgentOS's
``ForgeToolClient`` lists the tools, runs the bound Queries ``world.scene_state`` and
``arm.state`` and the Action ``arm.home`` to ``succeeded``, ``paos skill stop`` ends the
dataflow, and psutil sees every node (the Gateway among them) gone, then the coordinator
and daemon after ``dora down``.

How the run is kept apart from every other Dora and Gateway on the machine:

* PhyAgentOS passes no address flag to any ``dora`` command, but hands each one its own
  environment, and dora 1.1 reads ``DORA_COORDINATOR_PORT`` in all of them; ``dora up``
  gives it to the coordinator and daemon it spawns. The test gives PhyAgentOS a free port
  there and its own ``HOME`` (``dora up``'s coordinator store ``~/.dora/coordinator.redb``,
  PhyAgentOS's ``~/.PhyAgentOS``, and the Gateway's journal all live under it).
* ``dora up`` starts its daemon without ``--local-listen-port``, so it always binds 53291,
  and nothing PhyAgentOS passes through changes that. Tests that let PhyAgentOS run
  ``dora up`` therefore hold a file lock in this checkout's pytest cache and check the port
  is free first, failing (not skipping) with the holder named (:mod:`.paos_dora`).
* The shipped skill fixes its Gateway at 9201 in ``skill.yaml`` (the address PhyAgentOS
  polls) and in the profiles; the test packs a copy on a free port
  (:mod:`tests.support.skill_copies`).
* PhyAgentOS's stop is ``dora stop --name`` and, as its CLI says, leaves the shared Dora
  services up; the test checks exactly that, then ``dora down`` on its private port (which
  dora refuses while a dataflow still runs) and checks that nothing of the run is left.

The token: PhyAgentOS never writes doraforge's per-start Gateway token file
(``DORAFORGE_GATEWAY_TOKEN_FILE``), so the skill's loopback Gateway serves without one, as
doraforge's bind policy allows for loopback, and warns so at the profile's WARNING level;
its Host guard still turns a rebinding ``Host`` away.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from doraforge.skill_runtime.dora_run import dora_environment, free_port
from doraforge.skill_runtime.manifest import load_manifest
from tests.e2e.peers.paos_dora import (
    DAEMON_LISTEN_PORT,
    GONE_WITHIN_S,
    PaosDora,
    alive,
    daemon_port_lock,
    require_free,
)
from tests.paths import PROJECT_ROOT
from tests.peers import phyagentos
from tests.support.skill_copies import doraforge_pack, skill_on_port
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(360)]

SKILL = "pick-place"
PICK_PLACE = PROJECT_ROOT / "skills" / SKILL
START_TIMEOUT_S = 180.0
NODE_MODULES = {
    "doraforge.gateway",
    "doraforge.nodes.world",
    "doraforge.nodes.arm",
    "doraforge.nodes.gripper",
    "doraforge.nodes.camera",
}
#: Variables of the caller that would reach the skill's nodes through ``dora up``'s daemon
#: and point them elsewhere: another Dora, a Gateway token or port, a shared state folder.
FOREIGN = ("DORA_", "DORAFORGE_GATEWAY_", "XDG_")

INSTALL = """
import json, os
from pathlib import Path
from PhyAgentOS.skill_runtime.installer import SkillInstaller
installed = SkillInstaller().install(Path(os.environ["ARCHIVE"]))
print(json.dumps({"name": installed.name, "gateway_url": installed.gateway_url}))
"""

#: PhyAgentOS's manager reconciles the started runtime; its ForgeToolClient then drives the
#: Gateway at the URL the manager recorded, and reads the Action's outcome as its
#: AgentTaskCoordinator does (``_tool_status``).
CLIENT = """
import asyncio, json, time
from PhyAgentOS.forge.task import _tool_status
from PhyAgentOS.forge.tool_client import ForgeToolClient
from PhyAgentOS.skill_runtime.manager import RuntimeManager

async def finished(client, invocation_id, within_s=90.0):
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        answer = await client.invocation_result(invocation_id)
        if answer["data"].get("status") == "available":
            return answer
        await asyncio.sleep(0.05)
    raise SystemExit(f"{invocation_id} has no result after {within_s} s")

async def main():
    report = RuntimeManager().status("pick-place")
    state = report.state
    async with ForgeToolClient(state.gateway_url, timeout_s=10) as client:
        tools = await client.list_tools()
        scene = await client.invoke_query_tool("world.scene_state", {})
        started = await client.invoke_action("arm.home", {}, caller_id="paos-runtime-e2e")
        done = await finished(client, started["data"]["invocation_id"])
        arm = await client.invoke_query_tool("arm.state", {})
    print(json.dumps({
        "status": state.status,
        "ready": report.ready,
        "flow_running": report.flow_running,
        "contexts": report.tool_contexts,
        "recorded_identity": state.gateway_identity,
        "identity": tools["data"]["gateway_identity"],
        "tool_ids": [tool["tool_id"] for tool in tools["data"]["tools"]],
        "scene": scene["data"]["response"],
        "home_phase": started["data"]["phase"],
        "home_status": _tool_status(done, default="unknown"),
        "home": done["data"]["result"],
        "arm": arm["data"]["response"],
    }))

asyncio.run(main())
"""

STATUS = """
import json
from PhyAgentOS.skill_runtime.manager import RuntimeManager
report = RuntimeManager().status("pick-place")
print(json.dumps({"status": report.state.status, "flow_running": report.flow_running,
                  "gateway_ready": report.gateway_ready}))
"""


def _peer_environment(home: Path, coordinator_port: int) -> dict[str, str]:
    """What PhyAgentOS runs with: doraforge's interpreter and ``dora`` first on PATH (so
    ``path: python`` nodes run in doraforge's venv), a private coordinator port and HOME."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN)}
    return dora_environment(base, HOME=str(home), DORA_COORDINATOR_PORT=str(coordinator_port))


def _paos(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``paos skill ARGS...`` of the PhyAgentOS venv, with exactly ``env``."""
    return subprocess.run(
        [str(phyagentos.python().with_name("paos")), "skill", *args],
        env=env,
        cwd=env["HOME"],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )


def _logs(home: Path) -> str:
    """PhyAgentOS's lifecycle and ``dora`` logs and the Gateway's node log, for a failure."""
    paths = sorted((home / ".PhyAgentOS" / "logs" / "skills").glob("*.log"))
    text = "".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in paths)
    return text + "--- gateway\n" + "\n".join(_gateway_log(home)[-20:])


def _gateway_log(home: Path) -> list[str]:
    """The Gateway node's log lines, from the ``out/`` of the daemon PhyAgentOS started
    (its working directory is the launch folder PhyAgentOS rendered)."""
    launch = home / ".PhyAgentOS/forge_runtime/environments" / SKILL / "sim/current/launch"
    lines = []
    for path in sorted(launch.glob("profiles/sim/out/*/log_gateway.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):  # a line Dora is still writing
                lines.append(str(json.loads(line).get("msg", "")))
    return lines


def _nodes_by_module(dora: PaosDora) -> dict[str, psutil.Process]:
    """The daemon's node processes by the ``-m`` module each runs."""
    found = {}
    for node in dora.nodes():
        argv = node.cmdline()
        found[argv[argv.index("-m") + 1] if "-m" in argv else " ".join(argv)] = node
    return found


def _listens(process: psutil.Process) -> set[tuple[str, int]]:
    return {
        (c.laddr.ip, c.laddr.port)
        for c in process.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN
    }


def _peer(script: str, env: dict[str, str], **more: str) -> Any:
    """``script`` in PhyAgentOS's venv with ``env`` and ``more`` over this environment."""
    return phyagentos.run(script, **env, **more)  # type: ignore[arg-type]  # names only


def _lock_dir(config: pytest.Config) -> Path:
    """This checkout's pytest cache (``.pytest_cache/d/dora-up``), also without its plugin."""
    cache: pytest.Cache | None = getattr(config, "cache", None)
    return cache.mkdir("dora-up") if cache else PROJECT_ROOT / ".pytest_cache" / "d" / "dora-up"


def test_phyagentos_starts_drives_and_stops_a_doraforge_bundle_on_a_private_dora(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    gateway_port, coordinator_port = free_port(), free_port()
    url = f"http://127.0.0.1:{gateway_port}"
    archive = tmp_path / f"{SKILL}.tar.gz"
    doraforge_pack(skill_on_port(PICK_PLACE, tmp_path / "source" / SKILL, gateway_port), archive)
    home = tmp_path / "home"
    home.mkdir()
    env = _peer_environment(home, coordinator_port)
    assert _peer(INSTALL, env, ARCHIVE=str(archive)) == {"name": SKILL, "gateway_url": url}

    seen: list[psutil.Process] = []
    with daemon_port_lock(_lock_dir(pytestconfig)):
        require_free(DAEMON_LISTEN_PORT, "PhyAgentOS's `dora up` (its daemon)")
        require_free(coordinator_port, "PhyAgentOS's `dora up` (its coordinator)")
        require_free(gateway_port, "the skill's Gateway")
        dora = PaosDora(env, coordinator_port, since=time.time())
        try:
            _start_drive_stop(env, home, dora, url, seen)
        finally:
            dora.end(seen)


def _start_drive_stop(
    env: dict[str, str], home: Path, dora: PaosDora, url: str, seen: list[psutil.Process]
) -> None:
    started = _paos(env, "start", SKILL, "--profile", "sim")
    assert started.returncode == 0, f"{started.stdout}{started.stderr}\n{_logs(home)}"
    assert f"Skill {SKILL} is running (profile=sim" in started.stdout
    nodes = _nodes_by_module(dora)
    seen.extend([*dora.coordinator(), *dora.daemon(), *nodes.values()])
    # PhyAgentOS's `dora up` started one coordinator on the private port and one daemon.
    assert (len(dora.coordinator()), len(dora.daemon())) == (1, 1), seen
    assert set(nodes) == NODE_MODULES
    gateway = nodes["doraforge.gateway"]
    assert ("127.0.0.1", int(url.rsplit(":", 1)[1])) in _listens(gateway)
    # PhyAgentOS rendered its identity into the node; no doraforge token file came with it.
    environ = gateway.environ()
    assert (environ["PAOS_SKILL_NAME"], environ["HOME"]) == (SKILL, str(home))
    assert "DORAFORGE_GATEWAY_TOKEN_FILE" not in environ

    _check_forge_tool_api(env, url)
    _check_gateway_without_token(home, url)

    stopped = _paos(env, "stop", SKILL)
    assert stopped.returncode == 0, f"{stopped.stdout}{stopped.stderr}\n{_logs(home)}"
    assert f"Skill {SKILL} is stopped" in stopped.stdout
    _gone, left = psutil.wait_procs(list(nodes.values()), timeout=GONE_WITHIN_S)
    assert not [p for p in left if alive(p)], f"nodes outlive paos skill stop: {left}"
    assert dora.nodes() == []
    # As PhyAgentOS's stop promises: the dataflow ends, the shared Dora services stay.
    assert (len(dora.coordinator()), len(dora.daemon())) == (1, 1)
    after = _peer(STATUS, env)
    assert after == {"status": "stopped", "flow_running": False, "gateway_ready": False}

    down = dora.down()  # refused by dora while any dataflow still runs
    assert down.returncode == 0, down.stdout + down.stderr
    eventually(lambda: not dora.services(), within=GONE_WITHIN_S, what="Dora services to end")
    assert not [p for p in seen if alive(p)]


def _check_forge_tool_api(env: dict[str, str], url: str) -> None:
    seen = _peer(CLIENT, env)
    assert (seen["status"], seen["ready"], seen["flow_running"]) == ("running", True, True)
    required = load_manifest(PICK_PLACE).required_tools
    assert seen["contexts"] == dict.fromkeys(required, True)
    # The manager recorded the Gateway's own string identity, not a hash of the snapshot.
    assert seen["identity"].startswith("gwinst-")
    assert seen["recorded_identity"] == seen["identity"]
    assert set(required) <= set(seen["tool_ids"])
    assert seen["scene"]["outcome"] == "completed"
    assert seen["scene"]["result"]["status"] == "succeeded"
    cube = seen["scene"]["result"]["outputs"]["objects"]["cube"]["position"]
    assert [type(x) for x in cube] == [float, float, float]
    assert seen["home_phase"] in {"accepted", "dispatching", "running"}
    assert seen["home_status"] == "succeeded", seen["home"]
    assert seen["arm"]["outcome"] == "completed"
    assert seen["arm"]["result"]["status"] == "succeeded"
    arm = seen["arm"]["result"]["outputs"]
    assert arm["moving"] is False
    assert set(arm["joints"]) == set(seen["home"]["outputs"]["joints"])


def _check_gateway_without_token(home: Path, url: str) -> None:
    # No token file was handed to this start: loopback callers need none ...
    assert httpx.get(f"{url}/tools", timeout=10).status_code == 200
    # ... the guard still refuses a rebinding Host ...
    rebound = httpx.get(f"{url}/tools", headers={"Host": "rebind.example"}, timeout=10)
    assert rebound.status_code == 403
    assert rebound.json()["error"]["code"] == "FORGE_TOOL_HOST_NOT_ALLOWED"
    # ... and the Gateway said so, at the WARNING level the sim profile runs it at.
    notice = "gateway pick-place-sim: no bearer token, so any local process may call it"
    eventually(
        lambda: any(notice in line for line in _gateway_log(home)),
        within=GONE_WITHIN_S,
        what="the Gateway's no-token warning",
        detail=lambda: _gateway_log(home)[-10:],
    )
