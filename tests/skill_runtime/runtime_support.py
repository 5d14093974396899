"""The mock skill the RuntimeManager tests install, and the teardown every test home gets.

The skill runs the project's Gateway and mock provider under the home's own Dora
coordinator (a free port, never 6013). :func:`torn_down_home` stops the home's dataflows,
brings its coordinator down, and fails the test if any node, coordinator or daemon process
outlives it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from doraforge.dataflows import DATAFLOWS
from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.dora import DoraControl, node_pids
from doraforge.skill_runtime.dora_run import dora_binary
from doraforge.skill_runtime.runtime import RuntimeManager
from doraforge.skill_runtime.runtime_state import RuntimeState, all_states, utc_now, write_state
from tests.support.waiting import eventually

DORA_EXIT_TIMEOUT_S = 10.0

SKILL = "mock-skill"
TOOLS = ["mock.echo", "mock.move", "mock.stream"]
OPERATOR_TOKEN = "operator-token-0123456789"


def recorded_state(
    runtime_dir: Path,
    name: str,
    state: str,
    token_file: Path | None = None,
    *,
    gateway_url: str = "http://127.0.0.1:9301",
) -> RuntimeState:
    """Write (and return) a recorded state for ``name`` without starting anything."""
    now = utc_now()
    return write_state(
        runtime_dir,
        RuntimeState(
            name=name,
            version="1.0.0",
            profile="sim",
            state=state,
            runtime_instance_id=f"rt-{name}",
            dataflow_name=name,
            coordinator_port=6100,
            gateway_url=gateway_url,
            gateway_token_file=None if token_file is None else str(token_file),
            started_at=now,
            updated_at=now,
        ),
    )


def make_bundle(
    home: PaosHome,
    *,
    gateway_port: int,
    name: str = SKILL,
    hook: str | None = None,
    required_tools: list[str] | None = None,
    profile: dict[str, Any] | None = None,
    dataflow: str | None = None,
) -> Path:
    """Install a mock skill as ``skills/<name>/current``: the project's Gateway and mock
    provider, with the Gateway config copied into the profile and a free port baked in."""
    bundle = home.skills_dir / name / "current"
    profile_dir = bundle / "profiles" / "mock"
    profile_dir.mkdir(parents=True)
    gateway = yaml.safe_load((DATAFLOWS / "mock.gateway.yml").read_text())
    gateway.update(port=gateway_port, gateway_id=f"test-{gateway_port}")
    (profile_dir / "gateway.yml").write_text(yaml.safe_dump(gateway, sort_keys=False))
    (profile_dir / "dataflow.yml").write_text(dataflow or MOCK_DATAFLOW)
    manifest = {
        "manifest_version": 2,
        "name": name,
        "version": "1.2.3",
        "description": "The mock provider behind the project's Gateway.",
        "gateway_url": f"http://127.0.0.1:{gateway_port}",
        "required_tools": required_tools or TOOLS,
        "profiles": {
            "mock": {
                "dataflow": "profiles/mock/dataflow.yml",
                "startup_timeout_s": 40,
                "environment": {"DORAFORGE_LOG_LEVEL": "INFO"},
                **(profile or {}),
            }
        },
    }
    (bundle / "skill.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (bundle / "SKILL.md").write_text("# mock skill\n")
    if hook is not None:
        (bundle / "start.sh").write_text(hook)
    return bundle


# The Gateway finds its config by a relative path: the launch copy must keep it working.
MOCK_DATAFLOW = """\
nodes:
  - id: gateway
    path: python
    args: -m doraforge.gateway --config gateway.yml
    inputs:
      mock_in: {source: mock/tool_response, queue_size: 4096}
    outputs: [mock_out]
  - id: mock
    path: python
    args: -m doraforge.nodes.mock
    inputs:
      tool_request: {source: gateway/mock_out, queue_size: 4096}
    outputs: [tool_response]
"""

# Writes what the hook saw, so tests can assert on the arguments and the environment.
RECORDING_HOOK = """\
#!/usr/bin/env bash
set -eu
printf '%s\\n' "$1 $2 $PAOS_SKILL_NAME $PAOS_SKILL_VERSION $PAOS_SKILL_PROFILE $PAOS_SKILL_ROOT" \
  > "$PAOS_SKILL_ROOT/../hook-seen"
echo "hook says hello"
exit ${HOOK_EXIT:-0}
"""


# ---------------------------------------------------------------------- teardown


def dora_processes(port: int) -> list[psutil.Process]:
    """Coordinator and daemon processes serving ``port``."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if "dora" in line and (f"--port {port}" in line or f"--coordinator-port {port}" in line):
            found.append(process)
    return found


def _dora_gone(port: int) -> None:
    eventually(
        lambda: not dora_processes(port),
        within=DORA_EXIT_TIMEOUT_S,
        what=f"the Dora services on port {port} to exit",
        detail=lambda: dora_processes(port),
    )


@contextmanager
def torn_down_home(tmp_path: Path) -> Iterator[PaosHome]:
    """A fresh PAOS home whose Dora services and dataflows are always torn down."""
    home = PaosHome(tmp_path / "home")
    try:
        yield home
    finally:
        _tear_down(home, tmp_path)


def _tear_down(home: PaosHome, tmp_path: Path) -> None:
    services = home.runtime_dir / "dora.json"
    if not services.exists():
        return
    port = json.loads(services.read_text())["coordinator_port"]
    dora = DoraControl(dora_binary(), port=port, env=os.environ, log_dir=tmp_path / "teardown")
    uuids = [state.dataflow_uuid for state in all_states(home.runtime_dir) if state.dataflow_uuid]
    for dataflow_uuid in uuids:
        dora.stop(dataflow_uuid, grace_s=2)
    if dora.services_up():  # `dora down` against nothing waits 5 s for a connection
        dora.down()
    leftovers = [pid for u in uuids for pid in node_pids(u)]
    try:
        _dora_gone(port)
    except AssertionError:
        for process in dora_processes(port):
            process.kill()
        pytest.fail(f"Dora services on port {port} outlived the test")
    assert leftovers == [], "node processes outlived the test"


def manager(home: PaosHome, **kwargs: Any) -> RuntimeManager:
    return RuntimeManager(home, stop_grace_s=3.0, **kwargs)


def assert_nothing_runs(home: PaosHome, dataflow_uuid: str | None) -> None:
    """No node of the dataflow and no Dora service of the home is alive."""
    if dataflow_uuid is not None:
        assert node_pids(dataflow_uuid) == []
    services = home.runtime_dir / "dora.json"
    if services.exists():
        _dora_gone(json.loads(services.read_text())["coordinator_port"])
