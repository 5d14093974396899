"""The contract under test, fresh per case: in process or over the real MCP endpoint."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import httpx

from doraforge.registry.context.eval.fakes import FakeSource, build_sources
from doraforge.registry.context.eval.matchers import brief_text
from doraforge.registry.context.eval.schema import Case, Request, SourceSpec, Via, expand
from doraforge.registry.context.service import ContextArgumentError, ContextService
from doraforge.registry.context.source import SCOPES, ContextSource, Scope
from doraforge.registry.mcp_results import ERROR_META


@dataclass(frozen=True)
class Answer:
    """What the contract answered: a ``result``, a ``toolError`` (``document`` is the error
    object) or a protocol ``fault`` (a JSON-RPC error or an HTTP status other than 200)."""

    kind: Literal["result", "toolError", "fault"]
    document: Any

    def summary(self) -> str:
        """``a result``, or the fault or tool error's code and message, for a reason."""
        if self.kind == "result":
            return "a result"
        doc = self.document if isinstance(self.document, dict) else {}
        what = "tool error" if self.kind == "toolError" else "protocol fault"
        return f"{what} {doc.get('code')}: {brief_text(str(doc.get('message')), 120)}"


class Contract(Protocol):
    """One fresh contract over one case's fake sources: ``ask`` answers one request (never
    raising for an answer the contract gives), ``aclose`` releases it."""

    async def ask(self, request: Request) -> Answer: ...

    async def aclose(self) -> None: ...


class ServiceContract:
    """The in-process :class:`~.service.ContextService`."""

    def __init__(self, case: Case, sources: Mapping[Scope, ContextSource]) -> None:
        scopes = None if case.scopes is None else frozenset(case.scopes)
        self.service = ContextService(
            sources, profile=case.profile, scopes=scopes, grants=frozenset(case.grants)
        )

    async def ask(self, request: Request) -> Answer:
        if request.method == "tools/list":
            return Answer("result", {"tools": self.service.tool_definitions()})
        try:
            result = await self.service.call(str(request.tool), expand(request.arguments))
        except ContextArgumentError as exc:  # ContextSourceError included
            # The same error object the MCP edge puts in an isError result.
            return Answer("toolError", exc.to_payload())
        return Answer("result", result)

    async def aclose(self) -> None:
        return None


_MCP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}


class McpContract:
    """The real MCP endpoint and agent manifest of a registry app built in memory over the
    fake sources, reached through httpx's ASGI transport from a loopback address."""

    def __init__(self, case: Case, sources: Mapping[Scope, ContextSource]) -> None:
        from doraforge.registry.server import build_app, new_service

        settings = _server_settings(case)
        app = build_app(new_service(settings), settings, context_sources=sources)
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50_000))
        self.client = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
        self._ids = iter(range(1, 1_000_000))
        self._initialized = False

    async def ask(self, request: Request) -> Answer:
        if request.method == "manifest":
            return _http_answer(await self.client.get("/api/agent-context/manifest"))
        if not self._initialized:
            refused = await self._initialize()
            if refused is not None:
                return refused  # a server that refuses the handshake answers every request so
        if request.method == "tools/list":
            return await self._rpc("tools/list", {})
        arguments = expand(request.arguments)
        answer = await self._rpc("tools/call", {"name": request.tool, "arguments": arguments})
        return _tool_answer(answer)

    async def _initialize(self) -> Answer | None:
        """The MCP handshake; its answer when that is not a result."""
        client = {"name": "doraforge-eval", "version": "1"}
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
        answer = await self._rpc("initialize", params)
        if answer.kind != "result":
            return answer
        self._initialized = True
        return None

    async def _rpc(self, method: str, params: dict[str, Any]) -> Answer:
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        headers = {**_MCP_HEADERS, "mcp-protocol-version": "2025-11-25"}
        response = await self.client.post("/mcp", json=body, headers=headers)
        answer = _http_answer(response)
        if answer.kind == "fault":
            return answer
        if "error" in answer.document:
            error = answer.document["error"]
            data = error.get("data") if isinstance(error.get("data"), dict) else {}
            code = data.get("code", error.get("code"))
            return Answer("fault", {"code": code, "message": error.get("message"), "data": data})
        return Answer("result", answer.document.get("result"))

    async def aclose(self) -> None:
        await self.client.aclose()


def _http_answer(response: httpx.Response) -> Answer:
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code != 200 or not isinstance(body, dict):
        code = body.get("error", {}).get("data", {}).get("code") if isinstance(body, dict) else None
        message = f"HTTP {response.status_code} {brief_text(response.text, 120)}"
        return Answer("fault", {"code": code or f"HTTP_{response.status_code}", "message": message})
    return Answer("result", body)


def _tool_answer(answer: Answer) -> Answer:
    """A ``CallToolResult`` as the structured result, or (``isError``) its error object."""
    if answer.kind != "result" or not isinstance(answer.document, dict):
        return answer
    structured = answer.document.get("structuredContent")
    if not answer.document.get("isError"):
        return Answer("result", structured)
    meta = answer.document.get("_meta")
    error = meta.get(ERROR_META) if isinstance(meta, dict) else None
    if isinstance(error, dict):
        return Answer("toolError", error)
    texts = [c.get("text") for c in answer.document.get("content", []) if isinstance(c, dict)]
    return Answer("toolError", {"code": None, "message": " ".join(map(str, texts))})


def _server_settings(case: Case) -> Any:
    from doraforge.registry.settings import ServerSettings

    # As in process: no scopes named means every scope (of those the case has sources for).
    scopes = SCOPES if case.scopes is None else case.scopes
    return ServerSettings(
        mcp_enabled=case.mcp_enabled,
        grants=frozenset(case.grants),
        context_profile=case.profile,
        context_scopes=frozenset(scopes),
    )


def open_contract(
    case: Case, via: Via, specs: Mapping[Scope, SourceSpec]
) -> tuple[Contract, dict[Scope, FakeSource]]:
    """A fresh contract of kind ``via`` for ``case`` over new fake sources built from
    ``specs``, and those sources (to see what was inspected)."""
    sources = build_sources(specs)
    kind = ServiceContract if via == "service" else McpContract
    return kind(case, sources), sources
