"""Query ``arm_state``: measured joints and the tool pose from FK, with their age."""

from __future__ import annotations

from forge_tool import ToolContext, ToolRequest, ToolResult

from doraforge.nodes.arm.config import ArmConfig
from doraforge.nodes.arm.planners import INVALID, Kinematics, arm_pose
from doraforge.nodes.motion.action import MotionGuard
from doraforge.nodes.motion.arguments import ArgumentReader
from doraforge.nodes.motion.endpoint import no_state
from doraforge.nodes.motion.plane import JointPlane

NO_STATE = "ARM_NO_STATE"


class ArmStateQuery:
    """``{}`` in; joints, velocities, tool pose, frames, ``stale_ms`` and ``moving`` out.

    Before any ``joint_state`` has arrived the result is ``failed`` with ``ARM_NO_STATE``.
    """

    def __init__(
        self, config: ArmConfig, kinematics: Kinematics, plane: JointPlane, guard: MotionGuard
    ) -> None:
        self._config = config
        self._kinematics = kinematics
        self._plane = plane
        self._guard = guard

    async def query(self, request: ToolRequest, context: ToolContext) -> ToolResult:
        ArgumentReader(dict(request.arguments), code=INVALID, allowed=set())
        sample = self._plane.latest()
        if sample is None:
            return no_state(NO_STATE)
        outputs = arm_pose(self._config, self._kinematics, sample)
        outputs["velocities"] = dict(
            zip(self._config.names, map(float, sample.velocities), strict=True)
        )
        outputs["base_frame"] = self._config.base_frame
        outputs["tool_frame"] = self._config.tool_frame
        outputs["stale_ms"] = int(self._plane.age() * 1000)
        outputs["moving"] = self._guard.busy
        return ToolResult(status="succeeded", outputs=outputs)
