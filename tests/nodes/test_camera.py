"""Behaviour of the ``camera`` endpoint: references to the newest frame, never pixels."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from forge_msgs import Image

from doraforge.nodes.camera.endpoint import definition
from tests.nodes.provider_harness import HandlerHarness
from tests.support.clock import FakeClock

pytestmark = pytest.mark.anyio

STAMP_NS = 1_700_000_000_123_456_789


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def camera(clock: FakeClock) -> HandlerHarness:
    return HandlerHarness(definition(clock=clock, endpoint_instance_id="ep-c"))


def deliver(camera: HandlerHarness, source: str, seq: int, stamp_ns: int = STAMP_NS) -> None:
    pixels = np.full((480, 640, 3), seq % 255, dtype=np.uint8)
    frame = Image.from_numpy(pixels, encoding="rgb8").to_arrow().to_struct_array()
    metadata = {"seq": seq, "stamp_ns": stamp_ns, "source": source}
    camera.definition.data_plane.on_input(f"image_{source}", frame, metadata)  # type: ignore[union-attr]


async def capture(camera: HandlerHarness, source: str) -> Mapping[str, Any]:
    return (await camera.invoke("capture", {"source": source})).payload


async def test_capture_returns_a_reference_to_the_newest_frame(
    camera: HandlerHarness, clock: FakeClock
) -> None:
    deliver(camera, "scene", 7, STAMP_NS - 50_000_000)
    deliver(camera, "scene", 8)
    deliver(camera, "wrist", 3)
    clock.advance(0.25)
    payload = await capture(camera, "scene")
    assert payload["result"] == {
        "status": "succeeded",
        "outputs": {
            "source": "scene",
            "seq": 8,
            "captured_at_ms": STAMP_NS // 1_000_000,
            "width": 640,
            "height": 480,
            "encoding": "rgb8",
            "ref": "frame://scene/8",
            "age_ms": 250,
        },
    }
    assert len(json.dumps(payload)) < 1_000  # a reference, never the pixels


async def test_an_older_frame_arriving_late_does_not_replace_the_newest(
    camera: HandlerHarness,
) -> None:
    deliver(camera, "wrist", 5)
    deliver(camera, "wrist", 4)
    assert (await capture(camera, "wrist"))["result"]["outputs"]["seq"] == 5


async def test_capture_before_any_frame_fails_with_camera_no_frame(
    camera: HandlerHarness,
) -> None:
    result = (await capture(camera, "wrist"))["result"]
    assert result["status"] == "failed"
    assert result["error"]["code"] == "CAMERA_NO_FRAME"


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"source": "thermal"}, "CAMERA_UNKNOWN_SOURCE"),
        ({"source": 1}, "CAMERA_INVALID_ARGUMENTS"),
        ({}, "CAMERA_INVALID_ARGUMENTS"),
        ({"source": "scene", "encoding": "png"}, "CAMERA_INVALID_ARGUMENTS"),
    ],
)
async def test_bad_capture_arguments_are_rejected(
    camera: HandlerHarness, arguments: dict[str, Any], code: str
) -> None:
    response = await camera.invoke("capture", arguments)
    assert response.payload["outcome"] == "rejected"
    assert response.payload["error"]["code"] == code


async def test_status_is_degraded_until_every_source_streams(
    camera: HandlerHarness, clock: FakeClock
) -> None:
    status = camera.definition.status
    assert status is not None
    assert status().state == "degraded"
    deliver(camera, "scene", 1)
    deliver(camera, "wrist", 1)
    assert status().state == "ready"
    clock.advance(3.0)
    assert status().state == "degraded"
    assert status().details["stale_sources"] == ["scene", "wrist"]


async def test_malformed_frames_are_dropped(camera: HandlerHarness) -> None:
    plane = camera.definition.data_plane
    assert plane is not None
    frame = Image.from_numpy(np.zeros((2, 2, 3), np.uint8), encoding="rgb8").to_arrow()
    plane.on_input("image_scene", frame.to_struct_array(), {"seq": "x", "stamp_ns": 1})
    plane.on_input("image_scene", frame.to_struct_array(), {})
    result = (await capture(camera, "scene"))["result"]
    assert result["error"]["code"] == "CAMERA_NO_FRAME"
