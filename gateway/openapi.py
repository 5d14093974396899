"""What the Gateway's ``/openapi.json`` promises: request bodies, statuses, envelopes.

The routes read their bodies through the transport guard rather than through FastAPI
parameters, so FastAPI cannot infer them; the definitions here describe them, and every
status a route can really answer, so a schema-driven client (or fuzzer) can hold the
Gateway to its document. :func:`allowed_methods` answers a 405's ``Allow`` header from
the same route table the router used.

Statuses every route can answer come from the guard in front of all of them: 401 when a
bearer token is configured and missing or wrong, 403 for a foreign ``Host`` or ``Origin``.
A ``POST`` adds the body rules: 400 (malformed or non-strict JSON, wrong shape), 413 (over
the body limit) and 415 (a body that is not ``application/json``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

#: The guard's bearer token, optional because only a configured token makes it required.
BEARER_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "Required on every route when the Gateway is configured with a token.",
}
_FRAMEWORK_SCHEMAS = ("HTTPValidationError", "ValidationError")
#: Largest integer the strict JSON reader accepts (it refuses anything beyond ±(2^53-1)).
MAX_SAFE_INTEGER = 2**53 - 1
GUARD_STATUSES = (401, 403)
BODY_STATUSES = (400, 413, 415)

type Responses = dict[int | str, dict[str, Any]]


class ErrorBody(BaseModel):
    """The structured error: a stable ``code``, a message, whether a retry can help."""

    model_config = ConfigDict(extra="forbid")

    code: str
    message: str
    retryable: bool
    details: dict[str, Any]


class ErrorEnvelope(BaseModel):
    """Every non-2xx answer: ``{"ok": false, "msg", "error": {...}}``."""

    model_config = ConfigDict(extra="forbid")

    ok: Literal[False]
    msg: str
    error: ErrorBody


class Envelope(BaseModel):
    """A success: ``{"ok": true, "data": {...}}``."""

    model_config = ConfigDict(extra="forbid")

    ok: Literal[True]
    data: dict[str, Any]


class _Open(BaseModel):
    # Documents may grow fields; callers must ignore the ones they do not know.
    model_config = ConfigDict(extra="allow")


class Admission(_Open):
    """The 202 of an admitted (or deduplicated) Action or Session."""

    invocation_id: str
    attempt_id: str
    tool_id: str
    caller_id: str | None
    phase: str
    deadline_ms: int
    duplicate: bool


class AdmissionEnvelope(Envelope):
    """``data`` is the admission."""

    data: Admission  # type: ignore[assignment]


class GatewayInstance(_Open):
    """This Gateway process: ``instance_id`` changes on every restart."""

    gateway_id: str
    instance_id: str
    started_at_ms: int
    catalog_revision: str


class Listing(_Open):
    """``GET /tools``: the catalog and this Gateway's identity.

    ``gateway_identity`` is a string (this process's ``instance_id``), as PhyAgentOS's
    RuntimeManager reads it, so a restart shows as a new identity; ``gateway_id`` names the
    configured Gateway; ``gateway`` is the whole identity document.
    """

    gateway_identity: str
    gateway_id: str
    instance_id: str
    gateway: GatewayInstance
    revision: int
    catalog_revision: str
    tools: list[dict[str, Any]]


class ListingEnvelope(Envelope):
    """``data`` is the listing."""

    data: Listing  # type: ignore[assignment]


class ControlAnswer(_Open):
    """The answer to a cancel or stop: acceptance is not a stop (read ``phase``)."""

    invocation_id: str
    command: Literal["cancel", "stop"]
    status: str  # the generic name PhyAgentOS reads; equal to the command-named field
    cancel_status: str | None = None  # a cancel answer's status
    stop_status: str | None = None  # a stop answer's status
    phase: str


class ControlEnvelope(Envelope):
    """``data`` is the control answer."""

    data: ControlAnswer  # type: ignore[assignment]


class ResultDocument(_Open):
    """``pending`` (202) until terminal, then ``available`` with the terminal ``result``."""

    status: Literal["pending", "available"]
    phase: str
    result: dict[str, Any] | None = None


class ResultEnvelope(Envelope):
    """``data`` is the result document."""

    data: ResultDocument  # type: ignore[assignment]


#: ``POST /tools/...:invoke``: a closed object; ``arguments`` defaults to ``{}`` and is
#: checked against the tool's ``input_schema`` after admission starts (400 naming the path).
INVOKE_BODY: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "arguments": {
            "type": "object",
            "default": {},
            "description": "The tool's input, validated against its ToolSpec input_schema.",
        },
        "caller_id": {
            "anyOf": [
                {"type": "string", "minLength": 1, "maxLength": 256, "pattern": r"\S"},
                {"type": "null"},
            ],
            "description": "Idempotency key: a repeat within the dedupe window replays.",
        },
        "timeout_ms": {
            "anyOf": [
                {"type": "integer", "minimum": 1, "maximum": MAX_SAFE_INTEGER},
                {"type": "null"},
            ],
            "description": "Requested deadline; clamped to the Gateway's cap.",
        },
    },
}

#: One server-sent event: ``id`` is its sequence number, ``data`` a JSON object
#: ``{type, data, at_ms}``; comment lines (keep-alives) are not events.
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["id", "event", "data"],
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$"},
        "event": {"type": "string", "minLength": 1},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}

_EVENT_ID = {"type": "string", "pattern": "^[0-9]{1,16}$"}
#: ``GET .../events`` resumes after an event id, from the header or (for browsers'
#: ``EventSource``, which cannot set headers) the query; the header wins.
EVENT_RESUME: dict[str, Any] = {
    "parameters": [
        {
            "name": "Last-Event-ID",
            "in": "header",
            "required": False,
            "schema": _EVENT_ID,
            "description": "Resume after this event id; 410 if later events were evicted.",
        },
        {
            "name": "last_event_id",
            "in": "query",
            "required": False,
            "schema": _EVENT_ID,
            "description": "Like Last-Event-ID, for clients that cannot set headers.",
        },
    ]
}

#: Cancel and stop take no parameters: an empty body or ``{}``.
EMPTY_BODY: dict[str, Any] = {"type": "object", "additionalProperties": False, "maxProperties": 0}

_ERROR_DESCRIPTIONS = {
    400: "Malformed request: invalid path, query, JSON or arguments",
    401: "A bearer token is configured and the request lacks it or it is wrong",
    403: "The Host or Origin is not one this Gateway answers",
    404: "Unknown tool, endpoint, operation, invocation or camera source",
    409: "Conflicts with existing state (caller_id reuse, wrong semantics, control refused)",
    410: "Existed but was evicted from bounded retention",
    413: "The body exceeds the configured limit",
    415: "The body is not application/json",
    422: "The provider declined the request before any side effect",
    502: "The provider answered in a way the contract forbids",
    503: "Endpoint absent, unbound or at its concurrency limit; retry later",
    504: "The Query did not answer within its deadline; its outcome is unknown",
}


def request_body(schema: Mapping[str, Any], *, required: bool) -> dict[str, Any]:
    """``openapi_extra`` declaring a JSON request body with ``schema``."""
    content = {"application/json": {"schema": dict(schema)}}
    return {"requestBody": {"required": required, "content": content}}


def success(model: type[BaseModel], description: str) -> dict[str, Any]:
    """A success response whose JSON body is ``model``."""
    return {"model": model, "description": description}


def media(description: str, *types: str) -> dict[str, Any]:
    """A success response whose body is bytes in one of the media ``types`` (an image)."""
    schema = {"type": "string", "format": "binary"}
    return {"description": description, "content": {kind: {"schema": schema} for kind in types}}


def event_stream(description: str) -> dict[str, Any]:
    """A ``text/event-stream`` success; before OpenAPI 3.2 ``schema`` describes one event."""
    return {"description": description, "content": {"text/event-stream": {"schema": SSE_EVENT}}}


def responses(ok: Mapping[int, dict[str, Any]], errors: Iterable[int] = ()) -> Responses:
    """The ``responses=`` of a route: its successes, its errors and the guard's statuses."""
    table: Responses = {status: response for status, response in ok.items()}
    for status in sorted({*errors, *GUARD_STATUSES}):
        table[status] = {"model": ErrorEnvelope, "description": _ERROR_DESCRIPTIONS[status]}
    return table


def post_responses(ok: Mapping[int, dict[str, Any]], errors: Iterable[int] = ()) -> Responses:
    """:func:`responses` plus the body statuses every ``POST`` can answer."""
    return responses(ok, {*errors, *BODY_STATUSES})


def allowed_methods(routes: Iterable[BaseRoute], scope: Scope) -> list[str]:
    """Every method some HTTP route serves on the request's path, sorted (for ``Allow``).

    Starlette names only the first route whose path matched; paths such as
    ``/tools/{tool_id}`` and ``/tools/{tool_id}:invoke`` overlap, so all are asked.
    """
    methods: set[str] = set()
    for route in routes:
        if isinstance(route, Route) and route.methods:
            match, _ = route.matches(scope)
            if match is not Match.NONE:
                methods |= route.methods
    return sorted(methods)


def install(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and ``/openapi.json``) describe the Gateway as it answers.

    FastAPI documents a 422 "Validation Error" on every route with parameters; the Gateway's
    parameters are plain strings it checks itself (400 with a code), so that entry and its
    schemas are dropped wherever a route did not declare a 422 of its own. The guard's
    optional bearer scheme is declared.
    """

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                openapi_version=app.openapi_version,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = refined(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def refined(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` without the framework's validation 422s, with the bearer scheme."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            answer = operation.get("responses", {}).get("422", {})
            schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
            if schema.get("$ref", "").endswith("/HTTPValidationError"):
                del operation["responses"]["422"]
    components = document.setdefault("components", {})
    for name in _FRAMEWORK_SCHEMAS:
        components.get("schemas", {}).pop(name, None)
    components["securitySchemes"] = {"bearer": BEARER_SCHEME}
    document["security"] = [{}, {"bearer": []}]
    return document
