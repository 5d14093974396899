"""doraforge's robot data plane meets forge-robot's contract (``forge_robot`` 2.x validators).

Every ``joint_state`` the simulated world publishes passes ``validate_robot_state_arrow``
for the sim arm's joints, and every ``joint_command`` the real arm and gripper endpoints
publish while they run their tools passes ``validate_robot_control_arrow``; the world's
data plane takes the sparse commands a forge-robot driver would. So a forge-robot driver
node can stand where the world stands, and the world where a driver stands.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import pytest
from forge_msgs import JointCommand, JointState

# forge-robot 2.0 ships no type information (no py.typed).
from forge_robot import (  # type: ignore[import-untyped]
    ActuatorSpec,
    clip_and_validate_command,
    specs_by_name,
    validate_robot_control_arrow,
    validate_robot_state_arrow,
)

from doraforge.nodes.arm import config as arm_config
from doraforge.nodes.arm.endpoint import definition as arm_definition
from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.gripper import config as gripper_config
from doraforge.nodes.gripper.endpoint import definition as gripper_definition
from doraforge.nodes.motion.cli import DEFAULT_PROFILE
from doraforge.nodes.robot.profile import RobotProfile, load_profile
from doraforge.nodes.world.dataplane import WorldDataPlane
from doraforge.nodes.world.simulation import Simulation, SimulationOptions
from doraforge.sim.environment import Environment
from doraforge.sim.render import Cameras
from doraforge.sim.tasks.pick_place import PickPlace
from doraforge.sim.world import World
from tests.nodes.provider_harness import HandlerHarness
from tests.nodes.robot_fakes import FakeRobot, TickTiming
from tests.support.waiting import eventually

pytestmark = pytest.mark.anyio

STATES_TO_CHECK = 20


@pytest.fixture(scope="module")
def profile() -> RobotProfile:
    return load_profile(DEFAULT_PROFILE)


class Outputs:
    """The world node's publish callable: every output, in order, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent: list[tuple[str, Any]] = []

    def __call__(self, output: str, value: Any, metadata: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            self._sent.append((output, value))

    def of(self, output: str) -> list[Any]:
        with self._lock:
            return [value for name, value in self._sent if name == output]


@pytest.fixture
def world() -> Iterator[tuple[WorldDataPlane, Simulation, Outputs]]:
    """The world node's data plane on the real MuJoCo cell, started as the node starts it."""
    options = SimulationOptions(paced=False, camera_hz=5.0, width=64, height=48)
    simulation = Simulation(
        lambda: Environment(World(), PickPlace(), seed=1),
        lambda world: Cameras(world.model, height=options.height, width=options.width),
        options,
    )
    plane, outputs = WorldDataPlane(simulation), Outputs()
    plane.attach(outputs)
    yield plane, simulation, outputs
    plane.close()


class RecordingRobot(FakeRobot):
    """A fake robot that also keeps the exact Arrow value of every command it receives."""

    def __init__(self, names: list[str], start: list[float]) -> None:
        super().__init__(names, start)
        self.raw: list[pa.Array] = []

    def publish(self, output_id: str, value: pa.Array, metadata: Mapping[str, Any] | None) -> None:
        self.raw.append(value)
        super().publish(output_id, value, metadata)


def robot_for(profile: RobotProfile, timing: TickTiming) -> RecordingRobot:
    start = [*profile.home, profile.gripper.joint_for_width.joint_for(profile.gripper.open_width)]
    robot = RecordingRobot(profile.joint_names, start)
    timing.robots.append(robot)
    return robot


async def run(harness: HandlerHarness, operation: str, arguments: dict[str, Any]) -> None:
    invoke = await harness.invoke(operation, arguments)
    assert invoke.payload["outcome"] == "accepted", invoke.payload
    await harness.wait_event(invoke, "executor_completed")
    assert (await harness.result(invoke))["result"]["status"] == "succeeded"


def test_every_world_joint_state_passes_the_forge_robot_state_validator(
    world: tuple[WorldDataPlane, Simulation, Outputs], profile: RobotProfile
) -> None:
    _, _, outputs = world
    eventually(
        lambda: len(outputs.of("joint_state")) >= STATES_TO_CHECK,
        within=20.0,
        what="joint states from the world",
        interval=0.01,
    )
    for value in outputs.of("joint_state"):
        batch = validate_robot_state_arrow(value, profile.joint_names)
        assert JointState.from_arrow(batch).name[: len(profile.joint_names)] == (
            profile.joint_names
        )


def test_the_world_follows_a_sparse_command_clipped_by_forge_robot(
    world: tuple[WorldDataPlane, Simulation, Outputs], profile: RobotProfile
) -> None:
    plane, _, outputs = world
    specs = specs_by_name(
        (ActuatorSpec("shoulder_pan", "revolute", min_position=-2.9, max_position=2.9),)
    )
    command = clip_and_validate_command(
        JointCommand(name=["shoulder_pan", "not_a_joint"], position=[0.3, 9.0]), specs
    )
    assert (list(command.name), list(command.position)) == (["shoulder_pan"], [0.3])
    # What Dora delivers on the world's input: the command's batch as one struct array.
    value = command.to_arrow().to_struct_array()
    validate_robot_control_arrow(value, profile.joint_names)
    eventually(lambda: outputs.of("joint_state"), within=20.0, what="a first joint state")
    plane.on_input("arm_command", value, {})

    def pan() -> float:
        state = JointState.from_arrow(outputs.of("joint_state")[-1])
        return state.position[state.name.index("shoulder_pan")]

    eventually(lambda: abs(pan() - 0.3) < 0.02, within=20.0, what="pan at 0.3", interval=0.01)
    assert plane.rejected == 0


async def test_every_arm_command_passes_the_forge_robot_control_validator(
    profile: RobotProfile,
) -> None:
    timing = TickTiming()
    robot = robot_for(profile, timing)
    built = arm_definition(
        arm_config.from_profile(profile),
        Kinematics(profile),
        timing=timing,
        endpoint_instance_id="ep-arm",
    )
    assert built.data_plane is not None
    robot.connect(built.data_plane)
    robot.report()
    arm = HandlerHarness(built)
    await run(arm, "move_joints", {"positions": {"shoulder_pan": 0.4, "elbow": 1.5}})
    await run(arm, "move_to_pose", {"position": [0.35, 0.05, 0.2]})
    await run(arm, "home", {})
    assert robot.raw, "the arm sent no commands"
    for value in robot.raw:
        batch = validate_robot_control_arrow(
            value, profile.arm_joint_names, strict_extra_columns=True
        )
        assert JointCommand.from_arrow(batch).mode == "position"


async def test_every_gripper_command_passes_the_forge_robot_control_validator(
    profile: RobotProfile,
) -> None:
    timing = TickTiming()
    robot = robot_for(profile, timing)
    built = gripper_definition(
        gripper_config.from_profile(profile), timing=timing, endpoint_instance_id="ep-g"
    )
    assert built.data_plane is not None
    robot.connect(built.data_plane)
    robot.report()
    gripper = HandlerHarness(built)
    await run(gripper, "grasp", {"width": 0.02})
    await run(gripper, "release", {})
    assert robot.raw, "the gripper sent no commands"
    for value in robot.raw:
        validate_robot_control_arrow(value, list(profile.gripper.joints), strict_extra_columns=True)
