"""The operator's credential routes under ``/api/credentials``: values in, names out.

``PUT /api/credentials/{name}`` with ``{"value": "..."}`` sets one (201 new, 200 replaced),
``GET /api/credentials`` lists names, scopes and set-at times, ``DELETE`` forgets one. Every
route is the operator's (``registry.http.OPERATOR_ONLY``), reads included. Each write is
audited by the credential's name only; no answer, audit record or log line carries a value
(``registry.credentials`` has the threat model).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from doraforge.registry.credentials import CredentialStore, check_name
from doraforge.registry.errors import InvalidRequest
from doraforge.registry.http import OPERATOR_ONLY, audited_write, read_json_body


def store_of(request: Request) -> CredentialStore:
    """The credential store of the app serving ``request`` (``app.state.credentials``)."""
    store: CredentialStore = request.app.state.credentials
    return store


async def list_credentials(request: Request) -> Any:
    return {"ok": True, "credentials": store_of(request).names()}


async def set_credential(name: str, request: Request) -> Any:
    check_name(name)
    body = read_json_body(request)
    if not isinstance(body, dict) or set(body) != {"value"}:
        raise InvalidRequest("CREDENTIAL_VALUE_INVALID", 'the body must be {"value": "..."}')
    store = store_of(request)
    with audited_write(request, f"credentials set {name}"):
        row, created = store.set(name, body["value"])
    return JSONResponse({"ok": True, "credential": row.public()}, 201 if created else 200)


async def delete_credential(name: str, request: Request) -> Any:
    check_name(name)
    store = store_of(request)
    with audited_write(request, f"credentials delete {name}"):
        store.delete(name)
    return {"ok": True, "deleted": name}


#: Routes under ``/api/credentials``; every one the operator's.
ROUTES: list[BaseRoute] = [
    APIRoute("/api/credentials", list_credentials, methods=["GET"], dependencies=OPERATOR_ONLY),
    APIRoute(
        "/api/credentials/{name}", set_credential, methods=["PUT"], dependencies=OPERATOR_ONLY
    ),
    APIRoute(
        "/api/credentials/{name}", delete_credential, methods=["DELETE"], dependencies=OPERATOR_ONLY
    ),
]
