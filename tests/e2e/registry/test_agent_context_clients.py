"""End to end: two MCP clients orient themselves, see the cell and run a saved read recipe
against a real ``doraforge serve`` process over the started sim skill.

The clients are the official Python SDK (``streamable_http_client`` + ``ClientSession``)
and the official TypeScript SDK (``tests/peers/mcp_typescript``, installed by
:mod:`tests.peers.mcp_ts`). Both run the same plan and the same assertions: the five
context tools are listed read-only and idempotent, each answers (profile, then a search
for the skill, then one of the returned references, a console page, and every scope of
the live cell page by page),
the newest camera frame arrives as a JPEG image block described (never repeated) in the
structured result, and the operator's saved recipe runs; every structured result is within
the 20,000-character budget, a context tool's also within about 5,000 tokens by the
documented estimator. A JSON-RPC batch over raw HTTP is answered as an array on protocol
2025-03-26 and refused on 2025-06-18, which has no batches.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import httpx
import mcp.types as types
import numpy as np
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.registry.context.budgets import (
    MAX_RESULT_CHARS,
    MAX_RESULT_TOKENS,
    TOKEN_ESTIMATOR,
    dumps,
    estimate_tokens,
)
from doraforge.registry.context.source import SCOPES
from doraforge.registry.frames import MAX_HEIGHT, MAX_JPEG_BYTES, MAX_WIDTH
from tests.e2e.sim_skill import SKILL, started_sim
from tests.paths import PROJECT_ROOT
from tests.peers import mcp_ts
from tests.support.context_tools import CONTEXT_TOOLS
from tests.support.live_server import ServeProcess, serve_process

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

TOKEN = "agent-context-e2e-token-0123456789"
OPERATOR_TOKEN = "agent-context-e2e-operator-0123456789"
READ_ONLY = {
    "readOnlyHint": True,
    "idempotentHint": True,
    "destructiveHint": False,
    "openWorldHint": False,
}
CALL_TIMEOUT_S = 120.0
SEARCH_LIMIT = 10
#: Well-formed, but no item has it.
UNKNOWN_REF = "skills:" + "0" * 24
FRAME_TOOL = "forge_camera_frame"
FRAME_ARGUMENTS = {"skill": SKILL, "source": "scene"}
#: The operator's 2-step read recipe: the installed skills, then the runtime of the first
#: one (its name bound from step 1's result at call time); both results are returned.
RECIPE = {
    "name": "recipe.cell-overview",
    "description": "The installed skills and the runtime state of the first, in one call.",
    "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
    "steps": [
        {"tool": "forge.skills.installed", "arguments": {}},
        {
            "tool": "forge.runtime.status",
            "arguments": {"skill": {"$step": 1, "pointer": "/skills/0/name"}},
        },
    ],
    "output": [1, 2],
}
#: ``recipe.<slug>`` as the MCP projection names it.
RECIPE_TOOL = "recipe_cell-overview"

type Record = dict[str, Any]
type Step = dict[str, Any]
#: An MCP client run: the endpoint URL and a plan in, the connection and step records out.
type Client = Callable[[str, Sequence[Step]], list[Record]]


@dataclass(frozen=True)
class Served:
    """``doraforge serve`` over the started sim skill, and the home they share."""

    serve: ServeProcess
    home: Path

    @property
    def url(self) -> str:
        return f"{self.serve.base_url}/mcp"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("agent-context")
    options = (
        "--mcp",
        *(option for scope in SCOPES for option in ("--context-scope", scope)),
        "--grant",
        "robot.read",
        "--grant",
        "callToolRecipes",
        "--token-env",
        "CONTEXT_E2E_TOKEN",
        "--operator-token-env",
        "CONTEXT_E2E_OPERATOR_TOKEN",
    )
    env = {"CONTEXT_E2E_TOKEN": TOKEN, "CONTEXT_E2E_OPERATOR_TOKEN": OPERATOR_TOKEN}
    # started_sim's home is tmp/"home", which is where serve_process points --home.
    with (
        contextlib.contextmanager(started_sim)(tmp),
        serve_process(tmp, *options, token=TOKEN, env=env) as serve,
    ):
        yield Served(serve, tmp / "home")
    # Stopped by SIGTERM as an operator stops it: quietly, with nothing to show for a run.
    assert "Traceback" not in serve.errors(), serve.errors()


def _author(served: Served, token: str) -> httpx.Response:
    return httpx.post(
        f"{served.serve.base_url}/api/recipes",
        json=RECIPE,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


@pytest.fixture(scope="module")
def recipe_tool(served: Served) -> str:
    """The MCP name of the recipe the operator saved (the agent's token may not author)."""
    refused = _author(served, TOKEN)
    assert refused.status_code == 403, refused.text
    saved = _author(served, OPERATOR_TOKEN)
    assert saved.status_code in (200, 201), saved.text
    return RECIPE_TOOL


# ------------------------------------------------------------------ the Python SDK client


def _python_block(block: types.ContentBlock) -> Record:
    """A content block as the TypeScript client reports it, plus the raw image bytes."""
    record = block.model_dump(by_alias=True, exclude_none=True, mode="json")
    if record["type"] in ("image", "audio"):
        raw = base64.b64decode(record["data"])
        record.update(
            dataLength=len(record.pop("data")),
            byteLength=len(raw),
            headHex=raw[:8].hex(),
            sha256=hashlib.sha256(raw).hexdigest(),
            bytes=raw,
        )
    return record


async def _python_step(session: ClientSession, index: int, step: Step) -> Record:
    name = step.get("name")
    try:
        if step["op"] == "listTools":
            listed = await session.list_tools()
            tools = [
                t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools
            ]
            return {"step": index, "op": "listTools", "ok": True, "result": {"tools": tools}}
        called = await session.call_tool(str(name), step.get("arguments") or {})
    except Exception as failed:  # recorded for the test to judge, as the TS client does
        error = {"name": type(failed).__name__, "message": str(failed)}
        return {"step": index, "op": step["op"], "name": name, "ok": False, "error": error}
    result = {
        "isError": called.isError,
        "content": [_python_block(block) for block in called.content],
        "structuredContent": called.structuredContent,
    }
    return {"step": index, "op": "callTool", "name": name, "ok": True, "result": result}


async def _python_plan(url: str, plan: Sequence[Step]) -> list[Record]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(CALL_TIMEOUT_S)) as http,
        streamable_http_client(url, http_client=http) as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        initialized = await session.initialize()
        connected = {
            "op": "connect",
            "ok": True,
            "protocolVersion": str(initialized.protocolVersion),
            "serverVersion": initialized.serverInfo.model_dump(mode="json"),
        }
        return [connected] + [await _python_step(session, i, s) for i, s in enumerate(plan)]


def python_sdk(url: str, plan: Sequence[Step]) -> list[Record]:
    return asyncio.run(_python_plan(url, plan))


def typescript_sdk(url: str, plan: Sequence[Step]) -> list[Record]:
    return mcp_ts.run(url, plan, token=TOKEN)


CLIENTS: dict[str, Client] = {"python-sdk": python_sdk, "typescript-sdk": typescript_sdk}


@pytest.fixture(params=sorted(CLIENTS))
def client(request: pytest.FixtureRequest) -> Client:
    return CLIENTS[request.param]


# ------------------------------------------------------------------ assertions


def _structured(record: Record) -> dict[str, Any]:
    """The structured content of a successful tool call, within the result budget."""
    assert record["ok"] is True, record.get("error")
    result = record["result"]
    assert result["isError"] is False, result["content"]
    structured = result["structuredContent"]
    assert isinstance(structured, dict), result
    assert len(dumps(structured)) <= MAX_RESULT_CHARS, (record["name"], len(dumps(structured)))
    return structured


def _context(record: Record) -> dict[str, Any]:
    """:func:`_structured` of a context tool, also within its token budget (by the
    estimator ``context_profile`` documents)."""
    structured = _structured(record)
    assert estimate_tokens(dumps(structured)) <= MAX_RESULT_TOKENS, record["name"]
    return structured


def _tools(record: Record) -> dict[str, dict[str, Any]]:
    assert record["ok"] is True, record.get("error")
    return {tool["name"]: tool for tool in record["result"]["tools"]}


# ------------------------------------------------------------------ tests


def test_both_clients_list_the_forge_read_tools_over_the_running_sim(
    served: Served, client: Client
) -> None:
    connected, listed, installed, status = client(
        served.url,
        [
            mcp_ts.list_tools(),
            mcp_ts.call_tool("forge_skills_installed"),
            mcp_ts.call_tool("forge_runtime_status", {"skill": SKILL}),
        ],
    )
    assert connected["ok"] is True
    tools = _tools(listed)
    assert {"forge_skills_installed", "forge_runtime_status"} <= set(tools)
    assert tools["forge_skills_installed"]["annotations"] == READ_ONLY
    assert [skill["name"] for skill in _structured(installed)["skills"]] == [SKILL]
    assert _structured(status)["runtimes"][0]["state"] == "running"


def test_both_clients_get_a_context_tools_own_error_not_a_schema_failure(
    served: Served, client: Client
) -> None:
    """A context tool advertises a closed ``outputSchema``, and the TypeScript SDK holds
    an error's structured content to it too: while errors carried ``{ok: false, error}``
    there, that client threw its own schema error instead of handing over the tool's."""
    _connected, called = client(served.url, [mcp_ts.call_tool("list_context", {"scope": "x"})])
    assert called["ok"] is True, called.get("error")  # the client took the result
    result = called["result"]
    assert result["isError"] is True
    assert result["structuredContent"] is None
    texts = [block["text"] for block in result["content"] if block["type"] == "text"]
    assert texts[0].startswith("CONTEXT_INVALID_ARGUMENTS: "), texts
    error = json.loads(texts[-1])["error"]
    assert (error["code"], error["retryable"]) == ("CONTEXT_INVALID_ARGUMENTS", False)


BATCH = [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tools/call",
        "params": {"name": "forge_skills_installed", "arguments": {}},
    },
]


def _raw_mcp(served: Served, version: str) -> httpx.Client:
    """A plain HTTP client of ``/mcp`` speaking protocol ``version`` (no SDK in between)."""
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
    }
    return httpx.Client(base_url=served.serve.base_url, headers=headers, timeout=30)


def _initialize(http: httpx.Client, version: str) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw-httpx", "version": "0"},
        },
    }
    initialized = http.post("/mcp", json=initialize)
    assert initialized.status_code == 200, initialized.text
    assert initialized.json()["result"]["protocolVersion"] == version


def test_a_batch_on_protocol_2025_03_26_is_answered_as_an_array(served: Served) -> None:
    with _raw_mcp(served, "2025-03-26") as http:
        _initialize(http, "2025-03-26")
        answered = http.post("/mcp", json=BATCH)
    assert answered.status_code == 200, answered.text
    replies = answered.json()
    assert isinstance(replies, list), replies
    by_id = {reply["id"]: reply for reply in replies}
    # The notification is not answered; every request is, by its own id.
    assert sorted(by_id) == [2, 3, 4], replies
    names = {tool["name"] for tool in by_id[2]["result"]["tools"]}
    assert "forge_skills_installed" in names
    assert by_id[3]["result"] == {}
    called = by_id[4]["result"]
    assert called["isError"] is False, called
    assert [s["name"] for s in called["structuredContent"]["skills"]] == [SKILL]


def test_a_batch_on_a_protocol_without_batches_is_refused(served: Served) -> None:
    with _raw_mcp(served, "2025-06-18") as http:
        _initialize(http, "2025-06-18")
        refused = http.post("/mcp", json=BATCH)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == -32600, error


def test_both_clients_list_the_five_context_tools_read_only_with_their_schemas(
    served: Served, client: Client
) -> None:
    _connected, listed = client(served.url, [mcp_ts.list_tools()])
    tools = _tools(listed)
    assert set(tools) >= CONTEXT_TOOLS, sorted(tools)
    for name in sorted(CONTEXT_TOOLS):
        tool = tools[name]
        assert READ_ONLY.items() <= tool["annotations"].items(), (name, tool["annotations"])
        assert tool["inputSchema"]["type"] == "object", name
        assert tool["outputSchema"]["type"] == "object", name


def _skill_item(search: dict[str, Any]) -> dict[str, Any]:
    skills = [item for item in search["items"] if item["scope"] == "skills"]
    assert skills, search
    assert any(SKILL in item["label"] for item in skills), skills
    return next(item for item in skills if SKILL in item["label"])


def test_both_clients_orient_themselves_from_profile_to_search_to_get(
    served: Served, client: Client
) -> None:
    _connected, profiled, searched, listed, navigated = client(
        served.url,
        [
            mcp_ts.call_tool("context_profile"),
            mcp_ts.call_tool("search_context", {"query": SKILL, "limit": SEARCH_LIMIT}),
            mcp_ts.call_tool("list_context", {"scope": "skills", "limit": 5}),
            mcp_ts.call_tool("resolve_navigation", {"query": "approvals"}),
        ],
    )
    profile = _context(profiled)
    assert profile["profile"] == "metadata"
    assert set(profile["enabledScopes"]) == set(SCOPES)
    assert all(scope["available"] for scope in profile["scopes"]), profile["scopes"]
    assert profile["limits"]["maxResultChars"] == MAX_RESULT_CHARS == 20_000
    assert profile["limits"]["maxResultTokens"] == MAX_RESULT_TOKENS
    assert profile["limits"]["tokenEstimator"] == TOKEN_ESTIMATOR
    assert profile["exclusions"], profile
    search = _context(searched)
    assert search["sourceStatus"] == "fresh"
    # Cut to the limit, and saying so; the small home is inspected whole.
    assert len(search["items"]) <= SEARCH_LIMIT
    assert search["truncated"] is (search["total"] > len(search["items"])), search
    assert search["sourceTruncated"] is False
    ref = _skill_item(search)["ref"]
    page = _context(listed)
    assert page["scope"] == "skills"
    assert page["total"] >= 1
    assert ref in {item["ref"] for item in page["items"]}, page
    assert page["nextCursor"] is None  # one installed skill: one page
    navigation = _context(navigated)
    assert navigation["item"] is not None, navigation
    assert navigation["item"]["route"] == "/console/#/approvals", navigation
    assert navigation["matchedBy"] is not None
    _connected, got, unknown = client(
        served.url,
        [
            mcp_ts.call_tool("get_context", {"ref": ref}),
            mcp_ts.call_tool("get_context", {"ref": UNKNOWN_REF}),
        ],
    )
    item = _context(got)["item"]
    assert item is not None
    assert item["ref"] == ref
    assert SKILL in item["label"]
    assert _context(unknown)["item"] is None  # an answer, not an error
    # Opaque references and metadata only: neither the operator's home nor the checkout
    # the skill was packed from reaches the agent.
    answered = json.dumps([profiled, searched, listed, navigated, got])
    assert str(served.home) not in answered
    assert str(PROJECT_ROOT) not in answered


def _labels(page: dict[str, Any]) -> list[str]:
    return [item["label"] for item in page["items"]]


def test_both_clients_page_every_scope_of_the_live_cell(served: Served, client: Client) -> None:
    _connected, *pages = client(
        served.url,
        [mcp_ts.call_tool("list_context", {"scope": scope, "limit": 25}) for scope in SCOPES],
    )
    listed = {scope: _context(page) for scope, page in zip(SCOPES, pages, strict=True)}
    for scope, page in listed.items():
        assert page["scope"] == scope
        assert page["sourceStatus"] == "fresh", scope
        # A page is not a cut answer: what it leaves out, nextCursor continues from.
        assert page["truncated"] is False, page
        rest = page["total"] - len(page["items"])
        assert page["nextCursor"] == (len(page["items"]) if rest else None), page
    # The running cell, read live: its Gateway's tools ready, its runtime running.
    assert "world.scene_state (Query): ready" in _labels(listed["tools"]), listed["tools"]
    assert any(
        label.startswith(SKILL) and label.endswith("runtime: running")
        for label in _labels(listed["runtime"])
    ), listed["runtime"]
    navigation = listed["navigation"]
    assert navigation["nextCursor"] is not None, "the console and CLI have over 25 entries"
    _connected, following = client(
        served.url,
        [mcp_ts.call_tool("list_context", {"scope": "navigation", "cursor": 25, "limit": 25})],
    )
    second = _context(following)
    first_refs = {item["ref"] for item in navigation["items"]}
    assert first_refs.isdisjoint(item["ref"] for item in second["items"])
    assert second["total"] == navigation["total"]
    assert len(second["items"]) == min(25, navigation["total"] - 25)
    # Nothing has been asked of the cell yet: no tasks, so no evidence.
    assert listed["tasks"]["total"] == 0
    assert listed["evidence"]["total"] == 0


def _only_image(record: Record) -> Record:
    assert record["ok"] is True, record.get("error")
    images: list[Record] = [
        block for block in record["result"]["content"] if block["type"] == "image"
    ]
    assert len(images) == 1, record["result"]["content"]
    return images[0]


def test_both_clients_see_the_newest_scene_frame_as_a_jpeg_image_block(
    served: Served, client: Client
) -> None:
    _connected, framed = client(served.url, [mcp_ts.call_tool(FRAME_TOOL, FRAME_ARGUMENTS)])
    structured = _structured(framed)
    image = _only_image(framed)
    assert image["mimeType"] == "image/jpeg"
    assert image["headHex"].startswith("ffd8ff"), image  # the JPEG start-of-image marker
    assert 1_000 < image["byteLength"] <= MAX_JPEG_BYTES, image
    # The structured result describes the block (by index) instead of repeating its data.
    described = structured["image"]
    assert "data" not in described
    assert framed["result"]["content"][described["dataInContent"]]["type"] == "image"
    assert described["sha256"] == image["sha256"]
    assert described["bytes"] == image["byteLength"]
    assert described["width"] <= MAX_WIDTH
    assert described["height"] <= MAX_HEIGHT
    # Where and when it was seen, and the robot beside it, come with the picture.
    assert structured["source"] == "scene"
    assert isinstance(structured["seq"], int)
    assert structured["capturedAt"]
    assert structured["state"] is not None, structured.get("stateError")
    assert set(structured["state"]) == {"arm", "gripper"}


def _decoded_frame(block: Record) -> np.ndarray[Any, Any]:
    image = cv2.imdecode(np.frombuffer(block["bytes"], dtype=np.uint8), cv2.IMREAD_COLOR)
    assert image is not None, "the frame's bytes do not decode as an image"
    return image


def test_the_python_client_decodes_the_frame_as_a_non_blank_picture(served: Served) -> None:
    _connected, framed = python_sdk(served.url, [mcp_ts.call_tool(FRAME_TOOL, FRAME_ARGUMENTS)])
    picture = _decoded_frame(_only_image(framed))
    described = framed["result"]["structuredContent"]["image"]
    assert picture.shape[:2] == (described["height"], described["width"])
    assert min(picture.shape[:2]) >= 64, picture.shape
    # A rendered cell has structure; a blank or single-colour frame has almost none.
    assert float(picture.std()) > 8.0, float(picture.std())


def test_both_clients_run_the_saved_read_recipe(
    served: Served, recipe_tool: str, client: Client
) -> None:
    _connected, listed, ran = client(
        served.url, [mcp_ts.list_tools(), mcp_ts.call_tool(recipe_tool)]
    )
    tools = _tools(listed)
    assert recipe_tool in tools, sorted(tools)
    assert READ_ONLY.items() <= tools[recipe_tool]["annotations"].items()
    assert tools[recipe_tool]["description"].endswith("[local recipe, rev 1]")
    answer = _structured(ran)
    assert answer["recipe"] == RECIPE["name"]
    assert answer["revision"] == 1
    installed, status = answer["results"]
    assert (installed["step"], installed["tool"]) == (1, "forge.skills.installed")
    assert [skill["name"] for skill in installed["result"]["skills"]] == [SKILL]
    assert (status["step"], status["tool"]) == (2, "forge.runtime.status")
    assert status["result"]["runtimes"][0]["state"] == "running"
