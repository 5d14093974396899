"""Turn a bundle into registry entries + adapters; probe and save-time host checks."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from doraforge.registry.api_tools.addresses import parse_host
from doraforge.registry.api_tools.bundle import DOT_SEGMENTS, Bundle, Tool
from doraforge.registry.api_tools.client import ApiClient, execute, redact
from doraforge.registry.api_tools.errors import Conflict, OutboundDenied, ToolFailure, Unprocessable
from doraforge.registry.api_tools.outbound import (
    METADATA_HOSTS,
    OutboundPolicy,
    Resolver,
    hard_denied,
)
from doraforge.registry.api_tools.render import render
from doraforge.registry.api_tools.response import RawResponse, interpret

Adapter = Callable[[dict[str, Any]], Awaitable[Any]]

logger = logging.getLogger(__name__)

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "integer"},
        "content": {"type": "string"},
        "truncated": {"type": "boolean"},
    },
    "required": ["status", "content", "truncated"],
    "additionalProperties": False,
}


def tool_name(bundle: Bundle, tool: Tool) -> str:
    return f"api__{bundle.name}__{tool.name}"


def input_schema(tool: Tool) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for param in tool.params:
        schema = dict(param.schema_)
        if param.description and "description" not in schema:
            schema["description"] = param.description
        if param.in_ == "path":  # one segment below the base path: the gate refuses these
            schema = {**schema, "not": {"enum": sorted(DOT_SEGMENTS)}}
        properties[param.name] = schema
    return {
        "type": "object",
        "properties": properties,
        "required": [p.name for p in tool.params if p.required],
        "additionalProperties": False,
    }


def entry(bundle: Bundle, tool: Tool) -> dict[str, Any]:
    """The ToolEntry-shaped dict for one bundle tool."""
    read = tool.method == "GET"
    name = tool_name(bundle, tool)
    return {
        "type": "portos_tool",
        "name": name,
        "version": 1,
        "providerName": name,
        "aliases": [],
        "description": tool.description,
        "input_schema": input_schema(tool),
        "output_schema": OUTPUT_SCHEMA,
        "policy": {
            "scopes": ["agent", "ui"],
            "requiredCapabilities": ["api.read" if read else "api.write"],
            "sideEffect": "read" if read else "write",
            "idempotent": tool.method in ("GET", "PUT", "DELETE"),
            "async": False,
            "confirmation": "none",
            "risk": "low" if read else "medium",
            "permissions": [],
            "egressHosts": [bundle.authority],
            "timeoutMs": tool.timeoutMs,
        },
    }


def _adapter(bundle: Bundle, tool: Tool, secrets: Mapping[str, str], client: ApiClient) -> Adapter:
    async def call(arguments: dict[str, Any]) -> Any:
        return await execute(bundle, tool, arguments, secrets=secrets, client=client)

    return call


def build_tools(
    bundle: Bundle,
    *,
    secrets: Mapping[str, str],
    policy: OutboundPolicy,
    resolver: Resolver | None = None,
    client: ApiClient | None = None,
) -> list[tuple[dict[str, Any], Adapter]]:
    """One (entry, adapter) pair per bundle tool, named ``api__<service>__<tool>``."""
    client = client or ApiClient(policy, resolver=resolver)
    return [(entry(bundle, tool), _adapter(bundle, tool, secrets, client)) for tool in bundle.tools]


def check_saveable(bundle: Bundle, policy: OutboundPolicy) -> None:
    """Refuse (:class:`Conflict` ``API_TOOL_HOST_NOT_ALLOWED``) a bundle whose host and port
    can never be dialed under ``policy``: a link-local or metadata target in every mode, and
    under ``deny`` a host and port no rule names."""
    try:
        parsed = parse_host(bundle.host)
    except OutboundDenied as exc:
        raise Unprocessable("API_BUNDLE_INVALID", exc.message) from None
    blocked = parsed in METADATA_HOSTS if isinstance(parsed, str) else hard_denied(parsed)
    listed = policy.names_host(bundle.host, bundle.port, scheme=bundle.scheme)
    if blocked or (policy.default == "deny" and not listed):
        why = "is a link-local or metadata target" if blocked else "matches no outbound rule"
        raise Conflict(
            "API_TOOL_HOST_NOT_ALLOWED",
            f"host {bundle.host!r} port {bundle.port} {why}; the outbound policy default is "
            f"{policy.default!r}. An administrator must add the host to the internal or "
            "external list (as host:port for a port other than the scheme's default).",
            details={"host": bundle.host, "port": bundle.port, "default": policy.default},
        )


def _set_path(document: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        document = document.setdefault(part, {})
    document[last] = value


def sample_bodies(tool: Tool) -> dict[str, tuple[int, Any]]:
    """Synthesised success and failure answers for a tool's response model."""
    envelope = tool.response.envelope
    if tool.response.type == "text":
        return {"success": (200, "example text"), "failure": (500, "Internal Server Error")}
    success: dict[str, Any] = {}
    failure: dict[str, Any] = {}
    payload = {"example": "value"}
    if envelope is not None and envelope.codeField:
        _set_path(success, envelope.codeField, envelope.success[0])
        _set_path(failure, envelope.codeField, "probe-failure-code")
        for field in envelope.errorFields[:1]:
            _set_path(failure, field, "example upstream error")
        if envelope.payloadField:
            _set_path(success, envelope.payloadField, payload)
        return {"success": (200, success), "failure": (200, failure)}
    if envelope is not None and envelope.payloadField:
        _set_path(success, envelope.payloadField, payload)
        return {"success": (200, success), "failure": (500, {"error": "example"})}
    return {"success": (200, payload), "failure": (500, {"error": "example"})}


def preview(tool: Tool, status: int, body: Any) -> dict[str, Any]:
    """What the model would see for one sample answer."""
    is_text = isinstance(body, str)
    raw = body.encode() if is_text else json.dumps(body).encode()
    content_type = "text/plain" if is_text else "application/json"
    try:
        return {"ok": True, "result": interpret(tool, RawResponse(status, content_type, raw))}
    except ToolFailure as failure:
        return {"ok": False, "error": failure.to_payload()}


async def probe(
    bundle: Bundle,
    name: str,
    arguments: Mapping[str, Any],
    *,
    secrets: Mapping[str, str],
    samples: Mapping[str, tuple[int, Any]] | None = None,
    client: ApiClient | None = None,
) -> dict[str, Any]:
    """Render the request (secrets masked) and preview success and failure results.

    With ``client`` the request is also sent for real and its outcome reported as ``live``.
    """
    tool = bundle.tool(name)
    request = render(bundle, tool, arguments, secrets)
    chosen = {**sample_bodies(tool), **(samples or {})}
    report: dict[str, Any] = {
        "tool": tool_name(bundle, tool),
        "request": request.public(),
        "preview": {kind: preview(tool, *chosen[kind]) for kind in ("success", "failure")},
    }
    if client is not None:
        report["live"] = await _live(bundle, tool, arguments, secrets, client)
    redacted: dict[str, Any] = redact(report, secrets)  # the same report, secrets masked
    return redacted


async def _live(
    bundle: Bundle,
    tool: Tool,
    arguments: Mapping[str, Any],
    secrets: Mapping[str, str],
    client: ApiClient,
) -> dict[str, Any]:
    """The live outcome of one probe; every failure is reported, none escapes as a 500."""
    try:
        result = await execute(bundle, tool, arguments, secrets=secrets, client=client)
    except ToolFailure as failure:
        return {"ok": False, "error": failure.to_payload()}
    except Exception as exc:  # the probe is a diagnosis: report an unforeseen fault
        logger.warning("live probe of %s failed", tool_name(bundle, tool), exc_info=exc)
        fault = ToolFailure("API_PROBE_FAILED", f"the live request failed ({type(exc).__name__})")
        return {"ok": False, "error": fault.to_payload()}
    return {"ok": True, "result": result}
