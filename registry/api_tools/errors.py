"""Error types of the API-tools package, rooted in the registry's error tree."""

from __future__ import annotations

from doraforge.registry.errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    RegistryError,
    ToolFailure,
    Unprocessable,
)


class OutboundDenied(ToolFailure):
    """The outbound policy refused a target (or the target could not be parsed)."""


__all__ = [
    "Conflict",
    "InvalidRequest",
    "NotFound",
    "OutboundDenied",
    "RegistryError",
    "ToolFailure",
    "Unprocessable",
]
