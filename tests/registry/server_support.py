"""Shared pieces of the server and MCP tests: demo tools and the server on a live socket."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI

from doraforge.registry.errors import ToolFailure
from doraforge.registry.server import build_app, new_service, uvicorn_config
from doraforge.registry.settings import ServerSettings
from tests.support.live_server import LiveServer

TOKEN = "test-token-0123456789abcdef"
OBJECT = {"type": "object"}


def call_body(name: str, arguments: dict[str, Any], request_id: str = "r-1") -> dict[str, Any]:
    """A ``portos_tool_call`` envelope for ``name`` with ``arguments``."""
    return {
        "type": "portos_tool_call",
        "requestId": request_id,
        "name": name,
        "arguments": arguments,
    }


def _closed(required: list[str], **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": properties,
    }


def _entry(name: str, capability: str, schema: dict[str, Any], **policy: Any) -> dict[str, Any]:
    return {
        "name": name,
        "providerName": name.replace(".", "_"),
        "description": f"The {name} test tool.",
        "input_schema": schema,
        "output_schema": OBJECT,
        "policy": {
            "scopes": ["agent", "ui"],
            "requiredCapabilities": [capability],
            "sideEffect": "write" if capability == "robot.write" else "read",
            "idempotent": capability != "robot.write",
            "risk": "low",  # stated: an unstated risk is high and would need an approval
            **policy,
        },
    }


@dataclass
class DemoTools:
    """Four tools: echo (read), big (read, over budget), write (counts runs), fail."""

    writes: list[dict[str, Any]] = field(default_factory=list)

    async def echo(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"text": arguments["text"]}

    async def big(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"items": list(range(arguments.get("count", 100))), "blob": "x" * 50_000}

    async def write(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(arguments)
        return {"written": arguments["value"], "runs": len(self.writes)}

    async def fail(self, _arguments: dict[str, Any]) -> dict[str, Any]:
        raise ToolFailure("DEMO_BROKEN", "the demo tool failed", retryable=True)

    def register(self, service: Any) -> None:
        text = {"type": "string", "maxLength": 100}
        service.register(_entry("demo.echo", "robot.read", _closed(["text"], text=text)), self.echo)
        count = {"type": "integer", "minimum": 0, "maximum": 1000}
        service.register(_entry("demo.big", "robot.read", _closed([], count=count)), self.big)
        value = {"type": "integer"}
        service.register(
            _entry("demo.write", "robot.write", _closed(["value"], value=value)), self.write
        )
        service.register(_entry("demo.fail", "robot.read", _closed([])), self.fail)


def demo_app(settings: ServerSettings, tools: DemoTools | None = None) -> FastAPI:
    """The server app over a fresh service holding the demo tools."""
    service = new_service(settings)
    (tools or DemoTools()).register(service)
    return build_app(service, settings)


@contextmanager
def running(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` with the registry's own uvicorn settings on a loopback port; yields the
    base URL."""
    with LiveServer(uvicorn_config(app, "127.0.0.1", 0)) as server:
        yield server.url
