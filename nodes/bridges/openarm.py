"""The OpenArm bridge: doraforge's robot-adapter contract in front of an unchanged OpenArm node.

OpenArm's Dora nodes (``dora-openarm-dummy`` 1.0; ``dora-openarm-mujoco`` 0.5, one arm per
bridge) speak eight unnamed values per arm: joints 1-7 in rad, then the gripper as the
``finger_joint1`` hinge angle in rad. They publish ``position`` (float32[8], or
``struct{qpos}``) only when asked on ``request_position``, and teleport or servo to a full
float32[8] on ``move_position``. doraforge's arm and gripper nodes speak the contract
(:mod:`doraforge.nodes.robot.contract`): a named ``JointState`` on ``joint_state`` and sparse
``JointCommand`` rows from each controller. This node translates, and owns what the
OpenArm side lacks:

* **names**: the eight slots take the robot profile's arm joints and gripper joint, in order;
* **units**: the gripper slot is converted between OpenArm's angle and doraforge's finger
  opening in m (:mod:`doraforge.nodes.bridges.openarm_gripper`); arm joints pass as they are;
* **stamps and velocities**: ``joint_state`` carries the robot's own sample time (metadata
  ``stamp_ns``, from OpenArm's ``observation_timestamp`` or ``timestamp``); velocities are
  differences of successive positions over those stamps (the robot's clock against itself),
  zero for the first sample after a start or a gap;
* **full targets**: each sparse command is merged into the targets last sent, so unlisted
  joints keep their value (contract ``merge_command``), and clamped into the profile's
  limits (contract ``clamp``: the clamped vector is what is sent and held);
* **the request timer**: every ``tick`` (``dora/timer/millis/N``) is forwarded as
  ``request_position``;
* **stale state**: when no ``position`` arrived within ``max_age_s`` (contract ``is_stale``,
  on this node's receipt clock) the bridge says so once, forgets its held targets and drops
  commands until the robot answers again. It never republishes an old sample, so the arm and
  gripper see their state age and answer ``ARM_NO_STATE`` / ``*_STATE_LOST`` rather than
  act on it.

Dataflow stanza (``dataflows/openarm-dummy.yml``)::

    - id: bridge
      path: python
      args: -m doraforge.nodes.bridges.openarm --profile openarm_dummy
      inputs:
        tick: dora/timer/millis/10
        position: openarm/position
        arm_command: arm/joint_command
        gripper_command: gripper/joint_command
        robot_status: openarm/status
      outputs: [joint_state, request_position, move_position]
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from forge_msgs import JointCommand, JointState

from doraforge.nodes.bridges.openarm_gripper import finger_for, opening_for
from doraforge.nodes.cli import LOG_LEVEL_ENV, configure_logging
from doraforge.nodes.dataplane import Publish
from doraforge.nodes.robot import contract
from doraforge.nodes.robot.contract import Limits, clamp, is_stale, merge_command
from doraforge.nodes.robot.profile import ProfileError, RobotProfile, load_profile, profile_path

# Named, not __name__: run with -m, the module is __main__.
logger = logging.getLogger("doraforge.nodes.bridges.openarm")

# ---------------------------------------------------------------- Dora ids

#: Inputs: the request timer, OpenArm's answer and status, the controllers' commands.
TICK = "tick"
POSITION = "position"
ROBOT_STATUS = "robot_status"
ARM_COMMAND = contract.ARM_COMMAND
GRIPPER_COMMAND = contract.GRIPPER_COMMAND
#: Outputs: the contract's state, and OpenArm's two inputs.
JOINT_STATE = contract.JOINT_STATE
REQUEST_POSITION = "request_position"
MOVE_POSITION = "move_position"

#: OpenArm's values per arm: joints 1-7, then the gripper.
ARM_DOF = 7
OPENARM_VALUES = ARM_DOF + 1
#: Struct fields an OpenArm position may come in (mujoco node: ``qpos``; a move: ``new_position``).
POSITION_FIELDS = ("qpos", "new_position")
#: OpenArm's sample-time metadata (Unix ns): dora-openarm-mujoco's, then the dummy's.
ROBOT_STAMP_KEYS = ("observation_timestamp", "timestamp")
#: ``joint_state`` metadata: the robot's sample time (Unix ns, the robot's clock).
STAMP_NS = contract.STATE_STAMP_NS
#: Default bound on the age of OpenArm's newest position before it counts as stale.
MAX_AGE_S = 0.5
#: Before its first position, a robot node may take this long to start (Python, imports).
STARTUP_GRACE_S = 10.0

STALE = "OPENARM_STATE_STALE"
NO_STATE = "OPENARM_NO_STATE"
BAD_POSITION = "OPENARM_POSITION_INVALID"
BAD_COMMAND = "OPENARM_COMMAND_INVALID"


class BridgeConfigError(ValueError):
    """The robot profile does not describe an OpenArm arm (7 arm joints and 1 gripper joint)."""

    code = "OPENARM_PROFILE_INVALID"
    retryable = False


@dataclass(frozen=True)
class OpenArmJoints:
    """The data-plane names of OpenArm's eight slots and their limits in doraforge's units
    (rad for the arm, one finger's opening in m for the gripper, the last slot)."""

    names: tuple[str, ...]
    limits: Mapping[str, Limits]


def joints_from_profile(profile: RobotProfile) -> OpenArmJoints:
    """Names and limits from ``profile``; :class:`BridgeConfigError` unless it has 7 + 1."""
    if len(profile.arm_joints) != ARM_DOF or len(profile.gripper.joints) != 1:
        raise BridgeConfigError(
            f"{BridgeConfigError.code}: profile {profile.robot_id!r} has "
            f"{len(profile.arm_joints)} arm joints and {len(profile.gripper.joints)} gripper "
            "joints; give the profile of one OpenArm arm (7 and 1, e.g. openarm_dummy.yml)"
        )
    limits = {joint.name: Limits(joint.lower, joint.upper) for joint in profile.arm_joints}
    gripper, mapping = profile.gripper, profile.gripper.joint_for_width
    ends = sorted((mapping.joint_for(gripper.closed_width), mapping.joint_for(gripper.max_width)))
    limits[gripper.joints[0]] = Limits(*ends)
    return OpenArmJoints(tuple(profile.joint_names), limits)


# ---------------------------------------------------------------- conversions


def decode_position(value: pa.Array) -> np.ndarray:
    """OpenArm's eight values from a ``position`` event: a flat float array, a one-row
    struct with a ``qpos``/``new_position`` list, or a one-row list. ``ValueError`` otherwise."""
    if isinstance(value, pa.StructArray):
        field = next((f for f in POSITION_FIELDS if value.type.get_field_index(f) >= 0), None)
        if field is None or len(value) != 1:
            raise ValueError(f"a struct position needs one row with one of {POSITION_FIELDS}")
        value = value.field(field)
    if pa.types.is_list(value.type) or pa.types.is_large_list(value.type):
        if len(value) != 1:
            raise ValueError("a list position must hold exactly one row")
        value = value.flatten()
    if not (pa.types.is_floating(value.type) or pa.types.is_integer(value.type)):
        raise ValueError(f"position values must be numbers, not {value.type}")
    if len(value) != OPENARM_VALUES or value.null_count:
        raise ValueError(f"position must hold {OPENARM_VALUES} values, got {len(value)}")
    values = np.asarray(value.to_numpy(zero_copy_only=False), dtype=float)
    if not np.all(np.isfinite(values)):
        raise ValueError("position holds a non-finite value")
    return values


def to_contract(openarm: np.ndarray) -> np.ndarray:
    """OpenArm's eight values in doraforge's units (the gripper angle becomes an opening)."""
    converted = openarm.astype(float).copy()
    converted[ARM_DOF] = opening_for(float(openarm[ARM_DOF]))
    return converted


def to_openarm(targets: Mapping[str, float], joints: OpenArmJoints) -> pa.Array:
    """The full float32[8] ``move_position`` for ``targets`` (doraforge units, every joint)."""
    values = [float(targets[name]) for name in joints.names]
    values[ARM_DOF] = finger_for(values[ARM_DOF])
    return pa.array(values, type=pa.float32())


def robot_stamp_ns(metadata: Mapping[str, Any]) -> int | None:
    """OpenArm's sample time (Unix ns) from the event's metadata, if it sent one."""
    for key in ROBOT_STAMP_KEYS:
        stamp = metadata.get(key)
        if isinstance(stamp, int) and not isinstance(stamp, bool) and stamp >= 0:
            return stamp
    return None


def velocities(
    previous: tuple[np.ndarray, int] | None, positions: np.ndarray, stamp_ns: int
) -> np.ndarray:
    """Position differences over the robot's own stamps; zero without a usable predecessor."""
    if previous is None or stamp_ns <= previous[1]:
        return np.zeros_like(positions)
    dt = (stamp_ns - previous[1]) / contract.NS_PER_S
    derived: np.ndarray = (positions - previous[0]) / dt
    return derived


# ---------------------------------------------------------------- the bridge


class OpenArmBridge:
    """Translates one OpenArm arm's Dora I/O to the robot-adapter contract and back.

    ``publish`` sends a Dora output; ``clock`` is this node's monotonic clock (s), the one
    staleness is judged on; ``wall_ns`` stamps a position that arrived without a stamp.
    Inputs are handled one at a time, on the thread that calls :meth:`on_input`.
    """

    def __init__(
        self,
        joints: OpenArmJoints,
        publish: Publish,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_ns: Callable[[], int] = time.time_ns,
        max_age_s: float = MAX_AGE_S,
    ) -> None:
        if not (math.isfinite(max_age_s) and max_age_s > 0):
            raise ValueError("max_age_s must be a positive number of seconds")
        self.joints = joints
        self.max_age_s = max_age_s
        self._publish = publish
        self._clock = clock
        self._wall_ns = wall_ns
        # A robot that never answers goes stale too, once its start-up grace is over.
        self._received_ns = self._now_ns()
        self._seen = False
        self._previous: tuple[np.ndarray, int] | None = None
        self._held: dict[str, float] | None = None
        self.stale = False
        self.rejected_positions = 0
        self.rejected_commands = 0
        self._warned: set[str] = set()
        self._handlers: dict[str, Callable[[pa.Array, Mapping[str, Any]], None]] = {
            TICK: self._on_tick,
            POSITION: self._on_position,
            ARM_COMMAND: self._on_command,
            GRIPPER_COMMAND: self._on_command,
            ROBOT_STATUS: self._on_status,
        }

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset(self._handlers)

    @property
    def held(self) -> dict[str, float] | None:
        """The full targets last sent (doraforge units), or ``None`` until state is fresh."""
        return None if self._held is None else dict(self._held)

    def on_input(self, input_id: str, value: pa.Array, metadata: Mapping[str, Any]) -> None:
        """Handle one Dora input; unknown ids are ignored."""
        handler = self._handlers.get(input_id)
        if handler is not None:
            handler(value, metadata)

    def check_stale(self) -> bool:
        """Judge the newest position's age now; on the change to stale, report it once,
        forget the held targets and the velocity predecessor. Returns :attr:`stale`."""
        bound = self.max_age_s if self._seen else max(self.max_age_s, STARTUP_GRACE_S)
        if not self.stale and is_stale(self._received_ns, self._now_ns(), bound):
            self.stale = True
            self._held = None
            self._previous = None
            logger.warning(
                "%s: no position from the OpenArm node for more than %.2f s; joint_state "
                "withheld and commands dropped until it answers (is it running and wired to "
                "request_position?)",
                STALE,
                bound,
            )
        return self.stale

    # ------------------------------------------------------------ handlers

    def _on_tick(self, value: pa.Array, metadata: Mapping[str, Any]) -> None:
        self._publish(REQUEST_POSITION, value, None)
        self.check_stale()

    def _on_position(self, value: pa.Array, metadata: Mapping[str, Any]) -> None:
        try:
            openarm = decode_position(value)
        except (ValueError, TypeError, pa.ArrowException) as exc:
            self.rejected_positions += 1
            self._warn_once(BAD_POSITION, f"{BAD_POSITION}: OpenArm position dropped: {exc}")
            return
        self._received_ns, self._seen = self._now_ns(), True
        if self.stale:
            self.stale = False
            logger.info("OpenArm position arriving again; joint_state resumes")
        stamp = robot_stamp_ns(metadata)
        stamp = self._wall_ns() if stamp is None else stamp
        positions = to_contract(openarm)
        state = JointState(
            name=list(self.joints.names),
            position=[float(p) for p in positions],
            velocity=[float(v) for v in velocities(self._previous, positions, stamp)],
        )
        self._previous = (positions, stamp)
        if self._held is None:
            self._held = dict(zip(self.joints.names, map(float, positions), strict=True))
        self._publish(JOINT_STATE, state.to_arrow().to_struct_array(), {STAMP_NS: stamp})

    def _on_command(self, value: pa.Array, metadata: Mapping[str, Any]) -> None:
        if self.check_stale() or self._held is None:
            self.rejected_commands += 1
            self._warn_once(NO_STATE, f"{NO_STATE}: command dropped: no fresh OpenArm position")
            return
        try:
            merged = merge_command(self._held, JointCommand.from_arrow(value))
        except (ValueError, TypeError, KeyError, pa.ArrowException) as exc:
            self.rejected_commands += 1
            logger.warning("%s: command applies nothing: %s", BAD_COMMAND, exc)
            return
        sent, clamped = clamp(merged, self.joints.limits)
        if clamped:
            logger.info("targets clamped to their limits: %s", ", ".join(clamped))
        self._held = sent
        self._publish(MOVE_POSITION, to_openarm(sent, self.joints), None)

    def _on_status(self, value: pa.Array, metadata: Mapping[str, Any]) -> None:
        logger.info("OpenArm node status: %s", value.to_pylist())

    def _now_ns(self) -> int:
        return round(self._clock() * contract.NS_PER_S)

    def _warn_once(self, code: str, message: str) -> None:
        if code not in self._warned:
            self._warned.add(code)
            logger.warning(message)


# ---------------------------------------------------------------- the Dora node


def run(events: Iterable[Mapping[str, Any]], bridge: OpenArmBridge) -> None:
    """Feed Dora events to ``bridge`` until ``STOP`` or the end of the stream."""
    for event in events:
        kind = event.get("type")
        if kind == "STOP":
            return
        if kind == "INPUT":
            bridge.on_input(str(event["id"]), event["value"], event.get("metadata") or {})
        elif kind == "ERROR":
            logger.warning("Dora reported an error: %s", event.get("error"))


def _parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="doraforge bridge to an OpenArm Dora node (dora-openarm-dummy)"
    )
    parser.add_argument(
        "--profile",
        required=True,
        help="robot profile: a shipped name (openarm_dummy) or a YAML file",
    )
    parser.add_argument(
        "--max-age-s",
        type=float,
        default=MAX_AGE_S,
        help="age of the newest OpenArm position beyond which the state is stale",
    )
    parser.add_argument("--log-level", default=environ.get(LOG_LEVEL_ENV, "INFO"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bridge as a Dora node until Dora stops it; exits 2 on a bad profile."""
    parser = _parser(os.environ)
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    try:
        joints = joints_from_profile(load_profile(profile_path(args.profile)))
    except (ProfileError, BridgeConfigError) as exc:
        parser.error(str(exc))
    import dora  # only the Dora process needs the runtime

    node = dora.Node()

    def publish(output: str, value: pa.Array, metadata: Mapping[str, Any] | None) -> None:
        node.send_output(output, value, dict(metadata) if metadata else None)

    try:
        bridge = OpenArmBridge(joints, publish, max_age_s=args.max_age_s)
    except ValueError as exc:
        parser.error(str(exc))
    run(node, bridge)
    return 0


if __name__ == "__main__":
    sys.exit(main())
