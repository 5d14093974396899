from __future__ import annotations

from typing import Any

import pytest

from doraforge.registry.api_tools.bundle import parse_bundle
from doraforge.registry.api_tools.errors import ToolFailure
from doraforge.registry.api_tools.response import RawResponse, dot_path, interpret, loose, truncate


@pytest.mark.parametrize(
    ("left", "right", "same"),
    [
        (0, "0", True),
        (0.0, "0", True),
        (200, "200", True),
        (True, "true", True),
        (False, "false", True),
        ("Success", "success", True),
        (1, "0", False),
        (True, 1, False),
        (None, "0", False),
    ],
)
def test_loose_comparison(left: Any, right: Any, same: bool) -> None:
    assert (loose(left) == loose(right)) is same


def test_dot_paths_and_truncation() -> None:
    document = {"a": {"b": [10, {"c": "x"}]}}
    assert dot_path(document, "a.b.1.c") == "x"
    assert dot_path(document, "a.b.0") == 10
    assert dot_path(document, "a.z") is not None
    assert truncate("abcdef", 3) == ("abc…[truncated, 3/6 chars]", True)
    assert truncate("abc", 3) == ("abc", False)


def _tool(response: dict[str, Any]) -> Any:
    return parse_bundle(
        {
            "schemaVersion": 1,
            "name": "svc",
            "baseUrl": "https://api.example.com",
            "tools": [{"name": "t", "description": "d", "path": "/", "response": response}],
        }
    ).tools[0]


def test_success_true_and_string_codes() -> None:
    envelope = {"codeField": "ok", "success": [True], "payloadField": "data.items"}
    tool = _tool({"type": "json", "envelope": envelope})
    body = b'{"ok": "true", "data": {"items": [1, 2]}}'
    assert interpret(tool, RawResponse(200, "application/json", body))["content"] == "[1, 2]"
    with pytest.raises(ToolFailure) as info:
        interpret(tool, RawResponse(200, "application/json", b'{"ok": "true", "data": {}}'))
    assert info.value.code == "API_PAYLOAD_MISSING"


def test_invalid_json_and_missing_code() -> None:
    tool = _tool({"type": "json", "envelope": {"codeField": "code", "success": [0]}})
    with pytest.raises(ToolFailure) as info:
        interpret(tool, RawResponse(200, "application/json", b"{not json"))
    assert info.value.code == "API_RESPONSE_INVALID_JSON"
    with pytest.raises(ToolFailure) as info:
        interpret(tool, RawResponse(200, "application/json", b"{}"))
    assert info.value.code == "API_ENVELOPE_ERROR"
    assert "code=None" in info.value.message
