"""The inventory documents under ``/api/api-docs``, read from the app ``doraforge serve``
builds (demo and robot tools, API tools, recipes, the console) on a real socket: every route
is in the internal OpenAPI document and the route catalog, the public document holds only
the routes for outside callers, both documents are well-formed with every ``$ref``
resolving, known routes carry their side effect and access, ``tools.min.json`` lists every
registered tool with a binding that really calls it, and every document is built once and
kept yet holds the routes and tools added before it was read."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.responses import PlainTextResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

import doraforge.registry
from doraforge.console import Console, mount
from doraforge.paos.home import PaosHome
from doraforge.registry.inventory import access_of, inventory_of
from doraforge.registry.inventory_tools import COMMON_FAILURE_CODES, CONDITIONAL_FAILURE_CODES
from doraforge.registry.robot_tools import RobotTools
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from doraforge.skill_runtime.gateway_tokens import GatewayTokens
from tests.console.support import runtime_of
from tests.registry.server_support import TOKEN, DemoTools, running

OPERATOR_TOKEN = "inventory-operator-token-0123456789"
AGENT = {"Authorization": f"Bearer {TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
DOCS = "/api/api-docs"
STATIC = "/test-static"
BANNER = "/test-banner"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

#: The operations meant for outside callers: the public document holds exactly these.
PUBLIC = {
    ("GET", "/api/tools"),
    ("POST", "/api/tools/call"),
    ("GET", "/api/tools/calls/{request_id}"),
    ("POST", "/mcp"),
    ("GET", "/mcp"),
    ("DELETE", "/mcp"),
    ("GET", "/api/agent-context/manifest"),
    ("GET", f"{DOCS}/openapi.json"),
    ("GET", f"{DOCS}/tools.min.json"),
}


class BannerMiddleware:
    """Passes every request on; declares one path it serves (``inventory_routes``), as a
    middleware serving pages of its own (the console's shell) would."""

    inventory_routes = (("GET", BANNER, "a page the middleware serves"),)

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def served_app(tmp_path: Path) -> FastAPI:
    """What ``doraforge serve`` builds over a fresh home, plus a Starlette mount FastAPI
    does not describe and :class:`BannerMiddleware`; nothing read yet."""
    home = PaosHome(tmp_path / "home")
    runtime = runtime_of(home)
    robot = RobotTools(home, lambda: None, lambda: runtime)
    settings = ServerSettings(
        token=TOKEN,
        operator_token=OPERATOR_TOKEN,
        mcp_enabled=True,
        grants=frozenset({"robot.read"}),
    )
    service = new_service(settings)
    DemoTools().register(service)
    app = build_app(
        service,
        settings,
        robot=robot,
        api_tools_dir=tmp_path / "api-tools",
        recipes_dir=tmp_path / "recipes",
    )
    mount(app, Console(home, robot, lambda: runtime, GatewayTokens(home.runtime_dir)))
    (tmp_path / "static").mkdir()
    app.router.routes.append(Mount(STATIC, app=StaticFiles(directory=tmp_path / "static")))
    app.add_middleware(BannerMiddleware)
    return app


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    return served_app(tmp_path_factory.mktemp("inventory"))


@pytest.fixture(scope="module")
def client(app: FastAPI) -> Iterator[httpx.Client]:
    with running(app) as base, httpx.Client(base_url=base, timeout=10) as client:
        yield client


def _read(client: httpx.Client, name: str, headers: dict[str, str] = OPERATOR) -> Any:
    answer = client.get(f"{DOCS}/{name}", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    return answer.json()


@pytest.fixture(scope="module")
def internal(client: httpx.Client) -> dict[str, Any]:
    body: dict[str, Any] = _read(client, "internal/openapi.json")
    return body


@pytest.fixture(scope="module")
def public(client: httpx.Client) -> dict[str, Any]:
    body: dict[str, Any] = _read(client, "openapi.json", AGENT)
    return body


@pytest.fixture(scope="module")
def catalog(client: httpx.Client) -> dict[str, Any]:
    body: dict[str, Any] = _read(client, "catalog.json")
    return body


def _operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): operation
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


def _app_routes(routes: list[BaseRoute], prefix: str = "") -> set[tuple[str, str]]:
    """Every (method, path) of a route table, read here independently of the inventory."""
    found: set[tuple[str, str]] = set()
    for route in routes:
        if isinstance(route, Mount):
            found |= _app_routes(route.routes, prefix + route.path) or {
                ("GET", f"{prefix}{route.path}/{{path}}")
            }
        elif isinstance(route, Route):
            methods = set(route.methods or {"GET"}) - {"HEAD"}
            found |= {(method, prefix + route.path_format) for method in methods}
    return found


def test_every_route_of_the_app_is_in_the_internal_document_and_the_catalog(
    app: FastAPI, internal: dict[str, Any], catalog: dict[str, Any]
) -> None:
    routes = _app_routes(app.routes) | {("GET", BANNER)}
    assert ("POST", "/console/api/skills/{name}/start") in routes  # the console is mounted
    assert ("PUT", "/api/api-tools/{name}") in routes
    assert ("POST", "/api/recipes") in routes
    assert routes <= set(_operations(internal))
    # The console's page shell is served by a middleware, not a route, and still listed.
    assert {("GET", "/console/"), ("GET", "/console/static/{file}")} <= set(_operations(internal))
    listed = {(op["method"], op["path"]) for op in catalog["operations"]}
    assert listed == set(_operations(internal))
    assert catalog["stats"]["operations"] == len(listed)
    assert catalog["stats"]["declarations"] >= len(routes)


def test_the_public_document_holds_exactly_the_routes_for_outside_callers(
    internal: dict[str, Any], public: dict[str, Any]
) -> None:
    operations = _operations(public)
    assert set(operations) == PUBLIC
    inside = _operations(internal)
    assert all(operations[key] == inside[key] for key in operations)
    assert not any(path.startswith(("/api/approvals", "/console")) for _, path in operations)
    assert public["info"]["title"].endswith("(public)")


def test_access_is_decided_by_the_table_and_unknown_paths_are_the_operators() -> None:
    assert access_of("/api/tools/calls/r-1") == "public"
    assert access_of("/api/toolsmith") == "operator"  # whole segments only
    assert access_of("/mcp") == "agent"
    assert access_of(f"{DOCS}/internal/openapi.json") == "operator"
    assert access_of("/api/something-new") == "operator"


def _resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        if isinstance(value.get("$ref"), str):
            yield value["$ref"]
        for member in value.values():
            yield from _refs(member)
    elif isinstance(value, list):
        for member in value:
            yield from _refs(member)


def _assert_valid_openapi(document: dict[str, Any]) -> None:
    """OpenAPI 3 structure (``openapi-spec-validator`` is not installed here): version,
    info, operations with unique ids and responses, every path template parameter
    declared, every ``$ref`` resolving."""
    assert re.fullmatch(r"3\.\d+\.\d+", document["openapi"])
    assert document["info"]["title"]
    assert document["info"]["version"]
    ids = []
    for (_, path), operation in _operations(document).items():
        assert path.startswith("/")
        ids.append(operation["operationId"])
        assert operation["responses"]
        declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
        assert set(re.findall(r"{([^}]+)}", path)) == declared, path
    assert len(ids) == len(set(ids))
    refs = list(_refs(document))
    assert refs  # the error envelope at least
    for ref in refs:
        assert isinstance(_resolve(document, ref), dict), ref


def test_both_documents_are_valid_openapi_with_every_ref_resolving(
    internal: dict[str, Any], public: dict[str, Any]
) -> None:
    _assert_valid_openapi(internal)
    _assert_valid_openapi(public)
    referenced = {ref.rsplit("/", 1)[-1] for ref in _refs(public)}
    assert set(public["components"]["schemas"]) <= referenced  # no unused (operator) schema
    assert "Error" in public["components"]["schemas"]


@pytest.mark.parametrize(
    ("method", "path", "effect"),
    [
        ("GET", "/api/tools", "read"),
        ("POST", "/api/tools/call", "write"),
        ("GET", "/api/tools/calls/{request_id}", "read"),
        ("POST", "/mcp", "write"),
        ("GET", "/api/approvals", "read"),
        ("POST", "/api/approvals/{approval_id}/approve", "write"),
        ("PUT", "/api/api-tools/{name}", "write"),
        ("POST", "/api/api-tools/{name}/probe", "write"),
        ("POST", "/api/recipes/{name}/archive", "write"),
        ("GET", "/console/api/cell/{skill}/frame/{source}", "read"),
        ("POST", "/console/api/skills/{name}/start", "write"),
        ("GET", f"{DOCS}/catalog.json", "read"),
    ],
)
def test_a_known_route_carries_its_side_effect(
    catalog: dict[str, Any], internal: dict[str, Any], method: str, path: str, effect: str
) -> None:
    record = next(
        op for op in catalog["operations"] if (op["method"], op["path"]) == (method, path)
    )
    assert record["sideEffect"] == effect
    assert _operations(internal)[(method, path)]["x-doraforge-side-effect"] == effect


def test_access_domain_and_operator_only_are_recorded(catalog: dict[str, Any]) -> None:
    records = {(op["method"], op["path"]): op for op in catalog["operations"]}
    approve = records[("POST", "/api/approvals/{approval_id}/approve")]
    assert (approve["access"], approve["operatorOnly"], approve["domain"]) == (
        "operator",
        True,
        "approvals",
    )
    assert records[("GET", "/console/api/tasks")]["operatorOnly"] is True
    assert records[("GET", "/api/tools")]["access"] == "public"
    assert records[("POST", "/mcp")]["access"] == "agent"
    assert records[("GET", "/api/api-tools")]["operatorOnly"] is False  # admin, by the table
    assert records[("GET", "/api/api-tools")]["access"] == "operator"
    stats = catalog["stats"]
    assert sum(stats["byAccess"].values()) == stats["operations"]
    assert stats["bySideEffect"]["write"] >= 10


def test_routes_fastapi_does_not_describe_get_generated_operations(
    internal: dict[str, Any], catalog: dict[str, Any]
) -> None:
    operations = _operations(internal)
    mounted = operations[("GET", f"{STATIC}/{{path}}")]
    assert mounted["x-doraforge-contract"] == "generated"
    assert mounted["parameters"] == [
        {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}
    ]
    assert set(mounted["responses"]) == {"default"}
    assert operations[("GET", "/openapi.json")]["x-doraforge-contract"] == "generated"
    assert operations[("GET", BANNER)]["summary"] == "a page the middleware serves"
    modeled = operations[("POST", "/api/tools/call")]
    assert modeled["x-doraforge-contract"] == "modeled"
    assert {"200", "400", "default"} <= set(modeled["responses"])
    assert catalog["stats"]["byContract"]["generated"] >= 3


def test_the_apps_own_openapi_document_is_left_as_fastapi_made_it(client: httpx.Client) -> None:
    own = client.get("/openapi.json", headers=AGENT).json()
    assert "x-doraforge-access" not in str(own)
    assert "Error" not in own.get("components", {}).get("schemas", {})


def test_the_operator_documents_need_the_operator_token(client: httpx.Client) -> None:
    for name in ("internal/openapi.json", "catalog.json"):
        refused = client.get(f"{DOCS}/{name}", headers=AGENT)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "OPERATOR_REQUIRED"
    for name in ("openapi.json", "tools.min.json"):
        assert client.get(f"{DOCS}/{name}", headers=AGENT).status_code == 200
    anonymous = client.get(f"{DOCS}/openapi.json")
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "AUTH_REQUIRED"


@pytest.mark.parametrize("name", ["internal/openapi.json", "openapi.json", "catalog.json"])
def test_a_query_parameter_or_another_method_is_a_structured_4xx(
    client: httpx.Client, name: str
) -> None:
    queried = client.get(f"{DOCS}/{name}", params={"format": "yaml"}, headers=OPERATOR)
    assert queried.status_code == 400
    error = queried.json()["error"]
    assert error["code"] == "INVALID_QUERY"
    assert "'format'" in error["message"]
    assert set(error) == {"code", "message", "retryable", "details"}
    posted = client.post(f"{DOCS}/{name}", headers=OPERATOR, json={})
    assert posted.status_code == 405
    assert posted.json()["error"]["code"] == "METHOD_NOT_ALLOWED"


def test_tools_min_lists_every_registered_tool_with_its_binding(
    app: FastAPI, client: httpx.Client
) -> None:
    document = _read(client, "tools.min.json", AGENT)
    registered = {entry.name for entry in app.state.service.entries()}
    records = {record["name"]: record for record in document["tools"]}
    assert set(records) == registered
    assert {"demo.echo", "demo.write"} <= set(records)
    assert any(name.startswith("forge.") for name in records)
    assert all(r["http"] == {"method": "POST", "path": "/api/tools/call"} for r in records.values())
    assert document["call"]["body"]["type"] == "portos_tool_call"
    echo = records["demo.echo"]
    assert echo["inputSchema"]["required"] == ["text"]
    assert (echo["sideEffect"], echo["risk"], echo["requiredCapabilities"]) == (
        "read",
        "low",
        ["robot.read"],
    )
    assert echo["failureCodes"] == []
    assert "TOOL_AUTH_REQUIRED" in records["demo.write"]["failureCodes"]
    assert "TOOL_CAPABILITY_DENIED" in document["commonFailureCodes"]


def test_following_a_tools_min_binding_calls_the_tool(client: httpx.Client) -> None:
    document = _read(client, "tools.min.json", AGENT)
    echo = next(r for r in document["tools"] if r["name"] == "demo.echo")
    template = document["call"]
    filled = {"<requestId>": "inv-1", "<name>": echo["name"], "<arguments>": {"text": "hi"}}
    body = {key: filled.get(value, value) for key, value in template["body"].items()}
    headers = {key: filled[value] for key, value in template["headers"].items()}
    http = echo["http"]
    answer = client.request(http["method"], http["path"], json=body, headers={**AGENT, **headers})
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == {"text": "hi"}


def test_tools_min_is_smaller_than_the_portos_catalog(client: httpx.Client) -> None:
    minimized = client.get(f"{DOCS}/tools.min.json", headers=AGENT)
    portos = client.get("/api/tools", params={"format": "portos"}, headers=AGENT)
    assert len(minimized.json()["tools"]) == len(portos.json()["tools"])
    assert len(minimized.content) < len(portos.content)


def test_every_declared_failure_code_is_one_the_registry_raises() -> None:
    root = Path(doraforge.registry.__file__).parent
    sources = "".join(
        path.read_text()
        for path in root.rglob("*.py")
        if path.name not in ("inventory.py", "inventory_tools.py")
    )
    codes = [*COMMON_FAILURE_CODES, *(c for _, codes in CONDITIONAL_FAILURE_CODES for c in codes)]
    assert len(codes) == len(set(codes))
    assert [code for code in codes if f'"{code}"' not in sources] == []


def _route(path: str) -> APIRoute:
    async def endpoint() -> PlainTextResponse:
        return PlainTextResponse("late")

    return APIRoute(path, endpoint, methods=["GET"])


def test_documents_are_built_once_yet_hold_what_was_added_before_they_were_read(
    tmp_path: Path,
) -> None:
    app = served_app(tmp_path)
    app.router.routes.append(_route("/api/late"))
    inventory = inventory_of(app)
    first = inventory.internal_openapi()
    assert ("GET", "/api/late") in _operations(first)
    assert inventory.internal_openapi() is first
    assert inventory.catalog() is inventory.catalog()
    assert inventory.public_openapi() is inventory.public_openapi()
    tools = inventory.tools_min()
    assert inventory.tools_min() is tools
    app.router.routes.append(_route("/api/later"))
    assert ("GET", "/api/later") in _operations(inventory.internal_openapi())


def test_a_tool_registered_after_a_read_is_in_the_next_read(tmp_path: Path) -> None:
    app = served_app(tmp_path)
    inventory = inventory_of(app)
    before = inventory.tools_min()
    service = app.state.service
    entry = service.resolve("demo.echo").model_dump(mode="json", by_alias=True)
    service.register({**entry, "name": "demo.echo2", "providerName": "demo_echo2"}, _noop)
    after = inventory.tools_min()
    assert after is not before
    assert "demo.echo2" in {record["name"] for record in after["tools"]}
    assert "demo.echo2" not in {record["name"] for record in before["tools"]}


async def _noop(_arguments: dict[str, Any]) -> dict[str, Any]:
    return {}
