"""The robot-adapter contract (``nodes/robot/contract.py``): its rules, and one conformance
suite over every adapter that runs without Dora.

The adapters are the MuJoCo world's data plane in process (the physics thread the world
node runs) with every shipped robot model (sim_arm's own cell, and OpenArm v2 composed from
its package MJCF) and the robot-arm skill's forge-robot driver on its fake backend, driven by
forge-robot's own node-loop handlers (``_handle_tick``, ``_handle_control_input``) on a
fake clock. Each check runs on both: named ``JointState`` rows that pass forge-robot's
validator, a sparse ``JointCommand`` that keeps the other joints, a clamp whose result is
what the robot reaches, and stamps the stale rule can judge.
"""

from __future__ import annotations

import importlib.util
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import pyarrow as pa
import pytest
from forge_msgs import JointCommand, JointState

# forge-robot 2.0 ships no type information (no py.typed).
from forge_robot import node_runner, validate_robot_state_arrow  # type: ignore[import-untyped]

from doraforge.nodes.motion.cli import DEFAULT_PROFILE
from doraforge.nodes.robot import contract
from doraforge.nodes.robot.contract import Limits, clamp, is_stale, merge_command
from doraforge.nodes.robot.profile import RobotProfile, load_profile, profile_path
from doraforge.nodes.world.dataplane import WorldDataPlane
from doraforge.nodes.world.layout import build_world
from doraforge.nodes.world.simulation import Simulation, SimulationOptions
from doraforge.sim.environment import Environment
from doraforge.sim.render import Cameras
from doraforge.sim.tasks.pick_place import PickPlace
from doraforge.sim.world import World
from tests.support.clock import FakeClock
from tests.support.waiting import eventually

FAKE_DRIVER = (
    Path(__file__).resolve().parents[2]
    / "skills/robot-arm/profiles/forge-robot-fake/fake_driver.py"
)
TOLERANCE = 0.02  # rad or m: a position servo under gravity settles within this
MAX_AGE_S = 0.5
DRIVER_TICK_S = 1.0 / contract.STATE_HZ
DRIVER_MAX_TICKS = 2000  # 20 s of fake time: every move here takes under 3 s
STATES_TO_CHECK = 10

# ---------------------------------------------------------------- the rules

HELD = {"a": 0.1, "b": 0.2, "c": 0.3}


def test_a_sparse_command_keeps_the_other_joints_targets() -> None:
    command = JointCommand(name=["b"], mode="position", position=[1.5])
    assert merge_command(HELD, command) == {"a": 0.1, "b": 1.5, "c": 0.3}
    assert HELD == {"a": 0.1, "b": 0.2, "c": 0.3}, "merge must not change what was held"


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (JointCommand(name=["z"], mode="position", position=[0.0]), "unknown joint 'z'"),
        (JointCommand(name=["a"], mode="velocity", velocity=[0.0]), "only 'position'"),
        (JointCommand(name=["a"], mode="position"), "1 names but 0 positions"),
        (JointCommand(name=["a"], mode="position", position=[math.nan]), "not finite"),
    ],
)
def test_a_bad_command_applies_nothing_and_says_why(command: JointCommand, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        merge_command(HELD, command)


def test_a_clamp_returns_what_was_sent_and_which_joints_it_changed() -> None:
    limits = {"a": Limits(-1.0, 1.0), "b": Limits(0.0, 0.5)}
    sent, clamped = clamp({"a": 2.0, "b": 0.25, "c": 9.0}, limits)
    assert sent == {"a": 1.0, "b": 0.25, "c": 9.0}  # c has no limits: sent as asked
    assert clamped == ("a",)
    assert clamp({"b": -0.1}, limits) == ({"b": 0.0}, ("b",))


def test_state_older_than_the_max_age_is_stale() -> None:
    stamp = 5 * contract.NS_PER_S
    assert not is_stale(stamp, stamp + contract.NS_PER_S // 2, 0.5)  # exactly the max age
    assert is_stale(stamp, stamp + contract.NS_PER_S // 2 + 1, 0.5)
    assert not is_stale(stamp, stamp - 1, 0.5)  # a stamp from the future is not old


def test_image_outputs_are_named_per_camera() -> None:
    assert [contract.image_output(c) for c in contract.CAMERAS] == ["image_scene", "image_wrist"]


# ---------------------------------------------------------------- the adapters


class Adapter(Protocol):
    """What the suite needs of a robot adapter, run in process."""

    state_output: str
    joint_names: list[str]
    limits: dict[str, Limits]
    #: The start every check settles at first: every joint's target by name.
    held: dict[str, float]
    #: A joint and a target for the sparse-command check; the joint the clamp check drives.
    sparse: tuple[str, float]
    clamped: str

    def states(self) -> list[tuple[str, Any, int]]:
        """Every state published so far: ``(output id, value, stamp_ns)``."""
        ...

    def now_ns(self) -> int:
        """Now, on the clock the stamps are on."""
        ...

    def send(self, command: JointCommand) -> None: ...

    def until(self, holds: Callable[[JointState], bool], what: str) -> JointState:
        """The first state (published from now on) for which ``holds`` is true."""
        ...


DEFAULT = load_profile(DEFAULT_PROFILE)
ROBOTS = ("sim_arm", "openarm")
#: Per robot: (joint, target) the sparse check moves, and the joint the clamp check drives
#: past its upper limit (a wrist roll on OpenArm: nothing it swings can hit the table).
MOVES: dict[str, tuple[tuple[str, float], str]] = {
    "sim_arm": (("elbow", 1.5), "shoulder_pan"),
    "openarm": (("openarm_right_joint4", 1.9), "openarm_right_joint7"),
}


def actuator_limits(world: World) -> dict[str, Limits]:
    """The range the world clamps each data-plane joint's target to."""
    return {name: Limits(low, high) for name, (low, high) in world.target_limits().items()}


class WorldAdapter:
    """The world node's data plane on the real MuJoCo cell of one robot, started as the node
    starts it (sim_arm: the default cell; another robot: its composed cell)."""

    state_output = contract.JOINT_STATE

    def __init__(self, robot: str) -> None:
        profile = load_profile(profile_path(robot)) if robot != "sim_arm" else None
        self.joint_names = (
            DEFAULT.joint_names if profile is None else profile.data_plane_joint_names
        )
        self.held = held_targets(profile or DEFAULT)
        self.sparse, self.clamped = MOVES[robot]
        # Paced, as the node runs: sim-time stamps then age at the rate the stale rule assumes.
        options = SimulationOptions(paced=True, camera_hz=5.0, width=64, height=48)
        world = World() if profile is None else build_world(profile)
        # What the world clamps to is its actuators' ranges (the contract's "what was sent").
        self.limits = actuator_limits(world)
        self.simulation = Simulation(
            lambda: Environment(world, PickPlace(), seed=1),
            lambda world: Cameras(
                world.model,
                height=options.height,
                width=options.width,
                aliases=world.layout.cameras,
            ),
            options,
        )
        self.plane = WorldDataPlane(self.simulation)
        self._lock = threading.Lock()
        self.sent: list[tuple[str, Any, Mapping[str, Any]]] = []
        self.plane.attach(self._publish)

    def _publish(self, output: str, value: Any, metadata: Mapping[str, Any] | None) -> None:
        with self._lock:
            self.sent.append((output, value, dict(metadata or {})))

    def of(self, prefix: str) -> list[tuple[str, Any, Mapping[str, Any]]]:
        with self._lock:
            return [row for row in self.sent if row[0].startswith(prefix)]

    def states(self) -> list[tuple[str, Any, int]]:
        return [(o, v, m[contract.SIM_TIME_NS]) for o, v, m in self.of(contract.JOINT_STATE)]

    def now_ns(self) -> int:
        return round(self.simulation.stats.sim_time * contract.NS_PER_S)

    def send(self, command: JointCommand) -> None:
        # What Dora delivers on the world's input: the command's batch as one struct array.
        self.plane.on_input(contract.ARM_COMMAND, command.to_arrow().to_struct_array(), {})

    def until(self, holds: Callable[[JointState], bool], what: str) -> JointState:
        seen = len(self.states())

        def newest() -> JointState | None:
            rows = self.states()[seen:]
            state = JointState.from_arrow(rows[-1][1]) if rows else None
            return state if state is not None and holds(state) else None

        found = eventually(newest, within=20.0, what=what, interval=0.01)
        assert found is not None
        return found

    def close(self) -> None:
        self.plane.close()


def load_fake_driver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("forge_robot_fake_driver", FAKE_DRIVER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class DriverAdapter:
    """The fake-backend forge-robot driver behind forge-robot's own node-loop handlers.

    ``run_dora_robot_node`` sends ``state`` with no metadata, so its consumer stamps each
    state at receipt (as ``JointPlane`` does); here the receipt clock is the fake one.
    """

    state_output = contract.DRIVER_STATE

    def __init__(self) -> None:
        module = load_fake_driver()
        self.clock = FakeClock()
        self.driver = module.FakeArmDriver(clock=self.clock)
        self.driver.connect()
        self.joint_names: list[str] = self.driver.joint_order
        self.limits = {
            spec.name: Limits(spec.min_position, spec.max_position) for spec in module.ACTUATORS
        }
        self.held = held_targets(DEFAULT)
        self.sparse, self.clamped = MOVES["sim_arm"]
        self.sent: list[tuple[str, Any, int]] = []

    def send_output(self, output: str, value: Any, metadata: Any = None) -> None:
        """The part of ``dora.Node`` that ``_handle_tick`` uses."""
        self.sent.append((output, value, self.now_ns()))

    def tick(self) -> None:
        self.clock.advance(DRIVER_TICK_S)
        node_runner._handle_tick(
            node=self,
            driver=self.driver,
            joint_order=self.joint_names,
            debug=False,
            on_tick_after_state=None,
        )

    def states(self) -> list[tuple[str, Any, int]]:
        if not self.sent:
            self.tick()
        return list(self.sent)

    def now_ns(self) -> int:
        return round(self.clock.now * contract.NS_PER_S)

    def send(self, command: JointCommand) -> None:
        node_runner._handle_control_input(
            input_id=f"{contract.DRIVER_ACTION_PREFIX}arm",
            value=command.to_arrow().to_struct_array(),
            driver=self.driver,
            joint_order=self.joint_names,
            is_follower=True,
            debug=False,
            validate_control_arrow=True,
            strict_extra_arrow_columns=False,
        )

    def until(self, holds: Callable[[JointState], bool], what: str) -> JointState:
        for _ in range(DRIVER_MAX_TICKS):
            self.tick()
            state = JointState.from_arrow(self.sent[-1][1])
            if holds(state):
                return state
        raise AssertionError(f"no {what} within {DRIVER_MAX_TICKS} ticks")

    def close(self) -> None:
        self.driver.disconnect()


@pytest.fixture(scope="module")
def worlds() -> Iterator[dict[str, WorldAdapter]]:
    """The world adapters, built on first use and closed at the end of the module."""
    built: dict[str, WorldAdapter] = {}
    yield built
    for adapter in built.values():
        adapter.close()


def world_of(worlds: dict[str, WorldAdapter], robot: str) -> WorldAdapter:
    if robot not in worlds:
        worlds[robot] = WorldAdapter(robot)
    return worlds[robot]


@pytest.fixture(scope="module", params=ROBOTS)
def world(request: pytest.FixtureRequest, worlds: dict[str, WorldAdapter]) -> WorldAdapter:
    return world_of(worlds, request.param)


@pytest.fixture(
    scope="module",
    params=[*(f"mujoco_world-{robot}" for robot in ROBOTS), "forge_robot_fake_driver"],
)
def adapter(request: pytest.FixtureRequest, worlds: dict[str, WorldAdapter]) -> Iterator[Adapter]:
    if request.param.startswith("mujoco_world-"):
        yield world_of(worlds, request.param.removeprefix("mujoco_world-"))
        return
    driver = DriverAdapter()
    yield driver
    driver.close()


def held_targets(profile: RobotProfile) -> dict[str, float]:
    """Every arm at home with its gripper open: a start every adapter can reach."""
    held: dict[str, float] = {}
    for name in profile.arm_names:
        arm = profile.arm(name)
        opened = arm.gripper.joint_for_width.joint_for(arm.gripper.open_width)
        held.update(zip((joint.name for joint in arm.arm_joints), arm.home, strict=True))
        held.update(dict.fromkeys(arm.gripper.joints, opened))
    return held


def by_name(state: JointState) -> dict[str, float]:
    return dict(zip(state.name, state.position, strict=True))


def at(targets: Mapping[str, float]) -> Callable[[JointState], bool]:
    def holds(state: JointState) -> bool:
        now = by_name(state)
        return all(abs(now[name] - value) < TOLERANCE for name, value in targets.items())

    return holds


class Commanded(Protocol):
    """What :func:`settle_at` needs of an adapter (the OpenArm bridge's suite reuses it)."""

    def send(self, command: JointCommand) -> None: ...

    def until(self, holds: Callable[[JointState], bool], what: str) -> JointState: ...


def settle_at(adapter: Commanded, targets: Mapping[str, float], what: str) -> JointState:
    full = JointCommand(name=list(targets), mode="position", position=list(targets.values()))
    adapter.send(full)
    return adapter.until(at(targets), what)


# ---------------------------------------------------------------- the conformance suite


def test_state_is_named_joint_state_rows_that_pass_forge_robots_validator(adapter: Adapter) -> None:
    adapter.until(lambda _: len(adapter.states()) >= STATES_TO_CHECK, "states to check")
    for output, value, _ in adapter.states():
        assert output == adapter.state_output
        batch = validate_robot_state_arrow(value, adapter.joint_names)
        state = contract.STATE_TYPE.from_arrow(batch)
        assert list(state.name) == adapter.joint_names
        assert len(state.position) == len(state.velocity) == len(state.name)
        assert all(math.isfinite(p) for p in state.position)


def test_a_sparse_command_moves_its_joint_and_keeps_the_others(adapter: Adapter) -> None:
    held = adapter.held
    settle_at(adapter, held, "the home pose")
    joint, target = adapter.sparse
    sparse = JointCommand(name=[joint], mode="position", position=[target])
    expected = merge_command(held, sparse)
    adapter.send(sparse)
    state = adapter.until(at(expected), f"{joint} at {target} with the other joints held")
    assert abs(by_name(state)[joint] - target) < TOLERANCE


def test_a_target_beyond_the_limits_is_clamped_to_what_the_contract_says_was_sent(
    adapter: Adapter,
) -> None:
    held, joint = adapter.held, adapter.clamped
    settle_at(adapter, held, "the home pose")
    beyond = adapter.limits[joint].upper + 0.6
    sparse = JointCommand(name=[joint], mode="position", position=[beyond])
    sent, clamped = clamp(merge_command(held, sparse), adapter.limits)
    assert clamped == (joint,)
    adapter.send(sparse)
    adapter.until(at(sent), f"{joint} at its upper limit, the others held")
    reached = [by_name(JointState.from_arrow(v))[joint] for _, v, _ in adapter.states()]
    assert max(reached) < adapter.limits[joint].upper + TOLERANCE


def test_state_stamps_are_nanoseconds_the_stale_rule_can_judge(adapter: Adapter) -> None:
    adapter.until(lambda _: len(adapter.states()) >= STATES_TO_CHECK, "stamped states")
    stamps = [stamp for _, _, stamp in adapter.states()]
    assert all(isinstance(stamp, int) and stamp >= 0 for stamp in stamps)
    assert stamps == sorted(stamps), "stamps went backwards"
    newest, now = stamps[-1], adapter.now_ns()
    assert not is_stale(newest, now, MAX_AGE_S)
    assert is_stale(newest, now + 2 * round(MAX_AGE_S * contract.NS_PER_S), MAX_AGE_S)


# ---------------------------------------------------------------- cameras (the world only)


def test_the_worlds_frames_are_contract_images_with_the_contract_keys(world: WorldAdapter) -> None:
    outputs = [contract.image_output(camera) for camera in contract.CAMERAS]
    eventually(
        lambda: {o for o, _, _ in world.of(contract.IMAGE_PREFIX)} == set(outputs),
        within=20.0,
        what="a frame from every camera",
        interval=0.01,
    )
    for output, value, metadata in world.of(contract.IMAGE_PREFIX):
        assert output in outputs
        assert set(contract.IMAGE_METADATA) <= set(metadata)
        assert output == contract.image_output(metadata[contract.FRAME_SOURCE])
        image = contract.IMAGE_TYPE.from_arrow(value)
        assert image.encoding == contract.IMAGE_ENCODING
        assert isinstance(value, pa.Array | pa.RecordBatch)
