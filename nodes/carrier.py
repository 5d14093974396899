"""Which Wire messages a provider node accepts on its request input."""

from __future__ import annotations

EXECUTION_REQUEST_TYPES = frozenset(
    ("tool.invoke.request", "tool.status.request", "tool.result.request", "tool.control.request")
)
REGISTRY_RESPONSE_TYPE = "endpoint.registry.response"
