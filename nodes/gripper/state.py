"""Query ``gripper_state``: width, holding and joint positions from the newest joint_state."""

from __future__ import annotations

from forge_tool import ToolContext, ToolRequest, ToolResult

from doraforge.nodes.gripper.config import GripperConfig
from doraforge.nodes.gripper.planners import INVALID, GripMemory, gripper_outputs
from doraforge.nodes.motion.arguments import ArgumentReader
from doraforge.nodes.motion.endpoint import no_state
from doraforge.nodes.motion.plane import JointPlane

NO_STATE = "GRIPPER_NO_STATE"


class GripperStateQuery:
    """``{}`` in; ``{"width", "holding", "joint_positions", "stale_ms"}`` out.

    ``holding`` is the last grasp's verdict, withdrawn once the fingers have closed past
    the object (it slipped out). Before any joint_state: ``failed`` with ``GRIPPER_NO_STATE``.
    """

    def __init__(self, config: GripperConfig, plane: JointPlane, memory: GripMemory) -> None:
        self._config = config
        self._plane = plane
        self._memory = memory

    async def query(self, request: ToolRequest, context: ToolContext) -> ToolResult:
        ArgumentReader(dict(request.arguments), code=INVALID, allowed=set())
        sample = self._plane.latest()
        if sample is None:
            return no_state(NO_STATE)
        config = self._config
        closed = config.width_of(sample.positions) <= config.closed_width + config.contact_margin
        outputs = gripper_outputs(config, sample, self._memory.holding and not closed)
        outputs["stale_ms"] = int(self._plane.age() * 1000)
        return ToolResult(status="succeeded", outputs=outputs)
