"""End to end: the official MCP Inspector CLI (``inspector --cli URL --transport http``,
installed by :mod:`tests.peers.mcp_inspector`) as a third MCP client of a real
``doraforge serve``, beside the Python and TypeScript SDK clients of
``test_agent_context_clients.py``.

The registry serves an empty PAOS home with ``robot.read`` granted and a bearer token
required, so every tool it offers reads the home or doraforge's own state: no robot and no
cell is started. The Inspector lists exactly the granted tools and the five context tools,
each with the input schema of the registry's own catalog; calls ``context_profile`` and
``forge_skills_installed`` and reads their structured results; is refused without the
token and with a wrong one (the registry's 401 reaches the CLI as ``auth_required``,
carrying the registry's ``AUTH_REQUIRED`` / ``AUTH_INVALID``); and a call with arguments
the tool's schema refuses, and a context tool's own error, come back as the registry's
``isError`` results (``TOOL_INVALID_ARGUMENTS``, ``CONTEXT_INVALID_ARGUMENTS``: the error
object in ``_meta`` and as JSON text, no structured content).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.peers import mcp_inspector
from tests.peers.mcp_inspector import EXIT_AUTH_REQUIRED, EXIT_TOOL_IS_ERROR
from tests.support.context_tools import CONTEXT_TOOLS
from tests.support.live_server import ServeProcess, serve_process
from tests.support.mcp_errors import error_of

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

TOKEN = "inspector-e2e-token-0123456789abcdef"
TOKEN_VARIABLE = "DORAFORGE_INSPECTOR_E2E_TOKEN"
GRANTS = {"robot.read"}
#: The README's four default scopes (tasks and evidence are opt-in).
DEFAULT_SCOPES = ["navigation", "skills", "tools", "runtime"]
READ_ONLY = {
    "readOnlyHint": True,
    "idempotentHint": True,
    "destructiveHint": False,
    "openWorldHint": False,
}
SKILL_NAME = {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    tmp = tmp_path_factory.mktemp("mcp-inspector")
    options = ("--mcp", "--grant", "robot.read", "--token-env", TOKEN_VARIABLE)
    with serve_process(tmp, *options, token=TOKEN, env={TOKEN_VARIABLE: TOKEN}) as serve:
        yield serve
    assert "Traceback" not in serve.errors(), serve.errors()


def _url(served: ServeProcess) -> str:
    return f"{served.base_url}/mcp"


def _catalog(served: ServeProcess) -> dict[str, dict[str, Any]]:
    """The registry's whole catalog over HTTP, by MCP name (granted or not)."""
    answer = httpx.get(
        f"{served.base_url}/api/tools",
        params={"format": "portos"},
        headers=dict(served.bearer()),
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return {tool["providerName"]: tool for tool in answer.json()["tools"]}


def _structured(answer: mcp_inspector.Answer) -> dict[str, Any]:
    """A successful call's structured content, which its one text block repeats."""
    result = answer.result
    assert result["isError"] is False, result["content"]
    structured = result["structuredContent"]
    assert isinstance(structured, dict), result
    [block] = result["content"]
    assert block["type"] == "text"
    assert json.loads(block["text"]) == structured
    return structured


def test_the_inspector_lists_the_granted_tools_with_the_catalogs_input_schemas(
    served: ServeProcess,
) -> None:
    listed = mcp_inspector.run(_url(served), mcp_inspector.list_tools(), token=TOKEN)
    tools = {tool["name"]: tool for tool in listed.result["tools"]}
    catalog = _catalog(served)
    granted = {
        name
        for name, tool in catalog.items()
        if set(tool["policy"]["requiredCapabilities"]) <= GRANTS
    }
    # Only what robot.read grants, and the context tools; the writes stay in the catalog.
    assert set(tools) == granted | CONTEXT_TOOLS, sorted(set(tools) ^ (granted | CONTEXT_TOOLS))
    assert {"forge_skills_installed", "forge_runtime_status", "forge_tool_query"} <= granted
    assert {"forge_tool_start_action", "forge_task_create"} <= set(catalog) - set(tools)
    for name in sorted(granted):
        assert tools[name]["inputSchema"] == catalog[name]["input_schema"], name
        assert tools[name]["annotations"] == READ_ONLY, name
    assert tools["forge_skills_installed"]["inputSchema"] == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert tools["forge_runtime_status"]["inputSchema"] == {
        "type": "object",
        "properties": {"skill": SKILL_NAME},
        "additionalProperties": False,
    }
    for name in sorted(CONTEXT_TOOLS):
        assert READ_ONLY.items() <= tools[name]["annotations"].items(), name
        assert tools[name]["inputSchema"]["type"] == "object", name
        assert tools[name]["inputSchema"]["additionalProperties"] is False, name
    list_context = tools["list_context"]["inputSchema"]
    assert list_context["required"] == ["scope"]
    assert set(list_context["properties"]) == {"scope", "cursor", "limit"}
    assert list_context["properties"]["limit"]["maximum"] == 25


def test_the_inspector_calls_context_profile_and_reads_its_structured_result(
    served: ServeProcess,
) -> None:
    called = mcp_inspector.run(
        _url(served), mcp_inspector.call_tool("context_profile"), token=TOKEN
    )
    profile = _structured(called)
    assert profile["profile"] == "metadata"
    assert profile["enabledScopes"] == DEFAULT_SCOPES
    available = {scope["name"] for scope in profile["scopes"] if scope["available"]}
    assert available == set(DEFAULT_SCOPES)
    assert profile["grants"] == sorted(GRANTS)
    assert profile["limits"]["maxResultChars"] == 20_000
    assert {"credentials", "tokens", "paths"} <= {item["id"] for item in profile["exclusions"]}
    assert TOKEN not in json.dumps(called.output)


def test_the_inspector_calls_a_granted_read_through_the_registrys_gates(
    served: ServeProcess,
) -> None:
    called = mcp_inspector.run(
        _url(served), mcp_inspector.call_tool("forge_skills_installed"), token=TOKEN
    )
    assert _structured(called) == {"skills": []}  # the home is empty
    meta = called.result["_meta"]
    assert meta["doraforge/state"] == "completed", meta
    assert meta["doraforge/requestId"].startswith("mcp-"), meta


@pytest.mark.parametrize(
    ("token", "code"),
    [(None, "AUTH_REQUIRED"), ("inspector-e2e-wrong-token-0123456789", "AUTH_INVALID")],
    ids=["no-token", "wrong-token"],
)
def test_the_inspector_is_refused_without_the_registrys_bearer_token(
    served: ServeProcess, token: str | None, code: str
) -> None:
    refused = mcp_inspector.run(
        _url(served),
        mcp_inspector.list_tools(),
        token=token,
        exit_code=EXIT_AUTH_REQUIRED,
    )
    assert refused.output is None  # no tool list reached the client
    assert refused.error is not None
    error = refused.error["error"]
    assert error["code"] == "auth_required", error
    # The CLI quotes the registry's JSON-RPC answer to the 401 it got.
    quoted = json.loads(error["message"][error["message"].index("{") :])
    assert quoted["error"]["data"]["code"] == code, quoted


@pytest.mark.parametrize(
    ("arguments", "path", "named"),
    [
        ({"gateway_url": "http://127.0.0.1:9"}, "(arguments)", "gateway_url"),
        ({"skill": "Not/A/Skill"}, "skill", "Not/A/Skill"),
    ],
    ids=["unknown-parameter", "skill-pattern"],
)
def test_invalid_arguments_come_back_as_the_registrys_error_result(
    served: ServeProcess, arguments: dict[str, str], path: str, named: str
) -> None:
    answer = mcp_inspector.run(
        _url(served),
        mcp_inspector.call_tool("forge_runtime_status", arguments),
        token=TOKEN,
        exit_code=EXIT_TOOL_IS_ERROR,
    )
    assert answer.error == {
        "error": {
            "code": "tool_is_error",
            "message": "Tool 'forge_runtime_status' returned isError:true.",
        }
    }
    result = answer.result
    assert result["_meta"]["doraforge/state"] == "denied", result["_meta"]
    error = error_of(result)
    assert error["code"] == "TOOL_INVALID_ARGUMENTS", error
    assert error["retryable"] is False
    [problem] = error["details"]["errors"]
    assert problem["path"] == path, problem
    assert named in problem["message"], problem


def test_a_context_tools_error_reaches_the_inspector_as_the_tools_own_error(
    served: ServeProcess,
) -> None:
    """A context tool advertises a closed ``outputSchema``; the Inspector holds an error's
    structured content to it too, so an error carrying ``{ok: false, error}`` there came
    back as the client's own schema failure. Errors carry none: the tool's error arrives."""
    answer = mcp_inspector.run(
        _url(served),
        mcp_inspector.call_tool("list_context", {"scope": "nope"}),
        token=TOKEN,
        exit_code=EXIT_TOOL_IS_ERROR,
    )
    assert answer.error is not None
    assert answer.error["error"]["code"] == "tool_is_error", answer.error
    error = error_of(answer.result)
    assert error["code"] == "CONTEXT_INVALID_ARGUMENTS", error
