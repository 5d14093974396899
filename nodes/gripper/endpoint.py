"""The ``gripper`` endpoint: ``grasp``/``release`` Actions and the ``gripper_state`` Query.

Dora ids: inputs ``tool_request``, ``joint_state``; outputs ``tool_response``,
``joint_command`` (sparse position commands for the gripper joints only).
"""

from __future__ import annotations

from forge_tool import ToolEndpointDescriptor

from doraforge.nodes.definition import EndpointDefinition
from doraforge.nodes.gripper.config import GripperConfig
from doraforge.nodes.gripper.planners import GraspPlanner, GripMemory, ReleasePlanner
from doraforge.nodes.gripper.state import GripperStateQuery
from doraforge.nodes.motion.endpoint import MotionStack, motion_descriptor
from doraforge.nodes.timing import RealTiming, Timing

ENDPOINT_ID = "gripper"
PREFIX = "GRIPPER"
MOTIONS = ("grasp", "release")


DESCRIPTOR = motion_descriptor(ENDPOINT_ID, MOTIONS, "gripper_state")


def _descriptor(endpoint_id: str) -> ToolEndpointDescriptor:
    return motion_descriptor(endpoint_id, MOTIONS, "gripper_state")


def definition(
    config: GripperConfig,
    *,
    timing: Timing | None = None,
    endpoint_instance_id: str | None = None,
    endpoint_id: str = ENDPOINT_ID,
) -> EndpointDefinition:
    """Build the gripper endpoint for one process start (its data plane included); a
    second arm's gripper registers under its own ``endpoint_id`` (``gripper_left``)."""
    stack = MotionStack(config.joints, timing or RealTiming(), config.follow, MOTIONS)
    memory = GripMemory()
    planners = {"grasp": GraspPlanner(config, memory), "release": ReleasePlanner(config, memory)}
    state = GripperStateQuery(config, stack.plane, memory)
    return stack.definition(
        DESCRIPTOR if endpoint_id == ENDPOINT_ID else _descriptor(endpoint_id),
        planners,
        {"gripper_state": state},
        prefix=PREFIX,
        endpoint_instance_id=endpoint_instance_id,
    )
