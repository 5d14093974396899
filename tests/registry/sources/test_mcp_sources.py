"""MCP sources, one module at a time: names, schemas, annotations, results and config.

The servers themselves run for real in ``tests/e2e/registry/test_mcp_sources_e2e.py``.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, TextIO

import mcp.types as types
import pytest

from doraforge.registry.errors import ToolFailure, Unprocessable
from doraforge.registry.gates import Denied
from doraforge.registry.model import CANONICAL_NAME, PROVIDER_NAME, Principal, ToolEntry
from doraforge.registry.sources.config import CredentialRef, parse_server, parse_servers
from doraforge.registry.sources.mcp_servers import (
    McpSource,
    Runtime,
    closed_schema,
    names,
    result_of,
    tool_entry,
)

CONFIG = parse_server("src", {"command": "python"})


def _tool(name: str = "echo", **fields: Any) -> types.Tool:
    schema = fields.pop("inputSchema", {"type": "object", "properties": {"x": {"type": "string"}}})
    return types.Tool(name=name, inputSchema=schema, **fields)


def test_tool_names_are_namespaced_by_server_and_valid_for_every_provider() -> None:
    assert names("time", "get_current_time") == (
        "mcp__time__get_current_time",
        "mcp__time__get_current_time",
    )
    canonical, provider = names("src", "Read File.v2")
    assert (canonical, provider) == ("mcp__src__read_file_v2", "mcp__src__Read_File_v2")


def test_an_over_long_tool_name_keeps_a_prefix_and_a_hash_of_the_whole() -> None:
    long_a, long_b = "x" * 80 + "a", "x" * 80 + "b"
    (canonical_a, provider_a), (_, provider_b) = names("src", long_a), names("src", long_b)
    assert len(provider_a) == 64
    assert provider_a != provider_b
    assert re.fullmatch(PROVIDER_NAME, provider_a)
    assert re.fullmatch(CANONICAL_NAME, canonical_a)


def test_an_open_input_schema_is_closed_to_its_declared_properties_and_says_so() -> None:
    closed = closed_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert closed["additionalProperties"] is False
    assert "closed by doraforge" in closed["$comment"]
    already = {"type": "object", "properties": {}, "additionalProperties": False}
    assert closed_schema(already) == already


def test_a_non_object_input_schema_is_refused() -> None:
    with pytest.raises(ValueError, match="not an object schema"):
        closed_schema({"type": "string"})


def test_read_only_hint_makes_a_read_and_anything_else_a_write() -> None:
    read = tool_entry("src", CONFIG, _tool(annotations=types.ToolAnnotations(readOnlyHint=True)))
    write = tool_entry("src", CONFIG, _tool(annotations=types.ToolAnnotations(idempotentHint=True)))
    assert (read["policy"]["sideEffect"], read["policy"]["idempotent"]) == ("read", True)
    assert (write["policy"]["sideEffect"], write["policy"]["idempotent"]) == ("write", True)
    ToolEntry.model_validate(read)  # a valid registry entry


def test_a_tool_without_annotations_is_a_high_risk_write_whatever_the_server_risk() -> None:
    low = parse_server("src", {"command": "python", "risk": "low"})
    entry = tool_entry("src", low, _tool())
    assert (entry["policy"]["sideEffect"], entry["policy"]["risk"]) == ("write", "high")
    annotated = tool_entry("src", low, _tool(annotations=types.ToolAnnotations(title="t")))
    assert annotated["policy"]["risk"] == "low"


def test_the_default_grant_is_the_servers_own_capability() -> None:
    assert tool_entry("src", CONFIG, _tool())["policy"]["requiredCapabilities"] == ["mcp.src"]
    granted = parse_server("src", {"command": "python", "grants": ["lab.files"]})
    assert tool_entry("src", granted, _tool())["policy"]["requiredCapabilities"] == ["lab.files"]


def test_structured_content_is_the_result_else_the_joined_text() -> None:
    structured = types.CallToolResult(content=[], structuredContent={"a": 1})
    assert result_of("src", "t", structured) == {"a": 1}
    text = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="one"),
            types.TextContent(type="text", text="two"),
        ]
    )
    assert result_of("src", "t", text) == {"text": "one\ntwo"}


def test_an_error_result_is_a_tool_failure_with_its_text() -> None:
    error = types.CallToolResult(
        content=[types.TextContent(type="text", text="no such file")], isError=True
    )
    with pytest.raises(ToolFailure, match="no such file") as caught:
        result_of("src", "read", error)
    assert caught.value.code == "MCP_TOOL_ERROR"


def test_environment_values_are_literals_or_credential_names() -> None:
    config = parse_server(
        "src", {"command": "x", "env": {"MODE": "fast", "TOKEN": {"credential": "src_token"}}}
    )
    assert config.env["TOKEN"] == CredentialRef(credential="src_token")
    assert config.credentials() == ["src_token"]


@pytest.mark.parametrize(
    ("name", "raw", "field"),
    [
        ("src", {"command": "x", "tier": 3}, "tier"),
        ("src", {"command": "x", "surprise": 1}, "surprise"),
        ("src", {"command": "x", "env": {"T": {"secret": "v"}}}, "env"),
        ("src", {"command": "x", "timeoutMs": 5}, "timeoutMs"),
        ("src", {"args": []}, "command"),
    ],
)
def test_a_bad_server_config_names_the_server_and_the_field(
    name: str, raw: dict[str, Any], field: str
) -> None:
    with pytest.raises(Unprocessable) as caught:
        parse_servers({name: raw})
    assert caught.value.code == "MCP_SOURCE_INVALID"
    assert f"mcp_servers.{name}.{field}" in caught.value.message


@pytest.mark.parametrize("name", ["Src", "a__b", "1st", "x" * 40, "with-dash"])
def test_a_server_name_that_cannot_form_a_tool_name_is_refused(name: str) -> None:
    with pytest.raises(Unprocessable, match="not a server name"):
        parse_server(name, {"command": "x"})


def _no_process(path: Path) -> TextIO:
    raise AssertionError(f"no server process is started in this test ({path})")


def _source(tmp_path: Path) -> McpSource:
    """A source with no tier installed: nothing can ever be spawned."""
    runtime = Runtime(tiers={}, open_errlog=_no_process)
    return McpSource(
        "src", CONFIG, runtime=runtime, credentials={}, home=tmp_path, on_tools=lambda *_: None
    )


def test_a_server_not_running_is_unavailable_in_the_catalog_and_its_calls_retryable(
    tmp_path: Path,
) -> None:
    source = _source(tmp_path)
    with pytest.raises(Denied) as shown:
        source.admit(None)  # a catalog read: the availability it shows
    assert shown.value.code == "MCP_SOURCE_UNAVAILABLE"
    source.admit(Principal(id="p", scope="agent"))  # a call passes on to the adapter
    with pytest.raises(ToolFailure) as failed:
        asyncio.run(source.call("echo", {}, write=True))
    assert (failed.value.code, failed.value.retryable) == ("MCP_SOURCE_UNAVAILABLE", True)
    assert "GET /api/sources/mcp" in failed.value.message


def test_a_missing_tier_is_reported_in_the_servers_row(tmp_path: Path) -> None:
    async def reason() -> tuple[str, str]:
        source = _source(tmp_path)
        source.start()
        await source.wait_ready(5)
        row = source.status()
        await source.stop()
        return row["state"], row["reason"]

    state, why = asyncio.run(reason())
    assert state == "failed"  # not retried: a restart cannot install a tier
    assert why.startswith("MCP_SOURCE_TIER_UNKNOWN")
