"""A semantic tool result that carries ``image: {mediaType, data}`` reaches an MCP client
as an image block: the official SDK client over a real socket sees a decodable PNG, the
structured part keeps every field but the data, and the whole result stays inside
20,000 characters plus the image data."""

from __future__ import annotations

import base64
import json
from typing import Any

import cv2
import numpy as np
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.registry.context.budgets import MAX_IMAGE_DATA_CHARS
from doraforge.registry.mcp_results import tool_result
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import OBJECT, running


def _png() -> str:
    picture = np.zeros((48, 64, 3), dtype=np.uint8)
    picture[10:30, 20:40] = (0, 0, 255)
    ok, encoded = cv2.imencode(".png", picture)
    assert ok
    return base64.b64encode(encoded.tobytes()).decode()


def _framed(data: str, **extra: Any) -> dict[str, Any]:
    image = {"mediaType": "image/png", "data": data, "width": 64, "height": 48}
    return {"source": "scene", "seq": 12, "image": image, "state": {"arm": [0.1, 0.2]}, **extra}


def _completed(result: dict[str, Any]) -> dict[str, Any]:
    return {"requestId": "r-1", "state": "completed", "result": result}


def test_an_image_becomes_block_zero_and_the_structured_part_points_at_it() -> None:
    data = _png()
    result = tool_result(_completed(_framed(data)), ServerSettings())
    image, text = result["content"]
    assert image == {"type": "image", "data": data, "mimeType": "image/png"}
    structured = result["structuredContent"]
    assert structured["image"] == {
        "mediaType": "image/png",
        "width": 64,
        "height": 48,
        "dataInContent": 0,
    }
    assert structured["seq"] == 12
    assert json.loads(text["text"]) == structured
    assert data not in text["text"]


def test_a_large_structured_part_is_cut_so_the_whole_result_fits() -> None:
    data = "A" * MAX_IMAGE_DATA_CHARS
    noisy = _framed(data, log=['"\\' * 3_000 for _ in range(20)])
    result = tool_result(_completed(noisy), ServerSettings())
    serialized = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    assert len(serialized) - len(data) <= 20_000
    assert result["content"][0]["data"] == data
    assert result["_meta"]["doraforge/truncated"] is True
    assert result["structuredContent"]["truncated"] is True


@pytest.mark.parametrize(
    "image",
    [
        {"mediaType": "image/gif", "data": "R0lGOD=="},
        {"mediaType": "image/png", "data": "not base64!"},
        {"mediaType": "image/png", "data": "A" * (MAX_IMAGE_DATA_CHARS + 4)},
        {"mediaType": "image/png"},
        "frame://scene/12",
    ],
)
def test_anything_else_named_image_stays_structured_only(image: Any) -> None:
    result = tool_result(_completed({"image": image}), ServerSettings())
    assert [block["type"] for block in result["content"]] == ["text"]
    assert len(result["content"][0]["text"]) <= 20_000


@pytest.mark.anyio
async def test_the_sdk_client_receives_a_decodable_image_block() -> None:
    data = _png()

    async def frame(_arguments: dict[str, Any]) -> dict[str, Any]:
        return _framed(data)

    settings = ServerSettings(grants=frozenset({"robot.read"}), mcp_enabled=True)
    service = new_service(settings)
    entry = {
        "name": "demo.frame",
        "providerName": "demo_frame",
        "description": "The newest demo frame.",
        "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
        "output_schema": OBJECT,
        "policy": {
            "scopes": ["agent"],
            "requiredCapabilities": ["robot.read"],
            "sideEffect": "read",
            "idempotent": True,
            "risk": "low",
        },
    }
    service.register(entry, frame)
    with running(build_app(service, settings)) as url:
        async with (
            streamable_http_client(f"{url}/mcp") as (read, write, _session_id),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            called = await session.call_tool("demo_frame", {})
    assert called.isError is False
    block = called.content[0]
    assert block.type == "image"
    assert block.mimeType == "image/png"
    decoded = cv2.imdecode(np.frombuffer(base64.b64decode(block.data), np.uint8), cv2.IMREAD_COLOR)
    assert decoded is not None
    assert decoded.shape == (48, 64, 3)
    assert called.structuredContent is not None
    assert called.structuredContent["image"]["dataInContent"] == 0
