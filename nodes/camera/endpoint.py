"""The ``camera`` endpoint: Query ``capture`` answers a reference to the newest frame.

Pixels never cross the tool plane: a caller gets ``frame://<source>/<seq>`` plus the
capture time and geometry, and fetches the bytes from the Gateway's observation stream.
Dora ids: inputs ``tool_request``, ``image_<source>`` (``image_scene``, ``image_wrist``);
output ``tool_response``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from forge_tool import (
    TOOL_ENDPOINT_PROTOCOL,
    EndpointStatus,
    ToolContext,
    ToolEndpointDescriptor,
    ToolError,
    ToolOperationDescriptor,
    ToolRequest,
    ToolResult,
)

from doraforge.nodes.camera.frames import FramePlane
from doraforge.nodes.definition import EndpointDefinition, new_endpoint_instance_id
from doraforge.nodes.motion.arguments import ArgumentReader
from doraforge.nodes.motion.errors import rejection

ENDPOINT_ID = "camera"
SOURCES = ("scene", "wrist")
INVALID = "CAMERA_INVALID_ARGUMENTS"
UNKNOWN_SOURCE = "CAMERA_UNKNOWN_SOURCE"
NO_FRAME = "CAMERA_NO_FRAME"
#: A source silent this long makes the endpoint ``degraded``.
STALE_S = 2.0

DESCRIPTOR = ToolEndpointDescriptor(
    protocol_version=TOOL_ENDPOINT_PROTOCOL,
    endpoint_id=ENDPOINT_ID,
    operations=(ToolOperationDescriptor(name="capture", semantics="query", max_concurrency=64),),
)


class CaptureQuery:
    """``{"source"}`` in; ``{source, seq, captured_at_ms, width, height, encoding, ref,
    age_ms}`` out, or ``failed`` with ``CAMERA_NO_FRAME`` before the source's first frame."""

    def __init__(self, plane: FramePlane) -> None:
        self._plane = plane

    async def query(self, request: ToolRequest, context: ToolContext) -> ToolResult:
        reader = ArgumentReader(dict(request.arguments), code=INVALID, allowed={"source"})
        source = reader.raw("source")
        if not isinstance(source, str):
            raise reader.error("source must be a string")
        if source not in self._plane.sources:
            raise rejection(
                UNKNOWN_SOURCE, f"unknown camera source {source!r}", known=list(self._plane.sources)
            )
        header = self._plane.latest(source)
        if header is None:
            error = ToolError(
                code=NO_FRAME, message=f"no frame from {source!r} yet", retryable=True
            )
            return ToolResult(status="failed", error=error)
        outputs = {
            "source": source,
            "seq": header.seq,
            "captured_at_ms": header.stamp_ns // 1_000_000,
            "width": header.width,
            "height": header.height,
            "encoding": header.encoding,
            "ref": f"frame://{source}/{header.seq}",
            "age_ms": int(self._plane.age(source) * 1000),
        }
        return ToolResult(status="succeeded", outputs=outputs)


def camera_status(plane: FramePlane) -> EndpointStatus:
    """``degraded`` while any source has been silent for ``STALE_S``."""
    ages = {source: plane.age(source) for source in plane.sources}
    stale = sorted(source for source, age in ages.items() if age > STALE_S)
    return EndpointStatus(
        endpoint_id=ENDPOINT_ID,
        state="degraded" if stale else "ready",
        details={
            "stale_sources": stale,
            "active_by_operation": {"capture": 0},
            "saturated_operations": [],
        },
    )


def definition(
    *,
    sources: Sequence[str] = SOURCES,
    clock: Callable[[], float] = time.monotonic,
    endpoint_instance_id: str | None = None,
) -> EndpointDefinition:
    """Build the camera endpoint for one process start (its data plane included)."""
    plane = FramePlane(sources, clock)
    return EndpointDefinition(
        descriptor=DESCRIPTOR,
        operations={"capture": CaptureQuery(plane)},
        status=lambda: camera_status(plane),
        endpoint_instance_id=endpoint_instance_id or new_endpoint_instance_id(),
        data_plane=plane,
    )
