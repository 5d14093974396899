"""The ``arm`` endpoint: motion Actions and a state Query over the joint data plane.

Nothing here imports ``dora``; :func:`definition` is what both the Dora node and an
in-process test build on. Dora ids: inputs ``tool_request``, ``joint_state``; outputs
``tool_response``, ``joint_command`` (sparse position commands for the arm joints).
"""

from __future__ import annotations

from forge_tool import TOOL_ENDPOINT_PROTOCOL, ToolEndpointDescriptor, ToolOperationDescriptor

from nodes.arm.config import ArmConfig
from nodes.arm.planners import HomePlanner, Kinematics, MoveJointsPlanner, MoveToPosePlanner
from nodes.arm.state import ArmStateQuery
from nodes.definition import EndpointDefinition, new_endpoint_instance_id
from nodes.motion.action import MotionAction, MotionGuard, motion_status
from nodes.motion.follow import Follower
from nodes.motion.plane import JointPlane
from nodes.motion.timing import RealTiming, Timing

ENDPOINT_ID = "arm"
PREFIX = "ARM"
MOTIONS = ("move_to_pose", "move_joints", "home")


def _motion(name: str) -> ToolOperationDescriptor:
    return ToolOperationDescriptor(
        name=name, semantics="action", cancellable=True, status_supported=True, max_concurrency=1
    )


DESCRIPTOR = ToolEndpointDescriptor(
    protocol_version=TOOL_ENDPOINT_PROTOCOL,
    endpoint_id=ENDPOINT_ID,
    operations=(
        *(_motion(name) for name in MOTIONS),
        ToolOperationDescriptor(name="arm_state", semantics="query", max_concurrency=16),
    ),
)


def definition(
    config: ArmConfig,
    kinematics: Kinematics,
    *,
    timing: Timing | None = None,
    endpoint_instance_id: str | None = None,
) -> EndpointDefinition:
    """Build the arm endpoint for one process start (its data plane included)."""
    timing = timing or RealTiming()
    plane = JointPlane(config.names, timing.now)
    follower = Follower(plane, timing, config.follow)
    guard = MotionGuard(MOTIONS)
    planners = {
        "move_to_pose": MoveToPosePlanner(config, kinematics),
        "move_joints": MoveJointsPlanner(config, kinematics),
        "home": HomePlanner(config, kinematics),
    }
    operations = {
        name: MotionAction(name, planner, follower=follower, guard=guard, prefix=PREFIX)
        for name, planner in planners.items()
    }
    return EndpointDefinition(
        descriptor=DESCRIPTOR,
        operations={**operations, "arm_state": ArmStateQuery(config, kinematics, plane, guard)},
        status=lambda: motion_status(ENDPOINT_ID, follower, guard),
        endpoint_instance_id=endpoint_instance_id or new_endpoint_instance_id(),
        data_plane=plane,
    )
