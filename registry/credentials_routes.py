"""The operator's credential routes under ``/api/credentials``: values in, names out.

``PUT /api/credentials/{name}`` with ``{"value": "..."}`` sets one (201 new, 200 replaced),
``GET /api/credentials`` lists names, scopes and set-at times, ``DELETE`` forgets one. Every
route is the operator's (``registry.http.OPERATOR_ONLY``), reads included. Each write is
audited by the credential's name only; no answer, audit record or log line carries a value
(``registry.credentials`` has the threat model).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from doraforge.registry.credentials import CredentialStore, check_name
from doraforge.registry.errors import InvalidRequest, RegistryError
from doraforge.registry.http import OPERATOR, OPERATOR_ONLY, is_operator, read_json_body, service_of


def store_of(request: Request) -> CredentialStore:
    """The credential store of the app serving ``request`` (``app.state.credentials``)."""
    store: CredentialStore = request.app.state.credentials
    return store


def _audited[T](request: Request, action: str, name: str, work: Callable[[], T]) -> T:
    """Run one write and record its outcome by the credential's name (never its value)."""
    started = time.perf_counter()
    error: str | None = None
    try:
        return work()
    except RegistryError as exc:
        error = exc.code
        raise
    finally:
        service_of(request).audit.record(
            request_id=None,
            name=f"credentials {action} {name}"[:200],
            principal_id=OPERATOR if is_operator(request) else "doraforge-ui",
            scope="ui",
            state="rejected" if error else "completed",
            error_code=error,
            duration_s=time.perf_counter() - started,
        )


async def list_credentials(request: Request) -> Any:
    return {"ok": True, "credentials": store_of(request).names()}


async def set_credential(name: str, request: Request) -> Any:
    check_name(name)
    body = read_json_body(request)
    if not isinstance(body, dict) or set(body) != {"value"}:
        raise InvalidRequest("CREDENTIAL_VALUE_INVALID", 'the body must be {"value": "..."}')
    store = store_of(request)
    row, created = _audited(request, "set", name, lambda: store.set(name, body["value"]))
    return JSONResponse({"ok": True, "credential": row.public()}, 201 if created else 200)


async def delete_credential(name: str, request: Request) -> Any:
    check_name(name)
    store = store_of(request)
    _audited(request, "delete", name, lambda: store.delete(name))
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
