"""The ``gripper`` endpoint: ``grasp``/``release`` Actions and the ``gripper_state`` Query.

Dora ids: inputs ``tool_request``, ``joint_state``; outputs ``tool_response``,
``joint_command`` (sparse position commands for the gripper joints only).
"""

from __future__ import annotations

from forge_tool import TOOL_ENDPOINT_PROTOCOL, ToolEndpointDescriptor, ToolOperationDescriptor

from nodes.definition import EndpointDefinition, new_endpoint_instance_id
from nodes.gripper.config import GripperConfig
from nodes.gripper.planners import GraspPlanner, GripMemory, ReleasePlanner
from nodes.gripper.state import GripperStateQuery
from nodes.motion.action import MotionAction, MotionGuard, motion_status
from nodes.motion.follow import Follower
from nodes.motion.plane import JointPlane
from nodes.motion.timing import RealTiming, Timing

ENDPOINT_ID = "gripper"
PREFIX = "GRIPPER"
MOTIONS = ("grasp", "release")


def _motion(name: str) -> ToolOperationDescriptor:
    return ToolOperationDescriptor(
        name=name, semantics="action", cancellable=True, status_supported=True, max_concurrency=1
    )


DESCRIPTOR = ToolEndpointDescriptor(
    protocol_version=TOOL_ENDPOINT_PROTOCOL,
    endpoint_id=ENDPOINT_ID,
    operations=(
        *(_motion(name) for name in MOTIONS),
        ToolOperationDescriptor(name="gripper_state", semantics="query", max_concurrency=16),
    ),
)


def definition(
    config: GripperConfig,
    *,
    timing: Timing | None = None,
    endpoint_instance_id: str | None = None,
) -> EndpointDefinition:
    """Build the gripper endpoint for one process start (its data plane included)."""
    timing = timing or RealTiming()
    plane = JointPlane(config.joints, timing.now)
    follower = Follower(plane, timing, config.follow)
    guard = MotionGuard(MOTIONS)
    memory = GripMemory()
    planners = {"grasp": GraspPlanner(config, memory), "release": ReleasePlanner(config, memory)}
    operations = {
        name: MotionAction(name, planner, follower=follower, guard=guard, prefix=PREFIX)
        for name, planner in planners.items()
    }
    return EndpointDefinition(
        descriptor=DESCRIPTOR,
        operations={**operations, "gripper_state": GripperStateQuery(config, plane, memory)},
        status=lambda: motion_status(ENDPOINT_ID, follower, guard),
        endpoint_instance_id=endpoint_instance_id or new_endpoint_instance_id(),
        data_plane=plane,
    )
