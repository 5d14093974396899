"""The ``arm`` endpoint: motion Actions and a state Query over the joint data plane.

Nothing here imports ``dora``; :func:`definition` is what both the Dora node and an
in-process test build on. Dora ids: inputs ``tool_request``, ``joint_state``; outputs
``tool_response``, ``joint_command`` (sparse position commands for the arm joints).
"""

from __future__ import annotations

from forge_tool import ToolEndpointDescriptor

from doraforge.nodes.arm.config import ArmConfig
from doraforge.nodes.arm.planners import (
    HomePlanner,
    Kinematics,
    MoveJointsPlanner,
    MoveToPosePlanner,
)
from doraforge.nodes.arm.state import ArmStateQuery
from doraforge.nodes.definition import EndpointDefinition
from doraforge.nodes.motion.endpoint import MotionStack, motion_descriptor
from doraforge.nodes.timing import RealTiming, Timing

ENDPOINT_ID = "arm"
PREFIX = "ARM"
MOTIONS = ("move_to_pose", "move_joints", "home")


DESCRIPTOR = motion_descriptor(ENDPOINT_ID, MOTIONS, "arm_state")


def _descriptor(endpoint_id: str) -> ToolEndpointDescriptor:
    return motion_descriptor(endpoint_id, MOTIONS, "arm_state")


def definition(
    config: ArmConfig,
    kinematics: Kinematics,
    *,
    timing: Timing | None = None,
    endpoint_instance_id: str | None = None,
    endpoint_id: str = ENDPOINT_ID,
) -> EndpointDefinition:
    """Build the arm endpoint for one process start (its data plane included); a second
    arm of the same robot registers under its own ``endpoint_id`` (``arm_left``)."""
    stack = MotionStack(config.names, timing or RealTiming(), config.follow, MOTIONS)
    planners = {
        "move_to_pose": MoveToPosePlanner(config, kinematics),
        "move_joints": MoveJointsPlanner(config, kinematics),
        "home": HomePlanner(config, kinematics),
    }
    state = ArmStateQuery(config, kinematics, stack.plane, stack.guard)
    return stack.definition(
        DESCRIPTOR if endpoint_id == ENDPOINT_ID else _descriptor(endpoint_id),
        planners,
        {"arm_state": state},
        prefix=PREFIX,
        endpoint_instance_id=endpoint_instance_id,
    )
