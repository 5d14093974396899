"""A skill or dataflow that needs another Dora generation than the installed one is refused
up front, naming both (never a crash inside ``dora start``)."""

from __future__ import annotations

import os
import stat
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome
from doraforge.skill_runtime import dora, dora_generation
from doraforge.skill_runtime.dora_run import free_port
from doraforge.skill_runtime.errors import RuntimeStateError
from tests.paths import PROJECT_ROOT
from tests.skill_runtime.runtime_support import MOCK_DATAFLOW, SKILL, make_bundle, manager

SHIPPED = PROJECT_ROOT / "dataflows"
SKILLS = PROJECT_ROOT / "skills"
EXAMPLES = PROJECT_ROOT / "examples"
ZERO_X = "nodes:\n  - id: a\n    path: a.py\n"
ONE_X = MOCK_DATAFLOW.replace("  - id: gateway\n", "  - id: gateway\n    max_restarts: 5\n", 1)


def fake_dora(tmp_path: Path, version: str) -> str:
    """A ``dora`` that only answers ``--version`` with ``version``."""
    script = tmp_path / "dora"
    script.write_text(f"#!/bin/sh\necho 'dora-cli {version}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.mark.parametrize(
    ("text", "parsed", "generation"),
    [
        ("dora-cli 1.1.0", (1, 1, 0), "1.x"),
        ("dora-cli 0.4.1", (0, 4, 1), "0.x"),
        ("?", None, "unknown"),
    ],
)
def test_versions_and_generations_are_read_from_the_cli_line(
    text: str, parsed: tuple[int, int, int] | None, generation: str
) -> None:
    assert dora_generation.version_tuple(text) == parsed
    assert dora_generation.generation(text) == generation


def test_the_shipped_dataflows_need_dora_1_by_their_restart_fields() -> None:
    for name in ("sim.yml", "mock.yml"):
        refused = dora_generation.refusal(SHIPPED / name, "0.4.1")
        assert refused is not None
        assert "needs Dora 1.x" in refused
        assert "0.4.1 (Dora 0.x)" in refused
        assert "uses max_restarts, a Dora 1.x field" in refused
        assert "pip install 'dora-rs-cli>=1.1,<1.2'" in refused
        assert dora_generation.refusal(SHIPPED / name, "1.1.0") is None


@pytest.mark.parametrize(
    "dataflow",
    sorted(
        [*SHIPPED.glob("*.yml"), *SKILLS.glob("*/profiles/*/dataflow.yml"), *EXAMPLES.glob("*.yml")]
    ),
    ids=lambda path: str(path.relative_to(PROJECT_ROOT)),
)
def test_no_shipped_dataflow_uses_a_form_dora_1_removed(dataflow: Path) -> None:
    if dataflow.name.endswith(".gateway.yml"):
        return  # a Gateway configuration, not a dataflow
    assert dora_generation.refusal(dataflow, "1.1.0") is None


def test_a_dataflow_without_generation_fields_runs_on_either(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yml"
    flow.write_text(ZERO_X)
    assert dora_generation.refusal(flow, "0.4.1") is None
    assert dora_generation.refusal(flow, "1.1.0") is None
    assert dora_generation.refusal(tmp_path / "absent.yml", "1.1.0") is None


def test_restart_policy_alone_runs_on_either_generation(tmp_path: Path) -> None:
    # Dora 0.4.1's Node already has restart_policy (never, on-failure, always).
    flow = tmp_path / "flow.yml"
    flow.write_text(ZERO_X + "    restart_policy: on-failure\n")
    assert dora_generation.refusal(flow, "0.4.1") is None
    assert dora_generation.refusal(flow, "1.1.0") is None


def test_a_1x_dataflow_on_another_generation_says_doraforge_runs_1x(tmp_path: Path) -> None:
    refused = dora_generation.refusal(SHIPPED / "mock.yml", "2.0.0")
    assert refused is not None
    assert "needs Dora 1.x" in refused
    assert "(Dora 2.x)" in refused


#: Dataflows in Dora 0.x's own forms, each with what Dora 1.x refuses and how to rewrite it.
ZERO_X_FORMS = {
    "communication": (
        "communication:\n  _unstable_local: UnixDomain\n" + ZERO_X,
        "the dataflow uses communication",
        "delete the `communication` block",
    ),
    "dataflow-deploy": (
        "_unstable_deploy:\n  machine: A\n" + ZERO_X,
        "the dataflow uses _unstable_deploy",
        "rename `_unstable_deploy` to `deploy`",
    ),
    "node-deploy": (
        ZERO_X + "    _unstable_deploy:\n      machine: A\n",
        "node 'a' uses _unstable_deploy",
        "rename the node's `_unstable_deploy` to `deploy`",
    ),
    "debug": (
        "_unstable_debug:\n  publish_all_messages_to_zenoh: true\n" + ZERO_X,
        "the dataflow uses _unstable_debug",
        "rename `_unstable_debug` to `debug`",
    ),
    "debug-field": (
        "debug:\n  publish_all_messages_to_zenoh: true\n" + ZERO_X,
        "the dataflow's debug uses publish_all_messages_to_zenoh",
        "to `enable_debug_inspection`",
    ),
    "custom": (
        "nodes:\n  - id: a\n    custom:\n      source: python\n      args: a.py\n"
        "      envs: {A: b}\n",
        "node 'a' uses custom",
        "(`custom.envs` becomes `env`)",
    ),
}


@pytest.mark.parametrize("case", sorted(ZERO_X_FORMS))
def test_a_0x_form_is_refused_on_dora_1_naming_the_field_and_its_1x_rewrite(
    tmp_path: Path, case: str
) -> None:
    text, names, rewrite = ZERO_X_FORMS[case]
    flow = tmp_path / "flow.yml"
    flow.write_text(text)
    refused = dora_generation.refusal(flow, "1.1.0")
    assert refused is not None
    assert refused.startswith("flow.yml needs Dora 0.x (")
    assert f"{names}, a Dora 0.x form Dora 1.x removed" in refused
    assert "but the installed dora is 1.1.0 (Dora 1.x)" in refused
    assert rewrite in refused
    assert "\n" not in refused


def test_a_dataflow_of_several_0x_forms_names_the_first_and_counts_the_rest(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yml"
    flow.write_text(
        "communication:\n  _unstable_local: UnixDomain\n" + ZERO_X_FORMS["node-deploy"][0]
    )
    refused = dora_generation.refusal(flow, "1.1.0")
    assert refused is not None
    assert "the dataflow uses communication" in refused
    assert "; 1 more such field)" in refused


def test_a_1x_input_option_is_refused_on_dora_0x_naming_the_input(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yml"
    flow.write_text(ZERO_X + "    inputs:\n      x: {source: b/x, input_timeout: 1.5}\n")
    refused = dora_generation.refusal(flow, "0.4.1")
    assert refused is not None
    assert "node 'a' input 'x' uses input_timeout, a Dora 1.x field" in refused
    assert dora_generation.refusal(flow, "1.1.0") is None


def test_a_dataflow_mixing_both_generations_is_refused_on_each(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yml"
    flow.write_text(ZERO_X_FORMS["node-deploy"][0] + "    max_restarts: 3\n")
    on_one = dora_generation.refusal(flow, "1.1.0")
    on_zero = dora_generation.refusal(flow, "0.4.1")
    assert on_one is not None
    assert "uses _unstable_deploy" in on_one
    assert on_zero is not None
    assert "uses max_restarts" in on_zero


@pytest.mark.parametrize(
    ("first", "second", "talk"),
    [
        ("1.1.0", "1.1.3", True),
        ("1.1.0", "1.0.1", True),
        ("1.1.0", "0.4.1", False),
        ("2.0.0", "1.1.0", False),
        ("0.4.1", "0.4.0", True),
        ("0.4.1", "0.5.0", False),
        ("1.1.0", "not a version", False),
    ],
)
def test_dora_versions_talk_by_dora_own_semver_rule(first: str, second: str, talk: bool) -> None:
    assert dora_generation.compatible(first, second) is talk
    assert dora_generation.compatible(second, first) is talk


def test_a_node_library_of_another_generation_than_the_cli_is_refused_with_the_pin() -> None:
    assert dora_generation.library_refusal("1.1.0", "1.1.0") is None
    assert dora_generation.library_refusal("1.1.0", "1.0.1") is None
    refused = dora_generation.library_refusal("1.1.0", "0.4.1")
    assert refused is not None
    assert "dora-rs 0.4.1 (Dora 0.x) cannot talk to the daemon of the dora CLI 1.1.0" in refused
    assert "failed to deserialize DaemonRequest" in refused
    assert refused.endswith("pip install 'dora-rs==1.1.*'")
    missing = dora_generation.library_refusal("1.1.0", None)
    assert missing is not None
    assert "not installed" in missing


@pytest.fixture
def home(tmp_path: Path) -> PaosHome:
    return PaosHome(tmp_path / "home")


def test_start_refuses_a_1x_skill_on_a_0x_dora_naming_both(home: PaosHome, tmp_path: Path) -> None:
    assert ONE_X != MOCK_DATAFLOW
    make_bundle(home, gateway_port=free_port(), dataflow=ONE_X)
    with pytest.raises(RuntimeStateError) as raised:
        manager(home, dora=fake_dora(tmp_path, "0.4.1")).start(SKILL)
    assert raised.value.code == "SKILL_DORA_GENERATION"
    assert "needs Dora 1.x" in raised.value.message
    assert "0.4.1 (Dora 0.x)" in raised.value.message
    assert raised.value.details["installed"] == "0.4.1"


def test_start_refuses_an_old_dora_for_a_dataflow_without_generation_fields(
    home: PaosHome, tmp_path: Path
) -> None:
    make_bundle(home, gateway_port=free_port())  # its dataflow has no generation field
    with pytest.raises(RuntimeStateError) as raised:
        manager(home, dora=fake_dora(tmp_path, "0.4.1")).start(SKILL)
    assert raised.value.code == "SKILL_PREFLIGHT_FAILED"
    assert "older than 1.1" in raised.value.message
    assert "0.4.1" in raised.value.message


def test_start_refuses_a_0x_skill_on_dora_1_naming_the_rewrite(
    home: PaosHome, tmp_path: Path
) -> None:
    zero_x = MOCK_DATAFLOW.replace(
        "nodes:\n", "communication:\n  _unstable_local: UnixDomain\nnodes:\n", 1
    )
    assert zero_x != MOCK_DATAFLOW
    make_bundle(home, gateway_port=free_port(), dataflow=zero_x)
    with pytest.raises(RuntimeStateError) as raised:
        manager(home, dora=fake_dora(tmp_path, "1.1.0")).start(SKILL)
    assert raised.value.code == "SKILL_DORA_GENERATION"
    assert "needs Dora 0.x (the dataflow uses communication" in raised.value.message
    assert "delete the `communication` block" in raised.value.message


def test_the_node_library_version_is_asked_of_the_nodes_interpreter(tmp_path: Path) -> None:
    assert dora.node_library_version(sys.executable, os.environ) == version("dora-rs")
    silent = tmp_path / "python"
    silent.write_text("#!/bin/sh\nexit 0\n")
    silent.chmod(0o755)
    assert dora.node_library_version(silent, {}) is None
    assert dora.node_library_version(tmp_path / "absent", {}) is None


def test_nodes_whose_dora_rs_cannot_talk_to_the_cli_are_refused_before_dora_starts(
    tmp_path: Path,
) -> None:
    old = tmp_path / "python"
    old.write_text("#!/bin/sh\necho 0.4.1\n")
    old.chmod(0o755)
    with pytest.raises(RuntimeStateError) as raised:
        dora.require_node_library("1.1.0", old, {})
    assert raised.value.code == "SKILL_DORA_GENERATION"
    assert "dora-rs 0.4.1 (Dora 0.x) cannot talk to the daemon of the dora CLI 1.1.0" in (
        raised.value.message
    )
    assert raised.value.details == {"cli": "1.1.0", "node_library": "0.4.1", "python": str(old)}
    dora.require_node_library("1.1.0", sys.executable, os.environ)  # this venv's pair is fine
