"""The operator's egress routes under ``/api/egress``: read and change the live policy.

``GET /api/egress`` shows the operator's part, each principal's effective view and which
source declared which host; ``POST /api/egress/allow`` ``{"host", "principal"?}`` is
"allow this host from now on" (egress switched on for that principal, or the base, and
the host added; the route a ``TOOL_EGRESS_DENIED`` message names); ``DELETE
/api/egress/hosts/{host}`` (``?principal=`` for one overlay) takes an operator-allowed
host away; ``PUT /api/egress`` replaces the operator's part (keys left out take their
defaults; an empty document is refused, ``{"enabled": false}`` resets). Every route is the
operator's (``registry.http.OPERATOR_ONLY``), reads included. A change takes effect for the
next call and is audited by the policy; a refused change is audited here; bad input answers
a structured 400 (``EGRESS_INVALID`` naming the field), an unknown host 404.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from doraforge.registry.egress import EgressPolicy, egress_host, parse_egress
from doraforge.registry.errors import InvalidRequest, NotFound
from doraforge.registry.http import (
    ERROR_SCHEMA,
    OPERATOR_ONLY,
    Responses,
    actor,
    audited_write,
    json_response_doc,
    read_json_body,
    service_of,
)

_ALLOW_KEYS = frozenset({"host", "principal"})


def _policy(request: Request) -> EgressPolicy:
    return service_of(request).egress


def _audited(request: Request, action: str) -> AbstractContextManager[None]:
    """A change audited when refused; the policy records the completed ones itself."""
    return audited_write(request, f"egress.{action}", completed=False)


def _answer(policy: EgressPolicy, **extra: Any) -> dict[str, Any]:
    return {"ok": True, **extra, "egress": policy.snapshot()}


async def get_egress(request: Request) -> Any:
    return _answer(_policy(request))


def _allow_body(body: Any) -> tuple[Any, Any]:
    if not isinstance(body, dict) or "host" not in body or not set(body) <= _ALLOW_KEYS:
        raise InvalidRequest(
            "EGRESS_INVALID",
            'the body must be {"host": "<bare hostname>", "principal": "ui"|"agent"} '
            "(principal optional: without it the base policy)",
            details={"allowed": sorted(_ALLOW_KEYS)},
        )
    return body["host"], body.get("principal")


async def allow_host(request: Request) -> Any:
    policy = _policy(request)

    with _audited(request, "allow"):
        host, principal = _allow_body(read_json_body(request))
        policy.allow(host, principal, by=actor(request))
    return _answer(policy, allowed={"host": egress_host(host), "principal": principal})


async def remove_host(host: str, request: Request) -> Any:
    policy = _policy(request)

    with _audited(request, "remove"):
        params = request.query_params
        if set(params) - {"principal"} or len(params.getlist("principal")) > 1:
            raise InvalidRequest("EGRESS_INVALID", "the only query parameter is principal (once)")
        try:
            policy.remove(host, params.get("principal"), by=actor(request))
        except LookupError:
            raise NotFound(
                "EGRESS_HOST_NOT_FOUND",
                f"{host[:80]!r} is not an operator-allowed host there; GET /api/egress lists "
                "them (hosts a source declared go when the source is removed)",
                details={"host": host[:253], "declaredBy": policy.declared_by(host)},
            ) from None
    removed = egress_host(host)
    # A host a live source declared stays reachable through it: say so.
    return _answer(policy, removed=removed, stillDeclaredBy=policy.declared_by(removed))


def _replacement(body: Any) -> Any:
    """The ``PUT`` body, unless it is empty: ``{}`` would silently reset the whole policy
    (every key takes its default), so a reset must say ``enabled`` at least."""
    if body == {}:
        raise InvalidRequest(
            "EGRESS_INVALID",
            "body: an empty egress document is refused, it would reset the whole policy; "
            'to reset deliberately send {"enabled": false} (PUT replaces the operator\'s '
            "part: keys left out take their defaults, hosts and principals empty)",
            details={"field": "body", "reset": {"enabled": False}},
        )
    return body


async def put_egress(request: Request) -> Any:
    policy = _policy(request)

    with _audited(request, "replace"):
        settings = parse_egress(_replacement(read_json_body(request)), where="body")
        policy.replace_operator(settings, by=actor(request))
    return _answer(policy)


_POLICY = {"type": "object", "description": "ok, the change made (if any) and the policy"}
_ANSWERS: Responses = {
    "200": json_response_doc("the policy after the change", _POLICY),
    "400": json_response_doc("EGRESS_INVALID naming the field", ERROR_SCHEMA),
    "401": json_response_doc("no or a wrong bearer token", ERROR_SCHEMA),
    "403": json_response_doc("OPERATOR_REQUIRED: the agent token was presented", ERROR_SCHEMA),
}
_REMOVED: Responses = {
    **_ANSWERS,
    "404": json_response_doc("EGRESS_HOST_NOT_FOUND: not an operator-allowed host", ERROR_SCHEMA),
}

#: Routes under ``/api/egress``; every one the operator's.
ROUTES: list[BaseRoute] = [
    APIRoute(
        "/api/egress",
        get_egress,
        methods=["GET"],
        summary="The egress policy: operator part, effective per principal, declared hosts",
        responses=_ANSWERS,
        dependencies=OPERATOR_ONLY,
    ),
    APIRoute(
        "/api/egress",
        put_egress,
        methods=["PUT"],
        summary="Replace the operator's part (enabled, allow_any, hosts, principals)",
        responses=_ANSWERS,
        dependencies=OPERATOR_ONLY,
    ),
    APIRoute(
        "/api/egress/allow",
        allow_host,
        methods=["POST"],
        summary="Allow this host from now on (egress on for the principal, host added)",
        responses=_ANSWERS,
        dependencies=OPERATOR_ONLY,
    ),
    APIRoute(
        "/api/egress/hosts/{host}",
        remove_host,
        methods=["DELETE"],
        summary="Take an operator-allowed host away (all overlays, or ?principal= one)",
        responses=_REMOVED,
        dependencies=OPERATOR_ONLY,
    ),
]
