"""The robot-adapter contract: the data plane every robot adapter and controller shares.

One place names what was scattered over ``nodes/motion/plane.py``,
``nodes/world/dataplane.py`` and ``nodes/world/simulation.py``: the Dora topics, their
``forge_msgs`` types, the metadata keys, the nominal rates and the units, and the three
rules an adapter follows (as pure functions, so an adapter, a bridge and a test apply the
same words). The simulated world and a forge-robot driver node both conform; the
conformance suite in ``tests/nodes/test_robot_contract.py`` checks that.

Units: positions in rad (revolute) or m (prismatic; a gripper joint is one finger's
opening), velocities per second, efforts in N·m or N, stamps in integer nanoseconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from forge_msgs import Image, JointCommand, JointState

# ---------------------------------------------------------------- units

RADIAN = "rad"
METRE = "m"
SECOND = "s"
NANOSECOND = "ns"
NS_PER_S = 1_000_000_000

# ---------------------------------------------------------------- topics (Dora ids)

#: A robot's measured state, every joint by name (world output; arm/gripper input).
JOINT_STATE = "joint_state"
#: A controller's sparse position command (arm and gripper output).
JOINT_COMMAND = "joint_command"
#: The world's inputs fed from the arm's and the gripper's ``joint_command``.
ARM_COMMAND = "arm_command"
GRIPPER_COMMAND = "gripper_command"
#: The world's camera outputs are ``image_<camera>``; these two are the ones it renders.
IMAGE_PREFIX = "image_"
CAMERAS = ("scene", "wrist")
#: A forge-robot driver node (``forge_robot.run_dora_robot_node``): ``state`` out on each
#: ``tick``, sparse commands in on ``action`` or ``action/<source>``.
DRIVER_STATE = "state"
DRIVER_TICK = "tick"
DRIVER_ACTION_PREFIX = "action/"

# ---------------------------------------------------------------- message types

STATE_TYPE = JointState
COMMAND_TYPE = JointCommand
IMAGE_TYPE = Image
#: The only command mode adapters accept today.
POSITION_MODE = "position"
IMAGE_ENCODING = "rgb8"

# ---------------------------------------------------------------- metadata keys

#: On ``joint_state`` from the world: the simulated clock at the sample (ns).
SIM_TIME_NS = "sim_time_ns"
#: On ``joint_state`` from a real robot's adapter or a bridge: the robot's own sample time
#: (Unix ns, the robot's clock); velocities and staleness are judged against it.
STATE_STAMP_NS = "stamp_ns"
#: On ``image_<camera>``: frame counter per camera, wall-clock stamp (ns), camera name.
FRAME_SEQ = "seq"
FRAME_STAMP_NS = "stamp_ns"
FRAME_SOURCE = "source"
IMAGE_METADATA = (FRAME_SEQ, FRAME_STAMP_NS, FRAME_SOURCE)

# ---------------------------------------------------------------- nominal rates

#: Joint state, in the adapter's clock (simulated time for the world).
STATE_HZ = 100.0
#: Camera frames, in wall-clock time.
CAMERA_HZ = 15.0


def image_output(camera: str) -> str:
    """The Dora output id of ``camera``'s frames (``image_scene``, ``image_wrist``)."""
    return f"{IMAGE_PREFIX}{camera}"


# ---------------------------------------------------------------- rules


@dataclass(frozen=True)
class Limits:
    """A joint's position range, in its unit (rad or m)."""

    lower: float
    upper: float


def merge_command(held: Mapping[str, float], command: JointCommand) -> dict[str, float]:
    """The full targets after a sparse position ``command``: named joints take the new
    value, every other joint keeps the target it ``held``.

    A command is all-or-nothing, so one bad entry applies nothing: ``ValueError`` names an
    unknown joint, a non-position mode, a length mismatch or a non-finite position.
    """
    if command.mode != POSITION_MODE:
        raise ValueError(f"only {POSITION_MODE!r} commands are supported, not {command.mode!r}")
    if len(command.position) != len(command.name):
        raise ValueError(f"{len(command.name)} names but {len(command.position)} positions")
    targets = dict(held)
    for name, position in zip(command.name, command.position, strict=True):
        if name not in held:
            raise ValueError(f"unknown joint {name!r}; known: {sorted(held)}")
        if not math.isfinite(position):
            raise ValueError(f"target for joint {name!r} is not finite: {position!r}")
        targets[name] = float(position)
    return targets


def clamp(
    targets: Mapping[str, float], limits: Mapping[str, Limits]
) -> tuple[dict[str, float], tuple[str, ...]]:
    """``(sent, clamped_names)``: each target clamped into its joint's limits, and which
    joints were changed, so a caller reports what was actually sent rather than what was
    asked. A joint without limits (continuous) is sent as asked."""
    sent: dict[str, float] = {}
    clamped: list[str] = []
    for name, target in targets.items():
        limit = limits.get(name)
        value = target if limit is None else min(max(target, limit.lower), limit.upper)
        if value != target:
            clamped.append(name)
        sent[name] = value
    return sent, tuple(clamped)


def is_stale(stamp_ns: int, now_ns: int, max_age_s: float) -> bool:
    """Whether a state stamped ``stamp_ns`` is older than ``max_age_s`` at ``now_ns``.

    Both stamps must come from one clock (the adapter's own, or the consumer's receipt
    clock; a robot's clock is never compared with ours). A stamp from the future is not
    stale: a clock that went backwards is not evidence of an old sample.
    """
    return now_ns - stamp_ns > max_age_s * NS_PER_S
