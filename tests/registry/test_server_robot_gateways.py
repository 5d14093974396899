"""No URL from an agent: the forge.* tools the registry offers take a ``skill``, never a
``gateway_url``; a call naming one is refused with nothing dialled; a skill's Gateway comes
from its installed manifest and runtime state, through one shared client; failures carry no
internal exception text."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from doraforge.paos.agent_tools import TOOLS, AgentTool
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.paos.tasks import TaskService
from doraforge.registry.robot_tools import RobotTools, register_robot_tools
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skills import source as skill_source
from tests.registry.listeners import accepted, counting_listener
from tests.registry.server_support import running
from tests.support.mcp_errors import error_of

BOTH = frozenset({"robot.read", "robot.write"})
ACCEPT = "application/json, text/event-stream"
SKILL = "pick-place"
RECORDED_URL = "http://127.0.0.1:9301"  # where the runtime says the skill's Gateway is


class RecordingTransport(httpx.AsyncBaseTransport):
    """A Gateway stand-in that records every request and answers the read routes."""

    def __init__(self, fault: Exception | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.fault = fault

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.fault is not None:
            raise self.fault
        path = request.url.path
        if path == "/tools":
            data: dict[str, Any] = {"gateway_identity": {"id": "g"}, "tools": [{"tool_id": "a.b"}]}
        elif path.endswith("/context"):
            data = {"ready": True}
        else:
            data = {"tool_id": "a.b", "endpoint_id": "e", "operation": "o"}
        return httpx.Response(200, json={"ok": True, "data": data})


@dataclass
class Clients:
    """The TaskService's client factory: real clients over one recording transport."""

    transport: RecordingTransport
    urls: list[str] = field(default_factory=list)

    def __call__(self, url: str) -> ForgeToolClient:
        self.urls.append(url)
        return ForgeToolClient(url, transport=self.transport)


@dataclass
class FakeRuntime:
    """``healthy_runtime`` of a skill that runs at ``RECORDED_URL``, or ``refusal``."""

    refusal: str | None = None
    asked: list[str] = field(default_factory=list)

    def healthy_runtime(self, name: str) -> Any:
        self.asked.append(name)
        if self.refusal is not None:
            raise RuntimeStateError(self.refusal, f"/srv/home/runtime/{name}.json: {self.refusal}")
        return _State(gateway_url=RECORDED_URL)

    def status(self, name: str) -> Any:
        return None


@dataclass(frozen=True)
class _State:
    gateway_url: str


@dataclass
class Stack:
    home: PaosHome
    clients: Clients
    runtime: FakeRuntime
    robot: RobotTools


def _stack(tmp_path: Path, *, installed: bool = True, **runtime: Any) -> Stack:
    home = PaosHome(tmp_path / "home")
    if installed:  # the installed bundle's manifest names 127.0.0.1:9201
        shutil.copytree(skill_source(SKILL), home.skills_dir / SKILL / "current")
    clients = Clients(RecordingTransport(runtime.pop("fault", None)))
    fake_runtime = FakeRuntime(**runtime)

    def task_service() -> TaskService:
        home.root.mkdir(parents=True, exist_ok=True)
        store = AgentTaskStore(home.root / "tasks.db")
        return TaskService(store, clients, workspace=home.root)

    robot = RobotTools(home, task_service, lambda: fake_runtime)
    return Stack(home, clients, fake_runtime, robot)


def _settings(**changes: Any) -> ServerSettings:
    return ServerSettings(grants=BOTH, approvals=frozenset({"*"}), mcp_enabled=True, **changes)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Stack]]:
    stack = _stack(tmp_path)
    app = build_app(new_service(_settings()), _settings(), robot=stack.robot)
    with running(app) as url:
        yield url, stack


def _mentions_a_url(schema: Any) -> bool:
    return "gateway_url" in json.dumps(schema) or '"url"' in json.dumps(schema)


def _inputs(tools: list[dict[str, Any]]) -> list[Any]:
    """Each projected tool's input schema, whatever the format (a result may name a URL as
    data, web_search's results do; an argument never may)."""
    return [
        tool.get("function", {}).get("parameters")
        or tool.get("input_schema")
        or tool.get("inputSchema")
        for tool in tools
    ]


def _minimal(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy ``schema``: its required properties (and the first of any
    ``oneOf`` alternatives) with plain values."""
    required = list(schema.get("required", []))
    for alternatives in (schema.get("oneOf"), schema.get("anyOf")):
        if alternatives:
            required += alternatives[0].get("required", [])
    values: dict[str, Any] = {}
    for name in required:
        spec = schema["properties"][name]
        if "enum" in spec:
            values[name] = spec["enum"][0]
        elif spec.get("type") == "object":
            values[name] = {}
        elif spec.get("type") == "integer":
            values[name] = 1
        else:
            values[name] = SKILL if name == "skill" else "t-1"
    return values


def _rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def _mcp(url: str, message: dict[str, Any]) -> dict[str, Any]:
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    answer: dict[str, Any] = httpx.post(
        f"{url}/mcp", json=message, headers=headers, timeout=10
    ).json()
    return answer


def test_no_forge_tool_the_registry_offers_takes_a_gateway_url(
    served: tuple[str, Stack],
) -> None:
    url, _stack = served
    portos = httpx.get(f"{url}/api/tools", timeout=10).json()["tools"]
    for fmt in ("openai", "anthropic", "mcp"):
        projected = httpx.get(f"{url}/api/tools", params={"format": fmt}, timeout=10).json()
        assert not _mentions_a_url(_inputs(projected["tools"])), fmt
    listed = _mcp(url, _rpc("tools/list"))["result"]["tools"]
    manifest = httpx.get(f"{url}/api/agent-context/manifest", timeout=10).json()
    forge = [tool for tool in portos if tool["name"].startswith("forge.")]
    assert len(forge) == len(listed) == len(manifest["tools"]) >= 18
    for tool in forge:
        assert not _mentions_a_url(tool["input_schema"]), tool["name"]
    assert not _mentions_a_url(_inputs(listed))
    assert not _mentions_a_url(_inputs(manifest["tools"]))
    by_name = {tool["name"]: tool for tool in forge}
    for name in ("forge.tool_context", "forge.tool_query", "forge.task_create"):
        assert "skill" in by_name[name]["input_schema"]["properties"]


def test_a_call_naming_a_gateway_url_is_refused_as_an_unknown_parameter_and_nothing_is_dialled(
    served: tuple[str, Stack],
) -> None:
    url, stack = served
    tools = httpx.get(f"{url}/api/tools", timeout=10).json()["tools"]
    forge = [t for t in tools if t["name"].startswith("forge.")]
    with counting_listener() as listener:
        target = f"http://127.0.0.1:{listener.getsockname()[1]}"
        for number, tool in enumerate(forge):
            arguments = _minimal(tool["input_schema"])
            # The arguments alone are valid: only the added gateway_url can be refused.
            assert Draft202012Validator(tool["input_schema"]).is_valid(arguments), tool["name"]
            body = {
                "type": "portos_tool_call",
                "requestId": f"url-{number}",
                "name": tool["name"],
                "arguments": {**arguments, "gateway_url": target},
            }
            over_http = httpx.post(f"{url}/api/tools/call", json=body, timeout=10)
            assert over_http.status_code == 403, tool["name"]
            error = over_http.json()["error"]
            assert error["code"] == "TOOL_INVALID_ARGUMENTS", tool["name"]
            assert "gateway_url" in json.dumps(error["details"]["errors"])
            params = {"name": tool["name"], "arguments": body["arguments"]}
            over_mcp = _mcp(url, _rpc("tools/call", params))["result"]
            assert error_of(over_mcp)["code"] == "TOOL_INVALID_ARGUMENTS"
        assert accepted(listener) == 0
    assert stack.clients.transport.requests == []
    assert stack.runtime.asked == []


@pytest.mark.anyio
async def test_a_skill_call_reaches_the_gateway_its_runtime_recorded_through_one_client(
    tmp_path: Path,
) -> None:
    stack = _stack(tmp_path)
    service = new_service(_settings())
    build_app(service, _settings(), robot=stack.robot)
    principal = _principal(service)
    contexts = await service.call(_body("c1", "forge.tool_contexts", skill=SKILL), principal)
    context = await service.call(
        _body("c2", "forge.tool_context", skill=SKILL, tool_id="a.b"), principal
    )
    assert contexts["state"] == "completed", contexts
    assert context["state"] == "completed", context
    assert contexts["result"]["gateway_url"] == RECORDED_URL
    assert context["result"]["context"] == {"ready": True}
    hosts = {(r.url.host, r.url.port) for r in stack.clients.transport.requests}
    assert hosts == {("127.0.0.1", 9301)}  # never the manifest's 9201, never a caller's
    assert stack.clients.urls == [RECORDED_URL]  # one shared client for both calls
    assert stack.runtime.asked == [SKILL, SKILL]
    await stack.robot.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("installed", "refusal", "code"),
    [
        (False, None, "SKILL_NOT_INSTALLED"),
        (True, "SKILL_NOT_RUNNING", "SKILL_NOT_RUNNING"),
        (True, "SKILL_RUNTIME_UNHEALTHY", "SKILL_RUNTIME_UNHEALTHY"),
    ],
)
async def test_a_skill_not_installed_or_not_running_is_a_tool_failure_and_never_a_dial(
    tmp_path: Path, installed: bool, refusal: str | None, code: str
) -> None:
    stack = _stack(tmp_path, installed=installed, refusal=refusal)
    service = new_service(_settings())
    build_app(service, _settings(), robot=stack.robot)
    principal = _principal(service)
    calls = [
        _body("q", "forge.tool_query", skill=SKILL, tool_id="a.b"),
        _body("c", "forge.tool_context", skill=SKILL, tool_id="a.b"),
        _body("t", "forge.tool_contexts", skill=SKILL),
    ]
    for body in calls:
        result = await service.call(body, principal)
        assert result["state"] == "failed", result
        assert result["error"]["code"] == code
        assert "/srv/home" not in json.dumps(result)  # no path from the runtime's message
    assert stack.clients.transport.requests == []
    assert stack.clients.urls == []
    await stack.robot.aclose()


@pytest.mark.anyio
async def test_an_httpx_error_reaches_the_agent_without_its_text(tmp_path: Path) -> None:
    fault = httpx.ConnectError("[Errno 111] connect to /var/run/secret.sock refused")
    stack = _stack(tmp_path, fault=fault)
    service = new_service(_settings())
    build_app(service, _settings(), robot=stack.robot)
    principal = _principal(service)
    for body in (
        _body("q", "forge.tool_query", skill=SKILL, tool_id="a.b"),
        _body("t", "forge.tool_contexts", skill=SKILL),
    ):
        result = await service.call(body, principal)
        assert result["state"] == "failed"
        assert result["error"]["code"] == "FORGE_CLIENT_TRANSPORT"
        text = json.dumps(result)
        for internal in ("secret.sock", "Errno", "ConnectError"):
            assert internal not in text
    assert len(stack.clients.transport.requests) == 2
    await stack.robot.aclose()


def _principal(service: Any) -> Any:
    from doraforge.registry.http import server_principal

    return server_principal(service, _settings(), scope="agent", authenticated=True)


def _body(request_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "type": "portos_tool_call",
        "requestId": request_id,
        "name": name,
        "arguments": arguments,
    }


def test_the_operator_keeps_gateway_url_in_the_paos_agent_tools() -> None:
    for name in ("forge_tool_context", "forge_tool_query", "forge_task_create"):
        assert "gateway_url" in TOOLS[name].input_schema["properties"]


def test_a_paos_tool_whose_agent_schema_would_take_a_url_is_refused_at_registration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def handler(_service: Any, _arguments: dict[str, Any]) -> Any:
        raise AssertionError("never called")

    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"target": {"type": "object", "properties": {"callback_url": {}}}},
    }
    tool = AgentTool("forge_new_probe", "Probe a URL.", schema, handler, "read", "low")
    monkeypatch.setitem(TOOLS, "forge_new_probe", tool)
    service = new_service(_settings())
    with pytest.raises(ValueError, match="callback_url"):
        register_robot_tools(service, _stack(tmp_path).robot)
