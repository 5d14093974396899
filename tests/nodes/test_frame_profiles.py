"""Every shipped robot tool says which robot and which frames it addresses, and says it in
the words of the robot profile its provider node actually loads.

A ToolSpec's ``robot_frame_profile`` is what an agent reads (and PAOS freezes into a
binding); the robot profile is what the arm and gripper nodes act on. This walks every
shipped Gateway config beside its dataflow, finds the profile each robot node is started
with (``--profile``; the shipped sim arm when none is given) and requires the two to agree,
so a new robot or bridge cannot ship tools that describe another robot's frames.
"""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from doraforge.gateway.config import load_config
from doraforge.nodes.motion.cli import DEFAULT_PROFILE
from doraforge.nodes.robot.profile import RobotProfile
from doraforge.wire import strict_yaml

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "nodes" / "robot" / "profiles"
ROBOT_MODULES = ("doraforge.nodes.arm", "doraforge.nodes.gripper")


@dataclass(frozen=True)
class Shipped:
    """One Gateway config and the dataflow that starts its providers."""

    gateway: Path
    dataflow: Path
    skill_root: Path | None

    @property
    def label(self) -> str:
        return str(self.gateway.relative_to(ROOT))


def shipped() -> Iterator[Shipped]:
    for gateway in sorted((ROOT / "dataflows").glob("*.gateway.yml")):
        dataflow = gateway.with_name(gateway.name.replace(".gateway.yml", ".yml"))
        if dataflow.is_file():
            yield Shipped(gateway, dataflow, None)
    for gateway in sorted(ROOT.glob("skills/*/profiles/*/gateway.yml")):
        dataflow = gateway.with_name("dataflow.yml")
        if dataflow.is_file():
            yield Shipped(gateway, dataflow, gateway.parents[2])


def flag(args: list[str], name: str) -> str | None:
    for key, value in itertools.pairwise(args):
        if key == name:
            return value
    return None


def resolve_profile(value: str | None, where: Shipped) -> Path:
    if value is None:
        return DEFAULT_PROFILE
    if where.skill_root is not None:
        value = value.replace("${PAOS_SKILL_ROOT}", str(where.skill_root))
    if not value.endswith((".yml", ".yaml")):
        return PROFILES / f"{value}.yml"
    path = Path(value)
    return path if path.is_absolute() else where.dataflow.parent / path


def robot_nodes(where: Shipped) -> dict[str, RobotProfile]:
    """Endpoint id (as the node registers it) -> the profile its node loads, as its
    ``--arm`` sees it (a second arm of a multi-arm profile), for every arm and gripper
    node."""
    document = yaml.safe_load(where.dataflow.read_text(encoding="utf-8"))
    found: dict[str, RobotProfile] = {}
    for node in document["nodes"]:
        args = shlex.split(str(node.get("args", "")))
        if len(args) >= 2 and args[0] == "-m" and args[1] in ROBOT_MODULES:
            profile = frames_of(resolve_profile(flag(args, "--profile"), where))
            served = profile.for_arm(flag(args, "--arm"))
            found[served.endpoint_id(args[1].rsplit(".", 1)[1])] = served
    return found


def frames_of(path: Path) -> RobotProfile:
    """The profile's validated fields without its model file: the hardware template names
    an MJCF the operator supplies."""
    return RobotProfile.model_validate(strict_yaml.load(path.read_text(encoding="utf-8")))


SHIPPED = list(shipped())


def test_the_walk_finds_the_shipped_robot_cells() -> None:
    labels = {where.label for where in SHIPPED}
    assert "dataflows/sim.gateway.yml" in labels
    assert "skills/pick-place/profiles/sim/gateway.yml" in labels
    assert sum(bool(robot_nodes(where)) for where in SHIPPED) >= 3


@pytest.mark.parametrize("where", SHIPPED, ids=lambda where: where.label)
def test_every_robot_tool_carries_the_frames_of_the_profile_its_node_loads(
    where: Shipped,
) -> None:
    nodes = robot_nodes(where)
    config = load_config(where.gateway)
    checked = 0
    for tool in config.tools:
        profile = nodes.get(tool.endpoint_id)
        if profile is None:
            continue
        frames = tool.robot_frame_profile
        assert frames is not None, f"{tool.tool_id} has no robot_frame_profile"
        assert frames.robot_id == profile.robot_id, tool.tool_id
        assert frames.base_frame == profile.base_frame, tool.tool_id
        assert frames.tool_frame == profile.tool_frame, tool.tool_id
        assert dict(frames.frames) == dict(profile.frames), tool.tool_id
        assert dict(frames.directions) == dict(profile.directions), tool.tool_id
        checked += 1
    assert checked == sum(tool.endpoint_id in nodes for tool in config.tools)
