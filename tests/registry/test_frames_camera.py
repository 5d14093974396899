"""forge.camera.frame against a real Gateway's observations over a real socket: the newest
frame within the budgets, the robot state beside it (or ``state: null`` and a code), an
unknown source listing the real ones; and the catalog entries of both frame tools."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from forge_msgs import Image

from doraforge.gateway.config import ImageSource, ObservationsConfig
from doraforge.gateway.core import Gateway
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.errors import ForgeTimeout
from doraforge.paos.home import PaosHome, open_service
from doraforge.registry.errors import ToolFailure
from doraforge.registry.frames import MAX_JPEG_BYTES, FrameReader
from doraforge.registry.model import Principal
from doraforge.registry.robot_tools import RobotTools, register_robot_tools
from doraforge.registry.server import new_service
from doraforge.registry.settings import ServerSettings
from tests.gateway.harness import mock_config
from tests.gateway.support import live_gateway
from tests.registry.server_support import call_body

pytestmark = pytest.mark.anyio

OBSERVATIONS = ObservationsConfig(
    images=[
        ImageSource(source="scene", input="image_scene"),
        ImageSource(source="wrist", input="image_wrist"),
    ]
)
ARM = {
    "joints": {"shoulder_pan": 0.1234567, "elbow": -1.5, "bad": "x"},
    "velocities": {"shoulder_pan": 0.0},
    "position": [0.3, 0.0, 0.25],
    "yaw": 0.0,
    "base_frame": "base",
    "tool_frame": "tool_center",
    "stale_ms": 4,
    "moving": False,
}
GRIPPER = {"width": 0.08, "holding": False, "joint_positions": {"gripper": 0.04}, "stale_ms": 3}


@dataclass
class Cell:
    gateway: Gateway
    url: str

    def publish(self, pixels: np.ndarray, *, seq: int, stamp_ns: int, source: str) -> None:
        image = Image.from_numpy(pixels).to_arrow()
        self.gateway.observations.on_input(
            f"image_{source}", image, {"seq": seq, "stamp_ns": stamp_ns}
        )


@dataclass
class FixedGateway:
    """The one seam faked here: which Gateway a skill name reaches (SkillGateways.url)."""

    address: str
    asked: list[str] = field(default_factory=list)

    async def url(self, skill: str) -> str:
        self.asked.append(skill)
        return self.address


@dataclass
class StateService:
    """A TaskService whose clients are real but whose state Queries answer as scripted."""

    clients: dict[str, ForgeToolClient]
    answers: dict[str, Any]

    def client(self, url: str) -> ForgeToolClient:
        return self.clients.setdefault(url, ForgeToolClient(url))

    async def query(self, tool_id: str, arguments: dict[str, Any], **options: Any) -> Any:
        assert arguments == {}
        assert options["timeout_ms"] == 2_000
        answer = self.answers[tool_id]
        if isinstance(answer, Exception):
            raise answer
        return {"response": {"result": answer}}


@pytest.fixture
def cell() -> Iterator[Cell]:
    gateway = Gateway(mock_config(observations=OBSERVATIONS), send=lambda *_: None)
    with live_gateway(gateway) as live:
        yield Cell(gateway, live.url)


def textured(height: int, width: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.integers(0, 256, (height, width, 3), dtype=np.uint8)


def reader(cell: Cell, service: Any) -> tuple[FrameReader, FixedGateway]:
    gateways = FixedGateway(cell.url)
    return FrameReader(gateways, lambda: service), gateways  # type: ignore[arg-type]


async def test_the_newest_frame_of_the_first_source_comes_with_the_robot_state(
    cell: Cell,
) -> None:
    stamp = time.time_ns()
    cell.publish(textured(720, 1280), seq=4, stamp_ns=stamp - 1000, source="scene")
    cell.publish(textured(720, 1280), seq=5, stamp_ns=stamp, source="scene")
    ok = {"status": "succeeded"}
    service = StateService(
        {}, {"arm.state": {**ok, "outputs": ARM}, "gripper.state": {**ok, "outputs": GRIPPER}}
    )
    frames, gateways = reader(cell, service)
    answer = await frames.camera_frame({"skill": "pick-place"})
    await service.client(cell.url).aclose()
    assert gateways.asked == ["pick-place"]
    assert (answer["source"], answer["seq"], answer["capturedAtNs"]) == ("scene", 5, str(stamp))
    assert answer["capturedAt"].endswith("Z")
    image = answer["image"]
    data = base64.b64decode(image["data"])
    assert hashlib.sha256(data).hexdigest() == image["sha256"]
    assert image["bytes"] == len(data) <= MAX_JPEG_BYTES
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert pixels is not None
    assert pixels.shape == (image["height"], image["width"], 3)
    assert (image["originalWidth"], image["originalHeight"]) == (1280, 720)
    assert image["width"] <= 320
    assert answer["state"] == {
        "arm": {
            "joints": {"shoulder_pan": 0.12346, "elbow": -1.5},
            "position": [0.3, 0.0, 0.25],
            "yaw": 0.0,
            "moving": False,
            "stale_ms": 4,
        },
        "gripper": {"width": 0.08, "holding": False, "stale_ms": 3},
    }
    assert "stateError" not in answer


async def test_a_worst_case_frame_and_its_state_fit_the_result_budget(cell: Cell) -> None:
    # Noise at exactly the pixel budget: no downscale averages it, the encoder must cut.
    cell.publish(textured(240, 320), seq=1, stamp_ns=time.time_ns(), source="scene")
    long_names = {f"joint_{i:02d}_{'x' * 50}": float(i) / 3 for i in range(40)}
    outputs = {**ARM, "joints": long_names}
    ok = {"status": "succeeded"}
    answers = {"arm.state": {**ok, "outputs": outputs}, "gripper.state": {**ok, "outputs": GRIPPER}}
    service = StateService({}, answers)
    frames, _ = reader(cell, service)
    answer = await frames.camera_frame({"skill": "pick-place"})
    await service.client(cell.url).aclose()
    assert answer["image"]["bytes"] > MAX_JPEG_BYTES * 0.75  # the budget was really pressed
    assert len(answer["state"]["arm"]["joints"]) == 16
    assert len(json.dumps(answer, separators=(",", ":"))) <= 20_000


async def test_a_named_source_is_read_and_an_unknown_one_lists_the_real_ones(
    cell: Cell, tmp_path: Path
) -> None:
    cell.publish(textured(48, 64), seq=9, stamp_ns=time.time_ns(), source="wrist")
    service = open_service(PaosHome(tmp_path))
    frames, _ = reader(cell, service)
    try:
        wrist = await frames.camera_frame({"skill": "pick-place", "source": "wrist"})
        with pytest.raises(ToolFailure) as unknown:
            await frames.camera_frame({"skill": "pick-place", "source": "gripper_cam"})
        with pytest.raises(ToolFailure) as empty:
            await frames.camera_frame({"skill": "pick-place", "source": "scene"})
    finally:
        await service.aclose()
        service.store.close()
    assert (wrist["source"], wrist["seq"]) == ("wrist", 9)
    # The mock Gateway has no arm.state: the frame still answers, with the state's code.
    assert wrist["state"] is None
    assert wrist["stateError"]["toolId"] == "arm.state"
    assert wrist["stateError"]["code"].startswith("FORGE_")
    assert unknown.value.code == "FRAME_UNKNOWN_SOURCE"
    assert unknown.value.details == {"sources": ["scene", "wrist"]}
    assert "scene, wrist" in unknown.value.message
    # No frame from scene yet: the Gateway's retryable 503, passed on as it is.
    assert empty.value.retryable is True
    assert empty.value.code == "FORGE_OBSERVATION_NO_FRAME"


async def test_a_state_query_that_times_out_leaves_the_frame_with_state_null(cell: Cell) -> None:
    cell.publish(textured(48, 64), seq=1, stamp_ns=time.time_ns(), source="scene")
    timeout = ForgeTimeout("FORGE_CLIENT_TIMEOUT", "GET /tools/arm.state timed out; details")
    failed = {"status": "failed", "error": {"code": "GRIPPER_NO_STATE", "message": "none yet"}}
    for answers, code, tool_id in (
        ({"arm.state": timeout, "gripper.state": failed}, "FORGE_CLIENT_TIMEOUT", "arm.state"),
        (
            {"arm.state": {"status": "succeeded", "outputs": ARM}, "gripper.state": failed},
            "GRIPPER_NO_STATE",
            "gripper.state",
        ),
    ):
        service = StateService({}, answers)
        frames, _ = reader(cell, service)
        answer = await frames.camera_frame({"skill": "pick-place"})
        await service.client(cell.url).aclose()
        assert answer["state"] is None
        assert answer["stateError"]["code"] == code
        assert answer["stateError"]["toolId"] == tool_id
        assert "timed out" not in answer["stateError"]["message"]  # never the client's text
        assert answer["seq"] == 1


def _catalog(tmp_path: Path) -> Any:
    service = new_service(ServerSettings())
    register_robot_tools(service, RobotTools(PaosHome(tmp_path), lambda: None, lambda: None))
    return service


def test_both_frame_tools_are_low_risk_reads_with_closed_schemas(tmp_path: Path) -> None:
    service = _catalog(tmp_path)
    for name, provider in (
        ("forge.camera.frame", "forge_camera_frame"),
        ("forge.evidence.frame", "forge_evidence_frame"),
    ):
        entry = service.resolve(name)
        assert entry is not None
        assert entry.providerName == provider
        assert entry.policy.requiredCapabilities == ["robot.read"]
        assert (entry.policy.sideEffect, entry.policy.risk) == ("read", "low")
        assert entry.policy.scopes == ["agent", "ui"]
        assert entry.input_schema["additionalProperties"] is False
        assert not any("url" in key for key in entry.input_schema["properties"])
        image = entry.output_schema["properties"]["image"]["properties"]
        assert image["data"]["maxLength"] == 16_000


async def test_a_frame_call_that_names_a_url_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    service = _catalog(tmp_path)
    principal = Principal(id="t", scope="agent", grants=frozenset({"robot.read"}))
    arguments = {"skill": "pick-place", "gateway_url": "http://127.0.0.1:1"}
    refused = await service.call(call_body("forge.camera.frame", arguments), principal)
    ungranted = await service.call(
        call_body("forge.camera.frame", {"skill": "pick-place"}, "r-2"),
        Principal(id="t", scope="agent", grants=frozenset()),
    )
    assert refused["state"] == "denied"
    assert refused["error"]["code"] == "TOOL_INVALID_ARGUMENTS"
    assert ungranted["error"]["code"] == "TOOL_CAPABILITY_DENIED"
