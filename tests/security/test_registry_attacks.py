"""The registry's attack table: real sockets against a real ``doraforge serve`` process.

Two servers run for the module, both with MCP on (``--mcp``), every capability granted and
every tool approved, so that the transport guard and the argument rules are all that stands
between a row and a tool run: one on loopback without a token and one with
``--token-file``. Each serves a declarative API-tool bundle, ``canary``, whose tools dial a
local listener, so a row that got through shows up there as a hit. Every refused row
asserts the status and code of the refusal, then that nothing ran: no hit on the canary,
no retained result under the row's request id, no saved bundle, no data read.

The ``gateway_url`` rows hand every ``forge.*`` tool, over ``/api/tools/call`` and over
MCP, the address of a decoy listener: an agent never supplies a URL, so each call must be
refused as an unknown parameter with no connection made to the decoy. The outbound rows
check that a rule opening one port of ``127.0.0.1`` opens no other port of it.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.wire.tokens import write_token
from tests.security.attack_peers import Listener, Reply
from tests.security.attack_support import (
    ACCEPT_MCP,
    FOREIGN_ORIGINS,
    HUGE_INTEGER,
    JSON,
    NOT_JSON,
    REBINDING_HOSTS,
    TOKEN_REFUSALS,
    Answer,
    Headers,
    MiB,
    chunked_flood,
    declared_oversize,
    deep_array,
    exchange,
    presented,
)
from tests.support.live_server import ServeProcess, serve_process
from tests.support.mcp_errors import error_of

MAX_FLOOD_GROWTH = 32 * MiB
CANARY = "canary"
PING = "api__canary__ping"
GRANTS = ("api.read", "api.write", "robot.read", "robot.write")
#: Every forge.* tool the server registers (canonical name, MCP/provider name).
FORGE_TOOLS = (
    ("forge.tool_context", "forge_tool_context"),
    ("forge.tool_query", "forge_tool_query"),
    ("forge.tool_start_action", "forge_tool_start_action"),
    ("forge.tool_action_status", "forge_tool_action_status"),
    ("forge.tool_action_result", "forge_tool_action_result"),
    ("forge.tool_cancel_action", "forge_tool_cancel_action"),
    ("forge.tool_start_session", "forge_tool_start_session"),
    ("forge.tool_session_status", "forge_tool_session_status"),
    ("forge.tool_session_result", "forge_tool_session_result"),
    ("forge.tool_stop_session", "forge_tool_stop_session"),
    ("forge.task_create", "forge_task_create"),
    ("forge.task_get", "forge_task_get"),
    ("forge.task_begin_revision", "forge_task_begin_revision"),
    ("forge.task_finalize", "forge_task_finalize"),
    ("forge.task_cancel", "forge_task_cancel"),
    ("forge.activate_skill", "activate_skill"),
    ("forge.skills.installed", "forge_skills_installed"),
    ("forge.runtime.status", "forge_runtime_status"),
    ("forge.tool_contexts", "forge_tool_contexts"),
    ("forge.camera.frame", "forge_camera_frame"),
    ("forge.evidence.frame", "forge_evidence_frame"),
)


# ----------------------------------------------------------------------- servers


@dataclass
class Registry:
    """One running ``doraforge serve``, its canary upstream, another service on the same
    address (``other``: think of the Gateway's port) and a client carrying its token."""

    server: ServeProcess
    canary: Listener
    other: Listener
    http: httpx.Client

    @property
    def port(self) -> int:
        return self.server.port

    def retained(self, request_id: str) -> bool:
        """Whether a call with ``request_id`` got far enough to leave a result."""
        return self.http.get(f"/api/tools/calls/{request_id}").status_code == 200

    def bundle_saved(self, name: str) -> bool:
        return self.http.get(f"/api/api-tools/{name}").status_code == 200

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call ``name`` over ``/api/tools/call``; the ``portos_tool_result``."""
        body = {"type": "portos_tool_call", "requestId": f"row-{uuid.uuid4().hex}"}
        answer = self.http.post(
            "/api/tools/call", json={**body, "name": name, "arguments": arguments}
        )
        assert answer.status_code in (200, 403), answer.text
        result: dict[str, Any] = answer.json()
        return result


def canary_bundle(name: str, base_url: str) -> dict[str, Any]:
    """A bundle of GET tools on ``base_url``: ``ping`` and ``pong`` (two paths), ``hop``
    (which the canary answers with a redirect) and ``item`` (a path parameter)."""

    def tool(tool_name: str, path: str) -> dict[str, Any]:
        return {"name": tool_name, "description": f"GET {path} on the canary.", "path": path}

    item = {
        **tool("item", "/items/{id}"),
        "params": [{"name": "id", "in": "path", "required": True}],
    }
    tools = [tool("ping", "/ping"), tool("pong", "/pong"), tool("hop", "/hop"), item]
    return {"schemaVersion": 1, "name": name, "baseUrl": base_url, "tools": tools}


@contextlib.contextmanager
def running_registry(directory: Path, *, locked: bool) -> Iterator[Registry]:
    """``doraforge serve --mcp`` whose outbound policy allows exactly the canary's port of
    127.0.0.1 (and port 80 of 127.0.0.2), with the canary bundle saved."""
    with Listener() as other:
        hop = Reply(302, b"", {"Location": f"{other.url}/stolen"})
        with Listener({"/hop": hop}) as canary:
            outbound = {"default": "deny", "internal": [f"127.0.0.1:{canary.port}", "127.0.0.2"]}
            config = directory / "serve.json"
            settings = {"outbound": outbound, "grants": list(GRANTS), "approvals": ["*"]}
            config.write_text(json.dumps(settings))
            options = ["--mcp", "--config", str(config)]
            token = None
            if locked:
                token = write_token(directory / "serve.token")
                options += ["--token-file", str(directory / "serve.token")]
            with (
                serve_process(directory, *options, token=token) as server,
                httpx.Client(
                    base_url=server.base_url, headers=dict(server.bearer()), timeout=15.0
                ) as http,
            ):
                saved = http.put(f"/api/api-tools/{CANARY}", json=canary_bundle(CANARY, canary.url))
                assert saved.status_code == 201, saved.text
                yield Registry(server, canary, other, http)
            assert "Traceback" not in server.errors(), server.errors()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """``doraforge serve`` on loopback without a token."""
    with running_registry(tmp_path_factory.mktemp("serve-open"), locked=False) as running:
        yield running


@pytest.fixture(scope="module")
def locked_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """``doraforge serve --token-file``."""
    with running_registry(tmp_path_factory.mktemp("serve-locked"), locked=True) as running:
        yield running


# ----------------------------------------------------------------------- targets


@dataclass
class Target:
    """One registry route a row attacks: the request, how to wrap raw JSON members in the
    route's envelope (for hostile bodies), and how to tell whether anything got through."""

    method: str
    path: str
    headers: Headers
    body: bytes | None
    frame: Callable[[str], bytes]
    admitted: Callable[[Answer], bool]


def _ran(registry: Registry, request_id: str) -> Callable[[Answer], bool]:
    before = len(registry.canary.requests())

    def admitted(_: Answer) -> bool:
        return len(registry.canary.requests()) > before or registry.retained(request_id)

    return admitted


def _call(registry: Registry) -> Target:
    request_id = f"row-{uuid.uuid4().hex}"

    def frame(members: str) -> bytes:
        head = f'{{"type":"portos_tool_call","requestId":"{request_id}","name":"{PING}"'
        return (head + members + "}").encode()

    body = frame(',"arguments":{}')
    return Target("POST", "/api/tools/call", (), body, frame, _ran(registry, request_id))


def _mcp_call(registry: Registry) -> Target:
    request_id = f"row-{uuid.uuid4().hex}"

    def frame(members: str) -> bytes:
        head = f'{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{PING}"'
        return (head + members + "}}").encode()

    headers = (ACCEPT_MCP, ("Idempotency-Key", request_id))
    body = frame(',"arguments":{}')
    return Target("POST", "/mcp", headers, body, frame, _ran(registry, request_id))


def _bundle_put(registry: Registry) -> Target:
    name = f"sneaky_{uuid.uuid4().hex[:8]}"
    document = canary_bundle(name, registry.canary.url)

    def frame(members: str) -> bytes:
        return json.dumps(document).removesuffix("}").encode() + members.encode() + b"}"

    def admitted(_: Answer) -> bool:
        return registry.bundle_saved(name)

    body = json.dumps(document).encode()
    return Target("PUT", f"/api/api-tools/{name}", (), body, frame, admitted)


def _live_probe(registry: Registry) -> Target:
    """A live probe of the canary bundle: the registry itself dials the upstream."""
    before = len(registry.canary.requests())

    def frame(members: str) -> bytes:
        return ('{"tool":"ping","live":true' + members + "}").encode()

    def admitted(_: Answer) -> bool:
        return len(registry.canary.requests()) > before

    path = f"/api/api-tools/{CANARY}/probe"
    return Target("POST", path, (), frame(',"arguments":{}'), frame, admitted)


def _read(path: str, marker: bytes, method: str = "GET", body: bytes | None = None) -> Target:
    headers = (ACCEPT_MCP,) if path == "/mcp" else ()
    return Target(method, path, headers, body, lambda _: b"", lambda a: marker in a.body)


def target(registry: Registry, surface: str) -> Target:
    """The :class:`Target` for ``surface`` on ``registry``."""
    if surface == "catalog":
        return _read("/api/tools", b'"tools"')
    if surface == "manifest":
        return _read("/api/agent-context/manifest", b'"grants"')
    if surface == "bundles":
        return _read("/api/api-tools", b'"services"')
    if surface == "retained-result":
        # A 404 from the route itself would already confirm which request ids exist.
        return _read("/api/tools/calls/row-anything", b'"TOOL_CALL_NOT_FOUND"')
    if surface == "mcp-list":
        listing = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
        return _read("/mcp", b'"tools"', "POST", listing)
    writes = {"call": _call, "mcp": _mcp_call, "bundle": _bundle_put, "probe": _live_probe}
    return writes[surface](registry)


WRITES = ("call", "mcp", "bundle", "probe")
READS = ("catalog", "manifest", "mcp-list", "bundles", "retained-result")


def send(
    registry: Registry,
    goal: Target,
    headers: Headers = (JSON,),
    *,
    hosts: list[str] | None = None,
    body: bytes | None = None,
    authorise: bool = True,
) -> Answer:
    """``goal`` with exactly ``headers`` (a GET without its Content-Type), plus the
    server's token when it has one and ``authorise`` holds."""
    auth = registry.server.bearer() if authorise else ()
    if goal.method == "GET":
        headers = tuple(header for header in headers if header != JSON)
    payload = goal.body if body is None else body
    return exchange(
        registry.port,
        goal.method,
        goal.path,
        headers=(*headers, *goal.headers, *auth),
        body=payload,
        hosts=hosts,
    )


def assert_refused(answer: Answer, goal: Target, status: int, code: str) -> None:
    """The status and code, the edge's envelope, and nothing admitted."""
    assert (answer.status, answer.code) == (status, code), answer
    body = answer.json()
    if goal.path == "/mcp":
        assert body["id"] is None, body
        assert body["error"]["code"] in (-32600, -32700), body
    else:
        assert body["ok"] is False, body
    assert not goal.admitted(answer), f"refused with {status} but admitted anyway: {answer}"


def assert_admitted(answer: Answer, goal: Target) -> None:
    """Past the guard and answered by the route (a 404 of an unknown call id included)."""
    assert answer.status in (200, 201, 404), answer
    assert goal.admitted(answer), f"a well-formed request did not get through: {answer}"


# ------------------------------------------------------------------- content types


@pytest.mark.parametrize("surface", WRITES)
@pytest.mark.parametrize("kind", list(NOT_JSON))
def test_a_browser_simple_request_body_is_refused_415_and_nothing_runs(
    registry: Registry, surface: str, kind: str
) -> None:
    goal = target(registry, surface)
    answer = send(registry, goal, NOT_JSON[kind])
    assert_refused(answer, goal, 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize("surface", WRITES)
def test_the_same_write_as_application_json_runs(registry: Registry, surface: str) -> None:
    goal = target(registry, surface)
    assert_admitted(send(registry, goal), goal)


# ------------------------------------------------------------------------- origins


@pytest.mark.parametrize("surface", WRITES)
@pytest.mark.parametrize("origin", list(FOREIGN_ORIGINS))
def test_a_cross_origin_write_is_refused_403_and_nothing_runs(
    registry: Registry, surface: str, origin: str
) -> None:
    goal = target(registry, surface)
    answer = send(registry, goal, (JSON, *FOREIGN_ORIGINS[origin](registry.port)))
    assert_refused(answer, goal, 403, "ORIGIN_NOT_ALLOWED")


@pytest.mark.parametrize("surface", ["call", "mcp"])
def test_a_write_from_the_servers_own_origin_runs(registry: Registry, surface: str) -> None:
    goal = target(registry, surface)
    own = ("Origin", f"http://localhost:{registry.port}")
    assert_admitted(send(registry, goal, (JSON, own)), goal)


# --------------------------------------------------------------------------- hosts


@pytest.mark.parametrize("surface", ["call", "mcp", "catalog", "manifest"])
@pytest.mark.parametrize("host", list(REBINDING_HOSTS))
def test_a_rebinding_host_is_refused_403_and_nothing_runs_or_is_read(
    registry: Registry, surface: str, host: str
) -> None:
    goal = target(registry, surface)
    answer = send(registry, goal, hosts=REBINDING_HOSTS[host](registry.port))
    assert_refused(answer, goal, 403, "HOST_NOT_ALLOWED")


# -------------------------------------------------------------------------- tokens


@pytest.mark.parametrize("surface", [*READS, *WRITES])
@pytest.mark.parametrize("case", list(TOKEN_REFUSALS))
def test_a_request_without_the_right_token_is_refused_401_and_nothing_runs_or_is_read(
    locked_registry: Registry, surface: str, case: str
) -> None:
    token = locked_registry.server.token
    assert token is not None
    goal = target(locked_registry, surface)
    answer = send(locked_registry, goal, (JSON, *presented(case, token)), authorise=False)
    assert_refused(answer, goal, 401, TOKEN_REFUSALS[case])
    assert answer.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("surface", [*READS, *WRITES])
def test_the_same_request_with_the_token_runs(locked_registry: Registry, surface: str) -> None:
    goal = target(locked_registry, surface)
    assert_admitted(send(locked_registry, goal), goal)


# -------------------------------------------------------------------------- bodies


@pytest.mark.parametrize("surface", WRITES)
def test_a_chunked_flood_is_refused_413_at_the_limit_without_being_buffered(
    registry: Registry, surface: str
) -> None:
    goal = target(registry, surface)
    flood = chunked_flood(
        registry.port,
        goal.path,
        (JSON, *goal.headers),
        server_pid=registry.server.pid,
        method=goal.method,
    )
    assert_refused(flood.answer, goal, 413, "BODY_TOO_LARGE")
    assert flood.sent_bytes < 64 * MiB, "the registry kept reading far past its limit"
    assert flood.rss_growth_bytes < MAX_FLOOD_GROWTH, flood


@pytest.mark.parametrize("surface", WRITES)
def test_a_declared_length_over_the_limit_is_refused_413_before_any_byte_is_sent(
    registry: Registry, surface: str
) -> None:
    goal = target(registry, surface)
    answer = declared_oversize(registry.port, goal.path, (JSON, *goal.headers), method=goal.method)
    assert_refused(answer, goal, 413, "BODY_TOO_LARGE")


#: Raw JSON members appended to a call (``/api/tools/call`` or MCP) naming the ping tool.
HOSTILE_CALLS: dict[str, tuple[str, str]] = {
    "integer-of-5000-digits": (f',"arguments":{{"n":{HUGE_INTEGER}}}', "JSON_UNSAFE_INTEGER"),
    "nesting-100000-deep": (f',"arguments":{{"n":{deep_array()}}}', "JSON_TOO_DEEP"),
    "duplicate-name-naming-two-tools": (
        ',"name":"api__canary__pong","arguments":{}',
        "JSON_DUPLICATE_KEY",
    ),
    "nan": (',"arguments":{"n":NaN}', "JSON_NON_FINITE"),
    "lone-surrogate": (',"arguments":{"n":"\\udc00"}', "JSON_LONE_SURROGATE"),
}


@pytest.mark.parametrize("surface", ["call", "mcp"])
@pytest.mark.parametrize("case", list(HOSTILE_CALLS))
def test_a_hostile_json_call_is_refused_400_with_its_rule_and_no_tool_runs(
    registry: Registry, surface: str, case: str
) -> None:
    goal = target(registry, surface)
    members, code = HOSTILE_CALLS[case]
    answer = send(registry, goal, body=goal.frame(members))
    assert_refused(answer, goal, 400, code)


#: Raw JSON members appended to an otherwise valid bundle; each takes the address of
#: another service on the canary's host (a last-wins parser would save that one).
HOSTILE_BUNDLES: dict[str, tuple[Callable[[str], str], str]] = {
    "nesting-100000-deep": (lambda _other: f',"description":{deep_array()}', "JSON_TOO_DEEP"),
    "integer-of-5000-digits": (
        lambda _other: f',"description":{HUGE_INTEGER}',
        "JSON_UNSAFE_INTEGER",
    ),
    "duplicate-base-url-naming-another-port": (
        lambda other: f',"baseUrl":"{other}"',
        "JSON_DUPLICATE_KEY",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE_BUNDLES))
def test_a_hostile_json_bundle_is_refused_400_with_its_rule_and_nothing_is_saved(
    registry: Registry, case: str
) -> None:
    goal = target(registry, "bundle")
    members, code = HOSTILE_BUNDLES[case]
    answer = send(registry, goal, body=goal.frame(members(registry.other.url)))
    assert_refused(answer, goal, 400, code)
    assert registry.other.connections == 0


# --------------------------------------------------------------------- gateway_url


@pytest.fixture(scope="module")
def input_schemas(registry: Registry) -> dict[str, dict[str, Any]]:
    """Every catalog tool's input schema, by canonical name."""
    tools = registry.http.get("/api/tools").json()["tools"]
    return {tool["name"]: tool["input_schema"] for tool in tools}


def test_the_gateway_url_table_covers_every_forge_tool_the_server_offers(
    input_schemas: dict[str, dict[str, Any]],
) -> None:
    offered = {name for name in input_schemas if name.startswith("forge.")}
    assert offered == {canonical for canonical, _ in FORGE_TOOLS}


def _sample(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    samples: dict[str | None, Any] = {"integer": 1, "number": 1, "boolean": False, "object": {}}
    return samples.get(kind, ["mock.move"] if kind == "array" else "mock")


def plausible_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """A value for each required property, so only an extra argument can be wrong."""
    properties = schema.get("properties", {})
    return {name: _sample(properties.get(name, {})) for name in schema.get("required", [])}


def _denial(answer: Answer, surface: str) -> dict[str, Any]:
    """The tool-level error of a call answered over ``/api/tools/call`` or MCP."""
    body = answer.json()
    if surface == "mcp":
        assert answer.status == 200, answer
        return error_of(body["result"])
    assert answer.status == 403, answer
    assert body["state"] == "denied", body
    denial: dict[str, Any] = body["error"]
    return denial


@pytest.mark.parametrize("surface", ["call", "mcp"])
@pytest.mark.parametrize(("tool", "provider"), FORGE_TOOLS, ids=[c for c, _ in FORGE_TOOLS])
def test_an_agent_supplied_gateway_url_is_refused_as_an_unknown_parameter_and_never_dialled(
    registry: Registry,
    input_schemas: dict[str, dict[str, Any]],
    surface: str,
    tool: str,
    provider: str,
) -> None:
    with Listener() as decoy:
        arguments = {**plausible_arguments(input_schemas[tool]), "gateway_url": decoy.url}
        goal = target(registry, surface)
        name = tool if surface == "call" else provider
        members = f',"arguments":{json.dumps(arguments)}'
        body = goal.frame(members).replace(PING.encode(), name.encode(), 1)
        answer = send(registry, goal, body=body)
        assert decoy.connections == 0, f"{tool} dialled the agent's URL: {decoy.requests()}"
    error = _denial(answer, surface)
    assert error["code"] == "TOOL_INVALID_ARGUMENTS", error
    messages = [problem["message"] for problem in error["details"]["errors"]]
    assert any("'gateway_url' was unexpected" in message for message in messages), messages


# ------------------------------------------------------------------------ outbound


def _save(registry: Registry, base_url: str) -> tuple[str, httpx.Response]:
    name = f"probe_{uuid.uuid4().hex[:8]}"
    return name, registry.http.put(f"/api/api-tools/{name}", json=canary_bundle(name, base_url))


def test_a_bundle_on_the_allowed_address_but_another_port_is_refused_at_save(
    registry: Registry,
) -> None:
    name, answer = _save(registry, registry.other.url)
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"]["code"] == "API_TOOL_HOST_NOT_ALLOWED"
    assert answer.json()["error"]["details"]["port"] == registry.other.port
    assert not registry.bundle_saved(name)
    assert registry.other.connections == 0


@pytest.fixture
def second_loopback() -> Iterator[Listener]:
    with Listener(host="127.0.0.2") as listener:
        yield listener


def test_an_address_allowed_without_a_port_does_not_open_its_other_ports(
    registry: Registry, second_loopback: Listener
) -> None:
    name, answer = _save(registry, second_loopback.url)
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"]["code"] == "API_TOOL_HOST_NOT_ALLOWED"
    assert not registry.bundle_saved(name)
    assert second_loopback.connections == 0


OTHER_SPELLINGS = {
    "short-ipv4": "127.1",
    "hex-ipv4": "0x7f.0.0.1",
    "octal-ipv4": "0177.0.0.1",
    "zero-padded-ipv4": "127.000.000.001",
    "integer-ipv4": "2130706433",
    "ipv4-mapped-ipv6": "[::ffff:127.0.0.1]",
}


@pytest.mark.parametrize("spelling", list(OTHER_SPELLINGS))
def test_another_spelling_of_the_allowed_address_is_refused_at_save(
    registry: Registry, spelling: str
) -> None:
    before = registry.canary.connections
    base_url = f"http://{OTHER_SPELLINGS[spelling]}:{registry.canary.port}"
    name, answer = _save(registry, base_url)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "API_BUNDLE_INVALID"
    assert not registry.bundle_saved(name)
    assert registry.canary.connections == before


def test_the_allowed_upstreams_redirect_to_another_port_is_not_followed(
    registry: Registry,
) -> None:
    before = registry.canary.hits("/hop")
    result = registry.call("api__canary__hop", {})
    assert result["state"] in ("completed", "failed"), result
    assert registry.canary.hits("/hop") == before + 1
    assert registry.other.connections == 0, registry.other.requests()


@pytest.mark.parametrize(
    "value",
    ["@127.0.0.1:{other}", "//127.0.0.1:{other}/x", "../../ping", "..%2F..%2Fping", "x?y=1#z"],
    ids=["userinfo", "scheme-relative", "dot-segments", "encoded-dot-segments", "query"],
)
def test_a_path_argument_cannot_steer_the_request_off_its_path_or_port(
    registry: Registry, value: str
) -> None:
    seen = len(registry.canary.requests())
    argument = value.format(other=registry.other.port)
    result = registry.call("api__canary__item", {"id": argument})
    assert result["state"] in ("completed", "failed"), result
    assert registry.other.connections == 0, registry.other.requests()
    arrived = registry.canary.requests()[seen:]
    assert arrived, "the call never reached the canary"
    # One path segment under /items/, nothing after it: every "/", "?" and "#" was encoded.
    assert all(re.fullmatch(r"/items/[^/?#]+", path) for path in arrived), arrived
