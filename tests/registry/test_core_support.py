"""Shared pieces of the registry core tests: entry factories, adapters, principals."""

from __future__ import annotations

from typing import Any

from doraforge.registry.model import Principal
from doraforge.registry.service import RegistryService

SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["query"],
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 25},
        "tags": {"type": "array", "items": {"type": "string"}},
        "exact": {"type": "boolean"},
        "mode": {"enum": ["fast", "deep"]},
    },
}


def entry(name: str = "brain.search", **overrides: Any) -> dict[str, Any]:
    """A valid wire-form entry of a low-risk read (risk stated: unstated means ``high``);
    ``policy`` keys in ``overrides`` merge into the policy."""
    policy = {"scopes": ["agent", "ui"], "sideEffect": "read", "idempotent": True, "risk": "low"}
    policy.update(overrides.pop("policy", {}))
    body = {
        "name": name,
        "providerName": name.replace(".", "_").replace("-", "_"),
        "description": f"Search the user's brain inbox ({name}).",
        "input_schema": SEARCH_SCHEMA,
        "output_schema": {"type": "object"},
        "policy": policy,
    }
    body.update(overrides)
    return body


class CountingAdapter:
    """Echoes its arguments and counts executions."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(arguments)
        return {"echo": arguments}


AGENT = Principal(id="agent-1", scope="agent")


def call(request_id: str, name: str = "brain.search", **arguments: Any) -> dict[str, Any]:
    return {"requestId": request_id, "name": name, "arguments": arguments}


def service_with_search(**kwargs: Any) -> tuple[RegistryService, CountingAdapter]:
    service = RegistryService(**kwargs)
    adapter = CountingAdapter()
    service.register(entry(), adapter)
    return service, adapter
