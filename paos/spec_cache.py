"""ToolSpecs of Gateways whose identity a caller has just checked, for diagnostic Queries.

A diagnostic Query needs its tool's ``endpoint_id`` and ``operation``, and fetching the
ToolSpec (``GET /tools/{id}``) before every Query doubled the HTTP work of each call. A
Gateway's catalog is fixed for the life of its instance (a new catalog means a new
``instance_id``), so the specs of one instance never change; what can change is which
instance answers at a URL. This cache therefore only holds a ``GET /tools`` listing that
a caller *vouches for* (it compared the listing's identity with the one the runtime
recorded at start), and only for as long as that caller trusts its own check. Anything
else (no vouched listing, an expired one, a tool not in it) is a miss, and the caller
fetches the spec as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Bound on the Gateways remembered (one per running skill or cell, as GatewayClients).
MAX_GATEWAYS = 32


@dataclass(frozen=True, slots=True)
class _Vouched:
    specs: Mapping[str, dict[str, Any]]
    expires: float


class VouchedSpecs:
    """Per Gateway URL: the ToolSpecs of a vouched listing, until it expires or is dropped."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._by_url: dict[str, _Vouched] = {}

    def vouch(self, gateway_url: str, listing: Mapping[str, Any], *, trusted_for_s: float) -> None:
        """Hold ``listing``'s Query-capable specs for ``trusted_for_s`` seconds. A spec
        whose ``endpoint_id`` or ``operation`` is not a non-empty string is left out."""
        specs = {
            spec["tool_id"]: spec
            for spec in listing.get("tools") or []
            if isinstance(spec, dict) and _routable(spec)
        }
        self._by_url.pop(gateway_url, None)
        if len(self._by_url) >= MAX_GATEWAYS:
            self._by_url.pop(next(iter(self._by_url)))
        self._by_url[gateway_url] = _Vouched(specs, self._clock() + trusted_for_s)

    def get(self, gateway_url: str, tool_id: str) -> dict[str, Any] | None:
        """The vouched spec of ``tool_id`` at ``gateway_url``, or ``None`` (a miss)."""
        vouched = self._by_url.get(gateway_url)
        if vouched is None:
            return None
        if self._clock() >= vouched.expires:
            del self._by_url[gateway_url]
            return None
        return vouched.specs.get(tool_id)

    def drop(self, gateway_url: str) -> None:
        """Forget ``gateway_url``'s listing (its Gateway failed or refused the route)."""
        self._by_url.pop(gateway_url, None)


def _routable(spec: Mapping[str, Any]) -> bool:
    fields = (spec.get("tool_id"), spec.get("endpoint_id"), spec.get("operation"))
    return all(isinstance(value, str) and value for value in fields)
