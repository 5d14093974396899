"""Fixtures of the built-in tool tests: the local upstream and a way to call a built-in
through the registry's one governed path (``RegistryService.call``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from doraforge.registry.builtins import register_builtins
from doraforge.registry.model import Principal
from doraforge.registry.service import RegistryService
from doraforge.registry.settings import ServerSettings
from tests.registry.builtins.upstream import Upstream, upstream

NETWORK = frozenset({("network", "*")})
_ids = itertools.count(1)


@pytest.fixture
def served() -> Iterator[Upstream]:
    with upstream() as running:
        yield running


def caller(
    *, permissions: frozenset[tuple[str, str]] = NETWORK, approvals: frozenset[str] = frozenset()
) -> Principal:
    """An agent holding the built-ins' capability, ``permissions`` and ``approvals``."""
    return Principal(
        id="agent-1",
        scope="agent",
        grants=frozenset({"builtin.read"}),
        permissions=permissions,
        approvals=approvals,
    )


def service_with(settings: ServerSettings, **service: Any) -> RegistryService:
    """A fresh service with the built-ins ``settings`` enable registered into it."""
    registry = RegistryService(**service)
    register_builtins(registry, settings)
    return registry


async def call(
    service: RegistryService, name: str, arguments: dict[str, Any], principal: Principal
) -> dict[str, Any]:
    """One governed call; its ``portos_tool_result``."""
    body = {
        "type": "portos_tool_call",
        "requestId": f"builtin-{next(_ids)}",
        "name": name,
        "arguments": arguments,
    }
    return await service.call(body, principal)
