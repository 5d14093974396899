"""Issue 26's egress findings, reproduced on real sockets: a saved API bundle opens its own
origin for its own tools only (never another port of its host, never the registry, never
``http_fetch``); the agent token is the agent principal over HTTP as over MCP; a path
parameter cannot climb out of the bundle's base path."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from doraforge.registry.mcp_results import ERROR_META
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import TOKEN, call_body, running
from tests.support.live_server import LiveServer

OPERATOR_TOKEN = "promises-operator-token-0123456789"
AGENT = {"Authorization": f"Bearer {TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
MCP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}
FETCH = "builtin.http_fetch"


@dataclass
class Listener:
    """A loopback HTTP server that answers every path and records each one it saw."""

    port: int = 0
    paths: list[str] = field(default_factory=list)

    async def answer(self, request: Request) -> Response:
        path = request.scope["raw_path"].decode("latin-1")  # as sent, not decoded
        self.paths.append(path)
        return PlainTextResponse(f"reached {path}")


@contextmanager
def listening() -> Iterator[Listener]:
    listener = Listener()
    app = Starlette(routes=[Route("/{rest:path}", listener.answer)])
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    config.timeout_graceful_shutdown = 1
    with LiveServer(config) as server:
        listener.port = server.port
        yield listener


def _settings(**extra: Any) -> ServerSettings:
    """Two tokens, MCP on, outbound open (``default: allow``), egress off; both principals
    hold what http_fetch and API reads need, with a standing approval for http_fetch."""
    fields: dict[str, Any] = {
        "token": TOKEN,
        "operator_token": OPERATOR_TOKEN,
        "mcp_enabled": True,
        "grants": ["api.read", "builtin.read"],
        "approvals": [FETCH],
        "permissions": {"agent": ["network:*"], "ui": ["network:*"]},
        "outbound": {"default": "allow"},
        "builtins": {"enabled": ["http_fetch"]},
        **extra,
    }
    return ServerSettings.model_validate(fields)


def _bundle(port: int) -> dict[str, Any]:
    path = {"in": "path", "required": True}
    return {
        "schemaVersion": 1,
        "name": "public",
        "baseUrl": f"http://127.0.0.1:{port}/public",
        "tools": [
            {
                "name": "item",
                "description": "Read one item below /public.",
                "path": "/{a}/{b}",
                "params": [{"name": "a", **path}, {"name": "b", **path}],
                "response": {"type": "text"},
            }
        ],
    }


@dataclass
class Registry:
    url: str
    client: httpx.Client

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def call(self, name: str, arguments: dict[str, Any], auth: dict[str, str]) -> dict[str, Any]:
        body = call_body(name, arguments, f"r-{len(arguments)}-{id(arguments)}")
        answer = self.client.post(f"{self.url}/api/tools/call", json=body, headers=auth)
        assert answer.status_code < 500, answer.text
        result: dict[str, Any] = answer.json()
        return result

    def mcp(self, name: str, arguments: dict[str, Any], auth: dict[str, str]) -> dict[str, Any]:
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        headers = {**MCP_HEADERS, **auth}
        answer = self.client.post(f"{self.url}/mcp", json=message, headers=headers)
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()["result"]
        return result


@contextmanager
def registry(home: Path, settings: ServerSettings | None = None) -> Iterator[Registry]:
    settings = settings or _settings()
    app = build_app(new_service(settings), settings, api_tools_dir=home / "api-tools")
    with running(app) as url, httpx.Client(timeout=10) as client:
        yield Registry(url, client)


def _saved(server: Registry, port: int) -> None:
    saved = server.client.put(
        f"{server.url}/api/api-tools/public", json=_bundle(port), headers=OPERATOR
    )
    assert saved.status_code == 201, saved.text


def _target(port: int, path: str = "/anything") -> dict[str, Any]:
    return {"host": f"127.0.0.1:{port}", "path": path, "scheme": "http"}


def _mcp_code(result: dict[str, Any]) -> str:
    assert result["isError"] is True, result
    code: str = result["_meta"][ERROR_META]["code"]
    return code


@pytest.fixture
def bundle_port() -> Iterator[Listener]:
    with listening() as listener:
        yield listener


@pytest.fixture
def other_port() -> Iterator[Listener]:
    with listening() as listener:
        yield listener


def test_a_saved_bundle_opens_its_own_origin_for_its_own_tools_only(
    tmp_path: Path, bundle_port: Listener, other_port: Listener
) -> None:
    with registry(tmp_path) as server:
        _saved(server, bundle_port.port)
        own = server.call("api__public__item", {"a": "x", "b": "y"}, AGENT)
        assert own["state"] == "completed", own
        assert own["result"]["content"] == "reached /public/x/y"
        declared = server.client.get(f"{server.url}/api/egress", headers=OPERATOR).json()
        assert declared["egress"]["declared"] == {
            "api:public": [f"http://127.0.0.1:{bundle_port.port}"]
        }
        for port in (other_port.port, server.port, bundle_port.port):
            fetched = server.call(FETCH, _target(port), AGENT)
            assert fetched["state"] == "failed", (port, fetched)
            assert fetched["error"]["code"] == "TOOL_EGRESS_DENIED"
            assert fetched["error"]["details"]["host"] == f"127.0.0.1:{port}"
            assert _mcp_code(server.mcp(FETCH, _target(port), AGENT)) == "TOOL_EGRESS_DENIED"
    assert other_port.paths == []
    assert bundle_port.paths == ["/public/x/y"]  # the bundle's call alone reached it


def test_an_egress_entry_with_a_port_admits_that_port_alone(
    tmp_path: Path, bundle_port: Listener, other_port: Listener
) -> None:
    with registry(tmp_path) as server:
        denied = server.call(FETCH, _target(bundle_port.port, "/first"), AGENT)
        assert denied["error"]["code"] == "TOOL_EGRESS_DENIED"
        hint = {"host": f"127.0.0.1:{bundle_port.port}", "principal": "agent"}
        assert (
            f'{{"host": "127.0.0.1:{bundle_port.port}", "principal": "agent"}}'
            in (denied["error"]["message"])
        )
        allowed = server.client.post(
            f"{server.url}{denied['error']['details']['route']}", json=hint, headers=OPERATOR
        )
        assert allowed.status_code == 200, allowed.text
        fetched = server.call(FETCH, _target(bundle_port.port, "/second"), AGENT)
        assert fetched["state"] == "completed", fetched
        assert fetched["result"]["content"] == "reached /second"
        other = server.call(FETCH, _target(other_port.port), AGENT)
        assert other["error"]["code"] == "TOOL_EGRESS_DENIED"
        assert other["error"]["details"]["host"] == f"127.0.0.1:{other_port.port}"
    assert bundle_port.paths == ["/second"]
    assert other_port.paths == []


def test_the_agent_token_is_the_agent_principal_over_http_and_mcp(
    tmp_path: Path, other_port: Listener
) -> None:
    principals = {"agent": {"enabled": False}, "ui": {"enabled": True}}
    egress = {"hosts": ["127.0.0.1"], "principals": principals}
    with registry(tmp_path, _settings(egress=egress)) as server:
        over_http = server.call(FETCH, _target(other_port.port, "/agent-http"), AGENT)
        assert over_http["state"] == "failed", over_http
        assert over_http["error"]["code"] == "TOOL_EGRESS_DENIED"
        assert over_http["error"]["details"]["principal"] == "agent"
        over_mcp = server.mcp(FETCH, _target(other_port.port, "/agent-mcp"), AGENT)
        assert _mcp_code(over_mcp) == "TOOL_EGRESS_DENIED"
        operator = server.call(FETCH, _target(other_port.port, "/operator"), OPERATOR)
        assert operator["state"] == "completed", operator  # ui: the operator's session
    assert other_port.paths == ["/operator"]


@pytest.mark.parametrize("climb", ["..", "."])
def test_a_path_parameter_never_climbs_out_of_the_base_path(
    tmp_path: Path, bundle_port: Listener, climb: str
) -> None:
    with registry(tmp_path) as server:
        _saved(server, bundle_port.port)
        escaped = server.call("api__public__item", {"a": climb, "b": "admin"}, AGENT)
        assert escaped["state"] == "denied", escaped
        assert escaped["error"]["code"] == "TOOL_INVALID_ARGUMENTS"
        over_mcp = server.mcp("api__public__item", {"a": climb, "b": "admin"}, AGENT)
        assert over_mcp["isError"] is True
        probed = server.client.post(
            f"{server.url}/api/api-tools/public/probe",
            json={"tool": "item", "arguments": {"a": climb, "b": "admin"}},
            headers=OPERATOR,
        )
        assert probed.status_code == 422, probed.text
        assert probed.json()["error"]["code"] == "API_PATH_ESCAPE"
        slash = server.call("api__public__item", {"a": "../..", "b": "admin"}, AGENT)
        assert slash["state"] == "completed", slash  # one segment: %2F, never a separator
    assert bundle_port.paths == ["/public/..%2F../admin"]  # the only request that arrived


#: Spellings of the bundle's host and port (and of its host on the default port) that an
#: agent could hope ``http_fetch`` reads as another host the policy lets through.
SPELLINGS = (
    "localhost:{port}",
    "LOCALHOST:{port}",
    "[::1]:{port}",
    "[::ffff:127.0.0.1]:{port}",
    "[::ffff:7f00:1]:{port}",
    "127.0.0.1.:{port}",
    "0x7f.0.0.1:{port}",
    "2130706433:{port}",
    "127.1:{port}",
    "0177.0.0.1:{port}",
    "127.0.0.1:0{port}",
    "127.0.0.1",
    "127.0.0.1:80",
    "user@127.0.0.1:{port}",
    "127.0.0.1:{port}@127.0.0.1",
)


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_no_spelling_of_a_bundles_host_opens_it_to_http_fetch(
    tmp_path: Path, bundle_port: Listener, spelling: str
) -> None:
    host = spelling.format(port=bundle_port.port)
    with registry(tmp_path) as server:
        _saved(server, bundle_port.port)
        target = {"host": host, "path": "/public/x", "scheme": "http"}
        fetched = server.call(FETCH, target, AGENT)
        over_mcp = server.mcp(FETCH, target, AGENT)

    assert fetched["state"] != "completed", fetched
    assert over_mcp["isError"] is True
    assert bundle_port.paths == []


#: Path arguments a server or proxy might decode, fold or normalise into a climb.
CLIMBS = (
    "%2e%2e",
    "%2E%2E",
    ".%2e",
    "%252e%252e",
    "..%2f..",
    "..\\..",
    "\\..",
    "\uff0e\uff0e",
    "..;",
    "...",
    "%00..",
)


@pytest.mark.parametrize("climb", CLIMBS)
def test_an_encoded_climb_arrives_as_one_segment_below_the_base_path(
    tmp_path: Path, bundle_port: Listener, climb: str
) -> None:
    with registry(tmp_path) as server:
        _saved(server, bundle_port.port)
        server.call("api__public__item", {"a": climb, "b": "admin"}, AGENT)

    for arrived in bundle_port.paths:
        segments = arrived.split("/")
        assert segments[:2] == ["", "public"], arrived
        assert len(segments) == 4, arrived  # /public/<a>/<b>: one segment each
        assert not {"..", "."} & {unquote(segment) for segment in segments}, arrived
