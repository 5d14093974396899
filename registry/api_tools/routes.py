"""REST edge for API-tool bundles: upload (PUT), list/download (GET) and probe (POST).

The routes are a table (:data:`ROUTES`) whose handlers read the app's :class:`ApiTools`
(``app.state.api_tools``). They raise registry errors and let the registry's HTTP edge map
them (``registry.http.STATUS_FOR_ERROR``): a bundle that fails validation is 422, a name
taken or a host the outbound policy will never dial is 409, an unknown service 404.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from doraforge.registry.api_tools.bundle import Bundle, parse_bundle
from doraforge.registry.api_tools.client import ApiClient
from doraforge.registry.api_tools.errors import Conflict, InvalidRequest, NotFound, Unprocessable
from doraforge.registry.api_tools.outbound import OutboundPolicy, Resolver
from doraforge.registry.api_tools.store import BundleStore
from doraforge.registry.api_tools.tools import build_tools, check_saveable, probe, tool_name
from doraforge.wire.guard import NO_BODY, json_body

if TYPE_CHECKING:
    from doraforge.registry.service import RegistryService

_NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


def _json_body(request: Request) -> Any:
    """The body the transport guard read with the server's streamed limit and parsed as
    strict JSON (duplicate keys, huge integers and deep nesting are refused there)."""
    body = json_body(request)
    if body is NO_BODY:
        raise InvalidRequest("API_BODY_INVALID", "a JSON body is required")
    return body


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise NotFound("API_BUNDLE_NOT_FOUND", f"no API service {name!r}")


class ApiTools:
    """The API-tool bundles of one server: persisted in ``store_dir``, registered as
    registry tools on ``service``, dialled through one client under ``policy``.

    Construction registers every bundle already stored; :meth:`save` persists and
    (re)registers one."""

    def __init__(
        self,
        store_dir: Path,
        service: RegistryService,
        policy: OutboundPolicy,
        secrets: Mapping[str, str],
        *,
        resolver: Resolver | None = None,
    ) -> None:
        self.service, self.policy, self.secrets = service, policy, secrets
        self.store = BundleStore(store_dir)
        self.client = ApiClient(policy, resolver=resolver)
        self.bundles: dict[str, Bundle] = {}
        for bundle in self.store.load_all():
            self.install(bundle)

    def get(self, name: str) -> Bundle:
        """The bundle named ``name``; :class:`NotFound` API_BUNDLE_NOT_FOUND otherwise."""
        _check_name(name)
        if name not in self.bundles:
            raise NotFound("API_BUNDLE_NOT_FOUND", f"no API service {name!r}")
        return self.bundles[name]

    def check_free(self, bundle: Bundle) -> None:
        """Refuse up front a bundle that cannot be installed, before anything is written."""
        if bundle.name in self.bundles:
            return  # a replacement: install() unregisters the old tools first
        names = [tool_name(bundle, t) for t in bundle.tools]
        taken = [name for name in names if self.service.resolve(name) is not None]
        if taken:
            raise Conflict(
                "TOOL_REGISTRATION_CONFLICT",
                f"tool names already registered: {taken}",
                details={"names": taken},
            )

    def install(self, bundle: Bundle) -> None:
        """Register ``bundle``'s tools, replacing those of a bundle of the same name."""
        self.check_free(bundle)
        old = self.bundles.get(bundle.name)
        if old is not None:
            for tool in old.tools:
                self.service.unregister(tool_name(old, tool))
        pairs = build_tools(bundle, secrets=self.secrets, policy=self.policy, client=self.client)
        for entry, adapter in pairs:
            # The base host passed the outbound policy when the bundle was saved.
            self.service.allow_egress(entry["policy"]["egressHosts"])
            self.service.register(entry, adapter)
        self.bundles[bundle.name] = bundle

    def save(self, bundle: Bundle) -> bool:
        """Check, persist and install ``bundle``; whether it is new (not a replacement).
        Raises :class:`Conflict` for a host never dialled or a tool name taken."""
        check_saveable(bundle, self.policy)
        self.check_free(bundle)
        created = bundle.name not in self.bundles
        self.store.save(bundle)
        self.install(bundle)
        return created


def api_tools_of(request: Request) -> ApiTools:
    """The API tools of the app serving ``request`` (``app.state.api_tools``)."""
    api_tools: ApiTools = request.app.state.api_tools
    return api_tools


async def list_services(request: Request) -> Any:
    rows = [
        {"name": b.name, "baseUrl": b.baseUrl, "tools": [tool_name(b, t) for t in b.tools]}
        for b in api_tools_of(request).bundles.values()
    ]
    return {"ok": True, "services": rows}


async def download(name: str, request: Request) -> Any:
    bundle = api_tools_of(request).get(name)
    return {"ok": True, "bundle": bundle.model_dump(by_alias=True, exclude_none=True)}


async def upload(name: str, request: Request) -> Any:
    _check_name(name)
    bundle = parse_bundle(_json_body(request))
    if bundle.name != name:
        raise Unprocessable(
            "API_BUNDLE_INVALID",
            f"name: bundle name {bundle.name!r} does not match the URL {name!r}",
        )
    created = api_tools_of(request).save(bundle)
    body = {"ok": True, "service": name, "tools": [tool_name(bundle, t) for t in bundle.tools]}
    return JSONResponse(body, status_code=201 if created else 200)


async def probe_route(name: str, request: Request) -> Any:
    api_tools = api_tools_of(request)
    bundle = api_tools.get(name)
    body = _json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("tool"), str):
        raise InvalidRequest("API_BODY_INVALID", "tool: a tool name is required")
    arguments = body.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise InvalidRequest("API_BODY_INVALID", "arguments: must be an object")
    client = api_tools.client if body.get("live") is True else None
    secrets = api_tools.secrets
    report = await probe(bundle, body["tool"], arguments, secrets=secrets, client=client)
    return {"ok": True, **report}


#: Routes under ``/api/api-tools``; they read ``app.state.api_tools``.
ROUTES: list[BaseRoute] = [
    APIRoute("/api/api-tools", list_services, methods=["GET"]),
    APIRoute("/api/api-tools/{name}", download, methods=["GET"]),
    APIRoute("/api/api-tools/{name}", upload, methods=["PUT"]),
    APIRoute("/api/api-tools/{name}/probe", probe_route, methods=["POST"]),
]
