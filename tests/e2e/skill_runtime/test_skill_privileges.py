"""What a started skill's code can see on real Dora: its hook and nodes get an allowlisted
environment (no registry, operator or Gateway token of the operator's), only its Gateway
node learns where the runtime's token file is, and what they write in the home is 0600."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.dora import node_pids
from doraforge.skill_runtime.dora_run import free_port
from tests.skill_runtime.runtime_support import (
    OPERATOR_TOKEN,
    SKILL,
    assert_nothing_runs,
    make_bundle,
    manager,
    torn_down_home,
)

pytestmark = pytest.mark.e2e

#: What an operator's shell may hold when it starts a skill: none of it is the skill's.
SECRETS = {
    "DORAFORGE_OPERATOR_TOKEN": "operator-secret-0123456789abcdef",
    "DORAFORGE_REGISTRY_TOKEN": "registry-secret-0123456789abcdef",
    "DORAFORGE_GATEWAY_TOKEN": OPERATOR_TOKEN,
    "DORAFORGE_GATEWAY_TOKEN_FILE": "/operator/gateway.token",
    "CLOUD_API_KEY": "cloud-secret-0123456789abcdef",
}
# Writes the hook's whole environment beside the bundle.
ENV_HOOK = '#!/usr/bin/env bash\nenv -0 > "$PAOS_SKILL_ROOT/../hook-env"\n'


@pytest.fixture
def home(tmp_path: Path) -> Iterator[PaosHome]:
    with torn_down_home(tmp_path) as home:
        yield home


def _environment(raw: bytes) -> dict[str, str]:
    pairs = (entry.split(b"=", 1) for entry in raw.split(b"\0") if b"=" in entry)
    return {key.decode(): value.decode(errors="replace") for key, value in pairs}


def _node_environments(dataflow_uuid: str) -> dict[str, dict[str, str]]:
    """Each node process's environment, by its node id (from Dora's node config)."""
    return {
        node_id: _environment(Path(f"/proc/{pid}/environ").read_bytes())
        for node_id, pid in _node_pids(dataflow_uuid).items()
    }


def _node_pids(dataflow_uuid: str) -> dict[str, int]:
    """Each node's process (the innermost one holding Dora's node config), by node id."""
    found = {}
    for pid in sorted(node_pids(dataflow_uuid)):  # a sandboxed node's bwrap comes first
        env = _environment(Path(f"/proc/{pid}/environ").read_bytes())
        node_id = next(
            line.split(":", 1)[1].strip()
            for line in env["DORA_NODE_CONFIG"].splitlines()
            if line.startswith("node_id:")
        )
        found[node_id] = pid
    return found


def _leaks(env: dict[str, str]) -> list[str]:
    """The operator's secrets ``env`` holds, by name or by value."""
    values = set(SECRETS.values())
    return sorted(
        {k for k in env if k in SECRETS and env[k] == SECRETS[k]}
        | {k for k, v in env.items() if v in values}
    )


def test_a_started_skill_hook_and_nodes_see_none_of_the_operators_tokens(
    home: PaosHome,
) -> None:
    bundle = make_bundle(home, gateway_port=free_port(), hook=ENV_HOOK)
    runtime = manager(home, environ={**os.environ, **SECRETS})

    state = runtime.start(SKILL)

    assert state.dataflow_uuid is not None
    hook = _environment((bundle.parent / "hook-env").read_bytes())
    assert _leaks(hook) == []
    assert "DORAFORGE_GATEWAY_TOKEN_FILE" not in hook
    assert hook["PAOS_SKILL_NAME"] == SKILL
    nodes = _node_environments(state.dataflow_uuid)
    assert set(nodes) == {"gateway", "mock"}
    assert {node: _leaks(env) for node, env in nodes.items()} == {"gateway": [], "mock": []}
    # The runtime's own token file reaches the Gateway node, and no other node.
    assert nodes["gateway"]["DORAFORGE_GATEWAY_TOKEN_FILE"] == state.gateway_token_file
    assert "DORAFORGE_GATEWAY_TOKEN_FILE" not in nodes["mock"]
    assert nodes["mock"]["DORAFORGE_LOG_LEVEL"] == "INFO"  # the profile's own environment
    token_file = Path(str(state.gateway_token_file))
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700

    runtime.stop(SKILL)
    assert_nothing_runs(home, state.dataflow_uuid)
    # What the home's processes wrote (Dora's logs, the nodes' logs) is private too.
    assert stat.S_IMODE(home.root.stat().st_mode) == 0o700
    node_logs = [p for p in (home.runtime_dir / "launch" / SKILL / "out").rglob("*") if p.is_file()]
    written = [*(home.runtime_dir / "logs").iterdir(), *node_logs]
    assert node_logs
    assert {str(path): stat.S_IMODE(path.stat().st_mode) for path in written} == {
        str(path): 0o600 for path in written
    }


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (bwrap)")
def test_a_sandboxed_skill_nodes_see_only_their_own_files_of_the_home(home: PaosHome) -> None:
    make_bundle(home, gateway_port=free_port())
    other = home.runtime_dir / "tokens" / "other-skill.token"
    other.parent.mkdir(parents=True)
    other.write_text("another skill's token\n")
    home.store_path.write_bytes(b"")
    runtime = manager(home)

    state = runtime.start(SKILL, sandbox=True)

    assert state.state == "running"  # the Gateway answered with its token, tools ready
    assert state.dataflow_uuid is not None
    token_file = str(state.gateway_token_file)
    seen = {
        node: {
            str(path): Path(f"/proc/{pid}/root{path}").exists()
            for path in (token_file, other, home.store_path, home.skills_dir / SKILL / "current")
        }
        for node, pid in _node_pids(state.dataflow_uuid).items()
    }
    bundle = str(home.skills_dir / SKILL / "current")
    assert seen == {
        "gateway": {token_file: True, str(other): False, str(home.store_path): False, bundle: True},
        "mock": {token_file: False, str(other): False, str(home.store_path): False, bundle: True},
    }

    runtime.stop(SKILL)
    assert_nothing_runs(home, state.dataflow_uuid)
