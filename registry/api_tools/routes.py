"""REST edge for API-tool bundles: upload (PUT), list/download (GET) and probe (POST)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from doraforge.registry.api_tools.bundle import Bundle, parse_bundle
from doraforge.registry.api_tools.client import ApiClient
from doraforge.registry.api_tools.errors import RegistryError, ToolFailure
from doraforge.registry.api_tools.outbound import OutboundPolicy, Resolver
from doraforge.registry.api_tools.store import BundleStore
from doraforge.registry.api_tools.tools import build_tools, check_saveable, probe, tool_name
from doraforge.wire.guard import NO_BODY, json_body

if TYPE_CHECKING:
    from doraforge.registry.service import RegistryService

_NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


def _error(exc: RegistryError | ToolFailure, status: int) -> JSONResponse:
    return JSONResponse({"ok": False, "error": exc.to_payload()}, status_code=status)


async def _guarded(action: Callable[[], Awaitable[Any]]) -> Any:
    """The one place this edge maps domain errors to HTTP answers."""
    try:
        return await action()
    except RegistryError as exc:
        return _error(exc, exc.status)
    except ToolFailure as exc:
        return _error(exc, 422)


async def _json_body(request: Request) -> Any:
    """The body the transport guard read with the server's streamed limit and parsed as
    strict JSON (duplicate keys, huge integers and deep nesting are refused there)."""
    body = json_body(request)
    if body is NO_BODY:
        raise RegistryError("API_BODY_INVALID", "a JSON body is required", status=400)
    return body


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise RegistryError("API_BUNDLE_NOT_FOUND", f"no API service {name!r}", status=404)


class _Bundles:
    """Registered bundles and their registry tools."""

    def __init__(
        self,
        service: RegistryService,
        policy: OutboundPolicy,
        secrets: Mapping[str, str],
        resolver: Resolver | None,
    ) -> None:
        self.service, self.policy, self.secrets = service, policy, secrets
        self.client = ApiClient(policy, resolver=resolver)
        self.bundles: dict[str, Bundle] = {}

    def get(self, name: str) -> Bundle:
        _check_name(name)
        if name not in self.bundles:
            raise RegistryError("API_BUNDLE_NOT_FOUND", f"no API service {name!r}", status=404)
        return self.bundles[name]

    def check_free(self, bundle: Bundle) -> None:
        """Refuse up front a bundle that cannot be installed, before anything is written."""
        if bundle.name in self.bundles:
            return  # a replacement: install() unregisters the old tools first
        names = [tool_name(bundle, t) for t in bundle.tools]
        taken = [name for name in names if self.service.resolve(name) is not None]
        if taken:
            raise RegistryError(
                "TOOL_REGISTRATION_CONFLICT",
                f"tool names already registered: {taken}",
                status=409,
                details={"names": taken},
            )

    def install(self, bundle: Bundle) -> None:
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


def api_tools_router(
    store_dir: Path,
    service: RegistryService,
    policy: OutboundPolicy,
    secrets: Mapping[str, str],
    *,
    resolver: Resolver | None = None,
) -> APIRouter:
    """Routes under ``/api/api-tools``; persisted bundles are registered at construction."""
    store = BundleStore(store_dir)
    bundles = _Bundles(service, policy, secrets, resolver)
    for bundle in store.load_all():
        bundles.install(bundle)
    router = APIRouter()

    @router.get("/api/api-tools")
    async def list_services() -> Any:
        rows = [
            {"name": b.name, "baseUrl": b.baseUrl, "tools": [tool_name(b, t) for t in b.tools]}
            for b in bundles.bundles.values()
        ]
        return {"ok": True, "services": rows}

    @router.get("/api/api-tools/{name}")
    async def download(name: str) -> Any:
        async def action() -> Any:
            bundle = bundles.get(name)
            return {"ok": True, "bundle": bundle.model_dump(by_alias=True, exclude_none=True)}

        return await _guarded(action)

    @router.put("/api/api-tools/{name}")
    async def upload(name: str, request: Request) -> Any:
        async def action() -> Any:
            _check_name(name)
            bundle = parse_bundle(await _json_body(request))
            if bundle.name != name:
                raise RegistryError(
                    "API_BUNDLE_INVALID",
                    f"name: bundle name {bundle.name!r} does not match the URL {name!r}",
                    status=422,
                )
            check_saveable(bundle, policy)
            bundles.check_free(bundle)
            created = name not in bundles.bundles
            store.save(bundle)
            bundles.install(bundle)
            tools = [tool_name(bundle, t) for t in bundle.tools]
            body = {"ok": True, "service": name, "tools": tools}
            return JSONResponse(body, status_code=201 if created else 200)

        return await _guarded(action)

    @router.post("/api/api-tools/{name}/probe")
    async def probe_route(name: str, request: Request) -> Any:
        async def action() -> Any:
            bundle = bundles.get(name)
            body = await _json_body(request)
            if not isinstance(body, dict) or not isinstance(body.get("tool"), str):
                raise RegistryError("API_BODY_INVALID", "tool: a tool name is required")
            arguments = body.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise RegistryError("API_BODY_INVALID", "arguments: must be an object")
            client = bundles.client if body.get("live") is True else None
            report = await probe(bundle, body["tool"], arguments, secrets=secrets, client=client)
            return {"ok": True, **report}

        return await _guarded(action)

    return router
