"""A ToolSpec's SHA-256 is a contract: PAOS freezes it in a binding and compares it on every
call, so the bytes the Gateway hashes must not move when the code that hashes them does."""

from __future__ import annotations

from typing import Any

from doraforge.gateway.catalog import Catalog
from doraforge.gateway.config import ToolSpecConfig
from doraforge.paos.client import spec_sha256

SPEC: dict[str, Any] = {
    "tool_id": "arm.move_to",
    "implementation_id": "doraforge.arm/1",
    "endpoint_id": "arm",
    "operation": "move_to",
    "semantics": "action",
    "description": "Move the tool to a pose — über precise, 到达 target",
    "input_schema": {
        "type": "object",
        "properties": {
            "position": {"type": "array", "items": {"type": "number"}, "minItems": 3},
            "speed": {"type": "number", "maximum": 1.5, "default": 0.25},
        },
        "required": ["position"],
    },
    "output_schema": {"type": "object"},
    "readiness": ["endpoint_registered", "endpoint_ready"],
    "robot_frame_profile": {
        "robot_id": "panda",
        "base_frame": "base",
        "tool_frame": "tcp",
        "frames": {"camera": "cam_link"},
        "directions": {
            "up": {"frame": "base", "axis": "z", "sign": 1},
            "forward": {"frame": "base", "axis": "x", "sign": -1},
        },
    },
}
# Computed by the Gateway before canonical hashing moved into doraforge.wire.
PINNED_SHA256 = "12aea9831c12842b304d689699de0f47765a537d1153f8838e905ff4afa544a8"
PINNED_REVISION = "38cc80b295513097"


def test_the_gateway_toolspec_hash_is_unchanged() -> None:
    catalog = Catalog([ToolSpecConfig.model_validate(SPEC)])
    spec = catalog.get("arm.move_to")
    assert spec is not None
    assert spec.sha256 == PINNED_SHA256
    assert catalog.revision() == PINNED_REVISION


def test_paos_computes_the_same_hash_from_the_published_document() -> None:
    spec = Catalog([ToolSpecConfig.model_validate(SPEC)]).get("arm.move_to")
    assert spec is not None
    assert spec_sha256(spec.document) == PINNED_SHA256
    assert "über".encode() in spec.canonical  # UTF-8 bytes, not \u escapes
