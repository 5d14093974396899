"""Reading a skill's Gateway from the runtime manager: is it there, whose is it, is it ready.

Synchronous and short-timeout on purpose: lifecycle commands poll these in bounded loops,
and one slow answer must cost a poll interval, not the whole startup budget.

Every probe of a skill's own Gateway takes that runtime's bearer ``token`` (a skill-started
Gateway refuses anything without it, reads included). :func:`gateway_answers` alone sends
none: it asks whether *something* holds the port before a start, and a token must never
be offered to whatever squats there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from doraforge.paos.binding import identity_document
from doraforge.paos.client import path_segment
from doraforge.paos.errors import PaosError
from doraforge.paos.gateway_auth import http_client

PROBE_TIMEOUT_S = 2.0


def gateway_answers(url: str, *, timeout_s: float = 1.0) -> bool:
    """Whether anything answers HTTP at ``url`` (any status counts: the port is taken).

    A read timeout also counts: something accepted the connection.
    """
    try:
        httpx.get(f"{url.rstrip('/')}/tools", timeout=timeout_s)
    except httpx.ReadTimeout:
        return True
    except httpx.TransportError:
        return False
    return True


def _data(client: httpx.Client, path: str) -> dict[str, Any] | None:
    """``data`` of a 200 ok envelope at ``path``, or ``None`` for anything else."""
    try:
        response = client.get(path)
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("ok") is not True:
        return None
    data = body.get("data")
    return data if isinstance(data, dict) else None


def _client(url: str, token: str | None) -> httpx.Client:
    return http_client(url.rstrip("/"), token, timeout_s=PROBE_TIMEOUT_S)


def listing(url: str, *, token: str | None = None) -> dict[str, Any] | None:
    """``GET /tools`` data (``gateway_identity``, ``tools``...), or ``None`` (also for a
    refused token)."""
    with _client(url, token) as client:
        return _data(client, "/tools")


def identity(listed: dict[str, Any] | None) -> dict[str, Any] | None:
    """The Gateway's identity document in ``GET /tools`` data (see
    :func:`doraforge.paos.binding.identity_document`), ``None`` without one."""
    if listed is None:
        return None
    try:
        return identity_document(listed)
    except PaosError:
        return None


def readiness(
    url: str, required: Iterable[str], *, token: str | None = None
) -> tuple[dict[str, Any] | None, list[str]]:
    """``GET /tools`` data and the required tools that are missing or not ready.

    ``(None, [...all required])`` while the Gateway does not answer (or refuses ``token``).
    """
    wanted = sorted(set(required))
    with _client(url, token) as client:
        tools = _data(client, "/tools")
        if tools is None:
            return None, wanted
        known = {tool.get("tool_id") for tool in tools.get("tools", []) if isinstance(tool, dict)}
        waiting = []
        for tool_id in wanted:
            context = _data(client, f"/tools/{path_segment(tool_id)}/context")
            if tool_id not in known or context is None or context.get("ready") is not True:
                waiting.append(tool_id)
        return tools, waiting


def active_invocations(url: str, *, token: str | None = None) -> dict[str, int]:
    """Per tool, the Gateway's count of non-terminal invocations (only tools with some)."""
    with _client(url, token) as client:
        tools = _data(client, "/tools")
        if tools is None:
            return {}
        active = {}
        for tool in tools.get("tools", []):
            tool_id = tool.get("tool_id") if isinstance(tool, dict) else None
            if not isinstance(tool_id, str):
                continue
            context = _data(client, f"/tools/{path_segment(tool_id)}/context") or {}
            count = context.get("active_invocations")
            if isinstance(count, int) and count > 0:
                active[tool_id] = count
        return active


def request_stop(
    url: str, invocation_id: str, command: str, *, token: str | None = None
) -> dict[str, Any]:
    """POST ``/invocations/{id}/{cancel|stop}`` once; the outcome as plain data.

    Best effort by design: acceptance does not prove the motion stopped, and a failure
    here must not prevent the forced runtime stop that asked for it.
    """
    path = f"/invocations/{path_segment(invocation_id)}/{command}"
    try:
        with _client(url, token) as client:
            response = client.post(path, json={})
    except httpx.HTTPError as exc:
        return {"invocation_id": invocation_id, "command": command, "error": type(exc).__name__}
    return {"invocation_id": invocation_id, "command": command, "http_status": response.status_code}
