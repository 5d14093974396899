"""End to end: the whole life of an API service on a real ``doraforge serve`` process, over
real sockets, against real local upstreams.

The operator sets credentials by name (the value never comes back), saves a service (refused
while its credential is missing), calls its tool (the upstream receives the credential),
replaces it with another host (the old host's egress is retracted), deletes it (tools gone,
``TOOL_NOT_FOUND``, the catalog's ETag changed) and restores it by saving again. An agent's
``api_tools_save`` through ``/api/tools/call`` and through ``/mcp`` with the official SDK
client waits for an operator every time, even with ``--approve '*'``: approved, the tools
appear at the next read; denied, nothing is saved. An OpenAPI 3 document imports into a valid
draft; unmappable ones answer 422 naming the JSON pointer. Every answer, audit record, log
line and home file but ``credentials.json`` is scanned for the credential values.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.paths import PROJECT_ROOT
from tests.support.live_server import ServeProcess, serve_process, serving
from tests.support.mcp_errors import error_of
from tests.support.waiting import eventually_async

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

TOKEN = "lifecycle-agent-token-0123456789"
OPERATOR_TOKEN = "lifecycle-operator-token-987654321"
SECRET = "sk-lifecycle-Zq81xV0c-never-shown"
ENV_SECRET = "env-only-secret-Hk2m-never-shown"
APPROVAL_TIMEOUT_S = 20.0


class _Handler(BaseHTTPRequestHandler):
    server: _Upstream

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self.server.authorizations.append(self.headers.get("Authorization") or "")
        body = json.dumps({"code": "0", "data": {"upstream": self.server.label}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Upstream(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, label: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.label = label
        self.authorizations: list[str] = []


@dataclass
class Stack:
    serve: ServeProcess
    home: Path
    a: _Upstream
    b: _Upstream
    answers: list[str] = field(default_factory=list)

    def port(self, upstream: _Upstream) -> int:
        return int(upstream.server_address[1])


def _bundle(base_url: str, name: str = "weather") -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "name": name,
        "baseUrl": base_url,
        "headers": {"Authorization": "Bearer {{secret:WEATHER_KEY}}"},
        "credentials": ["WEATHER_KEY"],
        "tools": [
            {
                "name": "now",
                "description": "The weather now",
                "path": "/now",
                "response": {
                    "envelope": {"codeField": "code", "success": ["0"], "payloadField": "data"}
                },
            }
        ],
    }


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    with serving(_Upstream("a")) as a, serving(_Upstream("b")) as b:
        config = {
            "outbound": {
                "default": "deny",
                "internal": [
                    f"127.0.0.1:{a.server_address[1]}",
                    f"localhost:{b.server_address[1]}",
                ],
            },
            "secret_env": {"ENV_ONLY": "LIFECYCLE_ENV_SECRET"},
        }
        config_path = tmp_path / "serve.json"
        config_path.write_text(json.dumps(config), encoding="utf-8")
        options = (
            "--mcp",
            "--config",
            str(config_path),
            "--grant",
            "api.read",
            "--grant",
            "api.write",
            "--approve",
            "*",  # a standing rule for everything: it must not cover the meta tools
            "--token-env",
            "LIFECYCLE_TOKEN",
            "--operator-token-env",
            "LIFECYCLE_OPERATOR_TOKEN",
            "--approval-timeout",
            str(APPROVAL_TIMEOUT_S),
        )
        env = {
            "LIFECYCLE_TOKEN": TOKEN,
            "LIFECYCLE_OPERATOR_TOKEN": OPERATOR_TOKEN,
            "LIFECYCLE_ENV_SECRET": ENV_SECRET,
        }
        with serve_process(tmp_path, *options, token=TOKEN, env=env) as running:
            yield Stack(running, tmp_path / "home", a, b)
        assert "Traceback" not in running.errors(), running.errors()


@contextlib.asynccontextmanager
async def _clients(stack: Stack) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """(operator, agent) HTTP clients; every answer's text is kept for the secret scan."""

    async def keep(response: httpx.Response) -> None:
        await response.aread()
        stack.answers.append(response.text)

    hooks = {"response": [keep]}
    base = stack.serve.base_url
    async with (
        httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
            timeout=30,
            event_hooks=hooks,
        ) as operator,
        httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=httpx.Timeout(30, read=120),
            event_hooks=hooks,
        ) as agent,
    ):
        yield operator, agent


def _call(name: str, arguments: dict[str, Any], request_id: str) -> dict[str, Any]:
    return {
        "type": "portos_tool_call",
        "requestId": request_id,
        "name": name,
        "arguments": arguments,
    }


async def _tools(agent: httpx.AsyncClient) -> tuple[set[str], str]:
    answer = await agent.get("/api/tools")
    assert answer.status_code == 200, answer.text
    return {tool["name"] for tool in answer.json()["tools"]}, answer.headers["etag"]


async def _pending(operator: httpx.AsyncClient) -> dict[str, Any]:
    async def listed() -> dict[str, Any] | None:
        answer = await operator.get("/api/approvals", params={"state": "pending"})
        approvals: list[dict[str, Any]] = answer.json()["approvals"]
        return approvals[0] if len(approvals) == 1 else None

    found: dict[str, Any] | None = await eventually_async(
        listed, within=20.0, what="one pending approval"
    )
    assert found is not None
    return found


async def _declared(operator: httpx.AsyncClient) -> dict[str, list[str]]:
    answer = await operator.get("/api/egress")
    assert answer.status_code == 200, answer.text
    declared: dict[str, list[str]] = answer.json()["egress"]["declared"]
    return declared


async def _lifecycle(stack: Stack, operator: httpx.AsyncClient, agent: httpx.AsyncClient) -> None:
    base_a = f"http://127.0.0.1:{stack.port(stack.a)}"
    base_b = f"http://localhost:{stack.port(stack.b)}"

    refused = await operator.put("/api/api-tools/weather", json=_bundle(base_a))
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "API_TOOL_CREDENTIAL_MISSING"
    assert refused.json()["error"]["details"]["credentials"] == ["WEATHER_KEY"]

    by_agent = await agent.put("/api/credentials/WEATHER_KEY", json={"value": SECRET})
    assert by_agent.status_code == 403
    assert by_agent.json()["error"]["code"] == "OPERATOR_REQUIRED"
    created = await operator.put("/api/credentials/WEATHER_KEY", json={"value": SECRET})
    assert created.status_code == 201, created.text
    assert created.json()["credential"]["name"] == "WEATHER_KEY"
    listed = (await operator.get("/api/credentials")).json()["credentials"]
    assert [(row["name"], row["scope"]) for row in listed] == [("WEATHER_KEY", "global")]
    path = stack.home / "credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    saved = await operator.put("/api/api-tools/weather", json=_bundle(base_a))
    assert saved.status_code == 201, saved.text
    names, etag_saved = await _tools(agent)
    assert "api__weather__now" in names
    called = await agent.post("/api/tools/call", json=_call("api__weather__now", {}, "call-a"))
    assert called.json()["state"] == "completed", called.text
    assert "upstream" in called.json()["result"]["content"]
    assert stack.a.authorizations == [f"Bearer {SECRET}"]
    assert (await _declared(operator))["api:weather"] == [base_a]  # its origin, port included

    replaced = await operator.put("/api/api-tools/weather", json=_bundle(base_b))
    assert replaced.status_code == 200, replaced.text
    assert (await _declared(operator))["api:weather"] == [base_b]  # base_a retracted
    again = await agent.post("/api/tools/call", json=_call("api__weather__now", {}, "call-b"))
    assert again.json()["state"] == "completed", again.text
    assert json.loads(again.json()["result"]["content"]) == {"upstream": "b"}
    assert stack.b.authorizations == [f"Bearer {SECRET}"]

    deleted = await operator.delete("/api/api-tools/weather")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["tools"] == ["api__weather__now"]
    names, etag_deleted = await _tools(agent)
    assert "api__weather__now" not in names
    assert etag_deleted != etag_saved
    gone = await agent.post("/api/tools/call", json=_call("api__weather__now", {}, "call-c"))
    assert gone.json()["error"]["code"] == "TOOL_NOT_FOUND", gone.text
    assert "api:weather" not in await _declared(operator)
    listed_services = (await agent.get("/api/api-tools")).json()["services"]
    assert listed_services == []
    missing = await operator.delete("/api/api-tools/weather")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "API_BUNDLE_NOT_FOUND"
    assert list((stack.home / "api-tools" / "deleted").glob("weather.*.json"))

    restored = await operator.put("/api/api-tools/weather", json=_bundle(base_b))
    assert restored.status_code == 201, restored.text
    assert "api__weather__now" in (await _tools(agent))[0]


async def _management_over_http(
    stack: Stack, operator: httpx.AsyncClient, agent: httpx.AsyncClient
) -> None:
    base_a = f"http://127.0.0.1:{stack.port(stack.a)}"
    body = _call("api_tools_save", {"bundle": _bundle(base_a, "forecast")}, "save-forecast")
    saving = asyncio.create_task(agent.post("/api/tools/call", json=body))
    pending = await _pending(operator)
    assert pending["tool"] == "api_tools_save"
    assert pending["risk"] == "critical"
    assert "api__forecast__now" not in (await _tools(agent))[0]  # nothing before approval
    decided = await operator.post(f"/api/approvals/{pending['id']}/approve", json={"reason": "ok"})
    assert decided.status_code == 200, decided.text
    answer = (await saving).json()
    assert answer["state"] == "completed", answer
    assert answer["result"]["tools"] == ["api__forecast__now"]
    assert "api__forecast__now" in (await _tools(agent))[0]

    invalid = {
        **_bundle(base_a, "broken"),
        "tools": [{"name": "t", "description": "d", "path": "x"}],
    }
    body = _call("api_tools_save", {"bundle": invalid}, "save-broken")
    saving = asyncio.create_task(agent.post("/api/tools/call", json=body))
    pending = await _pending(operator)
    await operator.post(f"/api/approvals/{pending['id']}/approve", json={"reason": "try"})
    error = (await saving).json()["error"]
    assert error["code"] == "API_BUNDLE_INVALID"
    assert any(e.startswith("tools[0].path: ") for e in error["details"]["errors"]), error

    got = await agent.post(
        "/api/tools/call", json=_call("api_tools_get", {"service": "forecast"}, "get-forecast")
    )
    bundle = got.json()["result"]["bundle"]
    assert bundle["credentials"] == ["WEATHER_KEY"]
    assert bundle["name"] == "forecast"
    listed = await agent.post("/api/tools/call", json=_call("api_tools_list", {}, "list-1"))
    assert [s["name"] for s in listed.json()["result"]["services"]] == ["forecast", "weather"]


async def _management_over_mcp(stack: Stack, operator: httpx.AsyncClient) -> None:
    base_a = f"http://127.0.0.1:{stack.port(stack.a)}"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=120)) as http,
        streamable_http_client(f"{stack.serve.base_url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        before = {tool.name for tool in (await session.list_tools()).tools}
        assert "api_tools_save" in before
        assert "api__daily__now" not in before

        saving = asyncio.create_task(
            session.call_tool("api_tools_save", {"bundle": _bundle(base_a, "daily")})
        )
        pending = await _pending(operator)
        assert pending["tool"] == "api_tools_save"
        assert pending["caller"] == "doraforge-agent"
        denied = await operator.post(
            f"/api/approvals/{pending['id']}/deny", json={"reason": "not this one"}
        )
        assert denied.status_code == 200, denied.text
        result = await saving
        assert error_of(result)["code"] == "TOOL_APPROVAL_DENIED"
        assert (await operator.get("/api/api-tools/daily")).status_code == 404  # nothing saved
        assert "api__daily__now" not in {t.name for t in (await session.list_tools()).tools}

        saving = asyncio.create_task(
            session.call_tool("api_tools_save", {"bundle": _bundle(base_a, "daily")})
        )
        pending = await _pending(operator)
        await operator.post(f"/api/approvals/{pending['id']}/approve", json={"reason": "now ok"})
        result = await saving
        assert result.isError is False, result.content
        assert "api__daily__now" in {t.name for t in (await session.list_tools()).tools}

        saving = asyncio.create_task(session.call_tool("api_tools_delete", {"service": "forecast"}))
        pending = await _pending(operator)
        assert pending["tool"] == "api_tools_delete"
        await operator.post(f"/api/approvals/{pending['id']}/approve", json={"reason": "ok"})
        result = await saving
        assert result.isError is False, result.content
        after = {tool.name for tool in (await session.list_tools()).tools}
        assert "api__forecast__now" not in after


async def _imports(operator: httpx.AsyncClient) -> None:
    document = {
        "openapi": "3.0.3",
        "info": {"title": "Pets", "version": "1"},
        "servers": [{"url": "https://pets.example.com/v1"}],
        "paths": {
            "/pets/{petId}": {
                "parameters": [
                    {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "get": {"operationId": "getPet", "summary": "One pet"},
                "delete": {"operationId": "deletePet", "summary": "Remove a pet"},
            },
            "/pets": {
                "post": {
                    "operationId": "createPet",
                    "summary": "Add a pet",
                    "requestBody": {
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}
                        }
                    },
                },
            },
        },
        "components": {
            "schemas": {
                "NewPet": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"type": "string"}, "tag": {"type": "string"}},
                }
            }
        },
    }
    request = {"openapi": document, "service": "pets", "operations": ["getPet", "createPet"]}
    answer = await operator.post("/api/api-tools/import", json=request)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["valid"] is True
    assert body["errors"] == []
    tools = {tool["name"]: tool for tool in body["bundle"]["tools"]}
    assert sorted(tools) == ["create_pet", "get_pet"]  # only the chosen operations
    assert tools["get_pet"]["params"] == [
        {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}
    ]
    assert [
        (p["name"], p["in"], p.get("required", False)) for p in tools["create_pet"]["params"]
    ] == [
        ("name", "body", True),
        ("tag", "body", False),
    ]
    assert (await operator.get("/api/api-tools/pets")).status_code == 404  # never saved

    cookie = json.loads(json.dumps(document))
    cookie["paths"]["/pets/{petId}"]["get"]["parameters"] = [{"name": "s", "in": "cookie"}]
    bad = await operator.post("/api/api-tools/import", json={**request, "openapi": cookie})
    assert bad.status_code == 422, bad.text
    assert bad.json()["error"]["code"] == "API_OPENAPI_UNMAPPABLE"
    assert bad.json()["error"]["details"]["pointer"] == "/paths/~1pets~1{petId}/get/parameters/0/in"
    unknown = await operator.post("/api/api-tools/import", json={**request, "operations": ["nope"]})
    assert unknown.status_code == 422
    assert unknown.json()["error"]["details"]["pointer"] == "/paths"
    swagger = await operator.post(
        "/api/api-tools/import", json={**request, "openapi": {"swagger": "2.0"}}
    )
    assert swagger.status_code == 422
    assert swagger.json()["error"]["details"]["pointer"] == "/openapi"


CLI_SECRET = "cli-piped-secret-Pw7q-never-shown"


def _cli(stack: Stack, *arguments: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "doraforge.cli", "credentials", *arguments]
    command += ["--url", stack.serve.base_url, "--token-env", "LIFECYCLE_OPERATOR_TOKEN"]
    env = {**os.environ, "LIFECYCLE_OPERATOR_TOKEN": OPERATOR_TOKEN}
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, cwd=PROJECT_ROOT, timeout=60
    )


def _cli_rows(stack: Stack) -> None:
    """``doraforge credentials set`` reads the value from stdin; list and delete by name."""
    done = _cli(stack, "set", "CLI_KEY", stdin=CLI_SECRET + "\n")
    assert done.returncode == 0, done.stderr
    listed = _cli(stack, "list")
    assert listed.returncode == 0, listed.stderr
    assert "CLI_KEY global" in listed.stdout
    assert "WEATHER_KEY global" in listed.stdout
    assert _cli(stack, "delete", "CLI_KEY").returncode == 0
    missing = _cli(stack, "delete", "CLI_KEY")
    assert missing.returncode == 1
    assert "CREDENTIAL_NOT_FOUND" in missing.stderr + missing.stdout
    for output in (done, listed, missing):
        assert CLI_SECRET not in output.stdout + output.stderr
    stack.answers.append(listed.stdout)


def _scan_for_secrets(stack: Stack, audit: str) -> None:
    texts = {"audit": audit, "stdout": stack.serve.output(), "stderr": stack.serve.errors()}
    texts |= {f"answer {i}": text for i, text in enumerate(stack.answers)}
    for path in stack.home.rglob("*"):
        if path.is_file() and path.name != "credentials.json":
            texts[str(path)] = path.read_text(encoding="utf-8", errors="replace")
    for where, text in texts.items():
        assert SECRET not in text, f"the credential value leaked into {where}"
        assert ENV_SECRET not in text, f"the env credential value leaked into {where}"
        assert CLI_SECRET not in text, f"the CLI credential value leaked into {where}"


def test_an_api_service_lives_is_managed_by_an_agent_under_approval_and_never_shows_a_secret(
    stack: Stack,
) -> None:
    async def scenario() -> None:
        async with _clients(stack) as (operator, agent):
            await _lifecycle(stack, operator, agent)
            await _management_over_http(stack, operator, agent)
            await _management_over_mcp(stack, operator)
            await _imports(operator)
            await asyncio.to_thread(_cli_rows, stack)
            audit = await operator.get("/console/api/audit", params={"limit": 1000})
            assert audit.status_code == 200, audit.text
            names = [record["name"] for record in audit.json()["records"]]
            assert "credentials set WEATHER_KEY" in names
        _scan_for_secrets(stack, audit.text)

    asyncio.run(scenario())


def test_a_credential_file_others_can_read_is_refused_at_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    path = home / "credentials.json"
    path.write_text(json.dumps({"schemaVersion": 1, "credentials": {}}), encoding="utf-8")
    path.chmod(0o644)
    with (
        pytest.raises(AssertionError, match=r"CREDENTIALS_FILE_UNSAFE|chmod 600"),
        serve_process(tmp_path),
    ):
        pass
