"""The table of ToolEndpoint providers the conformance suite runs over, with their backings.

A provider is whatever a node builds into an ``EndpointDefinition`` (``grep
EndpointDefinition(``): the arm and gripper (``nodes.motion`` stacks), the camera, the
world and the scriptable mock. Each row says how to build the provider on a cheap but real
backing, which schema-valid arguments each operation takes, which calls stand for its
Query, Action and Session, and, where a provider legitimately differs, the expected
behaviour with the reason beside it. Nothing in the table skips a check.

Backings: the arm and gripper drive :class:`tests.nodes.robot_fakes.FakeRobot` on fake
time; the camera reads frames the real MuJoCo world rendered; the world is the real
MuJoCo cell stepping in its physics thread (paced, small cameras: cheap); the mock has
none.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from doraforge.gateway.config import GatewayConfig, ToolSpecConfig, load_config
from doraforge.nodes.arm import config as arm_config
from doraforge.nodes.arm.endpoint import definition as arm_definition
from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.camera.endpoint import definition as camera_definition
from doraforge.nodes.definition import EndpointDefinition
from doraforge.nodes.gripper import config as gripper_config
from doraforge.nodes.gripper.endpoint import definition as gripper_definition
from doraforge.nodes.mock.endpoint import definition as mock_definition
from doraforge.nodes.robot.profile import RobotProfile, load_profile
from doraforge.nodes.world.dataplane import WorldDataPlane
from doraforge.nodes.world.endpoint import DESCRIPTOR as WORLD
from doraforge.nodes.world.endpoint import ResetAction, SceneStateQuery, world_status
from doraforge.nodes.world.simulation import ResetDone, Simulation, SimulationOptions
from doraforge.sim.environment import Environment
from doraforge.sim.render import Cameras
from doraforge.sim.tasks.pick_place import PickPlace
from doraforge.sim.world import World
from tests.nodes.provider_harness import FakeTiming
from tests.nodes.robot_fakes import FakeRobot, TickTiming
from tests.support.clock import FakeClock
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[3]
#: Every Gateway configuration the repository ships: dataflows and skill profiles.
GATEWAY_CONFIGS = tuple(
    sorted([*ROOT.glob("dataflows/*.gateway.yml"), *ROOT.glob("skills/*/profiles/*/gateway.yml")])
)
SHIPPED_PROFILES = tuple(sorted((ROOT / "nodes" / "robot" / "profiles").glob("*.yml")))
WORLD_WAIT_S = 20.0  # first MuJoCo load and render on a loaded machine


@dataclass
class Backed:
    """One provider built on its backing.

    ``back()`` makes the backing speak (the robot reports, frames arrive); ``fingerprint()``
    is the provider's observable state that a refused call must leave unchanged.
    """

    definition: EndpointDefinition
    back: Callable[[], None]
    fingerprint: Callable[[], object]


@dataclass(frozen=True)
class Unbacked:
    """What the provider answers before its backing has said anything.

    ``query_code`` is the failed Query's error code (``None``: the Query succeeds, there is
    no backing), ``retryable`` that error's flag, ``state`` the health snapshot's state.
    """

    query_code: str | None
    retryable: bool
    state: str


@dataclass(frozen=True)
class ProviderCase:
    """One provider row of the suite."""

    name: str
    endpoint_id: str
    robot_id: str | None  # the robot its ToolSpecs name (frames); None: no robot
    build: Callable[[SharedWorld], Backed]
    unbacked_definition: Callable[[], EndpointDefinition]
    arguments: Mapping[str, dict[str, Any]]  # schema-valid arguments of every operation
    query: str
    action: str | None  # None: the provider has no Action (say why in the row)
    session: str | None = None
    volatile_outputs: frozenset[str] = frozenset()  # may differ between two identical asks
    frames_required: frozenset[str] = frozenset()  # operations whose ToolSpecs name frames
    #: Schema violations the provider accepts on purpose, ``(operation, violation)`` -> why.
    #: The Gateway refuses them first; each must still be one the suite generates.
    lenient: Mapping[tuple[str, str], str] = field(default_factory=dict)
    unbacked: Unbacked = field(default=Unbacked(None, False, "ready"))

    def __str__(self) -> str:
        return self.name


# ---------------------------------------------------------------- the Gateway's ToolSpecs


@functools.cache
def loaded_configs() -> tuple[tuple[Path, GatewayConfig], ...]:
    return tuple((path, load_config(path)) for path in GATEWAY_CONFIGS)


def configs_routing(case: ProviderCase) -> list[tuple[Path, GatewayConfig]]:
    """Every shipped Gateway config that routes the case's endpoint for the case's robot."""
    return [
        (path, config)
        for path, config in loaded_configs()
        if any(route.endpoint_id == case.endpoint_id for route in config.providers)
        and (case.robot_id is None or case.robot_id in robots_named(config, case.endpoint_id))
    ]


def robots_named(config: GatewayConfig, endpoint_id: str) -> set[str]:
    """The ``robot_id`` of every frame profile on ``endpoint_id``'s tools in ``config``."""
    return {
        tool.robot_frame_profile.robot_id
        for tool in config.tools
        if tool.endpoint_id == endpoint_id and tool.robot_frame_profile is not None
    }


def tool_for(config: GatewayConfig, endpoint_id: str, operation: str) -> ToolSpecConfig | None:
    return next(
        (t for t in config.tools if (t.endpoint_id, t.operation) == (endpoint_id, operation)),
        None,
    )


@functools.cache
def shipped_profiles() -> dict[str, RobotProfile]:
    """The shipped robot profiles by ``robot_id``."""
    profiles = [load_profile(path) for path in SHIPPED_PROFILES]
    return {profile.robot_id: profile for profile in profiles}


def served_profiles(endpoint_id: str) -> list[RobotProfile]:
    """Shipped profiles some shipped Gateway config serves ``endpoint_id`` for."""
    named = set().union(*(robots_named(config, endpoint_id) for _, config in loaded_configs()))
    return [prof for robot_id, prof in sorted(shipped_profiles().items()) if robot_id in named]


# ---------------------------------------------------------------- the shared MuJoCo cell


class CountingSimulation(Simulation):
    """The world's simulation, counting the resets its endpoint asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.resets_requested = 0

    def request_reset(self, seed: int | None, done: ResetDone) -> None:
        self.resets_requested += 1
        super().request_reset(seed, done)


def new_simulation() -> CountingSimulation:
    """The world node's simulation as ``nodes.world.__main__`` builds it, small and paced."""
    options = SimulationOptions(paced=True, camera_hz=5.0, width=64, height=48)
    return CountingSimulation(
        lambda: Environment(World(), PickPlace(), seed=1),
        lambda world: Cameras(world.model, height=options.height, width=options.width),
        options,
    )


def world_definition(simulation: Simulation, plane: WorldDataPlane) -> EndpointDefinition:
    """The world endpoint exactly as ``nodes.world.__main__.main`` assembles it."""
    return EndpointDefinition(
        descriptor=WORLD,
        operations={"scene_state": SceneStateQuery(simulation), "reset": ResetAction(simulation)},
        status=lambda: world_status(simulation),
        data_plane=plane,
    )


class SharedWorld:
    """One running MuJoCo cell for the whole module: the world's backing and the camera's
    frame source. Keeps the newest frame of every camera output (thread-safe)."""

    def __init__(self) -> None:
        self.simulation = new_simulation()
        self.plane = WorldDataPlane(self.simulation)
        self._lock = threading.Lock()
        self._frames: dict[str, tuple[pa.Array, dict[str, Any]]] = {}
        self.plane.attach(self._publish)

    def _publish(self, output: str, value: Any, metadata: Mapping[str, Any] | None) -> None:
        if output.startswith("image_"):
            with self._lock:
                self._frames[output] = (value, dict(metadata or {}))

    def frames(self, outputs: tuple[str, ...]) -> dict[str, tuple[pa.Array, dict[str, Any]]]:
        """The newest frame of each of ``outputs``, waiting (bounded) until all have one."""

        def all_there() -> dict[str, tuple[pa.Array, dict[str, Any]]] | None:
            with self._lock:
                return dict(self._frames) if set(outputs) <= set(self._frames) else None

        found = eventually(
            all_there, within=WORLD_WAIT_S, what=f"frames on {outputs}", detail=self.health
        )
        assert found is not None
        return found

    def stepped(self) -> None:
        eventually(
            self.simulation.snapshot,
            within=WORLD_WAIT_S,
            what="a first physics step",
            detail=self.health,
        )

    def health(self) -> str:
        """Why the cell may be silent: divergence (a model that failed to load) and counters."""
        return f"diverged={self.simulation.diverged!r} stats={self.simulation.stats}"

    def close(self) -> None:
        self.plane.close()


# ---------------------------------------------------------------- backings


@functools.cache
def kinematics(robot_id: str) -> Kinematics:
    """One IK model per robot: loading it is the costly part of building an arm."""
    return Kinematics(shipped_profiles()[robot_id])


def robot_on(definition: EndpointDefinition, timing: TickTiming, prof: RobotProfile) -> Backed:
    """A motion provider on a fake robot that starts at the profile's home, gripper open."""
    opened = prof.gripper.joint_for_width.joint_for(prof.gripper.open_width)
    robot = FakeRobot(prof.joint_names, [*prof.home, opened])
    timing.robots.append(robot)
    assert definition.data_plane is not None
    robot.connect(definition.data_plane)
    return Backed(
        definition, back=robot.report, fingerprint=lambda: (len(robot.commands), *robot.target)
    )


def arm_provider(prof: RobotProfile, timing: TickTiming | None = None) -> EndpointDefinition:
    config = arm_config.from_profile(prof)
    return arm_definition(config, kinematics(prof.robot_id), timing=timing or TickTiming())


def gripper_provider(prof: RobotProfile, timing: TickTiming | None = None) -> EndpointDefinition:
    return gripper_definition(gripper_config.from_profile(prof), timing=timing or TickTiming())


def motion_case(
    endpoint_id: str,
    prof: RobotProfile,
    provider: Callable[[RobotProfile, TickTiming | None], EndpointDefinition],
    **row: Any,
) -> ProviderCase:
    """A motion provider's row on one robot profile, backed by a fake robot."""

    def build(_: SharedWorld) -> Backed:
        timing = TickTiming()
        return robot_on(provider(prof, timing), timing, prof)

    return ProviderCase(
        name=f"{endpoint_id}-{prof.robot_id}",
        endpoint_id=endpoint_id,
        robot_id=prof.robot_id,
        build=build,
        unbacked_definition=lambda: provider(prof, None),
        **row,
    )


def nudged_joint(prof: RobotProfile) -> dict[str, float]:
    """The first arm joint 0.1 rad from home, toward the inside of its limits."""
    joint, home = prof.arm_joints[0], prof.home[0]
    return {joint.name: home + 0.1 if home + 0.1 <= joint.upper else home - 0.1}


def arm_case(prof: RobotProfile) -> ProviderCase:
    box = prof.workspace
    centre = [round((low + high) / 2, 4) for low, high in zip(box.min, box.max, strict=True)]
    return motion_case(
        "arm",
        prof,
        arm_provider,
        arguments={
            "move_to_pose": {"position": centre},
            "move_joints": {"positions": nudged_joint(prof)},
            "home": {},
            "arm_state": {},
        },
        query="arm_state",
        action="move_joints",
        frames_required=frozenset({"move_to_pose", "move_joints", "home", "arm_state"}),
        # No joint_state yet: the state Query fails retryably and health says degraded.
        unbacked=Unbacked("ARM_NO_STATE", True, "degraded"),
    )


def gripper_case(prof: RobotProfile) -> ProviderCase:
    width = round((prof.gripper.closed_width + prof.gripper.max_width) / 2, 4)
    return motion_case(
        "gripper",
        prof,
        gripper_provider,
        arguments={"grasp": {"width": width}, "release": {}, "gripper_state": {}},
        query="gripper_state",
        action="grasp",
        frames_required=frozenset({"grasp", "release", "gripper_state"}),
        unbacked=Unbacked("GRIPPER_NO_STATE", True, "degraded"),
    )


def build_camera(world: SharedWorld) -> Backed:
    """The camera fed, as Dora would feed it, with the newest frames the world rendered."""
    definition = camera_definition(clock=FakeClock())
    plane = definition.data_plane
    assert plane is not None

    def back() -> None:
        for output, (value, metadata) in world.frames(("image_scene", "image_wrist")).items():
            plane.on_input(output, value, metadata)

    return Backed(definition, back=back, fingerprint=lambda: None)  # Queries only: no state


def build_world(world: SharedWorld) -> Backed:
    simulation = world.simulation
    return Backed(
        world_definition(simulation, world.plane),
        back=world.stepped,
        fingerprint=lambda: simulation.resets_requested,
    )


def unbacked_world() -> EndpointDefinition:
    """A world whose physics thread has not stepped yet (its plane is never attached)."""
    simulation = new_simulation()
    return world_definition(simulation, WorldDataPlane(simulation))


def build_mock(_: SharedWorld) -> Backed:
    definition = mock_definition(timing=FakeTiming(), crash=lambda: None)
    move, stream = definition.operations["move"], definition.operations["stream"]

    def fingerprint() -> object:
        return len(move.executions), len(stream.executions)  # type: ignore[union-attr]

    return Backed(definition, back=lambda: None, fingerprint=fingerprint)


CASES = (
    *(arm_case(prof) for prof in served_profiles("arm")),
    *(gripper_case(prof) for prof in served_profiles("gripper")),
    ProviderCase(
        name="camera",
        endpoint_id="camera",
        robot_id="sim_arm",  # the shared world is the sim arm's cell
        build=build_camera,
        unbacked_definition=camera_definition,
        arguments={"capture": {"source": "scene"}},
        query="capture",
        action=None,  # the camera is one Query: capture answers a frame reference at once
        frames_required=frozenset({"capture"}),
        unbacked=Unbacked("CAMERA_NO_FRAME", True, "degraded"),
    ),
    ProviderCase(
        name="world",
        endpoint_id="world",
        robot_id="sim_arm",  # the shared world is the sim arm's cell
        build=build_world,
        unbacked_definition=unbacked_world,
        arguments={"scene_state": {}, "reset": {"seed": 3}},
        query="scene_state",
        action="reset",
        # Physics keeps stepping between two asks: time, the settling cube, the fingers and
        # the predicates read from them move; the episode (seed, target zone) must not.
        volatile_outputs=frozenset({"sim_time", "objects", "gripper", "predicates"}),
        frames_required=frozenset({"scene_state", "reset"}),
        lenient={("reset", "seed=None"): "an explicit null seed means the current one"},
        # Before the first physics step (a packaged robot's model is still being built):
        # a retryable WORLD_NOT_READY, and health says unavailable.
        unbacked=Unbacked("WORLD_NOT_READY", True, "unavailable"),
    ),
    ProviderCase(
        name="mock",
        endpoint_id="mock",
        robot_id=None,
        build=build_mock,
        unbacked_definition=lambda: mock_definition(timing=FakeTiming(), crash=lambda: None),
        arguments={
            "echo": {"message": "conformance"},
            "stats": {},
            "move": {"duration_s": 0.2, "behaviour": "succeed"},
            "stream": {},
        },
        query="echo",
        action="move",
        session="stream",
        # mock.move is the one mock tool standing for a robot motion (dataflows/mock.gateway.yml).
        frames_required=frozenset({"move"}),
        lenient={
            ("move", "behaviour missing"): "a direct Wire client's move defaults to succeed",
        },
        unbacked=Unbacked(None, False, "ready"),  # no backing: it is always ready
    ),
)
