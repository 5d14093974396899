"""End to end: an agent sees the simulated cell. ``forge.camera.frame`` and
``forge.evidence.frame`` are called through ``POST /api/tools/call`` of ``doraforge serve``'s
app on a real socket, over the installed sim skill started by a real ``dora run``; the
base64 JPEGs decode with OpenCV to real MuJoCo renders within the frame budgets. The
official MCP SDK client reads the same frame as an ImageContent block."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import cv2
import httpx
import numpy as np
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from doraforge.paos.evidence import BLANK_STDDEV
from doraforge.registry.frames import MAX_HEIGHT, MAX_JPEG_BYTES, MAX_WIDTH
from doraforge.registry.robot_tools import RobotTools
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from tests.e2e.sim_skill import SKILL, started_sim, task_service
from tests.paths import PROJECT_ROOT
from tests.registry.server_support import call_body, running
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

ARM_JOINTS = {"shoulder_pan", "shoulder_lift", "elbow", "forearm_roll", "wrist_pitch", "wrist_roll"}
FIRST_FRAME_S = 60.0
SCREENSHOTS = PROJECT_ROOT / "docs" / "screenshots"
ACTION_S = 90.0


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """The registry app with the robot tools over the started sim skill, on a socket."""
    with contextmanager(started_sim)(tmp_path_factory.mktemp("frames")) as (home, runtime):
        settings = ServerSettings(
            grants=frozenset({"robot.read", "robot.write"}),
            approvals=frozenset({"*"}),
            mcp_enabled=True,
        )
        robot = RobotTools(home, lambda: task_service(home, runtime), lambda: runtime)
        app = build_app(new_service(settings), settings, robot=robot)
        with running(app) as base, httpx.Client(base_url=base, timeout=60.0) as client:
            yield client


def call(client: httpx.Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One ``portos_tool_call``; its ``portos_tool_result`` (any state)."""
    body = call_body(name, arguments, f"{name}-{time.monotonic_ns()}")
    response = client.post("/api/tools/call", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def completed(client: httpx.Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = call(client, name, arguments)
    assert result["state"] == "completed", result
    value: dict[str, Any] = result["result"]
    return value


def first_frame(client: httpx.Client, source: str | None = None) -> dict[str, Any]:
    """The camera frame once the sim has rendered one (before: a retryable no-frame)."""
    arguments = {"skill": SKILL} if source is None else {"skill": SKILL, "source": source}

    def read() -> dict[str, Any] | None:
        result = call(client, "forge.camera.frame", arguments)
        if result["state"] == "completed":
            value: dict[str, Any] = result["result"]
            return value
        assert result["error"]["retryable"] is True, result
        return None

    return eventually(read, within=FIRST_FRAME_S, what=f"a frame of {source or 'the camera'}")


def rendered(image: dict[str, Any]) -> np.ndarray:
    """The image's JPEG decoded, after checking its budget, size and hash."""
    assert image["mediaType"] == "image/jpeg"
    data = base64.b64decode(image["data"], validate=True)
    assert data.startswith(b"\xff\xd8\xff")
    assert image["bytes"] == len(data) <= MAX_JPEG_BYTES
    assert hashlib.sha256(data).hexdigest() == image["sha256"]
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert pixels is not None
    assert pixels.shape == (image["height"], image["width"], 3)
    assert image["width"] <= MAX_WIDTH
    assert image["height"] <= MAX_HEIGHT
    # A real render of the cell, not a blank buffer.
    assert float(pixels.std()) > BLANK_STDDEV
    return pixels


def stamp_agrees(answer: dict[str, Any]) -> int:
    """The frame's capture time in ns, checked against its ISO form; returns it."""
    stamp_ns = int(answer["capturedAtNs"])
    iso = datetime.fromisoformat(answer["capturedAt"].replace("Z", "+00:00"))
    assert abs(iso.timestamp() - stamp_ns / 1e9) < 0.002
    return stamp_ns


def test_an_agent_sees_the_newest_scene_frame_with_the_arm_and_gripper_state(
    registry: httpx.Client,
) -> None:
    first = first_frame(registry)
    assert first["source"] == "scene"  # the skill's first camera
    pixels = rendered(first["image"])
    # What the agent saw, as the README shows it (written afresh on every run).
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(SCREENSHOTS / "agent-frame.png"), pixels)
    assert abs(time.time_ns() - stamp_agrees(first)) < 30e9
    state = first["state"]
    assert state is not None, first.get("stateError")
    assert set(state["arm"]["joints"]) == ARM_JOINTS
    assert len(state["arm"]["position"]) == 3
    assert isinstance(state["arm"]["moving"], bool)
    assert 0.0 <= state["gripper"]["width"] <= 0.1
    assert isinstance(state["gripper"]["holding"], bool)
    later = completed(registry, "forge.camera.frame", {"skill": SKILL, "source": "scene"})
    assert later["seq"] >= first["seq"]
    assert int(later["capturedAtNs"]) >= int(first["capturedAtNs"])


def test_the_wrist_camera_is_readable_and_an_unknown_source_lists_the_real_ones(
    registry: httpx.Client,
) -> None:
    wrist = first_frame(registry, "wrist")
    assert wrist["source"] == "wrist"
    rendered(wrist["image"])
    unknown = call(registry, "forge.camera.frame", {"skill": SKILL, "source": "top"})
    assert unknown["state"] == "failed"
    assert unknown["error"]["code"] == "FRAME_UNKNOWN_SOURCE"
    assert unknown["error"]["details"]["sources"] == ["scene", "wrist"]


def test_a_tasks_before_and_after_evidence_frames_are_readable_by_reference(
    registry: httpx.Client,
) -> None:
    first_frame(registry)  # the camera renders, so the task's evidence can be captured
    task_id = completed(registry, "forge.task_create", {"skill": SKILL})["task"]["task_id"]
    action = {"task_id": task_id, "tool_id": "arm.home", "arguments": {}}
    record_id = completed(registry, "forge.tool_start_action", action)["record_id"]

    def ended() -> dict[str, Any] | None:
        query = {"task_id": task_id, "record_id": record_id}
        answer = completed(registry, "forge.tool_action_result", query)
        return answer if answer["status"] == "available" else None

    eventually(ended, within=ACTION_S, what="arm.home to end")
    evidence = completed(registry, "forge.task_get", {"task_id": task_id})["evidence"]
    retained = {a["phase"]: a for a in evidence if a.get("error") is None}
    assert set(retained) == {"before", "after"}, evidence
    seen = {}
    for phase, artifact in retained.items():
        reference = {"task_id": task_id, "artifact_id": artifact["artifact_id"]}
        seen[phase] = completed(registry, "forge.evidence.frame", reference)
        frame = seen[phase]
        assert (frame["source"], frame["phase"], frame["seq"]) == ("scene", phase, artifact["seq"])
        assert frame["evidenceSha256"] == artifact["sha256"]
        assert stamp_agrees(frame) == artifact["captured_at_ns"]
        assert "path" not in frame
        rendered(frame["image"])
    assert seen["after"]["seq"] > seen["before"]["seq"]
    missing = call(registry, "forge.evidence.frame", {"task_id": task_id, "artifact_id": "ev-x"})
    assert missing["error"]["code"] == "EVIDENCE_NOT_FOUND"


async def _mcp_frame(url: str) -> types.CallToolResult:
    async with (
        streamable_http_client(url) as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert listed["forge_camera_frame"].annotations is not None
        assert listed["forge_camera_frame"].annotations.readOnlyHint is True
        return await session.call_tool("forge_camera_frame", {"skill": SKILL})


def test_an_mcp_client_gets_the_frame_as_an_image_block(registry: httpx.Client) -> None:
    first_frame(registry)  # rendered at least once, so the MCP call cannot meet a 503
    result = asyncio.run(_mcp_frame(str(registry.base_url.join("/mcp"))))
    assert result.isError is False, result.content
    blocks = [block for block in result.content if isinstance(block, types.ImageContent)]
    assert len(blocks) == 1
    assert blocks[0].mimeType == "image/jpeg"
    structured = result.structuredContent
    assert structured is not None
    assert structured["source"] == "scene"
    assert structured["state"] is not None
    rendered({**structured["image"], "data": blocks[0].data})
