"""The Cell and Tools routes: a running skill's cameras, joint state, tools and invocations.

Every route names a skill, never a URL: the Gateway dialled is the one the skill's runtime
recorded at start (``registry.skill_gateway``), with the token that start wrote. What the
Gateway refuses keeps its code (``console.errors``); a Gateway that cannot be reached is a
retryable failure whose remote state, for a write, is unknown.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
from fastapi.responses import JSONResponse, Response
from starlette.requests import Request

from doraforge.console.errors import translated
from doraforge.console.params import body_object, checked_id
from doraforge.console.state import Console, console_of
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.errors import PaosError
from doraforge.registry.errors import InvalidRequest, ToolFailure

#: Phases after which an invocation can no longer be cancelled or stopped.
_LIVE_RECORD_STATES = frozenset({"accepted", "running", "stopping"})


async def _gateway(request: Request, skill: str) -> tuple[Console, str]:
    """The console and the recorded Gateway URL of the running ``skill``."""
    console = console_of(request)
    try:
        return console, await console.robot.gateways.url(skill)
    except ToolFailure as exc:
        raise translated(exc) from exc


async def _client(request: Request, skill: str) -> ForgeToolClient:
    console, url = await _gateway(request, skill)
    return console.client(url)


async def sources(skill: str, request: Request) -> JSONResponse:
    client = await _client(request, skill)
    try:
        found = await client.image_sources()
    except PaosError as exc:
        raise translated(exc) from exc
    return JSONResponse({"ok": True, "sources": found})


async def frame(skill: str, source: str, request: Request) -> Response:
    """The newest JPEG of ``source``; the browser polls it (the registry serves no
    WebSockets), and a slow poll skips frames rather than queueing them."""
    checked_id(source, "source")
    client = await _client(request, skill)
    try:
        image = await client.latest_image(source, fmt="jpeg")
    except PaosError as exc:
        raise translated(exc) from exc
    headers = {"Cache-Control": "no-store", "X-Frame-Seq": str(image.seq)}
    return Response(image.data, media_type=image.content_type, headers=headers)


async def state(skill: str, request: Request) -> JSONResponse:
    console, url = await _gateway(request, skill)
    try:
        answer = await console.read(url, "/observations/state")
        body = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ToolFailure(
            "CONSOLE_GATEWAY_UNREACHABLE",
            f"the Gateway of {skill!r} did not answer the joint-state read",
            retryable=True,
        ) from exc
    if answer.status_code != 200 or not isinstance(body, dict) or body.get("ok") is not True:
        error = body.get("error") if isinstance(body, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        raise ToolFailure(
            str(code or "CONSOLE_STATE_UNAVAILABLE"),
            f"no joint state from {skill!r} yet",
            retryable=True,
        )
    return JSONResponse({"ok": True, **body["data"]})


async def _described(client: ForgeToolClient, tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "tool_id": tool["tool_id"],
        "semantics": tool.get("semantics"),
        "description": tool.get("description"),
        "input_schema": tool.get("input_schema") or {"type": "object"},
        "context": await client.context(tool["tool_id"]),
    }


async def tools(skill: str, request: Request) -> JSONResponse:
    """Every tool of the skill's Gateway with its input schema and live context."""
    client = await _client(request, skill)
    try:
        listing = await client.list_tools()
        found = await asyncio.gather(*(_described(client, t) for t in listing["tools"]))
    except PaosError as exc:
        raise translated(exc) from exc
    return JSONResponse({"ok": True, "tools": list(found)})


def _arguments(request: Request) -> dict[str, Any]:
    arguments = body_object(request, ("arguments",)).get("arguments", {})
    if not isinstance(arguments, dict):
        raise InvalidRequest("CONSOLE_INVALID_BODY", "arguments must be a JSON object")
    return arguments


async def run(skill: str, tool_id: str, request: Request) -> JSONResponse:
    """Run a Query to its answer, or admit an Action or Session and track it.

    The Gateway validates ``arguments`` against the tool's input schema; each run has a
    fresh ``caller_id``, so a retried click is a second run, never a silent replay."""
    checked_id(tool_id, "tool_id")
    arguments = _arguments(request)
    console, url = await _gateway(request, skill)
    client = console.client(url)
    caller_id = f"console_{uuid.uuid4().hex}"
    try:
        spec, _sha = await client.tool_spec(tool_id)
        semantics = str(spec.get("semantics"))
        if semantics == "query":
            answer = await client.query(
                spec["endpoint_id"], spec["operation"], arguments, caller_id=caller_id
            )
            return JSONResponse({"ok": True, "semantics": semantics, "response": answer})
        admission = await client.invoke(tool_id, arguments, caller_id=caller_id)
    except PaosError as exc:
        raise translated(exc) from exc
    console.track(skill, tool_id, semantics, {**admission, "caller_id": caller_id})
    body = {"ok": True, "semantics": semantics, "admission": admission}
    return JSONResponse(body, status_code=202)


async def _status(client: ForgeToolClient, invocation_id: str) -> dict[str, Any]:
    try:
        return await client.invocation(invocation_id)
    except PaosError as exc:
        return {"invocation_id": invocation_id, "error": exc.to_payload()}


def _task_invocations(console: Console, skill: str) -> list[dict[str, Any]]:
    """The live Actions and Sessions of the active task bound to ``skill`` (an agent's
    work; with per-runtime task slots other cells hold tasks of their own)."""
    store = console.robot.task_service().store
    task = store.active_task_of(skill)
    if task is None:
        return []
    return [
        {"invocation_id": r.invocation_id, "tool_id": r.tool_id, "task_id": task.task_id}
        for r in store.records(task.task_id)
        if r.invocation_id and r.state in _LIVE_RECORD_STATES
    ]


async def invocations(skill: str, request: Request) -> JSONResponse:
    """The console's recent invocations on ``skill`` and the active task's live ones,
    each with the Gateway's current status (phase, progress, cancel status)."""
    console, url = await _gateway(request, skill)
    client = console.client(url)
    mine = [
        {"invocation_id": a.invocation_id, "tool_id": a.tool_id, "by": "console"}
        for a in console.admitted
        if a.skill == skill
    ]
    try:
        agents = [{**row, "by": "task"} for row in _task_invocations(console, skill)]
    except PaosError as exc:
        raise translated(exc) from exc
    rows = [*agents, *mine]
    statuses = await asyncio.gather(*(_status(client, r["invocation_id"]) for r in rows))
    found = [{**row, "status": status} for row, status in zip(rows, statuses, strict=True)]
    return JSONResponse({"ok": True, "invocations": found})


async def invocation(skill: str, invocation_id: str, request: Request) -> JSONResponse:
    checked_id(invocation_id, "invocation_id")
    client = await _client(request, skill)
    try:
        found = await client.invocation(invocation_id)
    except PaosError as exc:
        raise translated(exc) from exc
    return JSONResponse({"ok": True, "invocation": found})


async def cancel(skill: str, invocation_id: str, request: Request) -> JSONResponse:
    """Request a cancel (Action) or a stop (Session). Acceptance is not the end: the
    page reads the phase until it is terminal."""
    checked_id(invocation_id, "invocation_id")
    body_object(request, ())
    client = await _client(request, skill)
    try:
        found = await client.invocation(invocation_id)
        command = client.stop if found.get("semantics") == "session" else client.cancel
        answer = await command(invocation_id)
    except PaosError as exc:
        raise translated(exc) from exc
    return JSONResponse({"ok": True, "requested": True, "answer": answer}, status_code=202)
