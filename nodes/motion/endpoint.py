"""Assembling a motion endpoint (arm, gripper): descriptor, controller stack, definition."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forge_tool import (
    TOOL_ENDPOINT_PROTOCOL,
    ToolEndpointDescriptor,
    ToolError,
    ToolOperationDescriptor,
    ToolResult,
)

from doraforge.nodes.definition import EndpointDefinition, new_endpoint_instance_id
from doraforge.nodes.motion.action import MotionAction, MotionGuard, motion_status
from doraforge.nodes.motion.follow import Follower, FollowLimits
from doraforge.nodes.motion.plane import JointPlane, JointSample
from doraforge.nodes.timing import Timing


def motion_descriptor(
    endpoint_id: str, motions: tuple[str, ...], state_query: str
) -> ToolEndpointDescriptor:
    """Cancellable one-at-a-time motion Actions plus a state Query."""
    actions = tuple(
        ToolOperationDescriptor(
            name=name,
            semantics="action",
            cancellable=True,
            status_supported=True,
            max_concurrency=1,
        )
        for name in motions
    )
    query = ToolOperationDescriptor(name=state_query, semantics="query", max_concurrency=16)
    return ToolEndpointDescriptor(
        protocol_version=TOOL_ENDPOINT_PROTOCOL,
        endpoint_id=endpoint_id,
        operations=(*actions, query),
    )


class MotionStack:
    """The joint data plane, the follower that drives it and the one-motion guard."""

    def __init__(
        self,
        joints: tuple[str, ...] | list[str],
        timing: Timing,
        limits: FollowLimits,
        motions: tuple[str, ...],
    ) -> None:
        self.plane = JointPlane(joints, timing.now)
        self.follower = Follower(self.plane, timing, limits)
        self.guard = MotionGuard(motions)

    def definition(
        self,
        descriptor: ToolEndpointDescriptor,
        planners: Mapping[str, Any],
        queries: Mapping[str, Any],
        *,
        prefix: str,
        endpoint_instance_id: str | None,
    ) -> EndpointDefinition:
        """The endpoint definition with one :class:`MotionAction` per planner."""
        actions = {
            name: MotionAction(
                name, planner, follower=self.follower, guard=self.guard, prefix=prefix
            )
            for name, planner in planners.items()
        }
        endpoint_id = descriptor.endpoint_id
        return EndpointDefinition(
            descriptor=descriptor,
            operations={**actions, **queries},
            status=lambda: motion_status(endpoint_id, self.follower, self.guard),
            endpoint_instance_id=endpoint_instance_id or new_endpoint_instance_id(),
            data_plane=self.plane,
        )


def no_state(code: str) -> ToolResult:
    """The state Query's answer before any joint_state arrived."""
    error = ToolError(code=code, message="no joint_state received yet", retryable=True)
    return ToolResult(status="failed", error=error)


__all__ = ["JointSample", "MotionStack", "motion_descriptor", "no_state"]
