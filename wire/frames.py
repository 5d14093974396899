"""Frame conventions both sides of the Provider Wire describe in the same words.

A robot profile (read by the providers) and a ToolSpec's ``robot_frame_profile`` (published
by the Gateway, frozen into PAOS bindings through its hash) name directions the same way,
so the model lives once here, in the only package the Gateway and the providers share.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class AxisDirection(BaseModel):
    """A named direction expressed as a signed axis of a frame (``up`` = ``base`` +z)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    frame: Annotated[str, Field(min_length=1, max_length=128)]
    axis: Literal["x", "y", "z"]
    sign: Literal[-1, 1]
