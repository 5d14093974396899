"""The ``gripper`` endpoint: ``grasp``/``release`` Actions and the ``gripper_state`` Query.

Dora ids: inputs ``tool_request``, ``joint_state``; outputs ``tool_response``,
``joint_command`` (sparse position commands for the gripper joints only).
"""

from __future__ import annotations

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


def definition(
    config: GripperConfig,
    *,
    timing: Timing | None = None,
    endpoint_instance_id: str | None = None,
) -> EndpointDefinition:
    """Build the gripper endpoint for one process start (its data plane included)."""
    stack = MotionStack(config.joints, timing or RealTiming(), config.follow, MOTIONS)
    memory = GripMemory()
    planners = {"grasp": GraspPlanner(config, memory), "release": ReleasePlanner(config, memory)}
    state = GripperStateQuery(config, stack.plane, memory)
    return stack.definition(
        DESCRIPTOR,
        planners,
        {"gripper_state": state},
        prefix=PREFIX,
        endpoint_instance_id=endpoint_instance_id,
    )
