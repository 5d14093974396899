"""Bounded reads of the console's path segments, query parameters and JSON bodies.

Every console route reads its input through these helpers, so a malformed id, an unknown
parameter or a body of the wrong shape is one structured 400 before anything is dialled.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request

from doraforge.registry.errors import InvalidRequest
from doraforge.registry.http import read_json_body

#: Tool, source, invocation, task and artifact ids as the Gateway and PAOS mint them.
ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")


def checked_id(value: str, what: str) -> str:
    """``value`` when it is a plausible id; :class:`InvalidRequest` CONSOLE_INVALID_ID."""
    if not ID.fullmatch(value):
        raise InvalidRequest(
            "CONSOLE_INVALID_ID", f"{what} is not a valid id", details={"field": what}
        )
    return value


def query_int(request: Request, name: str, default: int, low: int, high: int) -> int:
    """The integer query parameter ``name`` in ``[low, high]`` (``default`` when absent)."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise InvalidRequest(
            "CONSOLE_INVALID_QUERY",
            f"{name} must be an integer from {low} to {high}",
            details={"field": name},
        )
    return int(raw)


def only_params(request: Request, allowed: Iterable[str]) -> None:
    """Refuse a query parameter the route does not take (a typo is not ignored)."""
    unknown = sorted(set(request.query_params.keys()) - set(allowed))
    if unknown:
        raise InvalidRequest(
            "CONSOLE_INVALID_QUERY",
            f"unknown query parameter {unknown[0]!r}",
            details={"allowed": sorted(allowed)},
        )


def body_object(request: Request, allowed: Iterable[str]) -> dict[str, Any]:
    """The JSON object body (``{}`` when empty) holding only ``allowed`` keys."""
    body = read_json_body(request)
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise InvalidRequest("CONSOLE_INVALID_BODY", "the body must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise InvalidRequest(
            "CONSOLE_INVALID_BODY",
            f"unknown field {unknown[0]!r}",
            details={"allowed": sorted(allowed)},
        )
    return body
