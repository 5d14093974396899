"""The OpenArm bridge (``nodes/bridges/openarm.py``) on a recording publisher and a fake clock.

OpenArm's side is played by the Arrow values ``dora-openarm-dummy`` 1.0 and
``dora-openarm-mujoco`` 0.5 send (float32[8] with ``timestamp``; ``struct{qpos}`` with
``observation_timestamp``); the contract side by ``forge_msgs`` rows as the arm and gripper
nodes send them. The gripper conversion is checked against OpenArm's own MJCF in MuJoCo.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pyarrow as pa
import pytest
from forge_msgs import JointCommand, JointState

from doraforge.nodes.bridges import openarm_gripper
from doraforge.nodes.bridges.openarm import (
    ARM_COMMAND,
    GRIPPER_COMMAND,
    JOINT_STATE,
    MOVE_POSITION,
    POSITION,
    REQUEST_POSITION,
    STAMP_NS,
    STARTUP_GRACE_S,
    TICK,
    BridgeConfigError,
    OpenArmBridge,
    decode_position,
    joints_from_profile,
    main,
    run,
)
from doraforge.nodes.robot.contract import Limits, clamp, merge_command
from doraforge.nodes.robot.model import resolve_model_file
from doraforge.nodes.robot.profile import RobotProfile, load_profile
from tests.support.clock import FakeClock

PROFILE = Path(__file__).resolve().parents[2] / "nodes" / "robot" / "profiles"
OPENARM_DUMMY = PROFILE / "openarm_dummy.yml"
SIM_ARM = PROFILE / "sim_arm.yml"
ARM = [f"openarm_right_joint{i}" for i in range(1, 8)]
GRIPPER = "openarm_right_gripper"
T0_NS = 1_800_000_000_000_000_000
MAX_AGE_S = 0.5


@pytest.fixture(scope="module")
def profile() -> RobotProfile:
    return load_profile(OPENARM_DUMMY)


class Recorder:
    """The bridge's ``publish``: every output in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, pa.Array, Mapping[str, Any] | None]] = []

    def __call__(self, output: str, value: pa.Array, metadata: Mapping[str, Any] | None) -> None:
        self.sent.append((output, value, metadata))

    def of(self, output: str) -> list[tuple[pa.Array, Mapping[str, Any] | None]]:
        return [(value, metadata) for name, value, metadata in self.sent if name == output]

    def states(self) -> list[JointState]:
        return [JointState.from_arrow(value) for value, _ in self.of(JOINT_STATE)]

    def moves(self) -> list[list[float]]:
        return [value.to_pylist() for value, _ in self.of(MOVE_POSITION)]


class Cell:
    """A bridge, its recorder and its clock."""

    def __init__(self, profile: RobotProfile) -> None:
        self.clock = FakeClock()
        self.out = Recorder()
        self.bridge = OpenArmBridge(
            joints_from_profile(profile),
            self.out,
            clock=self.clock,
            wall_ns=lambda: 42,
            max_age_s=MAX_AGE_S,
        )

    def position(self, values: list[float], stamp_ns: int | None = T0_NS) -> None:
        """A ``position`` as dora-openarm-dummy sends it: float32[8] with ``timestamp``."""
        metadata = {} if stamp_ns is None else {"timestamp": stamp_ns}
        self.bridge.on_input(POSITION, pa.array(values, type=pa.float32()), metadata)

    def command(self, input_id: str, names: list[str], positions: list[float]) -> None:
        row = JointCommand(name=names, mode="position", position=positions)
        self.bridge.on_input(input_id, row.to_arrow().to_struct_array(), {})


@pytest.fixture
def cell(profile: RobotProfile) -> Cell:
    return Cell(profile)


def f32(value: float) -> float:
    """``value`` as it survives OpenArm's float32."""
    return float(np.float32(value))


START = [0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, -0.3927]


# ---------------------------------------------------------------- state


def test_a_position_becomes_a_joint_state_named_by_the_profile_with_the_gripper_in_metres(
    cell: Cell, profile: RobotProfile
) -> None:
    cell.position(START)
    [state] = cell.out.states()
    assert state.name == profile.joint_names == [*ARM, GRIPPER]
    assert state.position[:7] == pytest.approx([f32(v) for v in START[:7]])
    assert state.position[7] == pytest.approx(openarm_gripper.opening_for(f32(-0.3927)))
    assert state.velocity == [0.0] * 8  # the first sample has no predecessor
    assert cell.out.of(JOINT_STATE)[0][1] == {STAMP_NS: T0_NS}


def test_velocities_are_position_differences_over_the_robots_own_stamps(cell: Cell) -> None:
    cell.position(START, stamp_ns=T0_NS)
    moved = [*START[:3], START[3] + 0.02, *START[4:]]
    cell.position(moved, stamp_ns=T0_NS + 10_000_000)  # 10 ms later on the robot's clock
    velocity = cell.out.states()[-1].velocity
    assert velocity[3] == pytest.approx(2.0, rel=1e-3)
    assert [*velocity[:3], *velocity[4:]] == [0.0] * 7


def test_a_position_stamped_no_later_than_its_predecessor_has_zero_velocity(cell: Cell) -> None:
    cell.position(START, stamp_ns=T0_NS)
    cell.position([0.0] * 8, stamp_ns=T0_NS)
    assert cell.out.states()[-1].velocity == [0.0] * 8


def test_a_position_without_a_stamp_is_stamped_at_receipt_on_the_wall_clock(cell: Cell) -> None:
    cell.position(START, stamp_ns=None)
    assert cell.out.of(JOINT_STATE)[0][1] == {STAMP_NS: 42}


def test_the_mujoco_nodes_struct_with_its_observation_timestamp_decodes_the_same(
    cell: Cell,
) -> None:
    qpos = pa.array([{"qpos": START}], type=pa.struct([("qpos", pa.list_(pa.float32()))]))
    cell.bridge.on_input(POSITION, qpos, {"observation_timestamp": T0_NS + 5})
    [(value, metadata)] = cell.out.of(JOINT_STATE)
    assert JointState.from_arrow(value).position[0] == pytest.approx(f32(START[0]))
    assert metadata == {STAMP_NS: T0_NS + 5}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (pa.array([0.0] * 7, type=pa.float32()), "8 values, got 7"),
        (pa.array([0.0] * 7 + [math.nan], type=pa.float32()), "non-finite"),
        (pa.array(["a"] * 8), "must be numbers"),
        (pa.array([0.0] * 7 + [None], type=pa.float32()), "8 values"),
        (pa.array([{"other": 1.0}]), "qpos"),
        (pa.array([[0.0] * 8, [0.0] * 8]), "exactly one row"),
    ],
)
def test_a_malformed_position_is_refused_with_the_reason(value: pa.Array, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        decode_position(value)


def test_a_malformed_position_publishes_nothing_and_is_counted(cell: Cell) -> None:
    cell.bridge.on_input(POSITION, pa.array([1.0, 2.0], type=pa.float32()), {})
    assert cell.out.sent == []
    assert cell.bridge.rejected_positions == 1


# ---------------------------------------------------------------- commands


def test_a_sparse_arm_command_becomes_a_full_move_holding_the_other_slots(cell: Cell) -> None:
    cell.position(START)
    cell.command(ARM_COMMAND, ["openarm_right_joint4"], [1.2])
    [move] = cell.out.moves()
    assert move == pytest.approx([f32(v) for v in [*START[:3], 1.2, *START[4:]]])
    assert cell.out.of(MOVE_POSITION)[0][0].type == pa.float32()


def test_a_gripper_command_in_metres_moves_only_openarms_finger_angle(cell: Cell) -> None:
    cell.position(START)
    cell.command(ARM_COMMAND, ["openarm_right_joint1"], [0.9])
    cell.command(GRIPPER_COMMAND, [GRIPPER], [0.02])  # one finger opened by 2 cm
    last = cell.out.moves()[-1]
    assert last[0] == pytest.approx(f32(0.9)), "the arm's earlier target is held"
    assert last[1:7] == pytest.approx([f32(v) for v in START[1:7]])
    assert last[7] == pytest.approx(openarm_gripper.finger_for(0.02), abs=1e-6)
    assert openarm_gripper.opening_for(last[7]) == pytest.approx(0.02, abs=1e-6)


def test_a_target_beyond_its_limit_is_clamped_and_the_clamp_is_what_is_held(
    cell: Cell, profile: RobotProfile
) -> None:
    widest = openarm_gripper.finger_for(profile.gripper.max_width / 2)
    cell.position(START)
    held = cell.bridge.held
    assert held is not None
    command = JointCommand(name=["openarm_right_joint4", GRIPPER], position=[9.0, 1.0])
    expected, clamped = clamp(merge_command(held, command), joints_from_profile(profile).limits)
    assert clamped == ("openarm_right_joint4", GRIPPER)
    cell.command(ARM_COMMAND, ["openarm_right_joint4", GRIPPER], [9.0, 1.0])
    [move] = cell.out.moves()
    assert move[3] == pytest.approx(f32(2.4435))  # the MJCF's upper limit of joint 4
    assert move[7] == pytest.approx(widest, abs=1e-6)  # the profile's widest opening
    assert cell.bridge.held == expected


@pytest.mark.parametrize(
    ("names", "positions"),
    [(["openarm_left_joint1"], [0.1]), (["openarm_right_joint2"], [math.inf])],
)
def test_a_bad_command_moves_nothing_and_keeps_the_held_targets(
    cell: Cell, names: list[str], positions: list[float]
) -> None:
    cell.position(START)
    held = cell.bridge.held
    cell.command(ARM_COMMAND, names, positions)
    assert cell.out.moves() == []
    assert cell.bridge.held == held
    assert cell.bridge.rejected_commands == 1


def test_a_command_before_any_position_is_dropped(cell: Cell) -> None:
    cell.command(ARM_COMMAND, ["openarm_right_joint1"], [0.5])
    assert cell.out.moves() == []
    assert cell.bridge.rejected_commands == 1


# ---------------------------------------------------------------- timer and stale state


def test_each_tick_is_forwarded_as_a_position_request(cell: Cell) -> None:
    tick = pa.array([], type=pa.null())
    for _ in range(3):
        cell.bridge.on_input(TICK, tick, {})
    assert [value for value, _ in cell.out.of(REQUEST_POSITION)] == [tick] * 3
    assert cell.out.of(JOINT_STATE) == []  # a request is not a state


def test_no_position_within_the_bound_is_reported_stale_once_and_drops_commands(
    cell: Cell, caplog: pytest.LogCaptureFixture
) -> None:
    cell.position(START)
    cell.clock.advance(MAX_AGE_S)
    assert not cell.bridge.check_stale()  # exactly the bound is not older than it
    cell.clock.advance(0.01)
    with caplog.at_level(logging.WARNING):
        cell.bridge.on_input(TICK, pa.array([], type=pa.null()), {})
        cell.bridge.on_input(TICK, pa.array([], type=pa.null()), {})
    assert cell.bridge.stale
    assert sum("OPENARM_STATE_STALE" in message for message in caplog.messages) == 1
    cell.command(ARM_COMMAND, ["openarm_right_joint1"], [0.5])
    assert cell.out.moves() == []
    assert len(cell.out.states()) == 1, "an old sample is never published again"


def test_after_a_gap_the_held_targets_are_taken_from_the_fresh_position(cell: Cell) -> None:
    cell.position(START)
    cell.command(ARM_COMMAND, ["openarm_right_joint1"], [0.9])
    cell.clock.advance(1.0)
    assert cell.bridge.check_stale()
    restarted = [0.0] * 8  # e.g. the dummy restarted at zeros
    cell.position(restarted, stamp_ns=T0_NS + 1)
    assert not cell.bridge.stale
    assert cell.out.states()[-1].velocity == [0.0] * 8, "no velocity across the gap"
    cell.command(ARM_COMMAND, ["openarm_right_joint2"], [0.3])
    assert cell.out.moves()[-1] == pytest.approx([0.0, f32(0.3), 0, 0, 0, 0, 0, 0])


def test_a_robot_that_never_answers_is_stale_after_its_start_up_grace(cell: Cell) -> None:
    cell.clock.advance(STARTUP_GRACE_S)
    assert not cell.bridge.check_stale()
    cell.clock.advance(0.01)
    assert cell.bridge.check_stale()


# ---------------------------------------------------------------- the Dora node


def test_the_node_loop_handles_inputs_until_stop(cell: Cell) -> None:
    tick = pa.array([], type=pa.null())
    events = [
        {"type": "INPUT", "id": TICK, "value": tick, "metadata": {}},
        {"type": "INPUT", "id": POSITION, "value": pa.array(START, pa.float32()), "metadata": {}},
        {"type": "INPUT_CLOSED", "id": "robot_status"},
        {"type": "STOP"},
        {"type": "INPUT", "id": TICK, "value": tick, "metadata": {}},
    ]
    run(events, cell.bridge)
    assert [name for name, _, _ in cell.out.sent] == [REQUEST_POSITION, JOINT_STATE]


def test_the_node_refuses_a_profile_that_is_not_one_openarm_arm_with_its_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--profile", str(SIM_ARM)])
    assert exited.value.code == 2
    assert "OPENARM_PROFILE_INVALID" in capsys.readouterr().err


# ---------------------------------------------------------------- profile and gripper model


def test_a_profile_that_is_not_one_openarm_arm_is_refused() -> None:
    with pytest.raises(BridgeConfigError, match="6 arm joints"):
        joints_from_profile(load_profile(SIM_ARM))


def test_the_gripper_limits_are_the_profiles_widths_as_one_fingers_opening(
    profile: RobotProfile,
) -> None:
    limits = joints_from_profile(profile).limits
    assert limits[GRIPPER] == Limits(0.0, profile.gripper.max_width / 2)
    assert profile.gripper.max_width / 2 <= openarm_gripper.MAX_OPENING_M


def test_the_gripper_conversion_is_an_inverse_pair_over_the_hinge_range() -> None:
    for finger in np.linspace(openarm_gripper.OPEN_RAD, openarm_gripper.CLOSED_RAD, 9):
        opening = openarm_gripper.opening_for(float(finger))
        assert openarm_gripper.finger_for(opening) == pytest.approx(finger, abs=1e-9)
    assert openarm_gripper.finger_for(0.0) == openarm_gripper.CLOSED_RAD
    assert openarm_gripper.finger_for(1.0) == pytest.approx(openarm_gripper.OPEN_RAD)
    assert openarm_gripper.finger_for(-1.0) == openarm_gripper.CLOSED_RAD


class PadFace:
    """The inner face of OpenArm's right inner pad mesh, measured in MuJoCo on its MJCF."""

    def __init__(self) -> None:
        path = resolve_model_file("package:openarm_mujoco.v2:openarm_bimanual.xml", Path())
        self.model = mujoco.MjModel.from_xml_path(str(path))
        self.data = mujoco.MjData(self.model)
        # The face is the pad's vertices on the centre plane while the pads touch (closed).
        self.face = self._vertices_in_hand(openarm_gripper.CLOSED_RAD)[:, 1] < 5e-4

    def opening(self, finger: float) -> float:
        """Half the distance between the pad faces at ``finger`` (rad): the face centre's
        distance from the centre plane, in the hand's frame."""
        return float(self._vertices_in_hand(finger)[self.face, 1].mean())

    def _vertices_in_hand(self, finger: float) -> np.ndarray:
        model, data = self.model, self.data
        for joint in ("openarm_right_finger_joint1", "openarm_right_finger_joint2"):
            data.qpos[model.joint(joint).qposadr[0]] = finger
        mujoco.mj_kinematics(model, data)
        hand = model.body("openarm_right_ee_base_link").id
        pad = model.geom("finger_inner_right_collision_00")
        start, count = model.mesh_vertadr[pad.dataid[0]], model.mesh_vertnum[pad.dataid[0]]
        local = model.mesh_vert[start : start + count]
        world = local @ data.geom_xmat[pad.id].reshape(3, 3).T + data.geom_xpos[pad.id]
        in_hand: np.ndarray = (world - data.xpos[hand]) @ data.xmat[hand].reshape(3, 3)
        return in_hand


def test_the_gripper_conversion_matches_openarms_mjcf_geometry() -> None:
    pad = PadFace()
    for finger in np.linspace(openarm_gripper.OPEN_RAD, openarm_gripper.CLOSED_RAD, 7):
        measured = pad.opening(float(finger))
        assert openarm_gripper.opening_for(float(finger)) == pytest.approx(measured, abs=5e-4)
